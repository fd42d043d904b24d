// WriteAheadLog: every change of a server's tables, appended in order to
// segment files in one directory, so that a crash loses no confirmed insert
// (docs/guides/durability.md).
//
// Files: `<dir>/wal-<first sequence, 20 digits>.log`, WalRecord protos
// (proto/checkpoint.proto) in TFRecord framing, sequence numbers ascending
// across segments. A new segment starts when the active one reaches
// WalOptions::segment_bytes and at every start; segments a checkpoint
// covers are deleted (ReleaseThrough), so the log holds about what changed
// since the newest checkpoint.
//
// Durability (WalOptions::durability): kSync confirms a record once it is
// written and fdatasync'ed; kAsync once it is written to the OS (it
// survives the process, not the host), with an fdatasync every
// fsync_interval. One writer thread writes every record appended since its
// last write in one write(2), and with kSync one fdatasync covers them all
// (group commit: concurrent writers share it); with kAsync a confirming
// caller may write them itself (WritePending).
//
// Lifecycle: Open (reads nothing), Replay (once, before Start: every
// record on disk in order; a torn last record is cut off the file and
// reported), Start (a new segment, the writer thread), Append from then on.
// The destructor writes and syncs what was appended, then stops the thread.
//
// Contract:
//  * Thread-safety: Append, Confirmed, WhenConfirmed, WaitConfirmed,
//    ReleaseThrough and the accessors are thread-safe; Append never blocks
//    on I/O (tables call it under their mutex). Open/Replay/Start are called
//    by one thread before any other call.
//  * Ownership: owns its files and thread; records hold the chunks and
//    items they log (shared, immutable) until written.
//  * Errors: Open: INTERNAL/PERMISSION_DENIED when the directory cannot be
//    made or listed. Replay: DATA_LOSS naming the file and byte offset for
//    a corrupt record anywhere but a torn end of the last segment, or a
//    sequence number out of order or missing. Once a write or fsync fails the log is
//    failed: nothing more is confirmed, and every waiter (now and later)
//    gets UNAVAILABLE naming the file and the system error.
#ifndef TF_REVERB_SERVER_WAL_WRITE_AHEAD_LOG_H_
#define TF_REVERB_SERVER_WAL_WRITE_AHEAD_LOG_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "checkpoint.pb.h"
#include "schema.pb.h"
#include "server/item_record.h"
#include "server/metrics/wal_metrics.h"
#include "server/table_chunk.h"

namespace tf_reverb {

enum class WalDurability {
  kSync,   // confirmed once fdatasync'ed: survives a host crash
  kAsync,  // confirmed once written to the OS: survives a process crash
};

// "sync" / "async"; INVALID_ARGUMENT naming the text otherwise.
absl::StatusOr<WalDurability> ParseWalDurability(const std::string& text);
const char* WalDurabilityName(WalDurability durability);

struct WalOptions {
  WalDurability durability = WalDurability::kSync;
  // kAsync: written records are fdatasync'ed at least this often.
  absl::Duration fsync_interval = absl::Milliseconds(100);
  // A segment is closed and a new one started beyond this size.
  int64_t segment_bytes = int64_t{64} << 20;
};

// One change of a table, as appended: a chunk is shared (its record field is
// its wire bytes as they are, written by the writer thread), an item's bytes
// are copied (an ItemRecord, a few dozen bytes for small items).
struct WalChange {
  enum class Kind { kChunk, kInsert, kUpdate, kDelete, kSample, kReset, kPolicyVersion };
  Kind kind = Kind::kChunk;
  std::string table;                        // all kinds but kChunk
  std::shared_ptr<const TableChunk> chunk;  // kChunk
  ItemRecord item;                          // kInsert
  uint64_t key = 0;                         // kUpdate, kDelete, kSample
  double priority = 0;                      // kUpdate
  int64_t version = 0;                      // kPolicyVersion
};

// What Replay found.
struct WalReplayReport {
  int64_t records = 0;
  int64_t segments = 0;
  uint64_t last_sequence = 0;   // 0: an empty log
  uint64_t first_sequence = 0;  // the oldest segment's first record (0: none)
  // The torn end cut off the last segment ("" when none): the file, the
  // offset and what was wrong.
  std::string torn;
};

class WriteAheadLog {
 public:
  // Called with OK once the record is confirmed, or the log's error.
  using Confirmation = std::function<void(const absl::Status&)>;

  static absl::StatusOr<std::unique_ptr<WriteAheadLog>> Open(std::string dir, WalOptions options);
  ~WriteAheadLog();

  WriteAheadLog(const WriteAheadLog&) = delete;
  WriteAheadLog& operator=(const WriteAheadLog&) = delete;

  // Calls `visit` with every record on disk in sequence order; an error from
  // `visit` stops and is returned. A torn end of the last segment (a record
  // cut short, or its checksum failing at the end of the file: a write a
  // crash interrupted) is truncated away and reported.
  absl::StatusOr<WalReplayReport> Replay(
      const std::function<absl::Status(deepmind::reverb::WalRecord&)>& visit);

  // New records number from `sequence` at least (before Start).
  void AdvanceTo(uint64_t sequence) ABSL_LOCKS_EXCLUDED(mu_);
  // Opens a new segment after the records on disk and starts the writer.
  absl::Status Start();

  // Appends `change`; returns its sequence number. Never blocks on I/O.
  uint64_t Append(WalChange change) ABSL_LOCKS_EXCLUDED(mu_);
  // The sequence number of the newest appended record (0: none).
  uint64_t last_sequence() const ABSL_LOCKS_EXCLUDED(mu_);
  // Whether every record through `sequence` is confirmed (see Durability).
  bool Confirmed(uint64_t sequence) const ABSL_LOCKS_EXCLUDED(mu_);
  // Calls `done` once every record through `sequence` is confirmed: at once
  // on this thread when it is, else on the writer thread (no lock held).
  // Keep `done` quick: hand work to another thread.
  void WhenConfirmed(uint64_t sequence, Confirmation done) ABSL_LOCKS_EXCLUDED(mu_);
  // Blocks until every record through `sequence` is confirmed (kAsync:
  // writes the pending records first).
  absl::Status WaitConfirmed(uint64_t sequence) ABSL_LOCKS_EXCLUDED(mu_);
  // Writes every record appended so far now, on the calling thread (with
  // kSync: and fdatasyncs it), instead of waiting for the writer thread;
  // returns the log's status. For kAsync confirmations, which then need no
  // thread hop.
  absl::Status WritePending() ABSL_LOCKS_EXCLUDED(mu_, write_mu_);
  // Deletes the segments (other than the active one) holding only records
  // through `sequence`: those a checkpoint includes.
  void ReleaseThrough(uint64_t sequence) ABSL_LOCKS_EXCLUDED(mu_);

  // Whether the caller is the log's writer thread (which calls
  // confirmations with no lock held).
  bool OnWriterThread() const { return std::this_thread::get_id() == writer_id_.load(); }

  const std::string& dir() const { return dir_; }
  const WalOptions& options() const { return options_; }
  const WalMetrics& metrics() const { return metrics_; }

 private:
  struct Segment {
    uint64_t first_sequence;
    std::string path;
    int64_t bytes;
  };
  struct Pending {
    uint64_t sequence;
    WalChange change;
  };

  WriteAheadLog(std::string dir, WalOptions options, std::vector<Segment> segments);

  // Confirmations now due and the status to call them with; Run() calls
  // them (with no lock held).
  struct Due {
    std::vector<Confirmation> calls;
    absl::Status status;
    void Run();
  };

  void WriterLoop() ABSL_LOCKS_EXCLUDED(mu_, write_mu_);
  // Whether the writer thread must write now: records (kAsync: records
  // someone waits for), or the log is stopping.
  bool HasWorkLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Writes every pending record in one write (kSync: and fdatasyncs),
  // rotates a full segment, and confirms them (or fails the log); the
  // confirmations due go to `due`.
  void WritePendingLocked(Due* due) ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  // Serializes `batch` into `out` (framed records).
  static void Serialize(const std::vector<Pending>& batch, std::string* out);
  // Opens `<dir>/wal-<first>.log` as the active segment.
  absl::Status OpenSegment(uint64_t first) ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  // Writes all of `bytes` to the active segment.
  absl::Status WriteAll(const std::string& bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  absl::Status Sync() ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  // Moves the confirmation point to `sequence` (or fails the log); returns
  // the waiters now due.
  Due Confirm(uint64_t sequence, const absl::Status& error) ABSL_LOCKS_EXCLUDED(mu_);

  const std::string dir_;
  const WalOptions options_;
  WalMetrics metrics_;

  mutable absl::Mutex mu_;
  uint64_t next_sequence_ ABSL_GUARDED_BY(mu_) = 1;
  std::vector<Pending> pending_ ABSL_GUARDED_BY(mu_);
  uint64_t confirmed_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status failed_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::multimap<uint64_t, Confirmation> waiters_ ABSL_GUARDED_BY(mu_);
  // Oldest first; the last one is active once started.
  std::deque<Segment> segments_ ABSL_GUARDED_BY(mu_);

  // Writing: the writer thread, or a caller of WritePending. Taken before
  // mu_.
  absl::Mutex write_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  int fd_ ABSL_GUARDED_BY(write_mu_) = -1;            // the active segment
  bool unsynced_ ABSL_GUARDED_BY(write_mu_) = false;  // kAsync: written, not fdatasync'ed
  absl::Time last_sync_ ABSL_GUARDED_BY(write_mu_);
  bool io_failed_ ABSL_GUARDED_BY(write_mu_) = false;
  std::string io_bytes_ ABSL_GUARDED_BY(write_mu_);  // the batch being written
  std::thread writer_;
  std::atomic<std::thread::id> writer_id_;  // set by the writer thread first
};

}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_WAL_WRITE_AHEAD_LOG_H_
