#include "server/error_kind.h"

#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/string_view.h"

namespace tf_reverb {
namespace {

constexpr absl::string_view kErrorKindUrl = "type.tf-reverb.dev/ErrorKind";

absl::string_view KindName(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kCallerTimeout:
      return "caller_timeout";
    case ErrorKind::kTransportSecurityMismatch:
      return "transport_security_mismatch";
    case ErrorKind::kNone:
      break;
  }
  return "";
}

}  // namespace

absl::Status WithErrorKind(absl::Status status, ErrorKind kind) {
  if (status.ok()) return status;
  if (kind == ErrorKind::kNone) {
    status.ErasePayload(kErrorKindUrl);
  } else {
    status.SetPayload(kErrorKindUrl, absl::Cord(KindName(kind)));
  }
  return status;
}

ErrorKind ErrorKindOf(const absl::Status& status) {
  // absl::optional on Debian 12, std::optional on 13.
  const auto payload = status.GetPayload(kErrorKindUrl);
  if (!payload.has_value()) return ErrorKind::kNone;
  for (ErrorKind kind : {ErrorKind::kCallerTimeout, ErrorKind::kTransportSecurityMismatch}) {
    if (*payload == KindName(kind)) return kind;
  }
  return ErrorKind::kNone;
}

}  // namespace tf_reverb
