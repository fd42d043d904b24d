#include "server/wal/log_recovery.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "checkpoint.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "schema.pb.h"
#include "server/checkpointing/checkpointer.h"
#include "server/item_record.h"
#include "server/table.h"
#include "server/table_item.h"
#include "server/testing/table_testing.h"
#include "server/wal/write_ahead_log.h"

namespace tf_reverb {
namespace {

namespace fs = std::filesystem;
using namespace ::tf_reverb::testing;  // NOLINT: test builders
using ::testing::HasSubstr;

std::string FreshDir(const std::string& name) {
  const fs::path dir = fs::path(::testing::TempDir()) / name;
  fs::remove_all(dir);
  return dir.string();
}

// The two tables every test uses: FIFO with eviction (max_size 4) and
// max_times_sampled 2; prioritized with a min-heap remover.
// A third has a policy-version limit.
std::vector<std::shared_ptr<Table>> MakeTables() {
  Table::Config fresh = TableConfig("fresh", Uniform(), Fifo(), 100, MinSize(1));
  fresh.max_staleness = 1;
  return {MakeTable(Fifo(), Fifo(), 4, 2, MinSize(1), "fifo"),
          MakeTable(Prioritized(1.0), Heap(/*min_heap=*/true), 100, 0, MinSize(1), "prio"),
          Table::Create(std::move(fresh)).value()};
}

// A server's start: checkpoint restore, log replay, journals attached.
struct Started {
  std::vector<std::shared_ptr<Table>> tables;
  std::shared_ptr<Checkpointer> checkpointer;
  std::shared_ptr<WriteAheadLog> log;
};

Started Start(const std::string& root, WalDurability durability = WalDurability::kSync) {
  Started started;
  started.tables = MakeTables();
  started.checkpointer =
      std::make_shared<Checkpointer>(root + "/checkpoints", CheckpointerOptions{});
  WalOptions options;
  options.durability = durability;
  options.segment_bytes = 512;  // many segments, so that releases show
  absl::StatusOr<std::unique_ptr<WriteAheadLog>> log = WriteAheadLog::Open(root + "/wal", options);
  EXPECT_TRUE(log.ok()) << log.status();
  started.log = *std::move(log);
  absl::Status recovered = started.checkpointer->Recover(started.tables, started.log);
  EXPECT_TRUE(recovered.ok()) << recovered;
  return started;
}

// Everything a checkpoint would keep of `table`, but the log position and
// the selectors' generator states: items in insertion order with their
// protos (inserted_at included), priorities, times sampled and chunk keys,
// and the counters (rate limiter, deleted episodes, unique samples).
std::string State(Table& table) {
  Table::Snapshot snapshot = table.TakeSnapshot();
  snapshot.config.clear_wal_sequence();
  std::string state = snapshot.config.SerializeAsString();
  for (const Table::CheckpointItem& item : snapshot.items) {
    PrioritizedItem proto = item.data->item.ToProto();
    // A checkpoint restore names the table there and has the current
    // priority and times sampled (compared below) where inserts had theirs.
    proto.clear_table();
    proto.clear_priority();
    proto.clear_times_sampled();
    state += proto.SerializeAsString();
    state += absl::StrCat("|", item.priority, "|", item.times_sampled, "|");
    for (const auto& chunk : item.data->chunks) absl::StrAppend(&state, chunk->wire());
  }
  return state;
}

// A mix of every change the log records, on every table.
void Churn(std::vector<std::shared_ptr<Table>>& tables, uint64_t first_key) {
  Table& fifo = *tables[0];
  Table& prio = *tables[1];
  auto shared = MakeChunk(first_key + 7777, first_key);  // one chunk, many items
  for (uint64_t key = first_key; key < first_key + 6; ++key) {
    ASSERT_TRUE(fifo.InsertOrAssign(MakeItem(key, 1.0, {shared}), kNoWait).ok());  // evicts
    ASSERT_TRUE(prio.InsertOrAssign(MakeItem(key, 1.0 + key % 5, {shared}), kNoWait).ok());
  }
  SampleKeys(fifo, 3);  // the oldest reaches max_times_sampled: deleted
  SampleKeys(prio, 5);
  deepmind::reverb::KeyWithPriority update;
  update.set_key(first_key + 2);
  update.set_priority(9.5);
  ASSERT_TRUE(prio.MutateItems({update}, {first_key + 3}).ok());
  ASSERT_TRUE(Insert(prio, first_key + 4, 0.25).ok());  // an existing key: a priority update
  // A new policy version, then items of it and older ones (some stale).
  Table& fresh = *tables[2];
  const int64_t version = fresh.Info().policy_version() + 1;
  ASSERT_TRUE(fresh.SetPolicyVersion(version).ok());
  for (uint64_t key = first_key; key < first_key + 3; ++key) {
    TableItem item = MakeItem(key, 1.0, {shared});
    PrioritizedItem proto = item.item.ToProto();
    proto.set_policy_version(std::max<int64_t>(0, version - static_cast<int64_t>(key % 3)));
    item.item = ItemRecord::FromProto(proto);
    ASSERT_TRUE(fresh.InsertOrAssign(std::move(item), kNoWait).ok());
  }
  SampleKeys(fresh, 2);
}

TEST(LogRecoveryTest, ReplayRebuildsTablesExactlyWithoutACheckpoint) {
  const std::string root = FreshDir("log_only");
  std::vector<std::string> before;
  {
    Started server = Start(root);
    Churn(server.tables, 100);
    server.tables[1]->Reset();  // a reset, then new items after it
    Churn(server.tables, 200);
    ASSERT_TRUE(server.log->WaitConfirmed(server.log->last_sequence()).ok());
    for (const auto& table : server.tables) before.push_back(State(*table));
    ASSERT_GT(before[0].size(), 0u);
  }
  Started restarted = Start(root);
  for (size_t i = 0; i < restarted.tables.size(); ++i) {
    EXPECT_EQ(State(*restarted.tables[i]), before[i]) << restarted.tables[i]->name();
  }
  // The replayed state keeps being logged: a third start sees the same.
  Churn(restarted.tables, 300);
  before.clear();
  for (const auto& table : restarted.tables) before.push_back(State(*table));
  restarted = Started();
  Started third = Start(root);
  for (size_t i = 0; i < third.tables.size(); ++i) {
    EXPECT_EQ(State(*third.tables[i]), before[i]) << third.tables[i]->name();
  }
}

TEST(LogRecoveryTest, CheckpointPlusLaterRecordsAndReleasedSegments) {
  const std::string root = FreshDir("checkpoint_and_log");
  std::vector<std::string> before;
  {
    Started server = Start(root, WalDurability::kAsync);
    for (uint64_t first : {100, 500}) {  // two writes at least: two segments
      Churn(server.tables, first);
      ASSERT_TRUE(server.log->WaitConfirmed(server.log->last_sequence()).ok());
    }
    ASSERT_GE(server.log->metrics().segments.load(), 2);
    ASSERT_TRUE(server.checkpointer->Save(server.tables).ok());
    // Only the active segment holds records the checkpoint lacks.
    EXPECT_EQ(server.log->metrics().segments.load(), 1);
    // Later inserts reuse a chunk the checkpoint holds (logged again after
    // it), sample and delete checkpointed items.
    Churn(server.tables, 100);
    Churn(server.tables, 400);
    ASSERT_TRUE(server.log->WaitConfirmed(server.log->last_sequence()).ok());
    for (const auto& table : server.tables) before.push_back(State(*table));
  }
  Started restarted = Start(root);
  for (size_t i = 0; i < restarted.tables.size(); ++i) {
    EXPECT_EQ(State(*restarted.tables[i]), before[i]) << restarted.tables[i]->name();
  }
}

// A log that lost segments the restored checkpoint needs fails the start
// rather than replaying the rest over a gap.
TEST(LogRecoveryTest, SegmentsMissingAfterTheCheckpointAreDataLoss) {
  const std::string root = FreshDir("missing_segments");
  {
    Started server = Start(root);
    Churn(server.tables, 100);
    ASSERT_TRUE(server.checkpointer->Save(server.tables).ok());
    for (uint64_t first : {200, 300, 400}) {  // several segments after it
      Churn(server.tables, first);
      ASSERT_TRUE(server.log->WaitConfirmed(server.log->last_sequence()).ok());
    }
    ASSERT_GE(server.log->metrics().segments.load(), 2);
  }
  std::vector<fs::path> segments;
  for (const auto& entry : fs::directory_iterator(root + "/wal")) segments.push_back(entry.path());
  std::sort(segments.begin(), segments.end());
  fs::remove(segments.front());
  auto tables = MakeTables();
  Checkpointer checkpointer(root + "/checkpoints", {});
  absl::StatusOr<std::unique_ptr<WriteAheadLog>> log = WriteAheadLog::Open(root + "/wal", {});
  ASSERT_TRUE(log.ok());
  absl::Status status = checkpointer.Recover(tables, *std::move(log));
  EXPECT_TRUE(absl::IsDataLoss(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("segments are missing"));
}

// A log directory lost while its checkpoints survive: the server starts
// from the checkpoint, and numbers new records after the checkpoint's
// positions, so that the next recovery replays them.
TEST(LogRecoveryTest, ALostLogNumbersNewRecordsAfterTheCheckpoint) {
  const std::string root = FreshDir("lost_log");
  {
    Started server = Start(root);
    Churn(server.tables, 100);
    ASSERT_TRUE(server.checkpointer->Save(server.tables).ok());
  }
  fs::remove_all(root + "/wal");
  std::vector<std::string> before;
  {
    Started server = Start(root);
    Churn(server.tables, 200);
    ASSERT_TRUE(server.log->WaitConfirmed(server.log->last_sequence()).ok());
    for (const auto& table : server.tables) before.push_back(State(*table));
  }
  Started restarted = Start(root);
  for (size_t i = 0; i < restarted.tables.size(); ++i) {
    EXPECT_EQ(State(*restarted.tables[i]), before[i]) << restarted.tables[i]->name();
  }
}

// Zeroed pages after the last record (a host crash) count as a torn end.
TEST(LogRecoveryTest, AZeroFilledTailIsATornEnd) {
  const std::string root = FreshDir("zero_tail");
  std::vector<std::string> before;
  {
    Started server = Start(root);
    Churn(server.tables, 100);
    ASSERT_TRUE(server.log->WaitConfirmed(server.log->last_sequence()).ok());
    for (const auto& table : server.tables) before.push_back(State(*table));
  }
  std::vector<fs::path> segments;
  for (const auto& entry : fs::directory_iterator(root + "/wal")) segments.push_back(entry.path());
  std::sort(segments.begin(), segments.end());
  const uintmax_t size = fs::file_size(segments.back());
  fs::resize_file(segments.back(), size + 8192);  // zeros
  Started restarted = Start(root);
  EXPECT_EQ(fs::file_size(segments.back()), size);
  for (size_t i = 0; i < restarted.tables.size(); ++i) {
    EXPECT_EQ(State(*restarted.tables[i]), before[i]) << restarted.tables[i]->name();
  }
}

TEST(LogRecoveryTest, RecordsOfAnotherTableFailTheStart) {
  const std::string root = FreshDir("unknown_table");
  {
    Started server = Start(root);
    Churn(server.tables, 100);
  }
  auto only_fifo = std::vector<std::shared_ptr<Table>>{MakeTables()[0]};
  absl::StatusOr<std::unique_ptr<WriteAheadLog>> log = WriteAheadLog::Open(root + "/wal", {});
  ASSERT_TRUE(log.ok());
  absl::Status status = ReplayLog(**log, only_fifo, {});
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("'prio'"));
}

TEST(LogRecoveryTest, AnInsertWhoseChunkIsMissingIsDataLoss) {
  const std::string root = FreshDir("missing_chunk");
  {
    absl::StatusOr<std::unique_ptr<WriteAheadLog>> log = WriteAheadLog::Open(root, {});
    ASSERT_TRUE(log.ok());
    ASSERT_TRUE((*log)->Replay([](deepmind::reverb::WalRecord&) { return absl::OkStatus(); }).ok());
    ASSERT_TRUE((*log)->Start().ok());
    WalChange insert;
    insert.kind = WalChange::Kind::kInsert;
    insert.table = "fifo";
    insert.item = MakeItem(5).item;  // its chunk was never logged
    ASSERT_TRUE((*log)->WaitConfirmed((*log)->Append(insert)).ok());
  }
  absl::StatusOr<std::unique_ptr<WriteAheadLog>> log = WriteAheadLog::Open(root, {});
  ASSERT_TRUE(log.ok());
  absl::Status status = ReplayLog(**log, MakeTables(), {});
  EXPECT_TRUE(absl::IsDataLoss(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("inserts item 5"));
}

TEST(LogRecoveryTest, AServerWithoutALogIsUnchanged) {
  const std::string root = FreshDir("no_log");
  auto tables = MakeTables();
  Checkpointer checkpointer(root, {});
  ASSERT_TRUE(checkpointer.Recover(tables).ok());  // nothing to restore: no error
  EXPECT_EQ(checkpointer.log(), nullptr);
  ASSERT_TRUE(Insert(*tables[0], 1).ok());
  ASSERT_TRUE(checkpointer.Save(tables).ok());
  auto restored = MakeTables();
  Checkpointer again(root, {});
  ASSERT_TRUE(again.Recover(restored).ok());
  EXPECT_EQ(restored[0]->size(), 1);
}

}  // namespace
}  // namespace tf_reverb
