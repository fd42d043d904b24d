// InsertStreamReactor: one InsertStream call on gRPC's callback API
// (docs/architecture/wire-protocol.md), over a ServerInsertStream (server_insert_stream.h).
//
// No thread is held while the call waits: reads and writes complete on
// gRPC's threads; an insert the rate limiter refuses registers a waker with
// its table, which resumes the call on the service's WorkQueue. Behaviour as
// Reverb's: the initial metadata goes out at once (announcing zstd when
// asked), one response of confirmed keys per request with items, and the
// keys confirmed so far are sent before an insert that has to wait. With a
// write-ahead log, keys are confirmed only once the log has confirmed every
// record appended before them (WriteAheadLog::WhenConfirmed; the call
// waits without a thread), and a failed log ends the call with its error.
//
// Contract:
//  * Thread-safety: reactions (gRPC's threads) and resumptions (the
//    WorkQueue) are serialized by the reactor's mutex (stream_reactor.h).
//  * Ownership: gRPC holds the reactor from Create until OnDone; it owns
//    itself until OnDone (stream_reactor.h), so queued resumptions never
//    outlive it. The tables, the queue and `waiting` must outlive it.
//  * Errors end the call with the handler's status; a request that does not
//    parse is INVALID_ARGUMENT; a cancelled call waiting on a table ends
//    CANCELLED; the client going away ends it quietly.
#ifndef TF_REVERB_SERVER_SERVICE_INSERT_STREAM_REACTOR_H_
#define TF_REVERB_SERVER_SERVICE_INSERT_STREAM_REACTOR_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "google/protobuf/arena.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/status.h"
#include "reverb_service.pb.h"
#include "server/service/server_insert_stream.h"
#include "server/service/stream_reactor.h"
#include "server/service/work_queue.h"
#include "server/table.h"
#include "server/wal/write_ahead_log.h"

namespace tf_reverb {

class InsertStreamReactor : public StreamReactor<InsertStreamReactor> {
 public:
  // Starts the call. `waiting` counts calls waiting on a table; `log` (may
  // be null) is the server's write-ahead log.
  static InsertStreamReactor* Create(grpc::CallbackServerContext* context,
                                     ServerInsertStream::TableLookup tables, WorkQueue* queue,
                                     std::atomic<int>* waiting, bool announce_zstd,
                                     std::shared_ptr<WriteAheadLog> log = nullptr);

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  enum class State {
    kReading,     // a read is outstanding
    kInserting,   // the handler works on a request
    kWaiting,     // a table refused the next item; its waker is registered
    kConfirming,  // the request is done; its confirmation is (to be) written
    kFinished,    // Finish was called (or is due after the write in flight)
  };

  InsertStreamReactor(ServerInsertStream::TableLookup tables, WorkQueue* queue,
                      std::atomic<int>* waiting, std::shared_ptr<WriteAheadLog> log);
  void Begin(grpc::CallbackServerContext* context, bool announce_zstd);

  // Drives the handler until it blocks, fails or finishes the request.
  void Step() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Resume() ABSL_LOCKS_EXCLUDED(mu_);
  void StartReadLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Writes `confirmed_` as one response (clearing it), once the log has
  // confirmed what was appended before it.
  void WriteConfirmedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The log confirmed (or failed) what a held confirmation waited for.
  void OnLogConfirmed(const absl::Status& status) ABSL_LOCKS_EXCLUDED(mu_);
  // Ends the call with `status` once no write is in flight (the first
  // status wins; Locked sends the Finish).
  void FinishLocked(grpc::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void StopWaitingLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Frees the request once the handler no longer borrows it.
  void ReleaseRequestLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  friend class StreamReactor<InsertStreamReactor>;  // calls FinishLocked

  ServerInsertStream handler_;
  WorkQueue* const queue_;
  std::atomic<int>* const waiting_;
  const std::shared_ptr<WriteAheadLog> log_;

  State state_ ABSL_GUARDED_BY(mu_) = State::kReading;
  bool confirmation_written_ ABSL_GUARDED_BY(mu_) = false;
  bool request_has_items_ ABSL_GUARDED_BY(mu_) = false;
  // A confirmation is held until the log confirms.
  bool awaiting_log_ ABSL_GUARDED_BY(mu_) = false;
  grpc::ByteBuffer read_buffer_;  // owned by the outstanding read
  // Each request is parsed into request_, a message on arena_ (a few
  // blocks instead of a heap allocation per message), which the handler
  // borrows until the request is done; the arena is reset then.
  google::protobuf::Arena arena_ ABSL_GUARDED_BY(mu_);
  deepmind::reverb::InsertStreamRequest* request_ ABSL_GUARDED_BY(mu_) = nullptr;
  grpc::ByteBuffer write_buffer_ ABSL_GUARDED_BY(mu_);
  std::vector<uint64_t> confirmed_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<Table::Waker> waker_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_SERVICE_INSERT_STREAM_REACTOR_H_
