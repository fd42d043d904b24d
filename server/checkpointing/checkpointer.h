// Checkpointer: saves and restores tables as streams of bounded records in a
// checkpoint directory under `root` (docs/architecture/checkpoint-format.md, with its sharp edges
// fixed).
//
// A checkpoint is `<root>/<UTC time, RFC 3339 with ns>` holding
// tables.tfrecord (one PriorityTableCheckpoint per table), items.tfrecord
// (every item, per table in insertion order) and chunks.tfrecord (each chunk
// once, however many items and tables share it), in TFRecord framing, plus
// an empty DONE file. It is written under a temporary name and published by
// an atomic rename, so a crash at any moment leaves the previous checkpoint
// intact and the partial one ignored (and removed by the next save).
// Retention deletes only checkpoints and leftovers this class wrote.
//
// Incremental checkpoints (CheckpointerOptions::incremental, the default):
// chunks are immutable, so a save writes only the chunks that no checkpoint
// file under `root` holds yet, and lists the others in chunk_sources.tfrecord
// (ChunkSource records: the earlier checkpoint and the keys taken from its
// chunks.tfrecord). The checkpointer remembers which chunk it stored where
// (also for the chunks a load restored), so checkpointing a large table after
// a few inserts writes about what those inserts added, plus its item
// records, which every save rewrites (priorities and times sampled change)
// and an incremental one that follows an earlier checkpoint writes
// ZLIB-compressed. An earlier
// checkpoint whose chunks a kept one still uses is retired rather than
// deleted: its DONE, tables and items go, its chunks.tfrecord stays until no
// kept checkpoint names it. A source file most of whose chunks are no longer
// used is not referenced but copied forward (its live chunks are written
// again), so a chain never keeps more than about twice the live chunk
// bytes. Save(..., full=true) (and incremental=false) writes a
// self-contained checkpoint, exactly Reverb's format, which dm-reverb
// restores.
//
// Contract:
//  * Thread-safety: thread-safe; saves are serialised. Saving does not block
//    the tables beyond copying pointers (chunks are immutable), so inserts and
//    samples continue while a checkpoint is written.
//  * Ownership: shares the tables with their server.
//  * Errors: NOT_FOUND from LoadLatest when no complete checkpoint exists;
//    DATA_LOSS naming the file and offset for corrupt or truncated files,
//    and naming the file when a complete checkpoint (one with DONE) lacks
//    it; INVALID_ARGUMENT for a checkpoint table the server does not have;
//    other I/O errors as PERMISSION_DENIED / INTERNAL (NOT_FOUND on save).
//  * Observability: saves and loads log their events (server/logging) and
//    count into metrics() (durations, bytes, failures, restores).
#ifndef TF_REVERB_SERVER_CHECKPOINTING_CHECKPOINTER_H_
#define TF_REVERB_SERVER_CHECKPOINTING_CHECKPOINTER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/metrics/checkpoint_metrics.h"
#include "server/table.h"
#include "server/table_chunk.h"
#include "server/table_item.h"
#include "server/wal/write_ahead_log.h"

namespace tf_reverb {

struct CheckpointerOptions {
  // Complete checkpoints kept after a save (>= 1).
  int keep_latest = 1;
  // A checkpoint directory loaded when `root` holds no complete checkpoint.
  std::string fallback_checkpoint_path;
  // When the newest checkpoint cannot be loaded, try older ones (each failure
  // is logged) instead of failing.
  bool fall_back_to_older = false;
  // Whose configuration wins when a checkpointed table differs from the
  // server's (differences are logged either way).
  Table::RestoreMode restore_mode = Table::RestoreMode::kCheckpointConfig;
  // Write only the chunks earlier checkpoints do not hold (see above).
  bool incremental = true;
};

class Checkpointer {
 public:
  Checkpointer(std::string root, CheckpointerOptions options);

  // Writes a checkpoint of `tables`; returns its directory. `full`: a
  // self-contained checkpoint even when the options ask for incremental ones.
  absl::StatusOr<std::string> Save(const std::vector<std::shared_ptr<Table>>& tables,
                                   bool full = false);
  // Restores the newest complete checkpoint (or the fallback) into `tables`;
  // returns the directory loaded.
  absl::StatusOr<std::string> LoadLatest(const std::vector<std::shared_ptr<Table>>& tables);
  // What a server does at start: restores the newest complete checkpoint
  // (none is no error) and, with `log`, replays the log's records after it
  // (server/wal/log_recovery.h), attaches a journal to every table and
  // starts the log; later saves then delete the log segments they cover.
  // Errors as LoadLatest and ReplayLog.
  absl::Status Recover(const std::vector<std::shared_ptr<Table>>& tables,
                       std::shared_ptr<WriteAheadLog> log = nullptr);
  // The write-ahead log Recover attached (null: none).
  std::shared_ptr<WriteAheadLog> log() const {
    absl::MutexLock lock(&save_mu_);
    return log_;
  }
  // Restores the checkpoint at `path` into `tables`.
  absl::Status Load(const std::string& path, const std::vector<std::shared_ptr<Table>>& tables);

  const std::string& root() const { return root_; }
  // Saves and restores so far (read lock-free by the metrics exporter).
  const CheckpointMetrics& metrics() const { return metrics_; }
  std::string DebugString() const;

 private:
  // Where a chunk already lies in a checkpoint file under root_.
  struct SavedChunk {
    // Alive while the entry is valid: the chunk's address cannot have been
    // reused by another chunk.
    std::weak_ptr<const TableChunk> chunk;
    std::string checkpoint;  // directory name under root_
    uint64_t key = 0;        // the key it is stored under there
  };
  using SavedChunks = absl::flat_hash_map<const TableChunk*, SavedChunk>;
  // Table name -> the last log record its checkpointed state includes.
  using LogPositions = absl::flat_hash_map<std::string, uint64_t>;

  // Complete checkpoints of ours under root_, newest first.
  std::vector<std::string> CompleteCheckpoints() const;
  void DeleteOld() ABSL_EXCLUSIVE_LOCKS_REQUIRED(save_mu_);
  // Save's work; sets `bytes` to the bytes written and `log_position` to
  // the log record through which every table's changes are saved.
  absl::StatusOr<std::string> SaveLocked(const std::vector<std::shared_ptr<Table>>& tables,
                                         bool incremental, absl::Time start, int64_t* bytes,
                                         uint64_t* log_position)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(save_mu_);
  // Restores `path`; adds where each restored chunk lies to `saved` (when
  // `path` is under root_) and each table's log position to `log_positions`.
  absl::Status LoadImpl(const std::string& path, const std::vector<std::shared_ptr<Table>>& tables,
                        SavedChunks* saved, LogPositions* log_positions)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(save_mu_);

  const std::string root_;
  const CheckpointerOptions options_;
  mutable absl::Mutex save_mu_;
  SavedChunks saved_ ABSL_GUARDED_BY(save_mu_);
  // Checkpoint name -> chunks its chunks.tfrecord holds (for copy-forward).
  absl::flat_hash_map<std::string, int64_t> chunks_in_file_ ABSL_GUARDED_BY(save_mu_);
  // Of the newest successful load.
  LogPositions loaded_log_positions_ ABSL_GUARDED_BY(save_mu_);
  std::shared_ptr<WriteAheadLog> log_ ABSL_GUARDED_BY(save_mu_);
  CheckpointMetrics metrics_;
};

}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_CHECKPOINTING_CHECKPOINTER_H_
