// TrajectoryWriter: the column-oriented, asynchronous writer of
// docs/concepts/writers-and-patterns.md over one InsertStream (§4.3).
//
// Append() buffers one value per column in per-column Chunkers and returns a
// weak CellRef per value; CreateItem() turns slices of those references into
// an item (FlatTrajectory of ChunkSlices) and queues it. A background thread
// owns one InsertStream. It sends queued items strictly in creation order once
// every chunk they reference is finalized, batching all ready items with the
// chunks not yet sent on this stream into one request (under a steady stream
// of items, ready items wait up to kCoalesceWindow for company unless a caller
// waits for them), and tells the server (keep_chunk_keys) which chunks later
// items may still need. Large chunks that queued items reference go out as
// soon as they are encoded (chunk-only requests, spec §4.3), even while those
// items still wait for other chunks. A second thread reads the confirmations.
//
// Item latency: an item never waits for later steps just to fill an
// auto-tuned chunk (max_chunk_length 0, Client.trajectory_writer's default).
// While no item awaits confirmation, the open auto-tuned chunks the head
// item references are finalized at once (at CreateItem, or when the last
// confirmation arrives); only while the stream is busy do they keep growing.
// So an actor that creates an item per step sees each in the table one round
// trip later, and a writer outpacing the network still gets long chunks.
// Constant chunk lengths (the legacy Writer, configure()) are kept as asked.
//
// Locking: `mu_` guards the state shared with the background threads and is
// only held for bookkeeping. Chunks are stacked and compressed without it
// (large ones on a third background thread, the encoder, started by the
// first large chunk, so appends overlap their compression; items wait until
// their chunks are encoded). Requests are assembled (borrowing the immutable
// chunk and item messages rather than copying them) and freed, and confirmed
// items destroyed, outside it. `caller_mu_` serializes the caller-side
// mutations (Append, EndEpisode, ConfigureChunker) so the episode state cannot
// change while an Append runs unlocked.
//
// Contract:
//  * Thread-safety: every public method is thread-safe, but a writer models
//    one actor: calls are expected from one thread at a time (Append then
//    CreateItem), with Flush/Close possibly from another.
//  * Ownership: owns its chunkers, the queued/unconfirmed items and the
//    background threads; shares the gRPC channel. Items hold strong
//    references to their cells (hence chunks) until confirmed.
//  * Blocking: Append and CreateItem do not wait for the network, except that
//    CreateItem blocks while max_queued_items items are queued or unconfirmed
//    (bounded memory; it finalizes their chunks first so they can drain).
//    Flush and EndEpisode take a timeout.
//  * Transport failures: UNAVAILABLE/CANCELLED (server restart, network)
//    reopen the stream after a backoff (1 ms doubling to 1 s while streams
//    die within 2 s) and resend every unconfirmed item with its chunks; item
//    keys are reused, so the server never stores an item twice.
//  * Errors: INVALID_ARGUMENT for bad input (dtype/shape mismatch naming the
//    column, expired references, signature mismatch, unknown table when
//    validating); DEADLINE_EXCEEDED "Flush call did not complete within
//    provided timeout of ..." / "End episode call ..."; any other stream error
//    (NOT_FOUND for an unknown table, ...) is sticky: every later call returns
//    it; FAILED_PRECONDITION "TrajectoryWriter::Close has been called." after
//    Close().
#ifndef TF_REVERB_SERVER_WRITER_TRAJECTORY_WRITER_H_
#define TF_REVERB_SERVER_WRITER_TRAJECTORY_WRITER_H_

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/sync_stream.h"
#include "reverb_service.grpc.pb.h"
#include "reverb_service.pb.h"
#include "schema.pb.h"
#include "server/chunk_codec.h"
#include "server/signature.h"
#include "server/tensor.h"
#include "server/writer/cell_ref.h"
#include "server/writer/chunker.h"

namespace tf_reverb {

// A request is sent early once its chunks reach this size.
inline constexpr int64_t kMaxInsertRequestBytes = 40 << 20;
// Coalescing: ready items less than kCoalesceAfter after the previous send
// wait up to kCoalesceWindow (or until kCoalesceMaxItems items or
// kCoalesceMaxBytes of the data they reference are queued, or half the
// max_queued_items bound is pending) for more items to
// share their request, unless a caller waits for them (Flush, EndEpisode,
// CreateItem at the max_queued_items bound). An item after a quiet period is
// sent at once; so are items over large steps, whose requests are dominated
// by their data.
inline constexpr absl::Duration kCoalesceAfter = absl::Milliseconds(2);
inline constexpr absl::Duration kCoalesceWindow = absl::Milliseconds(1);
inline constexpr size_t kCoalesceMaxItems = 256;
inline constexpr int64_t kCoalesceMaxBytes = 64 << 10;
// Chunks of at least this many raw bytes are stacked and compressed on the
// writer's encoder thread instead of the appending thread.
inline constexpr int64_t kAsyncEncodeMinBytes = 32 << 10;

// Table name -> flattened signature (server/signature.h; nullopt: the table
// has none).
using TableSignatures = absl::flat_hash_map<std::string, std::optional<std::vector<SignatureSpec>>>;

struct TrajectoryWriterOptions {
  // Default chunking of every column (ConfigureChunker overrides per column).
  ChunkerOptions chunker_options;
  // Validate items client-side against these tables; nullopt: no validation
  // (errors then come from the server and are sticky).
  std::optional<TableSignatures> signatures;
  // Also accept an unsqueezed column whose signature is the per-step shape
  // (the legacy Writer's rule).
  bool accept_step_shape_signatures = false;
  // Bound on queued + unconfirmed items.
  int max_queued_items = 10000;
};

// An output column of an item: rows `refs`, concatenated; `squeeze` drops the
// leading dimension of a single-row column.
struct TrajectoryColumn {
  std::vector<std::weak_ptr<CellRef>> refs;
  bool squeeze = false;
};

class TrajectoryWriter {
 public:
  // INVALID_ARGUMENT for bad options. The stream opens in the background.
  static absl::StatusOr<std::unique_ptr<TrajectoryWriter>> Create(
      std::shared_ptr<grpc::Channel> channel, TrajectoryWriterOptions options);
  // Stops the threads without flushing (call Flush first to deliver items).
  ~TrajectoryWriter();

  using StepRefs = std::vector<std::optional<std::weak_ptr<CellRef>>>;

  // Appends one step: value i (or nullopt: no data) goes to column i. `refs`
  // receives one entry per value. All values are checked before any is
  // buffered. The episode step advances.
  absl::Status Append(std::vector<std::optional<Tensor>> data, StepRefs* refs);
  // As Append, but the step stays open: later calls fill other columns of the
  // same step (setting a column twice is INVALID_ARGUMENT).
  absl::Status AppendPartial(std::vector<std::optional<Tensor>> data, StepRefs* refs);

  // Queues an item of `table` over `trajectory`. `policy_version`: the
  // version of the policy that produced it (nullopt: the table's current
  // version when inserted); INVALID_ARGUMENT when negative.
  absl::Status CreateItem(const std::string& table, double priority,
                          const std::vector<TrajectoryColumn>& trajectory,
                          std::optional<int64_t> policy_version = std::nullopt);

  // Finalizes the chunks of all but the last `block_until_num_items` queued
  // items and waits until at most that many items are queued or unconfirmed.
  absl::Status Flush(int block_until_num_items = 0,
                     absl::Duration timeout = absl::InfiniteDuration());

  // Flush(0, timeout); then drops (clear_buffers) or finalizes every column's
  // buffer and starts a new episode. Nothing changes when the flush fails.
  absl::Status EndEpisode(bool clear_buffers = true,
                          absl::Duration timeout = absl::InfiniteDuration());

  // Overrides the chunking of `column`: applied at once if the column exists
  // (FAILED_PRECONDITION while it has buffered rows), else when it appears.
  absl::Status ConfigureChunker(int column, ChunkerOptions options);

  // Stops the background threads; queued items are dropped. Idempotent.
  void Close();

  int episode_steps() const;
  // max(num_keep_alive_refs) over the default and the overrides.
  int max_num_keep_alive_refs() const;
  // Items queued or sent but not yet confirmed.
  int num_pending_items() const;
  // Streams opened so far (1 + reconnects).
  int num_streams_opened() const;
  // InsertStream requests written so far (items are coalesced into them).
  int64_t num_requests_sent() const { return requests_sent_.load(std::memory_order_relaxed); }

 private:
  // Immutable once queued (shared between the queue, the unconfirmed map and
  // the request being built).
  struct Item {
    deepmind::reverb::PrioritizedItem proto;
    // Every distinct cell of the item, which keeps its chunk alive.
    std::vector<std::shared_ptr<CellRef>> cells;
    // The distinct chunk keys of `cells`.
    std::vector<uint64_t> chunk_keys;
    // Creation order, restored when unconfirmed items are requeued.
    uint64_t seq = 0;
    // Uncompressed bytes of the referenced cells (strings: 8 per element).
    int64_t data_bytes = 0;
    bool IsReady() const;
  };
  using ItemPtr = std::shared_ptr<const Item>;
  // What the sending thread takes from the queue for one request.
  struct Batch {
    std::vector<ItemPtr> items;
    // Chunks not yet sent on this stream, in first-use order.
    std::vector<std::shared_ptr<const deepmind::reverb::ChunkData>> chunks;
    std::vector<uint64_t> keep_chunk_keys;
  };
  using Stream = grpc::ClientReaderWriter<deepmind::reverb::InsertStreamRequest,
                                          deepmind::reverb::InsertStreamResponse>;

  TrajectoryWriter(std::shared_ptr<grpc::Channel> channel, TrajectoryWriterOptions options);

  absl::Status AppendInternal(std::vector<std::optional<Tensor>> data, bool partial,
                              StepRefs* refs);
  absl::StatusOr<std::shared_ptr<Chunker>> GetOrCreateChunker(int column)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Builds `item`'s flat trajectory (chunk slices), cells and chunk keys
  // from `trajectory`; returns its columns as they will be sampled.
  // INVALID_ARGUMENT for an empty trajectory or column, an expired cell, a
  // squeezed column of several rows or cells of different specs in a column.
  absl::StatusOr<std::vector<ItemColumn>> BuildItem(const std::vector<TrajectoryColumn>& trajectory,
                                                    Item* item) const;
  // Checks an item's columns against `table`'s signature, when the writer
  // has signatures (INVALID_ARGUMENT in Reverb's words otherwise).
  absl::Status CheckItemSignature(const std::string& table,
                                  const std::vector<ItemColumn>& columns) const;
  // Finalizes the open chunks referenced by queue_[0, end).
  absl::Status FinalizeChunksOfQueued(size_t end) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // When no item awaits confirmation, finalizes the open auto-tuned chunks
  // the head of the queue waits for, so it goes out now (see "Item latency"
  // above). An error becomes the writer's sticky error.
  void FinalizeAutoTunedChunksIfIdle() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status CheckUsable() const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Waits on pending_cv_ (until `deadline`; true when it passed) as a caller
  // the sending thread must not keep waiting (see urgent_waiters_).
  bool WaitAsUrgent(absl::Time deadline) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether the sending thread should send now rather than coalesce more.
  bool SendNow() const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  absl::Status WaitForPending(int max_pending, absl::Duration timeout, const char* what)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  void RunWorker();
  // Sends items over one stream until it breaks or the writer closes;
  // returns the stream's final status.
  absl::Status RunStream();
  void RunReader(Stream* stream);
  // Runs the encode jobs the chunkers hand over until Close; then drains.
  void RunEncoder();
  // The chunkers' EncodeExecutor: takes jobs of large chunks.
  bool TakeEncodeJob(int64_t raw_bytes, Chunker::EncodeJob* job);
  // Moves early_chunks_ not yet sent on this stream and the ready head of the
  // queue (up to kMaxInsertRequestBytes of new chunks) to unconfirmed_ and
  // into `batch`; false when there is nothing to send.
  // The request is built from `batch` without the lock.
  bool TakeBatch(Batch* batch, absl::flat_hash_set<uint64_t>* sent_chunks)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Queue bookkeeping of the chunks queued items reference.
  void PushBack(ItemPtr item) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PushFront(ItemPtr item) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  ItemPtr PopFront() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Wakes the sending thread if the head of the queue is ready.
  void SignalIfHeadReady() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::shared_ptr<grpc::Channel> channel_;
  const std::unique_ptr<deepmind::reverb::ReverbService::Stub> stub_;
  const TrajectoryWriterOptions options_;

  // Serializes Append/AppendPartial/EndEpisode/ConfigureChunker.
  absl::Mutex caller_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  mutable absl::Mutex mu_;
  // The sending thread waits on it (ready head, close, broken stream, backoff).
  absl::CondVar worker_cv_;
  // Flush/EndEpisode/CreateItem wait on it (confirmations, errors, close).
  absl::CondVar pending_cv_;
  std::vector<std::shared_ptr<Chunker>> chunkers_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<int, ChunkerOptions> overrides_ ABSL_GUARDED_BY(mu_);
  uint64_t episode_id_ ABSL_GUARDED_BY(mu_);
  int32_t episode_step_ ABSL_GUARDED_BY(mu_) = 0;
  // Columns set in the open (partial) step.
  absl::flat_hash_set<int> open_step_columns_ ABSL_GUARDED_BY(mu_);
  std::deque<ItemPtr> queue_ ABSL_GUARDED_BY(mu_);
  // Chunks the encoder made (large ones) that queued items reference, sent
  // ahead of those items (which may still wait for other chunks) so that
  // their bytes flow while the caller appends. Weak: a chunk no cell needs
  // any more is not sent.
  std::deque<std::weak_ptr<const deepmind::reverb::ChunkData>> early_chunks_ ABSL_GUARDED_BY(mu_);
  // Sum of the queued items' data_bytes.
  int64_t queued_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  // Chunk key -> number of queued items referencing it.
  absl::flat_hash_map<uint64_t, int> queued_chunk_refs_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, ItemPtr> unconfirmed_ ABSL_GUARDED_BY(mu_);
  absl::Status error_ ABSL_GUARDED_BY(mu_);  // sticky
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  bool stream_broken_ ABSL_GUARDED_BY(mu_) = false;
  // Callers blocked until items are confirmed; while any, nothing coalesces.
  int urgent_waiters_ ABSL_GUARDED_BY(mu_) = 0;
  // The sending thread is holding ready items back to coalesce them; only
  // SendNow() conditions wake it then.
  bool coalescing_ ABSL_GUARDED_BY(mu_) = false;
  grpc::ClientContext* context_ ABSL_GUARDED_BY(mu_) = nullptr;
  int streams_opened_ ABSL_GUARDED_BY(mu_) = 0;
  // Codec policy of new chunks: from what the last stream's server announced
  // (Snappy until one announces zstd; writer_chunk_codecs.h).
  CodecPolicy chunk_codec_ ABSL_GUARDED_BY(mu_) = CodecPolicy::kSnappy;
  uint64_t next_seq_ ABSL_GUARDED_BY(mu_) = 0;
  std::atomic<int64_t> requests_sent_{0};
  std::thread worker_;

  // Lock order: mu_, then a Chunker's lock, then encode_mu_.
  absl::Mutex encode_mu_ ABSL_ACQUIRED_AFTER(mu_);
  absl::CondVar encode_cv_;
  std::deque<Chunker::EncodeJob> encode_jobs_ ABSL_GUARDED_BY(encode_mu_);
  bool encoder_stopped_ ABSL_GUARDED_BY(encode_mu_) = false;
  // Started by the first chunk worth encoding in the background.
  std::thread encoder_ ABSL_GUARDED_BY(encode_mu_);
};

}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_WRITER_TRAJECTORY_WRITER_H_
