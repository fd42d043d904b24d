// SampleStreamReactor: one SampleStream call on gRPC's callback API
// (docs/architecture/wire-protocol.md).
//
// Each request asks for num_samples items of one table; they are sampled in
// growing batches (Table::TrySampleBatch) and written as SampleStreamResponses
// (sample_response.h; as SampleBatch responses, sample_batch.h, where the
// request accepts them and the samples can be batched), one write in flight
// at a time, then the next request is read. No thread is held while the call waits: a batch the
// rate limiter refuses registers a waker with the table, which resumes the call on the service's
// WorkQueue; a request's rate_limiter_timeout (> 0) schedules its end there too.
//
// Contract:
//  * Thread-safety: reactions (gRPC's threads), resumptions and timeouts (the
//    WorkQueue) are serialized by the reactor's mutex.
//  * Ownership: owns itself until OnDone (stream_reactor.h).
//  * Errors end the call: INVALID_ARGUMENT for a request that does not parse
//    or asks for num_samples <= 0; NOT_FOUND for an unknown table;
//    DEADLINE_EXCEEDED (kRateLimiterTimeoutMessage) when the timeout passes;
//    CANCELLED when the table closes or the call is cancelled while waiting.
#ifndef TF_REVERB_SERVER_SERVICE_SAMPLE_STREAM_REACTOR_H_
#define TF_REVERB_SERVER_SERVICE_SAMPLE_STREAM_REACTOR_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/status.h"
#include "server/service/server_insert_stream.h"
#include "server/service/stream_reactor.h"
#include "server/service/work_queue.h"
#include "server/table.h"

namespace tf_reverb {

class SampleStreamReactor : public StreamReactor<SampleStreamReactor> {
 public:
  using TableLookup = ServerInsertStream::TableLookup;

  // Starts the call. `waiting` counts calls waiting on a table.
  static SampleStreamReactor* Create(grpc::CallbackServerContext* context, TableLookup tables,
                                     WorkQueue* queue, std::atomic<int>* waiting);

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  enum class State {
    kReading,   // a read is outstanding
    kWaiting,   // the table refused a batch; its waker is registered
    kWriting,   // responses of a batch are being written
    kFinished,  // Finish was called (or is due after the write in flight)
  };

  SampleStreamReactor(TableLookup tables, WorkQueue* queue, std::atomic<int>* waiting,
                      bool client_accepts_zstd);

  // Samples the next batch, or waits for one.
  void Step() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Resume() ABSL_LOCKS_EXCLUDED(mu_);
  void TimedOut(uint64_t wait) ABSL_LOCKS_EXCLUDED(mu_);
  void StartReadLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void WriteNextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ends the call with `status` once no write is in flight (the first
  // status wins; Locked sends the Finish).
  void FinishLocked(grpc::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void StopWaitingLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  friend class StreamReactor<SampleStreamReactor>;  // calls FinishLocked

  const TableLookup tables_;
  WorkQueue* const queue_;
  std::atomic<int>* const waiting_;
  const bool client_accepts_zstd_;

  State state_ ABSL_GUARDED_BY(mu_) = State::kReading;
  grpc::ByteBuffer read_buffer_;  // owned by the outstanding read
  // The request being served.
  std::shared_ptr<Table> table_ ABSL_GUARDED_BY(mu_);
  int64_t remaining_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t last_batch_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Duration timeout_ ABSL_GUARDED_BY(mu_);
  bool rate_limited_ ABSL_GUARDED_BY(mu_) = false;
  bool accept_batches_ ABSL_GUARDED_BY(mu_) = false;
  // Counts waits, so that a timeout scheduled for an earlier one is ignored.
  uint64_t wait_ ABSL_GUARDED_BY(mu_) = 0;
  std::deque<grpc::ByteBuffer> to_write_ ABSL_GUARDED_BY(mu_);
  grpc::ByteBuffer write_buffer_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<Table::Waker> waker_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_SERVICE_SAMPLE_STREAM_REACTOR_H_
