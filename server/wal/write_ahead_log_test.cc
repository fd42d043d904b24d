#include "server/wal/write_ahead_log.h"

#include <stdlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <ios>
#include <iterator>
#include <memory>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "checkpoint.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "schema.pb.h"
#include "server/checkpointing/record_io.h"
#include "server/item_record.h"
#include "server/table_chunk.h"

namespace tf_reverb {
namespace {

namespace fs = std::filesystem;
using deepmind::reverb::ChunkData;
using deepmind::reverb::PrioritizedItem;
using deepmind::reverb::WalRecord;
using ::testing::HasSubstr;

// A fresh directory under the test's temporary directory, removed with
// everything in it when the object goes.
class ScratchDir {
 public:
  ScratchDir() {
    std::string pattern = (fs::path(::testing::TempDir()) / "wal_test_XXXXXX").string();
    const char* made = mkdtemp(pattern.data());
    EXPECT_NE(made, nullptr) << std::strerror(errno);
    path_ = pattern;
  }
  ~ScratchDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::string& path() const { return path_; }
  // `name` inside the directory, joined as the log joins its segment names.
  std::string Sub(const std::string& name) const { return (fs::path(path_) / name).string(); }

 private:
  std::string path_;
};

std::string SegmentName(uint64_t first) { return absl::StrFormat("wal-%020u.log", first); }

// The names of the segment files ("wal-" prefix) in `dir`, sorted.
std::vector<std::string> SegmentFiles(const std::string& dir) {
  std::vector<std::string> names;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("wal-", 0) == 0) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

int64_t DiskBytes(const std::string& dir) {
  int64_t bytes = 0;
  for (const std::string& name : SegmentFiles(dir)) {
    bytes += static_cast<int64_t>(fs::file_size(fs::path(dir) / name));
  }
  return bytes;
}

// The first sequence number a segment's name carries.
uint64_t FirstSequence(const std::string& name) { return std::stoull(name.substr(4, 20)); }

std::string ReadFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(file.good()) << path;
}

// --- Changes of every kind. ---

// The log neither decodes nor validates the chunks it writes: a chunk of
// one bare tensor whose payload is `bytes` stands in for a real one.
ChunkData ChunkProto(uint64_t key, std::string bytes) {
  ChunkData chunk;
  chunk.set_chunk_key(key);
  chunk.mutable_data()->add_tensors()->set_tensor_content(std::move(bytes));
  chunk.set_data_tensors_len(1);
  return chunk;
}

WalChange Chunk(uint64_t key, std::string bytes) {
  WalChange change;
  change.kind = WalChange::Kind::kChunk;
  change.chunk = TableChunk::FromProto(ChunkProto(key, std::move(bytes)));
  return change;
}

WalChange Insert(const std::string& table, uint64_t key, double priority, uint64_t chunk_key) {
  PrioritizedItem item;
  item.set_key(key);
  item.set_table(table);
  item.set_priority(priority);
  auto* slice = item.mutable_flat_trajectory()->add_columns()->add_chunk_slices();
  slice->set_chunk_key(chunk_key);
  slice->set_length(1);
  WalChange change;
  change.kind = WalChange::Kind::kInsert;
  change.table = table;
  change.item = ItemRecord::FromProto(item);
  return change;
}

WalChange Update(const std::string& table, uint64_t key, double priority) {
  WalChange change;
  change.kind = WalChange::Kind::kUpdate;
  change.table = table;
  change.key = key;
  change.priority = priority;
  return change;
}

WalChange KeyChange(WalChange::Kind kind, const std::string& table, uint64_t key) {
  WalChange change;
  change.kind = kind;
  change.table = table;
  change.key = key;
  return change;
}

WalChange Reset(const std::string& table) {
  WalChange change;
  change.kind = WalChange::Kind::kReset;
  change.table = table;
  return change;
}

// --- Opening and replaying. ---

std::unique_ptr<WriteAheadLog> OpenLog(const std::string& dir, WalOptions options = {}) {
  absl::StatusOr<std::unique_ptr<WriteAheadLog>> log = WriteAheadLog::Open(dir, options);
  EXPECT_TRUE(log.ok()) << log.status();
  return log.ok() ? *std::move(log) : nullptr;
}

// Replays `log` into `records`.
absl::StatusOr<WalReplayReport> ReplayInto(WriteAheadLog& log, std::vector<WalRecord>* records) {
  return log.Replay([records](WalRecord& record) {
    records->push_back(record);
    return absl::OkStatus();
  });
}

// Opens `dir` and replays it into `records`.
absl::StatusOr<WalReplayReport> OpenAndReplay(const std::string& dir,
                                              std::vector<WalRecord>* records,
                                              WalOptions options = {}) {
  absl::StatusOr<std::unique_ptr<WriteAheadLog>> log = WriteAheadLog::Open(dir, options);
  if (!log.ok()) return log.status();
  return ReplayInto(**log, records);
}

// Opens, replays (expecting success) and starts a log on `dir`.
std::unique_ptr<WriteAheadLog> OpenStarted(const std::string& dir, WalOptions options = {}) {
  std::unique_ptr<WriteAheadLog> log = OpenLog(dir, options);
  if (log == nullptr) return nullptr;
  std::vector<WalRecord> ignored;
  absl::StatusOr<WalReplayReport> report = ReplayInto(*log, &ignored);
  EXPECT_TRUE(report.ok()) << report.status();
  const absl::Status started = log->Start();
  EXPECT_TRUE(started.ok()) << started;
  return log;
}

std::vector<uint64_t> Sequences(const std::vector<WalRecord>& records) {
  std::vector<uint64_t> sequences;
  for (const WalRecord& record : records) sequences.push_back(record.sequence());
  return sequences;
}

std::vector<uint64_t> Range(uint64_t first, uint64_t last) {
  std::vector<uint64_t> range;
  for (uint64_t i = first; i <= last; ++i) range.push_back(i);
  return range;
}

// --- Tests. ---

// Every kind of change is appended, confirmed, and replayed after a reopen
// in order with its fields intact; a restarted log continues the sequence in
// a new segment and a later replay sees both sessions.
TEST(WriteAheadLogTest, AppendStartReplayRoundTrip) {
  ScratchDir dir;
  const std::string big(10000, 'z');
  {
    std::unique_ptr<WriteAheadLog> log = OpenLog(dir.path());
    ASSERT_NE(log, nullptr);
    ASSERT_TRUE(log->Start().ok());  // a fresh directory needs no replay
    EXPECT_EQ(log->Append(Chunk(100, "chunk-bytes-1")), 1u);
    EXPECT_EQ(log->Append(Insert("table_a", 7, 1.5, 100)), 2u);
    EXPECT_EQ(log->Append(Update("table_a", 7, 2.25)), 3u);
    EXPECT_EQ(log->Append(KeyChange(WalChange::Kind::kSample, "table_a", 7)), 4u);
    EXPECT_EQ(log->Append(KeyChange(WalChange::Kind::kDelete, "table_a", 7)), 5u);
    EXPECT_EQ(log->Append(Reset("table_b")), 6u);
    EXPECT_EQ(log->Append(Chunk(101, big)), 7u);
    EXPECT_EQ(log->Append(Insert("table_b", 8, 0.5, 101)), 8u);
    EXPECT_EQ(log->last_sequence(), 8u);
    ASSERT_TRUE(log->WaitConfirmed(8).ok());
  }
  EXPECT_EQ(SegmentFiles(dir.path()), std::vector<std::string>{SegmentName(1)});

  constexpr uint64_t kN = 8;
  {
    std::unique_ptr<WriteAheadLog> log = OpenLog(dir.path());
    ASSERT_NE(log, nullptr);
    std::vector<WalRecord> records;
    absl::StatusOr<WalReplayReport> report = ReplayInto(*log, &records);
    ASSERT_TRUE(report.ok()) << report.status();
    EXPECT_EQ(report->records, static_cast<int64_t>(kN));
    EXPECT_EQ(report->last_sequence, kN);
    EXPECT_EQ(report->segments, 1);
    EXPECT_EQ(report->torn, "");
    ASSERT_EQ(records.size(), kN);
    EXPECT_EQ(Sequences(records), Range(1, kN));

    EXPECT_EQ(records[0].change_case(), WalRecord::kChunk);
    EXPECT_EQ(records[0].table(), "");
    EXPECT_EQ(records[0].chunk().chunk_key(), 100u);
    ASSERT_EQ(records[0].chunk().data().tensors_size(), 1);
    EXPECT_EQ(records[0].chunk().data().tensors(0).tensor_content(), "chunk-bytes-1");
    EXPECT_EQ(records[0].chunk().data_tensors_len(), 1);

    EXPECT_EQ(records[1].change_case(), WalRecord::kInsert);
    EXPECT_EQ(records[1].table(), "table_a");
    EXPECT_EQ(records[1].insert().key(), 7u);
    EXPECT_EQ(records[1].insert().table(), "table_a");
    EXPECT_EQ(records[1].insert().priority(), 1.5);
    ASSERT_EQ(records[1].insert().flat_trajectory().columns_size(), 1);
    EXPECT_EQ(records[1].insert().flat_trajectory().columns(0).chunk_slices(0).chunk_key(), 100u);

    EXPECT_EQ(records[2].change_case(), WalRecord::kUpdate);
    EXPECT_EQ(records[2].table(), "table_a");
    EXPECT_EQ(records[2].update().key(), 7u);
    EXPECT_EQ(records[2].update().priority(), 2.25);

    EXPECT_EQ(records[3].change_case(), WalRecord::kSampleKey);
    EXPECT_EQ(records[3].table(), "table_a");
    EXPECT_EQ(records[3].sample_key(), 7u);

    EXPECT_EQ(records[4].change_case(), WalRecord::kDeleteKey);
    EXPECT_EQ(records[4].table(), "table_a");
    EXPECT_EQ(records[4].delete_key(), 7u);

    EXPECT_EQ(records[5].change_case(), WalRecord::kReset);
    EXPECT_EQ(records[5].table(), "table_b");
    EXPECT_TRUE(records[5].reset());

    EXPECT_EQ(records[6].change_case(), WalRecord::kChunk);
    EXPECT_EQ(records[6].table(), "");
    EXPECT_EQ(records[6].chunk().chunk_key(), 101u);
    EXPECT_EQ(records[6].chunk().data().tensors(0).tensor_content(), big);

    EXPECT_EQ(records[7].change_case(), WalRecord::kInsert);
    EXPECT_EQ(records[7].table(), "table_b");
    EXPECT_EQ(records[7].insert().key(), 8u);
    EXPECT_EQ(records[7].insert().priority(), 0.5);

    // The sequence continues after the replayed records, in a new segment.
    ASSERT_TRUE(log->Start().ok());
    EXPECT_EQ(log->last_sequence(), kN);
    EXPECT_EQ(log->Append(Chunk(102, "more")), kN + 1);
    EXPECT_EQ(log->Append(Insert("table_a", 9, 3.0, 102)), kN + 2);
    EXPECT_EQ(log->Append(KeyChange(WalChange::Kind::kDelete, "table_a", 9)), kN + 3);
    ASSERT_TRUE(log->WaitConfirmed(kN + 3).ok());
  }
  EXPECT_EQ(SegmentFiles(dir.path()),
            (std::vector<std::string>{SegmentName(1), SegmentName(kN + 1)}));

  std::vector<WalRecord> records;
  absl::StatusOr<WalReplayReport> report = OpenAndReplay(dir.path(), &records);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->records, static_cast<int64_t>(kN + 3));
  EXPECT_EQ(report->last_sequence, kN + 3);
  EXPECT_EQ(report->segments, 2);
  EXPECT_EQ(report->torn, "");
  EXPECT_EQ(Sequences(records), Range(1, kN + 3));
  EXPECT_EQ(records[kN].chunk().chunk_key(), 102u);
  EXPECT_EQ(records[kN + 1].insert().key(), 9u);
  EXPECT_EQ(records[kN + 2].delete_key(), 9u);
}

// A segment holds exactly the framed WalRecords, a chunk's record exactly as
// if the chunk were set in its chunk field (the format a log written before
// chunks were kept as wire bytes has).
TEST(WriteAheadLogTest, SegmentBytesAreFramedWalRecords) {
  ScratchDir dir;
  {
    std::unique_ptr<WriteAheadLog> log = OpenLog(dir.path());
    ASSERT_NE(log, nullptr);
    ASSERT_TRUE(log->Start().ok());
    log->Append(Chunk(100, "chunk-bytes-1"));
    log->Append(Insert("table_a", 7, 1.5, 100));
    ASSERT_TRUE(log->WaitConfirmed(2).ok());
  }
  std::string expected;
  WalRecord chunk;
  chunk.set_sequence(1);
  *chunk.mutable_chunk() = ChunkProto(100, "chunk-bytes-1");
  AppendRecordFrame(chunk.SerializeAsString(), &expected);
  WalRecord insert;
  insert.set_sequence(2);
  insert.set_table("table_a");
  *insert.mutable_insert() = Insert("table_a", 7, 1.5, 100).item.ToProto();
  AppendRecordFrame(insert.SerializeAsString(), &expected);
  EXPECT_EQ(ReadFile(dir.Sub(SegmentName(1))), expected);
}

// Replaying an empty directory finds nothing, and an error from the visitor
// stops the replay and is returned.
TEST(WriteAheadLogTest, ReplayOfAnEmptyLogAndVisitorErrors) {
  ScratchDir dir;
  {
    std::vector<WalRecord> records;
    absl::StatusOr<WalReplayReport> report = OpenAndReplay(dir.path(), &records);
    ASSERT_TRUE(report.ok()) << report.status();
    EXPECT_EQ(report->records, 0);
    EXPECT_EQ(report->segments, 0);
    EXPECT_EQ(report->last_sequence, 0u);
    EXPECT_EQ(report->torn, "");
  }
  {
    std::unique_ptr<WriteAheadLog> log = OpenStarted(dir.path());
    ASSERT_NE(log, nullptr);
    for (uint64_t key = 1; key <= 5; ++key) log->Append(Chunk(key, "x"));
    ASSERT_TRUE(log->WaitConfirmed(5).ok());
  }
  std::unique_ptr<WriteAheadLog> log = OpenLog(dir.path());
  ASSERT_NE(log, nullptr);
  int visited = 0;
  absl::StatusOr<WalReplayReport> report = log->Replay([&visited](WalRecord& record) {
    ++visited;
    if (record.sequence() == 3) return absl::FailedPreconditionError("stop at 3");
    return absl::OkStatus();
  });
  EXPECT_EQ(report.status(), absl::FailedPreconditionError("stop at 3"));
  EXPECT_EQ(visited, 3);
}

// Open rejects a missing directory name and non-positive sizes and intervals.
TEST(WriteAheadLogTest, OpenRejectsBadArguments) {
  ScratchDir dir;
  EXPECT_TRUE(absl::IsInvalidArgument(WriteAheadLog::Open("", WalOptions{}).status()));
  WalOptions no_segment;
  no_segment.segment_bytes = 0;
  EXPECT_TRUE(absl::IsInvalidArgument(WriteAheadLog::Open(dir.path(), no_segment).status()));
  WalOptions no_interval;
  no_interval.fsync_interval = absl::ZeroDuration();
  EXPECT_TRUE(absl::IsInvalidArgument(WriteAheadLog::Open(dir.path(), no_interval).status()));
}

class WriteAheadLogDurabilityTest : public ::testing::TestWithParam<WalDurability> {};

// Both durabilities confirm: Confirmed turns true, WhenConfirmed on a
// confirmed sequence calls back at once on the caller's thread, and on a
// future sequence from the writer once that sequence is appended; the
// metrics count the records and bytes (and, with sync, the fsyncs).
TEST_P(WriteAheadLogDurabilityTest, ConfirmsAppendedRecords) {
  ScratchDir dir;
  WalOptions options;
  options.durability = GetParam();
  options.fsync_interval = absl::Milliseconds(1);
  std::unique_ptr<WriteAheadLog> log = OpenStarted(dir.path(), options);
  ASSERT_NE(log, nullptr);
  EXPECT_FALSE(log->Confirmed(1));

  // Registered before record 1 exists: called only once it is appended.
  const std::thread::id test_thread = std::this_thread::get_id();
  absl::Notification first_confirmed;
  absl::Status first_status = absl::UnknownError("not called");
  std::thread::id first_thread;
  log->WhenConfirmed(1, [&](const absl::Status& status) {
    first_status = status;
    first_thread = std::this_thread::get_id();
    first_confirmed.Notify();
  });
  EXPECT_FALSE(first_confirmed.HasBeenNotified());
  EXPECT_EQ(log->Append(Chunk(1, "first")), 1u);
  first_confirmed.WaitForNotification();
  EXPECT_TRUE(first_status.ok()) << first_status;
  EXPECT_NE(first_thread, test_thread);  // the writer thread
  EXPECT_TRUE(log->Confirmed(1));
  EXPECT_FALSE(log->Confirmed(2));
  EXPECT_TRUE(log->WaitConfirmed(1).ok());

  // Already confirmed: at once, on this thread.
  bool called = false;
  absl::Status status = absl::UnknownError("not called");
  std::thread::id thread;
  log->WhenConfirmed(1, [&](const absl::Status& s) {
    called = true;
    status = s;
    thread = std::this_thread::get_id();
  });
  EXPECT_TRUE(called);
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_EQ(thread, test_thread);

  for (int i = 0; i < 9; ++i) log->Append(Update("t", 1, i));
  EXPECT_EQ(log->last_sequence(), 10u);
  ASSERT_TRUE(log->WaitConfirmed(10).ok());
  EXPECT_TRUE(log->Confirmed(10));

  const std::string segment = dir.Sub(SegmentName(1));
  EXPECT_EQ(log->metrics().records.load(), 10);
  EXPECT_GT(log->metrics().written_bytes.load(), 0);
  EXPECT_EQ(log->metrics().written_bytes.load(), static_cast<int64_t>(fs::file_size(segment)));
  EXPECT_EQ(log->metrics().disk_bytes.load(), static_cast<int64_t>(fs::file_size(segment)));
  EXPECT_EQ(log->metrics().segments.load(), 1);
  EXPECT_EQ(log->metrics().failures.load(), 0);
  if (GetParam() == WalDurability::kSync) {
    EXPECT_GE(log->metrics().fsyncs.load(), 1);
  }
  log.reset();

  std::vector<WalRecord> records;
  absl::StatusOr<WalReplayReport> report = OpenAndReplay(dir.path(), &records);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(Sequences(records), Range(1, 10));
}

INSTANTIATE_TEST_SUITE_P(BothDurabilities, WriteAheadLogDurabilityTest,
                         ::testing::Values(WalDurability::kSync, WalDurability::kAsync),
                         [](const ::testing::TestParamInfo<WalDurability>& info) {
                           return std::string(WalDurabilityName(info.param));
                         });

// Concurrent appenders share writes and fsyncs (group commit): with the
// writer held while 8 threads append their first records, those records go
// out in one batch, so there are fewer fsyncs than records; every wait
// returns OK and the replay has every record once, in ascending sequence,
// each thread's records in the order it appended them.
TEST(WriteAheadLogTest, GroupCommitUnderConcurrency) {
  constexpr int kThreads = 8;
  constexpr int kPerThread = 200;
  ScratchDir dir;
  std::unique_ptr<WriteAheadLog> log = OpenStarted(dir.path());
  ASSERT_NE(log, nullptr);

  // Record 1 holds the writer thread in its confirmation callback until
  // every thread has appended its first record.
  absl::Notification writer_held;
  absl::Notification release_writer;
  log->WhenConfirmed(1, [&](const absl::Status&) {
    writer_held.Notify();
    release_writer.WaitForNotification();
  });
  ASSERT_EQ(log->Append(Reset("gate")), 1u);
  writer_held.WaitForNotification();

  absl::BlockingCounter first_appended(kThreads);
  std::vector<absl::Status> results(kThreads * kPerThread, absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t]() {
      for (int i = 0; i < kPerThread; ++i) {
        const uint64_t sequence = log->Append(
            KeyChange(WalChange::Kind::kSample, absl::StrCat("t", t), uint64_t(t) * 1000 + i));
        if (i == 0) first_appended.DecrementCount();
        results[t * kPerThread + i] = log->WaitConfirmed(sequence);
      }
    });
  }
  first_appended.Wait();
  release_writer.Notify();
  for (std::thread& thread : threads) thread.join();

  for (const absl::Status& result : results) ASSERT_TRUE(result.ok()) << result;
  constexpr int64_t kTotal = kThreads * kPerThread + 1;
  EXPECT_EQ(log->last_sequence(), static_cast<uint64_t>(kTotal));
  EXPECT_EQ(log->metrics().records.load(), kTotal);
  EXPECT_GE(log->metrics().fsyncs.load(), 1);
  EXPECT_LT(log->metrics().fsyncs.load(), kTotal);
  log.reset();

  std::vector<WalRecord> records;
  absl::StatusOr<WalReplayReport> report = OpenAndReplay(dir.path(), &records);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->records, kTotal);
  EXPECT_EQ(report->torn, "");
  EXPECT_EQ(Sequences(records), Range(1, kTotal));
  std::vector<int> next(kThreads, 0);
  for (size_t r = 1; r < records.size(); ++r) {
    const WalRecord& record = records[r];
    ASSERT_EQ(record.change_case(), WalRecord::kSampleKey);
    const int t = static_cast<int>(record.sample_key() / 1000);
    ASSERT_GE(t, 0);
    ASSERT_LT(t, kThreads);
    EXPECT_EQ(record.table(), absl::StrCat("t", t));
    EXPECT_EQ(record.sample_key() % 1000, static_cast<uint64_t>(next[t]));
    ++next[t];
  }
  EXPECT_EQ(next, std::vector<int>(kThreads, kPerThread));
}

// Small segments rotate; ReleaseThrough(k) deletes exactly the oldest
// segments whose records are all <= k and never the active one; disk_bytes
// follows the files, and a later replay starts at the first kept record.
TEST(WriteAheadLogTest, RotationAndReleaseThrough) {
  ScratchDir dir;
  WalOptions options;
  options.segment_bytes = 200;
  constexpr uint64_t kN = 30;
  constexpr uint64_t kRelease = 13;
  std::vector<std::string> kept;
  {
    std::unique_ptr<WriteAheadLog> log = OpenStarted(dir.path(), options);
    ASSERT_NE(log, nullptr);
    for (uint64_t i = 1; i <= kN; ++i) {
      // One record per write, so that segments hold few records each.
      ASSERT_EQ(log->Append(Chunk(i, std::string(40 + i, 'c'))), i);
      ASSERT_TRUE(log->WaitConfirmed(i).ok());
    }
    const std::vector<std::string> before = SegmentFiles(dir.path());
    ASSERT_GT(before.size(), 3u);
    EXPECT_GT(log->metrics().segments.load(), 1);
    EXPECT_EQ(log->metrics().segments.load(), static_cast<int64_t>(before.size()));
    EXPECT_EQ(log->metrics().disk_bytes.load(), DiskBytes(dir.path()));
    for (size_t i = 0; i + 1 < before.size(); ++i) {
      // Every closed segment reached the size limit.
      EXPECT_GE(fs::file_size(dir.Sub(before[i])), options.segment_bytes) << before[i];
    }

    // Expected: the oldest segments whose last record (the next segment's
    // first minus one) is <= kRelease go; the newest always stays.
    size_t deleted = 0;
    while (deleted + 1 < before.size() && FirstSequence(before[deleted + 1]) - 1 <= kRelease) {
      ++deleted;
    }
    ASSERT_GT(deleted, 0u);
    kept.assign(before.begin() + deleted, before.end());
    ASSERT_LE(FirstSequence(kept.front()), kRelease + 1);  // holds a record > kRelease

    log->ReleaseThrough(kRelease);
    EXPECT_EQ(SegmentFiles(dir.path()), kept);
    EXPECT_EQ(log->metrics().segments.load(), static_cast<int64_t>(kept.size()));
    EXPECT_EQ(log->metrics().disk_bytes.load(), DiskBytes(dir.path()));

    // Releasing again through the same or an older sequence deletes nothing.
    log->ReleaseThrough(kRelease);
    log->ReleaseThrough(1);
    EXPECT_EQ(SegmentFiles(dir.path()), kept);
  }

  const uint64_t first_kept = FirstSequence(kept.front());
  {
    std::unique_ptr<WriteAheadLog> log = OpenLog(dir.path(), options);
    ASSERT_NE(log, nullptr);
    std::vector<WalRecord> records;
    absl::StatusOr<WalReplayReport> report = ReplayInto(*log, &records);
    ASSERT_TRUE(report.ok()) << report.status();
    EXPECT_EQ(Sequences(records), Range(first_kept, kN));
    EXPECT_EQ(report->last_sequence, kN);
    EXPECT_EQ(report->torn, "");

    // Everything released: only the active segment (holding the newest
    // record) is left.
    ASSERT_TRUE(log->Start().ok());
    ASSERT_EQ(log->Append(Chunk(kN + 1, "last")), kN + 1);
    ASSERT_TRUE(log->WaitConfirmed(kN + 1).ok());
    log->ReleaseThrough(kN + 1);
    EXPECT_EQ(SegmentFiles(dir.path()), std::vector<std::string>{SegmentName(kN + 1)});
    EXPECT_EQ(log->metrics().segments.load(), 1);
    EXPECT_EQ(log->metrics().disk_bytes.load(), DiskBytes(dir.path()));
  }
  std::vector<WalRecord> records;
  absl::StatusOr<WalReplayReport> report = OpenAndReplay(dir.path(), &records, options);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(Sequences(records), std::vector<uint64_t>{kN + 1});
}

// A one-segment log of 12 records of varied sizes, its record boundaries,
// and its records as read back.
struct SampleLog {
  std::string bytes;                // the segment file
  std::vector<int64_t> boundaries;  // 0, the end of each record
  std::vector<WalRecord> records;
};

SampleLog WriteSampleLog(const ScratchDir& dir) {
  SampleLog sample;
  {
    std::unique_ptr<WriteAheadLog> log = OpenStarted(dir.path());
    EXPECT_NE(log, nullptr);
    if (log == nullptr) return sample;
    const int sizes[] = {0, 1, 7, 300, 2, 90};
    for (int i = 0; i < 6; ++i) {
      log->Append(Chunk(i + 1, std::string(sizes[i], static_cast<char>('a' + i))));
      switch (i % 3) {
        case 0:
          log->Append(Insert(absl::StrCat("table", i), 10 + i, 0.25 * i, i + 1));
          break;
        case 1:
          log->Append(Update("u", 10 + i, 1.0 / (i + 1)));
          break;
        default:
          log->Append(KeyChange(WalChange::Kind::kDelete, "d", 10 + i));
          break;
      }
    }
    EXPECT_TRUE(log->WaitConfirmed(12).ok());
  }
  const std::string path = dir.Sub(SegmentName(1));
  EXPECT_EQ(SegmentFiles(dir.path()), std::vector<std::string>{SegmentName(1)});
  sample.bytes = ReadFile(path);
  absl::StatusOr<std::unique_ptr<RecordReader>> reader = RecordReader::Open(path, "test");
  EXPECT_TRUE(reader.ok()) << reader.status();
  if (!reader.ok()) return sample;
  sample.boundaries.push_back(0);
  std::string payload;
  while (true) {
    const absl::Status status = (*reader)->Read(&payload);
    if (absl::IsOutOfRange(status)) break;
    EXPECT_TRUE(status.ok()) << status;
    if (!status.ok()) break;
    // The framing: header, payload, footer.
    EXPECT_EQ((*reader)->offset() - sample.boundaries.back(),
              static_cast<int64_t>(kRecordHeaderBytes + payload.size() + kRecordFooterBytes));
    sample.boundaries.push_back((*reader)->offset());
    WalRecord record;
    EXPECT_TRUE(record.ParseFromString(payload));
    sample.records.push_back(record);
  }
  EXPECT_EQ(sample.records.size(), 12u);
  EXPECT_EQ(sample.boundaries.back(), static_cast<int64_t>(sample.bytes.size()));
  return sample;
}

// Whether `records` are exactly the first records.size() of `expected`.
::testing::AssertionResult ArePrefix(const std::vector<WalRecord>& records,
                                     const std::vector<WalRecord>& expected) {
  if (records.size() > expected.size()) {
    return ::testing::AssertionFailure() << records.size() << " records, more than written";
  }
  for (size_t i = 0; i < records.size(); ++i) {
    if (records[i].SerializeAsString() != expected[i].SerializeAsString()) {
      return ::testing::AssertionFailure()
             << "record " << i << " differs: " << records[i].ShortDebugString();
    }
  }
  return ::testing::AssertionSuccess();
}

// The crash test: the segment cut at every byte length L replays exactly
// the complete records before L; a cut inside a record is reported torn and
// truncated away (to the last boundary <= L), and replaying again then
// finds nothing torn and the same records.
TEST(WriteAheadLogFaultTest, EveryTruncationReplaysTheCompleteRecordsBeforeIt) {
  ScratchDir source;
  const SampleLog sample = WriteSampleLog(source);
  ASSERT_EQ(sample.boundaries.size(), 13u);
  const int64_t size = static_cast<int64_t>(sample.bytes.size());

  ScratchDir scratch;
  for (int64_t length = 0; length <= size; ++length) {
    SCOPED_TRACE(absl::StrCat("truncated to ", length, " of ", size, " bytes"));
    const std::string dir = scratch.Sub(absl::StrCat("L", length));
    fs::create_directory(dir);
    const std::string path = (fs::path(dir) / SegmentName(1)).string();
    WriteFile(path, sample.bytes.substr(0, static_cast<size_t>(length)));

    // Complete records before `length`, and the boundary they end at.
    const size_t complete = static_cast<size_t>(
        std::upper_bound(sample.boundaries.begin() + 1, sample.boundaries.end(), length) -
        (sample.boundaries.begin() + 1));
    const int64_t kept_bytes = sample.boundaries[complete];
    const bool at_boundary = kept_bytes == length;

    {
      std::unique_ptr<WriteAheadLog> log = OpenLog(dir);
      ASSERT_NE(log, nullptr);
      std::vector<WalRecord> records;
      absl::StatusOr<WalReplayReport> report = ReplayInto(*log, &records);
      ASSERT_TRUE(report.ok()) << report.status();
      EXPECT_EQ(records.size(), complete);
      EXPECT_TRUE(ArePrefix(records, sample.records));
      EXPECT_EQ(report->records, static_cast<int64_t>(complete));
      EXPECT_EQ(report->last_sequence, complete);
      EXPECT_EQ(report->torn.empty(), at_boundary) << report->torn;
      if (!at_boundary) {
        EXPECT_THAT(report->torn, HasSubstr(path));
      }
      EXPECT_EQ(static_cast<int64_t>(fs::file_size(path)), kept_bytes);
      EXPECT_EQ(log->metrics().disk_bytes.load(), kept_bytes);
    }
    {
      std::vector<WalRecord> records;
      absl::StatusOr<WalReplayReport> report = OpenAndReplay(dir, &records);
      ASSERT_TRUE(report.ok()) << report.status();
      EXPECT_EQ(report->torn, "");
      EXPECT_EQ(records.size(), complete);
      EXPECT_TRUE(ArePrefix(records, sample.records));
      EXPECT_EQ(static_cast<int64_t>(fs::file_size(path)), kept_bytes);
    }
    fs::remove_all(dir);
    if (HasFailure()) break;  // one length's failures are enough to read
  }
}

// A flipped payload byte is a torn end in the last record (dropped and
// truncated away) and corruption anywhere else: DATA_LOSS naming the file
// and the record's offset. A flipped length byte is always corruption.
TEST(WriteAheadLogFaultTest, CorruptRecordsAreDataLossExceptATornLastRecord) {
  ScratchDir source;
  const SampleLog sample = WriteSampleLog(source);
  ASSERT_EQ(sample.boundaries.size(), 13u);
  const size_t count = sample.records.size();

  ScratchDir scratch;
  for (size_t i = 0; i < count; ++i) {
    SCOPED_TRACE(absl::StrCat("payload byte of record ", i, " flipped"));
    const std::string dir = scratch.Sub(absl::StrCat("payload", i));
    fs::create_directory(dir);
    const std::string path = (fs::path(dir) / SegmentName(1)).string();
    const int64_t start = sample.boundaries[i];
    const int64_t payload = sample.boundaries[i + 1] - start -
                            static_cast<int64_t>(kRecordHeaderBytes + kRecordFooterBytes);
    ASSERT_GT(payload, 0);
    std::string bytes = sample.bytes;
    bytes[static_cast<size_t>(start + static_cast<int64_t>(kRecordHeaderBytes) + payload / 2)] ^=
        0x5a;
    WriteFile(path, bytes);

    std::vector<WalRecord> records;
    absl::StatusOr<WalReplayReport> report = OpenAndReplay(dir, &records);
    if (i + 1 == count) {
      ASSERT_TRUE(report.ok()) << report.status();
      EXPECT_EQ(records.size(), i);
      EXPECT_TRUE(ArePrefix(records, sample.records));
      EXPECT_NE(report->torn, "");
      EXPECT_EQ(static_cast<int64_t>(fs::file_size(path)), start);
    } else {
      EXPECT_TRUE(absl::IsDataLoss(report.status())) << report.status();
      EXPECT_THAT(report.status().message(), HasSubstr(path));
      EXPECT_THAT(report.status().message(), HasSubstr(absl::StrCat("at byte ", start, ":")));
      EXPECT_EQ(records.size(), i);                  // the records before it were visited
      EXPECT_EQ(fs::file_size(path), bytes.size());  // corruption is never cut off
    }
  }

  for (size_t i = 0; i + 1 < count; ++i) {
    SCOPED_TRACE(absl::StrCat("length byte of record ", i, " flipped"));
    const std::string dir = scratch.Sub(absl::StrCat("length", i));
    fs::create_directory(dir);
    const std::string path = (fs::path(dir) / SegmentName(1)).string();
    std::string bytes = sample.bytes;
    bytes[static_cast<size_t>(sample.boundaries[i])] ^= 0x01;
    WriteFile(path, bytes);
    std::vector<WalRecord> records;
    absl::StatusOr<WalReplayReport> report = OpenAndReplay(dir, &records);
    EXPECT_TRUE(absl::IsDataLoss(report.status())) << report.status();
    EXPECT_THAT(report.status().message(), HasSubstr(path));
    EXPECT_THAT(report.status().message(),
                HasSubstr(absl::StrCat("at byte ", sample.boundaries[i], ":")));
    EXPECT_EQ(fs::file_size(path), bytes.size());
  }
}

// A torn end only counts in the last segment: the same cut in an older one
// is DATA_LOSS naming it (and nothing is truncated), while in the newest it
// is dropped.
TEST(WriteAheadLogFaultTest, ATornEndBeforeTheLastSegmentIsDataLoss) {
  ScratchDir dir;
  {
    std::unique_ptr<WriteAheadLog> log = OpenStarted(dir.path());
    ASSERT_NE(log, nullptr);
    for (uint64_t i = 1; i <= 5; ++i) log->Append(Chunk(i, std::string(20, 'a')));
    ASSERT_TRUE(log->WaitConfirmed(5).ok());
  }
  {
    std::unique_ptr<WriteAheadLog> log = OpenStarted(dir.path());  // a second segment
    ASSERT_NE(log, nullptr);
    for (uint64_t i = 6; i <= 10; ++i) ASSERT_EQ(log->Append(Chunk(i, std::string(20, 'b'))), i);
    ASSERT_TRUE(log->WaitConfirmed(10).ok());
  }
  const std::string first = dir.Sub(SegmentName(1));
  const std::string second = dir.Sub(SegmentName(6));
  ASSERT_EQ(SegmentFiles(dir.path()), (std::vector<std::string>{SegmentName(1), SegmentName(6)}));
  const std::string first_bytes = ReadFile(first);
  const std::string second_bytes = ReadFile(second);

  // The first segment's last record cut short.
  fs::resize_file(first, first_bytes.size() - 3);
  {
    std::vector<WalRecord> records;
    absl::StatusOr<WalReplayReport> report = OpenAndReplay(dir.path(), &records);
    EXPECT_TRUE(absl::IsDataLoss(report.status())) << report.status();
    EXPECT_THAT(report.status().message(), HasSubstr(first));
    EXPECT_EQ(Sequences(records), Range(1, 4));
    EXPECT_EQ(fs::file_size(first), first_bytes.size() - 3);
  }

  // The same cut in the last segment is a torn end.
  WriteFile(first, first_bytes);
  fs::resize_file(second, second_bytes.size() - 3);
  std::vector<WalRecord> records;
  absl::StatusOr<WalReplayReport> report = OpenAndReplay(dir.path(), &records);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_THAT(report->torn, HasSubstr(second));
  EXPECT_EQ(Sequences(records), Range(1, 9));
  EXPECT_EQ(report->segments, 2);
}

// A crash that leaves only the first 2..11 bytes of a segment's first
// record is a torn end, whatever those bytes look like: a record whose
// length's low bytes read as a zlib (7432 = 0x1d08: 08 1d) or gzip
// (35615 = 0x8b1f: 1f 8b) header must not make the segment look compressed.
TEST(WriteAheadLogFaultTest, ATornFirstRecordIsTornWhateverItsLength) {
  for (const size_t payload_bytes : {size_t{7432}, size_t{35615}}) {
    ScratchDir dir;
    // A chunk record whose payload is exactly `payload_bytes` long.
    std::string content(payload_bytes - 40, 'p');
    while (true) {
      WalRecord record;
      record.set_sequence(1);
      record.mutable_chunk()->set_chunk_key(1);
      record.mutable_chunk()->mutable_data()->add_tensors()->set_tensor_content(content);
      record.mutable_chunk()->set_data_tensors_len(1);
      if (record.ByteSizeLong() >= payload_bytes) {
        ASSERT_EQ(record.ByteSizeLong(), payload_bytes);
        break;
      }
      content.push_back('p');
    }
    {
      std::unique_ptr<WriteAheadLog> log = OpenStarted(dir.path());
      ASSERT_NE(log, nullptr);
      log->Append(Chunk(1, content));
      ASSERT_TRUE(log->WaitConfirmed(1).ok());
    }
    const std::string path = dir.Sub(SegmentName(1));
    const std::string bytes = ReadFile(path);
    ASSERT_EQ(bytes.size(), kRecordHeaderBytes + payload_bytes + kRecordFooterBytes);
    for (size_t length = 1; length < kRecordHeaderBytes; ++length) {
      SCOPED_TRACE(absl::StrCat("payload ", payload_bytes, ", cut to ", length, " bytes"));
      WriteFile(path, bytes.substr(0, length));
      std::vector<WalRecord> records;
      absl::StatusOr<WalReplayReport> report = OpenAndReplay(dir.path(), &records);
      ASSERT_TRUE(report.ok()) << report.status();
      EXPECT_TRUE(records.empty());
      EXPECT_NE(report->torn, "");
      EXPECT_EQ(fs::file_size(path), 0u);
    }
  }
}

// Replay checks the order of sequence numbers: a repeated one (1, 2, 2) or
// one below its segment's first is DATA_LOSS naming the file and offset.
TEST(WriteAheadLogFaultTest, SequencesOutOfOrderAreDataLoss) {
  const auto write_segment = [](const std::string& path, const std::vector<uint64_t>& sequences,
                                std::vector<int64_t>* offsets) {
    std::string bytes;
    for (const uint64_t sequence : sequences) {
      offsets->push_back(static_cast<int64_t>(bytes.size()));
      WalRecord record;
      record.set_sequence(sequence);
      record.set_table("t");
      record.set_sample_key(sequence);
      AppendRecordFrame(record.SerializeAsString(), &bytes);
    }
    WriteFile(path, bytes);
  };
  {
    ScratchDir dir;
    const std::string path = dir.Sub(SegmentName(1));
    std::vector<int64_t> offsets;
    write_segment(path, {1, 2, 2}, &offsets);
    std::vector<WalRecord> records;
    absl::StatusOr<WalReplayReport> report = OpenAndReplay(dir.path(), &records);
    EXPECT_TRUE(absl::IsDataLoss(report.status())) << report.status();
    EXPECT_THAT(report.status().message(), HasSubstr(path));
    EXPECT_THAT(report.status().message(), HasSubstr(absl::StrCat("at byte ", offsets[2])));
    EXPECT_EQ(Sequences(records), Range(1, 2));
  }
  {
    ScratchDir dir;
    const std::string path = dir.Sub(SegmentName(5));
    std::vector<int64_t> offsets;
    write_segment(path, {3, 4}, &offsets);
    std::vector<WalRecord> records;
    absl::StatusOr<WalReplayReport> report = OpenAndReplay(dir.path(), &records);
    EXPECT_TRUE(absl::IsDataLoss(report.status())) << report.status();
    EXPECT_THAT(report.status().message(), HasSubstr(path));
    EXPECT_TRUE(records.empty());
  }
  {
    // Across segments: the second repeats the first's last sequence.
    ScratchDir dir;
    std::vector<int64_t> offsets;
    write_segment(dir.Sub(SegmentName(1)), {1, 2, 3}, &offsets);
    write_segment(dir.Sub(SegmentName(3)), {3, 4}, &offsets);
    std::vector<WalRecord> records;
    absl::StatusOr<WalReplayReport> report = OpenAndReplay(dir.path(), &records);
    EXPECT_TRUE(absl::IsDataLoss(report.status())) << report.status();
    EXPECT_THAT(report.status().message(), HasSubstr(dir.Sub(SegmentName(3))));
    EXPECT_EQ(Sequences(records), Range(1, 3));
  }
}

// Once a write fails the log is failed: the waiter gets UNAVAILABLE naming
// the file and the system error, nothing more is confirmed, and every later
// waiter gets the same error. The segment is a symlink to /dev/full, whose
// writes fail with ENOSPC even for root.
TEST(WriteAheadLogFaultTest, AFailedWriteFailsTheLog) {
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  ScratchDir dir;
  const std::string path = dir.Sub(SegmentName(1));
  fs::create_symlink("/dev/full", path);
  std::unique_ptr<WriteAheadLog> log = OpenStarted(dir.path());
  ASSERT_NE(log, nullptr);

  const uint64_t first = log->Append(Chunk(1, "lost"));
  const absl::Status status = log->WaitConfirmed(first);
  EXPECT_TRUE(absl::IsUnavailable(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr(path));
  EXPECT_THAT(status.message(), HasSubstr(std::strerror(ENOSPC)));
  EXPECT_FALSE(log->Confirmed(first));
  EXPECT_FALSE(log->Confirmed(0));
  EXPECT_EQ(log->metrics().failures.load(), 1);

  // Later records and waiters: the same error, at once.
  const uint64_t second = log->Append(Chunk(2, "also lost"));
  EXPECT_EQ(log->WaitConfirmed(second), status);
  EXPECT_FALSE(log->Confirmed(second));
  bool called = false;
  absl::Status later;
  log->WhenConfirmed(second + 5, [&](const absl::Status& s) {
    called = true;
    later = s;
  });
  EXPECT_TRUE(called);
  EXPECT_EQ(later, status);
}

// ParseWalDurability knows exactly "sync" and "async".
TEST(WriteAheadLogTest, ParseWalDurability) {
  absl::StatusOr<WalDurability> sync = ParseWalDurability("sync");
  ASSERT_TRUE(sync.ok()) << sync.status();
  EXPECT_EQ(*sync, WalDurability::kSync);
  absl::StatusOr<WalDurability> async = ParseWalDurability("async");
  ASSERT_TRUE(async.ok()) << async.status();
  EXPECT_EQ(*async, WalDurability::kAsync);
  EXPECT_STREQ(WalDurabilityName(WalDurability::kSync), "sync");
  EXPECT_STREQ(WalDurabilityName(WalDurability::kAsync), "async");

  for (const std::string text : {"SYNC", "", "asynchronous"}) {
    absl::StatusOr<WalDurability> parsed = ParseWalDurability(text);
    EXPECT_TRUE(absl::IsInvalidArgument(parsed.status())) << text;
    EXPECT_THAT(parsed.status().message(), HasSubstr(absl::StrCat("'", text, "'")));
  }
}

}  // namespace
}  // namespace tf_reverb
