// Chunker: turns the successive values of ONE column into chunks
// (docs/architecture/wire-protocol.md, docs/concepts/writers-and-patterns.md "Chunking").
//
// Rows are buffered until the buffer holds max_chunk_length rows, Flush() is
// called, or a row of another episode arrives; then the buffer is stacked,
// compressed (codec per options.codec; optional delta encoding)
// and handed to every CellRef of
// it. A chunk never mixes episodes. The last num_keep_alive_refs CellRefs are
// kept alive in a ring; older ones expire unless an item still holds them.
//
// Chunk length: a constant max_chunk_length, or (max_chunk_length == 0)
// auto-tuned: as many rows as fit in kAutoChunkTargetBytes of raw data,
// clamped to [1, num_keep_alive_refs]. Chunk length only affects efficiency.
//
// Contract:
//  * Thread-safety: thread-safe (one mutex). Append/Flush may run on the
//    writer's caller thread while the sending thread reads KeepAliveKeys.
//  * Ownership: create with Create() (shared_ptr; CellRefs point back to it
//    weakly). The Chunker owns its buffer and keep-alive ring.
//  * Errors: INVALID_ARGUMENT for bad options and for a value whose dtype or
//    shape differs from the column's spec (fixed by the first value);
//    FAILED_PRECONDITION for a step index not strictly above the previous one
//    of the same episode, and for ApplyConfig with rows buffered.
#ifndef TF_REVERB_SERVER_WRITER_CHUNKER_H_
#define TF_REVERB_SERVER_WRITER_CHUNKER_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "schema.pb.h"
#include "server/chunk_codec.h"
#include "server/tensor.h"
#include "server/writer/cell_ref.h"

namespace tf_reverb {

// Auto-tuned chunks hold at most this many raw bytes (at least one row).
inline constexpr int64_t kAutoChunkTargetBytes = 256 << 10;

struct ChunkerOptions {
  int num_keep_alive_refs = 1;
  // 0: auto-tuned; otherwise in [1, num_keep_alive_refs].
  int max_chunk_length = 0;
  bool delta_encode = false;
  // Codec choice for the chunks made (Snappy is what Reverb understands).
  // The TrajectoryWriter overrides it with SetCodec after negotiating with
  // the server (chunk_codec.h).
  CodecPolicy codec = CodecPolicy::kSnappy;
  int zstd_level = kDefaultZstdLevel;

  absl::Status Validate() const;
};

class Chunker : public std::enable_shared_from_this<Chunker> {
 public:
  // `column` only names the column in error messages.
  static absl::StatusOr<std::shared_ptr<Chunker>> Create(int column, ChunkerOptions options);

  // INVALID_ARGUMENT when `value` does not match the column's spec (set by the
  // first value ever appended).
  absl::Status CheckSpec(const Tensor& value) const;

  // Buffers `value` as step `episode_step` of `episode_id`; returns its cell.
  absl::StatusOr<std::weak_ptr<CellRef>> Append(Tensor value, uint64_t episode_id,
                                                int32_t episode_step);

  // Finalizes the buffered rows (if any) into a chunk.
  absl::Status Flush();

  // Finalizes the open chunk if `chunk_key` is it.
  absl::Status FlushIfOpen(uint64_t chunk_key);

  // Drops the buffered rows and the keep-alive ring (end of episode).
  void Reset();

  // Replaces the options; FAILED_PRECONDITION "Flush must be called before
  // ApplyConfig." while rows are buffered.
  absl::Status ApplyConfig(ChunkerOptions options);

  // Sets options().codec; applies to chunks finalized from now on (rows may
  // be buffered).
  void SetCodec(CodecPolicy codec);

  // May take over the encoding of a finalized buffer (stacking, compression,
  // handing the chunk to the cells) to run it on another thread: it returns
  // true after moving `*encode` away (the job's error is then the executor's
  // to report), or false to leave it to run inline. Called with the Chunker's
  // lock held: it must not call into the Chunker. `raw_bytes` is the size of
  // the rows. Until a taken job ran, the chunk's cells are not ready and
  // BufferedRow still serves their rows. A job returns the chunk it made.
  using EncodeJob =
      std::function<absl::StatusOr<std::shared_ptr<const deepmind::reverb::ChunkData>>()>;
  using EncodeExecutor = std::function<bool(int64_t raw_bytes, EncodeJob* encode)>;
  // nullptr (the default): encode inline.
  void SetEncodeExecutor(EncodeExecutor executor);

  // Chunk keys of the cells in the keep-alive ring (finalized or not).
  std::vector<uint64_t> KeepAliveChunkKeys() const;

  // Row `offset` of the open chunk `chunk_key` (or of a finalized chunk still
  // being encoded elsewhere); NOT_FOUND when that chunk is neither.
  absl::StatusOr<Tensor> BufferedRow(uint64_t chunk_key, int32_t offset) const;

  ChunkerOptions options() const;
  std::optional<CellSpec> spec() const;
  int num_buffered() const;
  // The chunk length currently in force.
  int chunk_length() const;

 private:
  Chunker(int column, ChunkerOptions options);
  absl::Status CheckSpecLocked(const Tensor& value) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  absl::Status FinalizeLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int ChunkLengthLocked() const ABSL_SHARED_LOCKS_REQUIRED(mu_);

  const int column_;
  mutable absl::Mutex mu_;
  ChunkerOptions options_ ABSL_GUARDED_BY(mu_);
  std::optional<CellSpec> spec_ ABSL_GUARDED_BY(mu_);
  // The open chunk.
  uint64_t chunk_key_ ABSL_GUARDED_BY(mu_);
  std::vector<Tensor> buffer_ ABSL_GUARDED_BY(mu_);
  std::vector<std::weak_ptr<CellRef>> buffer_refs_ ABSL_GUARDED_BY(mu_);
  uint64_t buffer_episode_id_ ABSL_GUARDED_BY(mu_) = 0;
  int32_t buffer_first_step_ ABSL_GUARDED_BY(mu_) = 0;
  int32_t buffer_last_step_ ABSL_GUARDED_BY(mu_) = 0;
  bool buffer_sparse_ ABSL_GUARDED_BY(mu_) = false;
  // Last step appended, to enforce strictly increasing steps per episode.
  std::optional<std::pair<uint64_t, int32_t>> last_step_ ABSL_GUARDED_BY(mu_);
  std::deque<std::shared_ptr<CellRef>> keep_alive_ ABSL_GUARDED_BY(mu_);
  EncodeExecutor executor_ ABSL_GUARDED_BY(mu_);
  // Rows of finalized chunks being encoded by the executor, by chunk key.
  absl::flat_hash_map<uint64_t, std::shared_ptr<const std::vector<Tensor>>> encoding_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_WRITER_CHUNKER_H_
