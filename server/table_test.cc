#include "server/table.h"

#include <atomic>
#include <cfloat>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "checkpoint.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "reverb_service.pb.h"
#include "schema.pb.h"
#include "server/chunk_codec.h"
#include "server/item_record.h"
#include "server/selectors/selector.h"
#include "server/signature.h"
#include "server/table_chunk.h"
#include "server/table_item.h"
#include "server/tensor.h"
#include "server/testing/table_testing.h"
#include "struct.pb.h"
#include "tensor.pb.h"

namespace tf_reverb {
namespace {

namespace tfp = ::tf_reverb::tf;
using ::deepmind::reverb::KeyDistributionOptions;
using ::deepmind::reverb::KeyWithPriority;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;
using ::testing::UnorderedElementsAreArray;

using namespace ::tf_reverb::testing;  // NOLINT: test builders
constexpr absl::Duration kForever = absl::InfiniteDuration();
// Long enough that a call which should block is seen blocking (a busy
// machine can only make the check miss a bug, never fail a correct table).
constexpr absl::Duration kBlockCheck = absl::Milliseconds(150);
// Deadline of waits that must end: only a hung test reaches it, however
// loaded the machine.
constexpr absl::Duration kUnblockTimeout = absl::Seconds(120);

uint64_t KeyOf(const SampledItem& s) { return s.data->item.key(); }

// Keys present in `table`, found by deleting each candidate (destructive).
std::set<uint64_t> DrainKeys(Table& table, const std::vector<uint64_t>& candidates) {
  std::set<uint64_t> present;
  for (uint64_t key : candidates) {
    const int64_t before = table.size();
    EXPECT_TRUE(table.MutateItems({}, {key}).ok());
    if (table.size() < before) present.insert(key);
  }
  return present;
}

KeyWithPriority Update(uint64_t key, double priority) {
  KeyWithPriority u;
  u.set_key(key);
  u.set_priority(priority);
  return u;
}

TEST(TableTest, CreateValidates) {
  auto config = [](std::string name, bool sampler, bool remover, int64_t max_size) {
    return Table::Config{std::move(name),
                         sampler ? CreateSelector(Uniform()).value() : nullptr,
                         remover ? CreateSelector(Fifo()).value() : nullptr,
                         max_size,
                         0,
                         MinSize(1),
                         ""};
  };
  EXPECT_EQ(Table::Create(config("", true, true, 10)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Table::Create(config("t", true, true, 0)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Table::Create(config("t", true, true, -1)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Table::Create(config("t", false, true, 10)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Table::Create(config("t", true, false, 10)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Table::Create(config("t", true, true, 10)).ok());
}

TEST(TableTest, InsertAndSample) {
  auto table = MakeTable(Uniform(), Fifo(), 10, 0, MinSize(1));
  EXPECT_EQ(table->name(), "t");
  for (uint64_t k = 1; k <= 3; ++k) ASSERT_TRUE(Insert(*table, k, 0.5 * k).ok());
  EXPECT_EQ(table->size(), 3);

  absl::StatusOr<SampledItem> s = SampleOne(*table);
  ASSERT_TRUE(s.ok()) << s.status();
  const uint64_t key = KeyOf(*s);
  EXPECT_THAT(key, ::testing::AnyOf(1u, 2u, 3u));
  EXPECT_DOUBLE_EQ(s->priority, 0.5 * key);
  EXPECT_EQ(s->times_sampled, 1);
  EXPECT_DOUBLE_EQ(s->probability, 1.0 / 3);
  EXPECT_EQ(s->table_size, 3);
  EXPECT_FALSE(s->rate_limited);
  EXPECT_EQ(s->data->item.ToProto().table(), "t");
  EXPECT_GT(absl::ToUnixSeconds(s->data->item.inserted_at()), 0);
  EXPECT_EQ(s->data->item.ToProto().times_sampled(), 0);
  ASSERT_EQ(s->data->chunks.size(), 1u);
  EXPECT_EQ(s->data->chunks[0]->key(), key + 1000000000);
  // Sampling does not remove without max_times_sampled.
  EXPECT_EQ(table->size(), 3);

  // A batch returns up to num_samples items.
  std::vector<SampledItem> batch;
  ASSERT_TRUE(table->SampleBatch(50, kNoWait, &batch).ok());
  EXPECT_EQ(batch.size(), 50u);
}

TEST(TableTest, InsertInvalidItemIsRejectedWithoutCharge) {
  auto table = MakeTable(Uniform(), Fifo(), 10, 0, MinSize(1));
  TableItem empty;
  empty.item = ItemRecord::FromProto(PrioritizedItem());
  EXPECT_EQ(table->InsertOrAssign(empty, kNoWait).code(), absl::StatusCode::kInvalidArgument);
  TableItem out_of_range = MakeItem(1);
  PrioritizedItem proto = out_of_range.item.ToProto();
  proto.mutable_flat_trajectory()->mutable_columns(0)->mutable_chunk_slices(0)->set_length(2);
  out_of_range.item = ItemRecord::FromProto(proto);
  EXPECT_EQ(table->InsertOrAssign(out_of_range, kNoWait).code(),
            absl::StatusCode::kInvalidArgument);
  TableItem empty_second_column = MakeItem(3);
  PrioritizedItem two_columns = empty_second_column.item.ToProto();
  two_columns.mutable_flat_trajectory()->add_columns();
  empty_second_column.item = ItemRecord::FromProto(two_columns);
  absl::Status no_slices = table->InsertOrAssign(empty_second_column, kNoWait);
  EXPECT_EQ(no_slices.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(no_slices.message()), HasSubstr("Column 1"));
  TableItem missing_chunk = MakeItem(2);
  missing_chunk.chunks.clear();
  EXPECT_EQ(table->InsertOrAssign(missing_chunk, kNoWait).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(table->size(), 0);
  EXPECT_EQ(table->Info().rate_limiter_info().insert_stats().completed(), 0);
}

TEST(TableTest, MaxSizeEvictsWithFifoRemover) {
  auto table = MakeTable(Fifo(), Fifo(), 3, 0, MinSize(1));
  for (uint64_t k = 1; k <= 5; ++k) ASSERT_TRUE(Insert(*table, k).ok());
  EXPECT_EQ(table->size(), 3);
  // Evicted inserts still count as inserts.
  EXPECT_EQ(table->Info().rate_limiter_info().insert_stats().completed(), 5);
  absl::StatusOr<SampledItem> s = SampleOne(*table);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(KeyOf(*s), 3u);
  EXPECT_EQ(DrainKeys(*table, {1, 2, 3, 4, 5}), (std::set<uint64_t>{3, 4, 5}));
}

TEST(TableTest, LifoRemoverEvictsTheItemJustInserted) {
  auto table = MakeTable(Uniform(), Lifo(), 2, 0, MinSize(1));
  for (uint64_t k = 1; k <= 4; ++k) ASSERT_TRUE(Insert(*table, k).ok());
  EXPECT_EQ(table->size(), 2);
  EXPECT_EQ(DrainKeys(*table, {1, 2, 3, 4}), (std::set<uint64_t>{1, 2}));
}

TEST(TableTest, MinHeapRemoverEvictsLowestPriority) {
  auto table = MakeTable(Uniform(), Heap(true), 2, 0, MinSize(1));
  ASSERT_TRUE(Insert(*table, 1, 5.0).ok());
  ASSERT_TRUE(Insert(*table, 2, 1.0).ok());
  ASSERT_TRUE(Insert(*table, 3, 3.0).ok());  // evicts 2
  ASSERT_TRUE(Insert(*table, 4, 0.5).ok());  // evicts itself
  EXPECT_EQ(DrainKeys(*table, {1, 2, 3, 4}), (std::set<uint64_t>{1, 3}));
}

TEST(TableTest, MaxTimesSampledDeletes) {
  auto table = MakeTable(Fifo(), Fifo(), 10, 2, MinSize(1));
  ASSERT_TRUE(Insert(*table, 1).ok());
  ASSERT_TRUE(Insert(*table, 2).ok());
  absl::StatusOr<SampledItem> s = SampleOne(*table);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(KeyOf(*s), 1u);
  EXPECT_EQ(s->times_sampled, 1);
  EXPECT_EQ(table->size(), 2);
  s = SampleOne(*table);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(KeyOf(*s), 1u);
  EXPECT_EQ(s->times_sampled, 2);
  EXPECT_EQ(s->table_size, 2);  // the size including the sampled item
  EXPECT_EQ(table->size(), 1);
  s = SampleOne(*table);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(KeyOf(*s), 2u);
  EXPECT_EQ(table->Info().num_unique_samples(), 2);

  // Within one batch: an item is deleted as soon as it hits the limit.
  auto once = MakeTable(Fifo(), Fifo(), 10, 1, MinSize(1));
  for (uint64_t k = 1; k <= 3; ++k) ASSERT_TRUE(Insert(*once, k).ok());
  std::vector<SampledItem> batch;
  ASSERT_TRUE(once->SampleBatch(10, kNoWait, &batch).ok());
  ASSERT_EQ(batch.size(), 3u);  // flexible batch: fewer than asked, no block
  EXPECT_EQ(KeyOf(batch[0]), 1u);
  EXPECT_EQ(KeyOf(batch[1]), 2u);
  EXPECT_EQ(KeyOf(batch[2]), 3u);
  EXPECT_EQ(once->size(), 0);
}

// A chunk of one ~600 KB column of random uint64s (incompressible).
std::shared_ptr<const TableChunk> IncompressibleChunk(uint64_t key, std::mt19937_64& gen) {
  Tensor column;
  column.dtype = tfp::DT_UINT64;
  column.shape = {75000};
  for (int i = 0; i < 75000; ++i) {
    const uint64_t v = gen();
    column.data.append(reinterpret_cast<const char*>(&v), 8);
  }
  return TableChunk::FromProto(BuildChunk(key, {column}, 1, 0, 0, false).value());
}

TEST(TableTest, SampleBatchStopsAtByteLimit) {
  auto table = MakeTable(Fifo(), Fifo(), 10, 0, MinSize(1));
  // ~600 KB of incompressible data per item: two items pass 1 MiB.
  std::mt19937_64 gen(1);
  for (uint64_t k = 1; k <= 4; ++k) {
    auto chunk = IncompressibleChunk(k + 100, gen);
    ASSERT_TRUE(table->InsertOrAssign(MakeItem(k, 1.0, {chunk}), kNoWait).ok());
  }
  std::vector<SampledItem> batch;
  ASSERT_TRUE(table->SampleBatch(10, kNoWait, &batch).ok());
  EXPECT_EQ(batch.size(), 2u);
}

TEST(TableTest, SampleBatchTakesWhatTheRateLimiterAllowsWithinAWindow) {
  // 10 inserts allow 10 samples (samples_per_insert 1, min_diff 0): a
  // batch of 16 takes 10, in windows the limiter allows as a whole.
  auto table = MakeTable(Uniform(), Fifo(), 100, 0, Limiter(1.0, 1, 0.0, DBL_MAX));
  for (uint64_t key = 1; key <= 10; ++key) ASSERT_TRUE(Insert(*table, key).ok());
  std::vector<SampledItem> batch;
  ASSERT_TRUE(table->SampleBatch(16, kNoWait, &batch).ok());
  EXPECT_EQ(batch.size(), 10u);
  batch.clear();
  EXPECT_EQ(table->SampleBatch(1, kNoWait, &batch).code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(batch.empty());
}

TEST(TableTest, InsertOfExistingKeyOnlyUpdatesPriority) {
  // After one insert the limiter forbids another (cursor would be 2 > 1).
  auto table = MakeTable(Heap(false), Fifo(), 10, 0, Limiter(1.0, 1, -DBL_MAX, 1.0));
  ASSERT_TRUE(Insert(*table, 7, 1.0).ok());
  EXPECT_EQ(Insert(*table, 8, 1.0).code(), absl::StatusCode::kDeadlineExceeded);

  absl::StatusOr<SampledItem> first = SampleOne(*table);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->times_sampled, 1);
  const absl::Time inserted_at = first->data->item.inserted_at();

  // Same key, different chunk and priority: accepted without waiting, even
  // though the limiter forbids a new insert.
  ASSERT_TRUE(Insert(*table, 8, 1.0).ok());  // one sample made room for one
  EXPECT_EQ(Insert(*table, 9, 1.0).code(), absl::StatusCode::kDeadlineExceeded);
  TableItem again = MakeItem(7, 42.0, {MakeChunk(555, 9)});
  ASSERT_TRUE(table->InsertOrAssign(again, kNoWait).ok());
  EXPECT_EQ(table->size(), 2);
  EXPECT_EQ(table->Info().rate_limiter_info().insert_stats().completed(), 2);

  absl::StatusOr<SampledItem> s = SampleOne(*table);  // max-heap: key 7
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(KeyOf(*s), 7u);
  EXPECT_DOUBLE_EQ(s->priority, 42.0);
  EXPECT_EQ(s->times_sampled, 2);  // not reset
  EXPECT_EQ(s->data->item.inserted_at(), inserted_at);
  ASSERT_EQ(s->data->chunks.size(), 1u);
  EXPECT_EQ(s->data->chunks[0]->key(), 7u + 1000000000);  // trajectory kept
  // Episode 9 of the ignored chunk was never counted.
  EXPECT_EQ(table->Info().num_episodes(), 2);
}

TEST(TableTest, MutateItemsDeletesThenUpdatesAndIgnoresMissingKeys) {
  auto table = MakeTable(Heap(false), Fifo(), 10, 0, MinSize(2));
  for (uint64_t k = 1; k <= 4; ++k) ASSERT_TRUE(Insert(*table, k, k).ok());
  ASSERT_TRUE(
      table->MutateItems({Update(1, 10.0), Update(99, 5.0), Update(3, 100.0)}, {3, 42}).ok());
  // 3 was deleted before its update was considered; 99 and 42 are unknown.
  EXPECT_EQ(table->size(), 3);
  absl::StatusOr<SampledItem> s = SampleOne(*table);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(KeyOf(*s), 1u);
  EXPECT_DOUBLE_EQ(s->priority, 10.0);

  // Deletes are charged to the rate limiter: size 1 < min_size 2.
  ASSERT_TRUE(table->MutateItems({}, {1, 2}).ok());
  EXPECT_EQ(table->size(), 1);
  EXPECT_FALSE(table->CanSample(1));
  EXPECT_EQ(SampleOne(*table).status().code(), absl::StatusCode::kDeadlineExceeded);
  // Empty request is fine.
  EXPECT_TRUE(table->MutateItems({}, {}).ok());
}

TEST(TableTest, NegativePriorityOnPrioritizedTableIsRejectedAndHarmless) {
  auto table = MakeTable(Prioritized(1.0), Fifo(), 10, 0, MinSize(1));
  for (double bad : {-1.0, -1e-300, std::nan("")}) {
    absl::Status s = Insert(*table, 1, bad);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_EQ(table->size(), 0);
  EXPECT_EQ(table->Info().rate_limiter_info().insert_stats().completed(), 0);
  EXPECT_EQ(table->Info().num_episodes(), 0);

  // The table is healthy: inserts and samples work.
  std::map<uint64_t, double> priorities = {{1, 1.0}, {2, 2.0}, {3, 0.0}};
  for (const auto& [k, p] : priorities) ASSERT_TRUE(Insert(*table, k, p).ok());
  EXPECT_EQ(table->size(), 3);

  // Re-inserting an existing key with a bad priority changes nothing.
  EXPECT_EQ(Insert(*table, 1, -5.0).code(), absl::StatusCode::kInvalidArgument);

  // One bad update among good ones: nothing of the request is applied.
  absl::Status s = table->MutateItems({Update(1, 50.0), Update(2, -3.0)}, {3});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("negative"));
  s = table->MutateItems({Update(1, std::nan("")), Update(2, 7.0)}, {});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(table->size(), 3);

  std::vector<SampledItem> batch;
  ASSERT_TRUE(table->SampleBatch(200, kNoWait, &batch).ok());
  ASSERT_EQ(batch.size(), 200u);
  int ones = 0;
  for (const SampledItem& item : batch) {
    const uint64_t key = KeyOf(item);
    ASSERT_TRUE(priorities.count(key));
    EXPECT_DOUBLE_EQ(item.priority, priorities[key]);
    EXPECT_NE(key, 3u);  // weight 0
    EXPECT_NEAR(item.probability, priorities[key] / 3.0, 1e-12);
    ones += key == 1;
  }
  EXPECT_GT(ones, 30);
  EXPECT_LT(ones, 110);

  // Good mutations still work afterwards.
  ASSERT_TRUE(table->MutateItems({Update(3, 1.0)}, {2}).ok());
  EXPECT_EQ(table->size(), 2);
  ASSERT_TRUE(Insert(*table, 4, 3.0).ok());
  EXPECT_EQ(table->size(), 3);
}

TEST(TableTest, NegativePriorityRejectedByPrioritizedRemover) {
  auto table = MakeTable(Uniform(), Prioritized(1.0), 10, 0, MinSize(1));
  EXPECT_EQ(Insert(*table, 1, -1.0).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(Insert(*table, 1, 1.0).ok());
  EXPECT_EQ(table->MutateItems({Update(1, -2.0)}, {}).code(), absl::StatusCode::kInvalidArgument);
  absl::StatusOr<SampledItem> s = SampleOne(*table);
  ASSERT_TRUE(s.ok());
  EXPECT_DOUBLE_EQ(s->priority, 1.0);
}

TEST(TableTest, SampleBlocksUntilInsertFromAnotherThread) {
  auto table = MakeTable(Uniform(), Fifo(), 10, 0, MinSize(1));
  absl::Notification started, done;
  absl::StatusOr<SampledItem> result = absl::UnknownError("unset");
  std::thread sampler([&] {
    started.Notify();
    result = SampleOne(*table, kForever);
    done.Notify();
  });
  started.WaitForNotification();
  EXPECT_FALSE(done.WaitForNotificationWithTimeout(kBlockCheck));
  ASSERT_TRUE(Insert(*table, 5).ok());
  EXPECT_TRUE(done.WaitForNotificationWithTimeout(kUnblockTimeout));
  sampler.join();
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(KeyOf(*result), 5u);
  EXPECT_TRUE(result->rate_limited);
  EXPECT_GT(table->Info().table_worker_time().waiting_for_inserts_ms(), 0);
}

TEST(TableTest, SampleTimeoutIsDeadlineExceeded) {
  auto table = MakeTable(Uniform(), Fifo(), 10, 0, MinSize(2));
  ASSERT_TRUE(Insert(*table, 1).ok());
  const absl::Time start = absl::Now();
  std::vector<SampledItem> out;
  absl::Status s = table->SampleBatch(3, absl::Milliseconds(100), &out);
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(100));
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(s.message(), kRateLimiterTimeoutMessage);
  EXPECT_TRUE(out.empty());
  // Zero timeout fails at once.
  s = table->SampleBatch(1, kNoWait, &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(s.message(), kRateLimiterTimeoutMessage);
  // Bad batch size.
  EXPECT_EQ(table->SampleBatch(0, kNoWait, &out).code(), absl::StatusCode::kInvalidArgument);
}

TEST(TableTest, InsertBlocksOnQueueLimiterUntilSample) {
  auto table = MakeTable(Fifo(), Fifo(), 100, 1, QueueLimiter(2));
  ASSERT_TRUE(Insert(*table, 1).ok());
  ASSERT_TRUE(Insert(*table, 2).ok());
  EXPECT_FALSE(table->CanInsert(1));
  absl::Status timed_out = Insert(*table, 3, 1.0, absl::Milliseconds(50));
  EXPECT_EQ(timed_out.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(timed_out.message(), kRateLimiterTimeoutMessage);

  absl::Notification done;
  absl::Status status = absl::UnknownError("unset");
  std::thread inserter([&] {
    status = Insert(*table, 3, 1.0, kForever);
    done.Notify();
  });
  EXPECT_FALSE(done.WaitForNotificationWithTimeout(kBlockCheck));
  EXPECT_EQ(table->size(), 2);
  absl::StatusOr<SampledItem> s = SampleOne(*table);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(KeyOf(*s), 1u);
  EXPECT_TRUE(done.WaitForNotificationWithTimeout(kUnblockTimeout));
  inserter.join();
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_EQ(table->size(), 2);
  EXPECT_GT(table->Info().table_worker_time().waiting_for_sampling_ms(), 0);
  // FIFO order is kept.
  EXPECT_EQ(KeyOf(SampleOne(*table).value()), 2u);
  EXPECT_EQ(KeyOf(SampleOne(*table).value()), 3u);
  EXPECT_EQ(SampleOne(*table).status().code(), absl::StatusCode::kDeadlineExceeded);
}

TEST(TableTest, CloseCancelsBlockedInsertsAndSamples) {
  auto queue = MakeTable(Fifo(), Fifo(), 100, 1, QueueLimiter(1));
  ASSERT_TRUE(Insert(*queue, 1).ok());
  auto empty = MakeTable(Uniform(), Fifo(), 10, 0, MinSize(1));

  absl::Notification insert_done, sample_done;
  absl::Status insert_status, sample_status;
  std::thread inserter([&] {
    insert_status = Insert(*queue, 2, 1.0, kForever);
    insert_done.Notify();
  });
  std::thread sampler([&] {
    sample_status = SampleOne(*empty, kForever).status();
    sample_done.Notify();
  });
  EXPECT_FALSE(insert_done.WaitForNotificationWithTimeout(kBlockCheck));
  EXPECT_FALSE(sample_done.HasBeenNotified());
  queue->Close();
  empty->Close();
  EXPECT_TRUE(insert_done.WaitForNotificationWithTimeout(kUnblockTimeout));
  EXPECT_TRUE(sample_done.WaitForNotificationWithTimeout(kUnblockTimeout));
  inserter.join();
  sampler.join();
  EXPECT_EQ(insert_status.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(insert_status.message(), kTableClosedMessage);
  EXPECT_EQ(sample_status.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(sample_status.message(), kTableClosedMessage);
  EXPECT_EQ(queue->size(), 1);  // the blocked insert was not stored

  // Later calls fail at once, even ones that would not block.
  EXPECT_EQ(Insert(*empty, 3).code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(SampleOne(*queue, kForever).status().code(), absl::StatusCode::kCancelled);
  queue->Close();  // idempotent
}

TEST(TableTest, CancelledCallbackAbortsBlockedCalls) {
  auto table = MakeTable(Fifo(), Fifo(), 100, 1, QueueLimiter(1));
  std::atomic<bool> cancel{false};
  auto cancelled = [&cancel] { return cancel.load(); };

  absl::Notification sample_done;
  absl::Status sample_status;
  std::thread sampler([&] {
    std::vector<SampledItem> out;
    sample_status = table->SampleBatch(1, kForever, &out, cancelled);
    sample_done.Notify();
  });
  EXPECT_FALSE(sample_done.WaitForNotificationWithTimeout(kBlockCheck));
  cancel = true;
  EXPECT_TRUE(sample_done.WaitForNotificationWithTimeout(kUnblockTimeout));
  sampler.join();
  EXPECT_EQ(sample_status.code(), absl::StatusCode::kCancelled);

  cancel = false;
  ASSERT_TRUE(Insert(*table, 1).ok());
  absl::Notification insert_done;
  absl::Status insert_status;
  std::thread inserter([&] {
    insert_status = table->InsertOrAssign(MakeItem(2), kForever, cancelled);
    insert_done.Notify();
  });
  EXPECT_FALSE(insert_done.WaitForNotificationWithTimeout(kBlockCheck));
  cancel = true;
  EXPECT_TRUE(insert_done.WaitForNotificationWithTimeout(kUnblockTimeout));
  inserter.join();
  EXPECT_EQ(insert_status.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(table->size(), 1);
  // The table still works and the callback is irrelevant when not blocked.
  EXPECT_EQ(KeyOf(SampleOne(*table).value()), 1u);
  EXPECT_TRUE(table->InsertOrAssign(MakeItem(3), kNoWait, cancelled).ok());
}

TEST(TableTest, ResetClearsItemsAndCounters) {
  auto table = MakeTable(Uniform(), Fifo(), 2, 0, MinSize(1));
  for (uint64_t k = 1; k <= 3; ++k) ASSERT_TRUE(Insert(*table, k).ok());
  ASSERT_TRUE(SampleOne(*table).ok());
  auto info = table->Info();
  EXPECT_EQ(info.current_size(), 2);
  EXPECT_EQ(info.num_deleted_episodes(), 1);
  EXPECT_EQ(info.rate_limiter_info().insert_stats().completed(), 3);

  table->Reset();
  info = table->Info();
  EXPECT_EQ(table->size(), 0);
  EXPECT_EQ(info.current_size(), 0);
  EXPECT_EQ(info.num_episodes(), 0);
  EXPECT_EQ(info.num_deleted_episodes(), 0);
  EXPECT_EQ(info.num_unique_samples(), 0);
  EXPECT_EQ(info.rate_limiter_info().insert_stats().completed(), 0);
  EXPECT_EQ(info.rate_limiter_info().sample_stats().completed(), 0);
  EXPECT_EQ(info.rate_limiter_info().min_size_to_sample(), 1);  // parameters kept
  EXPECT_EQ(SampleOne(*table).status().code(), absl::StatusCode::kDeadlineExceeded);

  // Keys of the old items may be inserted again.
  ASSERT_TRUE(Insert(*table, 1).ok());
  EXPECT_EQ(KeyOf(SampleOne(*table).value()), 1u);
  EXPECT_EQ(table->Info().rate_limiter_info().insert_stats().completed(), 1);
}

TEST(TableTest, ResetUnblocksAnInsertBlockedByTheLimiter) {
  auto table = MakeTable(Fifo(), Fifo(), 100, 0, QueueLimiter(1));
  ASSERT_TRUE(Insert(*table, 1).ok());
  absl::Notification done;
  absl::Status status;
  std::thread inserter([&] {
    status = Insert(*table, 2, 1.0, kForever);
    done.Notify();
  });
  EXPECT_FALSE(done.WaitForNotificationWithTimeout(kBlockCheck));
  table->Reset();
  EXPECT_TRUE(done.WaitForNotificationWithTimeout(kUnblockTimeout));
  inserter.join();
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_EQ(table->size(), 1);
  EXPECT_EQ(KeyOf(SampleOne(*table).value()), 2u);
}

TEST(TableTest, InfoReportsConfigurationAndCounters) {
  auto table = MakeTable(Prioritized(0.8), Fifo(), 10, 3, Limiter(2.0, 1, -5.0, 7.0), "info_table");
  auto info = table->Info();
  EXPECT_EQ(info.name(), "info_table");
  EXPECT_EQ(info.max_size(), 10);
  EXPECT_EQ(info.max_times_sampled(), 3);
  EXPECT_DOUBLE_EQ(info.sampler_options().prioritized().priority_exponent(), 0.8);
  EXPECT_TRUE(info.remover_options().fifo());
  EXPECT_DOUBLE_EQ(info.rate_limiter_info().samples_per_insert(), 2.0);
  EXPECT_EQ(info.rate_limiter_info().min_size_to_sample(), 1);
  EXPECT_DOUBLE_EQ(info.rate_limiter_info().min_diff(), -5.0);
  EXPECT_DOUBLE_EQ(info.rate_limiter_info().max_diff(), 7.0);
  EXPECT_EQ(info.current_size(), 0);

  // Episode accounting counts (item, chunk) references per episode id.
  auto c1 = MakeChunk(11, /*episode_id=*/100);
  auto c2 = MakeChunk(12, /*episode_id=*/100);
  auto c3 = MakeChunk(13, /*episode_id=*/200);
  ASSERT_TRUE(table->InsertOrAssign(MakeItem(1, 1.0, {c1, c2}), kNoWait).ok());
  ASSERT_TRUE(table->InsertOrAssign(MakeItem(2, 1.0, {c2, c3}), kNoWait).ok());
  info = table->Info();
  EXPECT_EQ(info.current_size(), 2);
  EXPECT_EQ(info.num_episodes(), 2);
  EXPECT_EQ(info.num_deleted_episodes(), 0);

  ASSERT_TRUE(table->MutateItems({}, {1}).ok());
  info = table->Info();
  EXPECT_EQ(info.num_episodes(), 2);  // episode 100 still referenced by item 2
  EXPECT_EQ(info.num_deleted_episodes(), 0);

  // Sampling item 2 three times deletes it (max_times_sampled = 3).
  std::vector<SampledItem> batch;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(table->SampleBatch(1, kNoWait, &batch).ok());
  info = table->Info();
  EXPECT_EQ(info.current_size(), 0);
  EXPECT_EQ(info.num_episodes(), 0);
  EXPECT_EQ(info.num_deleted_episodes(), 2);
  EXPECT_EQ(info.num_unique_samples(), 1);
  EXPECT_EQ(info.rate_limiter_info().insert_stats().completed(), 2);
  EXPECT_EQ(info.rate_limiter_info().sample_stats().completed(), 3);

  // An episode coming back counts again; its earlier deletion stays counted.
  ASSERT_TRUE(table->InsertOrAssign(MakeItem(3, 1.0, {c1}), kNoWait).ok());
  info = table->Info();
  EXPECT_EQ(info.num_episodes(), 1);
  EXPECT_EQ(info.num_deleted_episodes(), 2);
  EXPECT_THAT(table->DebugString(), HasSubstr("info_table"));
}

TEST(TableTest, ConcurrentInsertSampleAndUpdate) {
  constexpr int kInserters = 4;
  constexpr int kPerInserter = 600;
  constexpr int64_t kMaxSize = 100;
  auto table = MakeTable(Prioritized(0.8), Fifo(), kMaxSize, 0, MinSize(1));
  auto key_of = [](int thread, int i) -> uint64_t {
    return static_cast<uint64_t>(thread + 1) * 1000000 + i;
  };

  std::atomic<int> inserters_running{kInserters};
  std::atomic<int64_t> samples_taken{0};
  std::atomic<int64_t> updates_done{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kInserters; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerInserter; ++i) {
        absl::Status s =
            table->InsertOrAssign(MakeItem(key_of(t, i), 1.0 + i % 7), absl::Seconds(30));
        EXPECT_TRUE(s.ok()) << s;
      }
      --inserters_running;
    });
  }
  // Each sampler and the updater works at least once even when it starts
  // after the inserters are done (they can finish within milliseconds).
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&] {
      int64_t batches = 0;
      while (inserters_running > 0 || batches == 0) {
        std::vector<SampledItem> batch;
        absl::Status s = table->SampleBatch(4, absl::Milliseconds(20), &batch);
        if (!s.ok()) {
          EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
          continue;
        }
        EXPECT_GE(batch.size(), 1u);
        EXPECT_LE(batch.size(), 4u);
        for (const SampledItem& item : batch) {
          EXPECT_GE(item.times_sampled, 1);
          EXPECT_GT(item.probability, 0.0);
          EXPECT_LE(item.probability, 1.0 + 1e-9);
          EXPECT_GE(item.table_size, 1);
          EXPECT_LE(item.table_size, kMaxSize);
          EXPECT_GE(item.priority, 0.0);
        }
        samples_taken += static_cast<int64_t>(batch.size());
        ++batches;
      }
    });
  }
  threads.emplace_back([&] {
    std::mt19937 gen(3);
    do {
      std::vector<KeyWithPriority> updates;
      for (int j = 0; j < 5; ++j) {
        updates.push_back(
            Update(key_of(gen() % kInserters, gen() % kPerInserter), (gen() % 1000) / 100.0));
      }
      EXPECT_TRUE(table->MutateItems(updates, {}).ok());
      ++updates_done;
    } while (inserters_running > 0);
  });
  for (std::thread& t : threads) t.join();

  auto info = table->Info();
  EXPECT_EQ(info.rate_limiter_info().insert_stats().completed(), kInserters * kPerInserter);
  EXPECT_EQ(info.rate_limiter_info().sample_stats().completed(), samples_taken.load());
  EXPECT_GT(samples_taken.load(), 0);
  EXPECT_GT(updates_done.load(), 0);
  EXPECT_EQ(info.current_size(), kMaxSize);
  EXPECT_EQ(table->size(), kMaxSize);
  EXPECT_EQ(info.num_episodes(), kMaxSize);  // one episode per item
  EXPECT_EQ(info.num_deleted_episodes(), kInserters * kPerInserter - kMaxSize);
  EXPECT_LE(info.num_unique_samples(), samples_taken.load());

  // FIFO eviction keeps, of each inserter's keys, a suffix.
  std::vector<uint64_t> all;
  for (int t = 0; t < kInserters; ++t) {
    for (int i = 0; i < kPerInserter; ++i) all.push_back(key_of(t, i));
  }
  std::set<uint64_t> present = DrainKeys(*table, all);
  EXPECT_EQ(present.size(), static_cast<size_t>(kMaxSize));
  for (int t = 0; t < kInserters; ++t) {
    bool seen = false;
    for (int i = 0; i < kPerInserter; ++i) {
      const bool here = present.count(key_of(t, i)) > 0;
      EXPECT_FALSE(seen && !here) << "gap in thread " << t << " at " << i;
      seen = seen || here;
    }
  }
  EXPECT_EQ(table->size(), 0);
  EXPECT_EQ(table->Info().num_episodes(), 0);
}

// ---------------------------------------------------------------------------
// Signatures: every insert is checked (signature.h), whoever sent it.

std::string TupleSignature(
    const std::vector<std::pair<tfp::DataType, std::vector<int64_t>>>& specs) {
  tfp::StructuredValue root;
  auto* tuple = root.mutable_tuple_value();
  for (const auto& [dtype, dims] : specs) {
    auto* spec = tuple->add_values()->mutable_tensor_spec_value();
    spec->set_dtype(dtype);
    auto* shape = spec->mutable_shape();
    for (int64_t d : dims) shape->add_dim()->set_size(d);
  }
  return root.SerializeAsString();
}

absl::StatusOr<std::shared_ptr<Table>> SignatureTable(std::string signature,
                                                      bool check_item_signatures = true) {
  Table::Config config = TableConfig("sig", Fifo(), Fifo(), 100, MinSize(1));
  config.signature = std::move(signature);
  config.check_item_signatures = check_item_signatures;
  return Table::Create(std::move(config));
}

// A one-column chunk of `rows` float32 steps of shape [2].
std::shared_ptr<const TableChunk> FloatPairChunk(uint64_t chunk_key, int rows) {
  Tensor column;
  column.dtype = tfp::DT_FLOAT;
  column.shape = {rows, 2};
  column.data.assign(rows * 2 * sizeof(float), '\0');
  absl::StatusOr<ChunkData> chunk = BuildChunk(chunk_key, {column}, 1, 0, rows - 1, false);
  EXPECT_TRUE(chunk.ok()) << chunk.status();
  return TableChunk::FromProto(*chunk);
}

TEST(TableSignatureTest, AcceptsItemsOfTheSignature) {
  // MakeItem's column is int64 [rows]: matches [?] as a trajectory and []
  // as a step.
  for (const std::vector<int64_t>& dims : {std::vector<int64_t>{-1}, std::vector<int64_t>{}}) {
    auto table = SignatureTable(TupleSignature({{tfp::DT_INT64, dims}}));
    ASSERT_TRUE(table.ok()) << table.status();
    EXPECT_TRUE((*table)->InsertOrAssign(MakeItem(1), kNoWait).ok());
    EXPECT_TRUE(
        (*table)
            ->InsertOrAssign(MakeItem(2, 1.0, {MakeChunk(7, 1, 3), MakeChunk(8, 1, 2)}), kNoWait)
            .ok());
    EXPECT_EQ((*table)->size(), 2);
  }
}

TEST(TableSignatureTest, RejectsWrongDtypeShapeOrColumnCount) {
  auto table = SignatureTable(TupleSignature({{tfp::DT_FLOAT, {-1}}}));
  ASSERT_TRUE(table.ok()) << table.status();
  absl::Status dtype = (*table)->InsertOrAssign(MakeItem(1), kNoWait);
  EXPECT_TRUE(absl::IsInvalidArgument(dtype)) << dtype;
  EXPECT_THAT(dtype.message(), HasSubstr("table 'sig'"));
  EXPECT_THAT(dtype.message(), HasSubstr("column 0 (0,) is " + DataTypeName(tfp::DT_FLOAT) +
                                         "[?] in the signature but the item provides " +
                                         DataTypeName(tfp::DT_INT64) + "[1]"));

  auto pairs = SignatureTable(TupleSignature({{tfp::DT_FLOAT, {-1, 3}}}));
  ASSERT_TRUE(pairs.ok()) << pairs.status();
  absl::Status shape = (*pairs)->InsertOrAssign(MakeItem(2, 1.0, {FloatPairChunk(20, 4)}), kNoWait);
  EXPECT_TRUE(absl::IsInvalidArgument(shape)) << shape;
  EXPECT_THAT(shape.message(), HasSubstr("[?,3] in the signature"));
  EXPECT_THAT(shape.message(), HasSubstr("[4,2]"));

  auto two = SignatureTable(TupleSignature({{tfp::DT_INT64, {-1}}, {tfp::DT_INT64, {-1}}}));
  ASSERT_TRUE(two.ok()) << two.status();
  absl::Status count = (*two)->InsertOrAssign(MakeItem(3), kNoWait);
  EXPECT_TRUE(absl::IsInvalidArgument(count)) << count;
  EXPECT_THAT(count.message(), HasSubstr("1 columns but the signature has 2"));

  // Nothing above was stored or charged.
  EXPECT_EQ((*table)->size(), 0);
  EXPECT_EQ((*pairs)->size(), 0);
  EXPECT_EQ((*two)->size(), 0);
  EXPECT_EQ((*table)->Info().rate_limiter_info().insert_stats().completed(), 0);
}

TEST(TableSignatureTest, WithoutTheOptionItemsOfOtherColumnsAreStoredAsInReverb) {
  // Reverb's tables never check items against their signature: a writer that
  // does not validate (TF-Agents with policy_info) inserts one more column.
  auto table = SignatureTable(TupleSignature({{tfp::DT_FLOAT, {-1}}, {tfp::DT_FLOAT, {-1}}}),
                              /*check_item_signatures=*/false);
  ASSERT_TRUE(table.ok()) << table.status();
  absl::Status status = (*table)->InsertOrAssign(MakeItem(1), kNoWait);
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_EQ((*table)->size(), 1);
  // A malformed item is still refused.
  TableItem no_chunks = MakeItem(2);
  no_chunks.chunks.clear();
  EXPECT_TRUE(absl::IsInvalidArgument((*table)->InsertOrAssign(no_chunks, kNoWait)));
  EXPECT_EQ((*table)->size(), 1);
}

TEST(TableSignatureTest, RejectsColumnsJoiningDifferentSlices) {
  auto table = SignatureTable(TupleSignature({{tfp::DT_INT64, {-1}}}));
  ASSERT_TRUE(table.ok()) << table.status();
  absl::Status status = (*table)->InsertOrAssign(
      MakeItem(1, 1.0, {MakeChunk(7, 1, 1), FloatPairChunk(8, 1)}), kNoWait);
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("different dtypes or row shapes"));
}

// Found by //server/fuzz:insert_stream_fuzzer: without a signature, a
// column joining an int64 [n] slice and a float32 [n, 2] one was stored,
// and every sample of it failed to unpack ("mixes chunks of different
// specs"). Whatever a table accepts must be readable, so the check does not
// depend on a signature, on insert or on restore.
TEST(TableTest, ColumnsJoiningDifferentSlicesAreRejectedWithoutASignature) {
  auto table = MakeTable(Uniform(), Fifo(), 10, 0, MinSize(1));
  TableItem mixed = MakeItem(1, 1.0, {MakeChunk(7, 1, 1), FloatPairChunk(8, 1)});
  absl::Status status = table->InsertOrAssign(mixed, kNoWait);
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("different dtypes or row shapes"));
  EXPECT_EQ(table->size(), 0);

  Table::Snapshot snapshot = table->TakeSnapshot();
  std::vector<Table::CheckpointItem> items;
  items.push_back(Table::CheckpointItem{std::make_shared<const TableItem>(mixed), 1.0, 0});
  absl::StatusOr<std::vector<std::string>> restored =
      table->Restore(snapshot.config, std::move(items), Table::RestoreMode::kCheckpointConfig);
  EXPECT_TRUE(absl::IsInvalidArgument(restored.status())) << restored.status();
  EXPECT_EQ(table->size(), 0);
}

TEST(TableSignatureTest, SqueezedColumnsAreCheckedWithoutTheTimeDimension) {
  auto table = SignatureTable(TupleSignature({{tfp::DT_INT64, {}}}));
  ASSERT_TRUE(table.ok()) << table.status();
  TableItem item = MakeItem(1);
  PrioritizedItem proto = item.item.ToProto();
  proto.mutable_flat_trajectory()->mutable_columns(0)->set_squeeze(true);
  item.item = ItemRecord::FromProto(proto);
  EXPECT_TRUE((*table)->InsertOrAssign(item, kNoWait).ok());

  auto trajectory = SignatureTable(TupleSignature({{tfp::DT_INT64, {1}}}));
  ASSERT_TRUE(trajectory.ok()) << trajectory.status();
  absl::Status status = (*trajectory)->InsertOrAssign(item, kNoWait);
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("provides " + DataTypeName(tfp::DT_INT64) + "[]"));
}

TEST(TableSignatureTest, UnreadableSignaturesAreRejectedUncheckableOnesStored) {
  absl::StatusOr<std::shared_ptr<Table>> garbage = SignatureTable("\xff\xff\xff");
  EXPECT_TRUE(absl::IsInvalidArgument(garbage.status())) << garbage.status();

  // A composite spec (say a RaggedTensorSpec) is kept but not enforced.
  tfp::StructuredValue ragged;
  ragged.mutable_type_spec_value()->set_type_spec_class(3);
  auto table = SignatureTable(ragged.SerializeAsString());
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_EQ((*table)->Info().signature(), ragged.SerializeAsString());
  EXPECT_TRUE((*table)->InsertOrAssign(MakeItem(1), kNoWait).ok());
}

TEST(TableSignatureTest, RestoredCheckpointSignatureIsEnforced) {
  // A table that checks signatures, without one until the restore.
  std::shared_ptr<Table> table = SignatureTable("").value();
  ASSERT_TRUE(table->InsertOrAssign(MakeItem(1), kNoWait).ok());
  Table::Snapshot snapshot = table->TakeSnapshot();
  deepmind::reverb::PriorityTableCheckpoint checkpoint = snapshot.config;
  checkpoint.set_signature(TupleSignature({{tfp::DT_FLOAT, {}}}));
  ASSERT_TRUE(table->Restore(checkpoint, {}, Table::RestoreMode::kCheckpointConfig).ok());
  EXPECT_TRUE(absl::IsInvalidArgument(table->InsertOrAssign(MakeItem(2), kNoWait)));

  checkpoint.set_signature("\xff\xff\xff");
  EXPECT_TRUE(absl::IsInvalidArgument(
      table->Restore(checkpoint, {}, Table::RestoreMode::kCheckpointConfig).status()));
}

// A seeded table: `sampler` draws, a uniform remover, 100 items of keys
// 1..100 with priorities 1..100.
std::shared_ptr<Table> SeededTable(const KeyDistributionOptions& sampler,
                                   std::optional<uint64_t> seed) {
  Table::Config config = TableConfig("seeded", sampler, Uniform(), 100, MinSize(1));
  config.seed = seed;
  auto table = Table::Create(std::move(config)).value();
  for (uint64_t key = 1; key <= 100; ++key) {
    EXPECT_TRUE(table->InsertOrAssign(MakeItem(key, static_cast<double>(key)), kNoWait).ok());
  }
  return table;
}

class SeededTableTest : public ::testing::TestWithParam<KeyDistributionOptions> {};

TEST_P(SeededTableTest, TheSameSeedSamplesTheSameKeysInTheSameOrder) {
  auto first = SeededTable(GetParam(), 42);
  auto second = SeededTable(GetParam(), 42);
  const std::vector<uint64_t> keys = SampleKeys(*first, 200);
  EXPECT_EQ(SampleKeys(*second, 200), keys);
  // Another seed, or none, draws otherwise (200 draws over 100 keys).
  EXPECT_NE(SampleKeys(*SeededTable(GetParam(), 43), 200), keys);
  EXPECT_NE(SampleKeys(*SeededTable(GetParam(), std::nullopt), 200), keys);
}

TEST_P(SeededTableTest, ABatchTakesTheKeysOfDrawsOneAtATime) {
  // Batches draw keys a window at a time (kSampleWindow): the same keys in
  // the same order, and each sample's count as if taken one by one.
  ASSERT_GT(50, kSampleWindow);
  auto batched = SeededTable(GetParam(), 42);
  auto single = SeededTable(GetParam(), 42);
  std::vector<uint64_t> keys;
  std::map<uint64_t, int32_t> counts;
  for (int call = 0; call < 4; ++call) {
    std::vector<SampledItem> batch;
    ASSERT_TRUE(batched->SampleBatch(50, kNoWait, &batch).ok());
    ASSERT_EQ(batch.size(), 50u);
    for (const SampledItem& item : batch) {
      keys.push_back(item.data->item.key());
      EXPECT_EQ(item.times_sampled, ++counts[item.data->item.key()]);
    }
  }
  EXPECT_EQ(keys, SampleKeys(*single, 200));
}

TEST(SeededTableBytesTest, ABatchOfMixedSizesStopsWhereOneAtATimeSamplingWould) {
  // One ~600 KB item among 30 of a few bytes: a window must not run past
  // the batch's byte limit after a small item (the limit is checked before
  // each draw of one-at-a-time sampling).
  auto make = [] {
    Table::Config config = TableConfig("mixed", Uniform(), Fifo(), 100, MinSize(1));
    config.seed = 5;
    auto table = Table::Create(std::move(config)).value();
    std::mt19937_64 gen(1);
    auto large = IncompressibleChunk(101, gen);
    EXPECT_TRUE(table->InsertOrAssign(MakeItem(1, 1.0, {large}), kNoWait).ok());
    for (uint64_t key = 2; key <= 31; ++key) EXPECT_TRUE(Insert(*table, key).ok());
    return table;
  };
  auto batched = make();
  auto single = make();
  std::vector<SampledItem> batch;
  ASSERT_TRUE(batched->SampleBatch(400, kNoWait, &batch).ok());
  std::vector<uint64_t> expected;
  int64_t bytes = 0;
  while (bytes < kMaxSampleBatchBytes) {
    absl::StatusOr<SampledItem> one = SampleOne(*single);
    ASSERT_TRUE(one.ok()) << one.status();
    expected.push_back(one->data->item.key());
    for (const auto& chunk : one->data->chunks) bytes += chunk->stored_bytes();
  }
  ASSERT_LT(expected.size(), 400u);  // the bytes cut the batch
  std::vector<uint64_t> keys;
  for (const SampledItem& item : batch) keys.push_back(item.data->item.key());
  EXPECT_EQ(keys, expected);
}

TEST_P(SeededTableTest, ARestoredTableGoesOnDrawingWhereTheCheckpointStopped) {
  auto original = SeededTable(GetParam(), 7);
  SampleKeys(*original, 50);
  Table::Snapshot snapshot = original->TakeSnapshot();
  ASSERT_TRUE(snapshot.config.has_seed());
  EXPECT_EQ(snapshot.config.seed(), 7u);
  EXPECT_FALSE(snapshot.config.sampler_random_state().empty());
  // Restored into an unseeded table with the checkpoint's configuration.
  auto restored = SeededTable(GetParam(), std::nullopt);
  ASSERT_TRUE(restored
                  ->Restore(snapshot.config, std::move(snapshot.items),
                            Table::RestoreMode::kCheckpointConfig)
                  .ok());
  EXPECT_EQ(SampleKeys(*restored, 100), SampleKeys(*original, 100));
}

TEST(SeededTableConfigTest, UnseededTablesCheckpointNoRandomState) {
  Table::Snapshot snapshot = SeededTable(Uniform(), std::nullopt)->TakeSnapshot();
  EXPECT_FALSE(snapshot.config.has_seed());
  EXPECT_TRUE(snapshot.config.sampler_random_state().empty());
}

TEST(SeededTableConfigTest, AnUnreadableRandomStateFailsTheRestore) {
  Table::Snapshot snapshot = SeededTable(Uniform(), 1)->TakeSnapshot();
  snapshot.config.set_sampler_random_state("not a state");
  auto restored = SeededTable(Uniform(), std::nullopt);
  absl::StatusOr<std::vector<std::string>> result = restored->Restore(
      snapshot.config, std::move(snapshot.items), Table::RestoreMode::kCheckpointConfig);
  EXPECT_TRUE(absl::IsInvalidArgument(result.status())) << result.status();
  EXPECT_EQ(restored->size(), 100);  // untouched
}

INSTANTIATE_TEST_SUITE_P(DrawingSelectors, SeededTableTest,
                         ::testing::Values(Uniform(), Prioritized(0.8)), [](const auto& info) {
                           return info.index == 0 ? "Uniform" : "Prioritized";
                         });

}  // namespace
}  // namespace tf_reverb

namespace tf_reverb {
namespace {

using namespace ::tf_reverb::testing;  // NOLINT: test builders

// Lookup, Scan and Stats look without sampling: counters stay, the scan
// cursor survives deletes and inserts between batches.
TEST(TableLookTest, LookupScanAndStatsAreNotSamples) {
  auto table = MakeTable(Uniform(), Fifo(), 100, 0, MinSize(1));
  for (uint64_t key = 1; key <= 7; ++key) ASSERT_TRUE(Insert(*table, key, key * 1.0).ok());
  ASSERT_TRUE(SampleOne(*table).ok());
  const deepmind::reverb::TableInfo before = table->Info();

  std::vector<SampledItem> found;
  std::vector<uint64_t> missing;
  table->Lookup({3, 99, 5}, &found, &missing);
  ASSERT_EQ(found.size(), 2u);
  EXPECT_EQ(found[0].data->item.key(), 3u);
  EXPECT_EQ(found[0].priority, 3.0);
  EXPECT_EQ(found[0].table_size, 7);
  EXPECT_EQ(missing, std::vector<uint64_t>{99});

  std::vector<SampledItem> batch;
  bool done = false;
  uint64_t next = table->Scan(0, 3, &batch, &done);
  ASSERT_EQ(batch.size(), 3u);
  EXPECT_FALSE(done);
  ASSERT_TRUE(table->MutateItems({}, {4, 7}).ok());  // one ahead of the cursor, the last
  ASSERT_TRUE(Insert(*table, 8).ok());
  std::vector<uint64_t> keys;
  for (const auto& item : batch) keys.push_back(item.data->item.key());
  while (!done) {
    batch.clear();
    next = table->Scan(next, 3, &batch, &done);
    for (const auto& item : batch) keys.push_back(item.data->item.key());
  }
  EXPECT_EQ(keys, (std::vector<uint64_t>{1, 2, 3, 5, 6, 8}));

  const deepmind::reverb::TableStatsResponse stats = table->Stats();
  EXPECT_EQ(stats.size(), 6);
  EXPECT_EQ(stats.total_priority(), 1 + 2 + 3 + 5 + 6 + 1.0);
  EXPECT_EQ(stats.max_priority(), 6.0);
  int64_t sampled = 0;
  for (const auto& [times, count] : stats.times_sampled()) sampled += times * count;
  EXPECT_LE(sampled, 1);  // the sampled item may have been deleted since
  const deepmind::reverb::TableInfo after = table->Info();
  EXPECT_EQ(after.rate_limiter_info().sample_stats().completed(),
            before.rate_limiter_info().sample_stats().completed());
  EXPECT_EQ(after.num_unique_samples(), before.num_unique_samples());
}

}  // namespace
}  // namespace tf_reverb
