// Policy-version limits of a Table: items older than the current version
// minus max_staleness are not sampled (or are evicted), through inserts,
// version changes, deletes, updates, snapshots and restores.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "checkpoint.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "schema.pb.h"
#include "server/item_record.h"
#include "server/table.h"
#include "server/table_item.h"
#include "server/testing/table_testing.h"

namespace tf_reverb {
namespace {

using ::testing::HasSubstr;
using namespace ::tf_reverb::testing;  // NOLINT: test builders

constexpr absl::Duration kUnblockTimeout = absl::Seconds(120);

deepmind::reverb::KeyWithPriority Update(uint64_t key, double priority) {
  deepmind::reverb::KeyWithPriority update;
  update.set_key(key);
  update.set_priority(priority);
  return update;
}

std::shared_ptr<Table> StalenessTable(std::optional<int64_t> max_staleness, bool evict,
                                      int64_t max_size = 100,
                                      const KeyDistributionOptions& sampler = Uniform()) {
  Table::Config config = TableConfig("t", sampler, Fifo(), max_size, MinSize(1));
  config.max_staleness = max_staleness;
  config.evict_stale = evict;
  absl::StatusOr<std::shared_ptr<Table>> table = Table::Create(std::move(config));
  EXPECT_TRUE(table.ok()) << table.status();
  return *table;
}

// An item of `key` with policy version `version` (nullopt: none given).
TableItem VersionedItem(uint64_t key, std::optional<int64_t> version, double priority = 1.0) {
  TableItem item = MakeItem(key, priority);
  PrioritizedItem proto = item.item.ToProto();
  if (version.has_value()) proto.set_policy_version(*version);
  item.item = ItemRecord::FromProto(proto);
  return item;
}

absl::Status InsertVersioned(Table& table, uint64_t key, std::optional<int64_t> version) {
  return table.InsertOrAssign(VersionedItem(key, version), kNoWait);
}

// Every key sampled in `n` samples.
std::set<uint64_t> SampledKeys(Table& table, int n) {
  std::vector<uint64_t> keys = SampleKeys(table, n);
  return {keys.begin(), keys.end()};
}

TEST(TableStalenessTest, CreateValidatesTheLimit) {
  for (auto [limit, evict] : {std::make_pair(std::optional<int64_t>(-1), false),
                              std::make_pair(std::optional<int64_t>(), true)}) {
    Table::Config config = TableConfig("t", Uniform(), Fifo(), 10, MinSize(1));
    config.max_staleness = limit;
    config.evict_stale = evict;
    absl::StatusOr<std::shared_ptr<Table>> table = Table::Create(std::move(config));
    EXPECT_TRUE(absl::IsInvalidArgument(table.status())) << table.status();
  }
}

TEST(TableStalenessTest, ItemsWithoutAVersionTakeTheCurrentOne) {
  auto table = StalenessTable(std::nullopt, false);
  ASSERT_TRUE(table->SetPolicyVersion(7).ok());
  ASSERT_TRUE(InsertVersioned(*table, 1, std::nullopt).ok());
  ASSERT_TRUE(InsertVersioned(*table, 2, 3).ok());
  std::vector<SampledItem> found;
  std::vector<uint64_t> missing;
  table->Lookup({1, 2}, &found, &missing);
  ASSERT_EQ(found.size(), 2u);
  EXPECT_EQ(found[0].data->item.policy_version(), 7);
  EXPECT_EQ(found[1].data->item.policy_version(), 3);
  EXPECT_EQ(SampleInfoOf(found[1]).item().policy_version(), 3);
  // Without a limit nothing is stale, however old.
  ASSERT_TRUE(table->SetPolicyVersion(1000).ok());
  EXPECT_EQ(SampledKeys(*table, 100), (std::set<uint64_t>{1, 2}));
}

TEST(TableStalenessTest, StaleItemsAreNotSampledButKept) {
  auto table = StalenessTable(2, false);
  for (int64_t version = 0; version < 5; ++version) {
    ASSERT_TRUE(InsertVersioned(*table, 10 + version, version).ok());
  }
  ASSERT_TRUE(table->SetPolicyVersion(4).ok());  // fresh: versions 2, 3, 4
  EXPECT_EQ(SampledKeys(*table, 200), (std::set<uint64_t>{12, 13, 14}));
  EXPECT_EQ(table->size(), 5);
  EXPECT_EQ(table->num_stale(), 2);
  absl::StatusOr<int64_t> stale = table->SetPolicyVersion(6);
  ASSERT_TRUE(stale.ok()) << stale.status();
  EXPECT_EQ(*stale, 2);  // versions 2 and 3
  EXPECT_EQ(SampledKeys(*table, 50), (std::set<uint64_t>{14}));
  EXPECT_EQ(table->Stats().stale_items(), 4);
  EXPECT_EQ(table->Stats().policy_version(), 6);
  EXPECT_EQ(table->Info().policy_version(), 6);
  EXPECT_EQ(table->Info().max_staleness(), 2);

  // An item inserted already stale is stored unsampled; stale items can be
  // updated and deleted; the remover still evicts them.
  ASSERT_TRUE(InsertVersioned(*table, 20, 1).ok());
  EXPECT_EQ(table->num_stale(), 5);
  EXPECT_EQ(SampledKeys(*table, 50), (std::set<uint64_t>{14}));
  ASSERT_TRUE(table->MutateItems({Update(20, 5.0)}, {10}).ok());
  EXPECT_EQ(table->num_stale(), 4);
  EXPECT_EQ(table->size(), 5);
}

TEST(TableStalenessTest, SamplingWaitsForAFreshItem) {
  auto table = StalenessTable(0, false);
  ASSERT_TRUE(InsertVersioned(*table, 1, 0).ok());
  ASSERT_TRUE(table->SetPolicyVersion(1).ok());
  // The table holds an item, but none may be sampled: a sample times out.
  EXPECT_TRUE(absl::IsDeadlineExceeded(SampleOne(*table, absl::Milliseconds(10)).status()));
  std::thread writer([&] { EXPECT_TRUE(InsertVersioned(*table, 2, 1).ok()); });
  absl::StatusOr<SampledItem> sample = SampleOne(*table, kUnblockTimeout);
  writer.join();
  ASSERT_TRUE(sample.ok()) << sample.status();
  EXPECT_EQ(sample->data->item.key(), 2u);
  EXPECT_EQ(sample->table_size, 2);  // the stale item still counts in the size
}

TEST(TableStalenessTest, EvictingTablesDeleteStaleItems) {
  auto table = StalenessTable(1, true);
  for (int64_t version = 0; version < 4; ++version) {
    ASSERT_TRUE(InsertVersioned(*table, 10 + version, version).ok());
  }
  absl::StatusOr<int64_t> stale = table->SetPolicyVersion(3);
  ASSERT_TRUE(stale.ok());
  EXPECT_EQ(*stale, 2);
  EXPECT_EQ(table->size(), 2);
  EXPECT_EQ(table->num_stale(), 0);
  // Counted as deletions by the rate limiter, as evictions are.
  EXPECT_EQ(table->TakeSnapshot().config.rate_limiter().delete_count(), 2);
  // An item inserted stale is evicted at once.
  ASSERT_TRUE(InsertVersioned(*table, 30, 0).ok());
  EXPECT_EQ(table->size(), 2);
  EXPECT_EQ(SampledKeys(*table, 100), (std::set<uint64_t>{12, 13}));
}

TEST(TableStalenessTest, VersionsOnlyGrow) {
  auto table = StalenessTable(1, false);
  ASSERT_TRUE(table->SetPolicyVersion(5).ok());
  EXPECT_TRUE(table->SetPolicyVersion(5).ok());  // the same again: nothing changes
  absl::StatusOr<int64_t> lower = table->SetPolicyVersion(4);
  EXPECT_TRUE(absl::IsInvalidArgument(lower.status()));
  EXPECT_THAT(lower.status().message(), HasSubstr("only grow"));
  EXPECT_TRUE(absl::IsInvalidArgument(table->SetPolicyVersion(-1).status()));
  absl::Status negative = InsertVersioned(*table, 1, -3);
  EXPECT_TRUE(absl::IsInvalidArgument(negative)) << negative;
  EXPECT_EQ(table->size(), 0);
  table->Close();
  EXPECT_TRUE(absl::IsCancelled(table->SetPolicyVersion(9).status()));
}

TEST(TableStalenessTest, ResetKeepsTheVersion) {
  auto table = StalenessTable(0, false);
  ASSERT_TRUE(table->SetPolicyVersion(3).ok());
  ASSERT_TRUE(InsertVersioned(*table, 1, 2).ok());
  table->Reset();
  EXPECT_EQ(table->num_stale(), 0);
  EXPECT_EQ(table->Info().policy_version(), 3);
}

TEST(TableStalenessTest, SnapshotsKeepVersionsAndTheLimit) {
  auto original = StalenessTable(1, false, 100, Prioritized(1.0));
  for (int64_t version = 0; version < 4; ++version) {
    ASSERT_TRUE(InsertVersioned(*original, 10 + version, version).ok());
  }
  ASSERT_TRUE(original->SetPolicyVersion(3).ok());
  Table::Snapshot snapshot = original->TakeSnapshot();
  EXPECT_EQ(snapshot.config.policy_version(), 3);
  EXPECT_EQ(snapshot.config.max_staleness(), 1);

  auto restored = StalenessTable(std::nullopt, false);
  absl::StatusOr<std::vector<std::string>> differences =
      restored->Restore(snapshot.config, snapshot.items, Table::RestoreMode::kCheckpointConfig);
  ASSERT_TRUE(differences.ok()) << differences.status();
  EXPECT_THAT(*differences, ::testing::Contains(HasSubstr("max_staleness")));
  EXPECT_EQ(restored->num_stale(), 2);
  EXPECT_EQ(SampledKeys(*restored, 100), (std::set<uint64_t>{12, 13}));
  EXPECT_EQ(restored->Info().policy_version(), 3);

  // Into a table keeping its own (evicting) limit: the stale items go.
  auto evicting = StalenessTable(1, true);
  ASSERT_TRUE(
      evicting->Restore(snapshot.config, snapshot.items, Table::RestoreMode::kTableConfig).ok());
  EXPECT_EQ(evicting->size(), 2);
  EXPECT_EQ(SampledKeys(*evicting, 100), (std::set<uint64_t>{12, 13}));
}

TEST(TableStalenessTest, PrioritizedProbabilitiesAreOverFreshItems) {
  auto table = StalenessTable(0, false, 100, Prioritized(1.0));
  ASSERT_TRUE(table->InsertOrAssign(VersionedItem(1, 0, 3.0), kNoWait).ok());
  ASSERT_TRUE(table->InsertOrAssign(VersionedItem(2, 1, 1.0), kNoWait).ok());
  ASSERT_TRUE(table->InsertOrAssign(VersionedItem(3, 1, 3.0), kNoWait).ok());
  ASSERT_TRUE(table->SetPolicyVersion(1).ok());
  // A stale item's priority update changes nothing that is sampled.
  ASSERT_TRUE(table->MutateItems({Update(1, 100.0)}, {}).ok());
  for (int i = 0; i < 50; ++i) {
    absl::StatusOr<SampledItem> sample = SampleOne(*table);
    ASSERT_TRUE(sample.ok());
    const uint64_t key = sample->data->item.key();
    ASSERT_NE(key, 1u);
    EXPECT_DOUBLE_EQ(sample->probability, key == 2 ? 0.25 : 0.75);
  }
  EXPECT_DOUBLE_EQ(table->Info().sampler_total_weight(), 4.0);
}

TEST(TableStalenessTest, RestoredItemsWithoutAVersionKeepTheOneTheyGot) {
  // A checkpoint of items without versions (as dm-reverb writes them).
  auto plain = StalenessTable(std::nullopt, false);
  for (uint64_t key = 1; key <= 3; ++key) ASSERT_TRUE(InsertVersioned(*plain, key, 0).ok());
  Table::Snapshot snapshot = plain->TakeSnapshot();
  for (Table::CheckpointItem& item : snapshot.items) {
    PrioritizedItem proto = item.data->item.ToProto();
    proto.clear_policy_version();
    auto data = std::make_shared<TableItem>(*item.data);
    data->item = ItemRecord::FromProto(proto);
    item.data = std::move(data);
  }
  auto table = StalenessTable(1, false);
  ASSERT_TRUE(
      table->Restore(snapshot.config, snapshot.items, Table::RestoreMode::kTableConfig).ok());
  // They are of the version current at the restore (0), and say so.
  std::vector<SampledItem> found;
  std::vector<uint64_t> missing;
  table->Lookup({1}, &found, &missing);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_TRUE(found[0].data->item.has_policy_version());
  EXPECT_EQ(found[0].data->item.policy_version(), 0);
  ASSERT_TRUE(table->SetPolicyVersion(5).ok());
  EXPECT_EQ(table->num_stale(), 3);
  // A checkpoint round trip keeps them stale.
  Table::Snapshot again = table->TakeSnapshot();
  auto restored = StalenessTable(1, false);
  ASSERT_TRUE(
      restored->Restore(again.config, again.items, Table::RestoreMode::kCheckpointConfig).ok());
  EXPECT_EQ(restored->num_stale(), 3);
  // A negative version in a checkpoint fails the restore.
  Table::Snapshot bad = plain->TakeSnapshot();
  PrioritizedItem proto = bad.items[0].data->item.ToProto();
  proto.set_policy_version(-5);
  auto data = std::make_shared<TableItem>(*bad.items[0].data);
  data->item = ItemRecord::FromProto(proto);
  bad.items[0].data = std::move(data);
  EXPECT_TRUE(
      absl::IsInvalidArgument(StalenessTable(1, false)
                                  ->Restore(bad.config, bad.items, Table::RestoreMode::kTableConfig)
                                  .status()));
}

// A queue whose items all went stale must not wait forever for their
// samples: their inserts are retired from the rate limiter.
TEST(TableStalenessTest, StaleItemsDoNotBlockAQueue) {
  for (bool evict : {false, true}) {
    Table::Config config = TableConfig("q", Fifo(), Fifo(), 4, QueueLimiter(4));
    config.max_times_sampled = 1;
    config.max_staleness = 0;
    config.evict_stale = evict;
    absl::StatusOr<std::shared_ptr<Table>> created = Table::Create(std::move(config));
    ASSERT_TRUE(created.ok()) << created.status();
    Table& queue = **created;
    for (uint64_t key = 1; key <= 4; ++key) ASSERT_TRUE(InsertVersioned(queue, key, 0).ok());
    EXPECT_FALSE(queue.CanInsert(1));  // full
    ASSERT_TRUE(queue.SetPolicyVersion(1).ok());
    for (uint64_t key = 5; key <= 8; ++key) {
      absl::Status inserted = InsertVersioned(queue, key, 1);
      ASSERT_TRUE(inserted.ok()) << "evict=" << evict << " key " << key << ": " << inserted;
    }
    std::set<uint64_t> sampled;
    for (int i = 0; i < 4; ++i) {
      absl::StatusOr<SampledItem> sample = SampleOne(queue);
      ASSERT_TRUE(sample.ok()) << sample.status();
      sampled.insert(sample->data->item.key());
    }
    EXPECT_EQ(sampled, (std::set<uint64_t>{5, 6, 7, 8})) << "evict=" << evict;
    // The reported counts are as without a limit.
    EXPECT_EQ(queue.Info().rate_limiter_info().insert_stats().completed(), 8);
    EXPECT_EQ(queue.TakeSnapshot().config.rate_limiter().retired_count(), 4);
  }
}

TEST(TableStalenessTest, AReplayedStaleInsertIsEvictedAsTheOriginalWas) {
  auto table = StalenessTable(0, true);
  ASSERT_TRUE(table->SetPolicyVersion(3).ok());
  TableItem item = VersionedItem(1, 1);
  ASSERT_TRUE(table->ReplayInsert(std::make_shared<const TableItem>(std::move(item))).ok());
  EXPECT_EQ(table->size(), 0);
  EXPECT_EQ(table->TakeSnapshot().config.rate_limiter().retired_count(), 1);
}

// Writers insert with the current version while another thread raises it:
// no sample is ever staler than the limit at the time it was taken.
TEST(TableStalenessTest, ConcurrentVersionBumpsNeverLetAStaleSampleOut) {
  auto table = StalenessTable(2, false, 1000);
  constexpr int kVersions = 200;
  std::atomic<int64_t> current{0};
  std::thread learner([&] {
    for (int64_t v = 1; v <= kVersions; ++v) {
      ASSERT_TRUE(table->SetPolicyVersion(v).ok());
      current.store(v);
    }
  });
  std::atomic<bool> written{false};
  std::thread writer([&] {
    // Versions current - 3 .. current: some are stale when they arrive.
    for (uint64_t key = 1; key <= 2000; ++key) {
      const int64_t version = std::max<int64_t>(0, current.load() - static_cast<int64_t>(key % 4));
      ASSERT_TRUE(InsertVersioned(*table, key, version).ok());
    }
    written.store(true);
  });
  int checked = 0;
  while (checked < 2000) {
    const bool finished = written.load() && current.load() == kVersions;
    const int64_t before = current.load();
    std::vector<SampledItem> out;
    absl::Status status = table->SampleBatch(1, absl::Milliseconds(1), &out);
    if (!status.ok()) {
      ASSERT_TRUE(absl::IsDeadlineExceeded(status)) << status;
      if (finished) break;  // nothing fresh is left
      continue;
    }
    // The version can only have grown since `before` was read.
    EXPECT_GE(out[0].data->item.policy_version(), before - 2);
    ++checked;
  }
  learner.join();
  writer.join();
  EXPECT_GT(checked, 0);
}

}  // namespace
}  // namespace tf_reverb
