#include "server/error_kind.h"

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace tf_reverb {
namespace {

TEST(ErrorKindTest, AMarkedStatusReportsItsKindAndKeepsCodeAndMessage) {
  const absl::Status marked =
      WithErrorKind(absl::DeadlineExceededError("Flush timed out"), ErrorKind::kCallerTimeout);
  EXPECT_EQ(ErrorKindOf(marked), ErrorKind::kCallerTimeout);
  EXPECT_EQ(marked.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(marked.message(), "Flush timed out");
}

TEST(ErrorKindTest, AnUnmarkedStatusWithTheSameCodeAndTextHasNoKind) {
  EXPECT_EQ(ErrorKindOf(absl::DeadlineExceededError("Flush timed out")), ErrorKind::kNone);
  EXPECT_EQ(ErrorKindOf(absl::OkStatus()), ErrorKind::kNone);
}

TEST(ErrorKindTest, TheKindSurvivesCopiesAndCanBeReplacedOrErased) {
  absl::Status status =
      WithErrorKind(absl::FailedPreconditionError("TLS"), ErrorKind::kTransportSecurityMismatch);
  const absl::Status copy = status;
  EXPECT_EQ(ErrorKindOf(copy), ErrorKind::kTransportSecurityMismatch);
  status = WithErrorKind(status, ErrorKind::kCallerTimeout);
  EXPECT_EQ(ErrorKindOf(status), ErrorKind::kCallerTimeout);
  EXPECT_EQ(ErrorKindOf(WithErrorKind(status, ErrorKind::kNone)), ErrorKind::kNone);
}

TEST(ErrorKindTest, AnOkStatusStaysUnmarked) {
  const absl::Status ok = WithErrorKind(absl::OkStatus(), ErrorKind::kCallerTimeout);
  EXPECT_TRUE(ok.ok());
  EXPECT_EQ(ErrorKindOf(ok), ErrorKind::kNone);
}

}  // namespace
}  // namespace tf_reverb
