#include "server/extensions/insert_on_sample.h"

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "server/table.h"
#include "server/table_extension.h"
#include "server/table_item.h"
#include "server/testing/table_testing.h"

namespace tf_reverb {
namespace {

using namespace ::tf_reverb::testing;  // NOLINT: test builders

TEST(InsertOnSampleExtensionTest, CopiesAnItemOnItsFirstSampleOnly) {
  auto target = MakeTable(Uniform(), Fifo(), 100, 0, MinSize(1), "target");
  auto extension = std::make_shared<InsertOnSampleExtension>(target, absl::Seconds(5));
  auto source = MakeTable(Fifo(), Fifo(), 100, 0, MinSize(1), "source", {extension});
  ASSERT_TRUE(Insert(*source, 7, 2.5).ok());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(SampleOne(*source).ok());
  extension->WaitUntilIdle();
  EXPECT_EQ(extension->inserted(), 1);
  EXPECT_EQ(target->size(), 1);
  absl::StatusOr<SampledItem> copy = SampleOne(*target);
  ASSERT_TRUE(copy.ok()) << copy.status();
  EXPECT_EQ(copy->data->item.key(), 7u);
  EXPECT_EQ(copy->data->item.ToProto().table(), "target");
  EXPECT_EQ(copy->priority, 2.5);
  EXPECT_EQ(copy->times_sampled, 1);
  // The copy shares the chunks of the original instead of duplicating them.
  absl::StatusOr<SampledItem> original = SampleOne(*source);
  ASSERT_TRUE(original.ok());
  EXPECT_EQ(copy->data->chunks[0].get(), original->data->chunks[0].get());
}

TEST(InsertOnSampleExtensionTest, FailedInsertsAreCountedNotLost) {
  // The target is a full queue: the copy's insert times out.
  auto target = MakeTable(Fifo(), Fifo(), 10, 1, QueueLimiter(1), "target");
  ASSERT_TRUE(Insert(*target, 100).ok());
  auto extension = std::make_shared<InsertOnSampleExtension>(target, absl::Milliseconds(50));
  auto source = MakeTable(Fifo(), Fifo(), 100, 0, MinSize(1), "source", {extension});
  ASSERT_TRUE(Insert(*source, 1).ok());
  ASSERT_TRUE(SampleOne(*source).ok());
  extension->WaitUntilIdle();
  EXPECT_EQ(extension->failed(), 1);
  EXPECT_EQ(extension->inserted(), 0);
}

TEST(InsertOnSampleExtensionTest, BacklogBeyondTheLimitIsDroppedAndCounted) {
  // A blocked target and a backlog of one: later copies are dropped.
  auto target = MakeTable(Fifo(), Fifo(), 10, 1, QueueLimiter(1), "target");
  ASSERT_TRUE(Insert(*target, 100).ok());
  // The copy's insert waits for as long as the test needs (a short timeout
  // could expire before the samples below, on a busy machine, and let the
  // backlog drain): the target is released by sampling it afterwards.
  auto extension =
      std::make_shared<InsertOnSampleExtension>(target, absl::Seconds(120), /*max_pending=*/1);
  auto source = MakeTable(Fifo(), Fifo(), 100, /*max_times_sampled=*/1, MinSize(1), "source",
                          {extension});  // FIFO over 1..5
  for (uint64_t key = 1; key <= 5; ++key) ASSERT_TRUE(Insert(*source, key).ok());
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(SampleOne(*source).ok());
  // One copy is being inserted or waits, one more may wait: 3 or 4 dropped.
  EXPECT_GE(extension->dropped(), 3);
  const absl::Time deadline = absl::Now() + absl::Seconds(120);
  while (extension->inserted() + extension->dropped() < 5 && absl::Now() < deadline) {
    (void)SampleOne(*target);  // room for the next copy
    absl::SleepFor(absl::Milliseconds(1));
  }
  extension->WaitUntilIdle();
  EXPECT_EQ(extension->failed(), 0);
  EXPECT_EQ(extension->inserted() + extension->dropped(), 5);
}

}  // namespace
}  // namespace tf_reverb
