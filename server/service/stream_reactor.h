// StreamReactor: what the InsertStream and SampleStream reactors share, the
// lifetime and the finish/write state of one bidi call on gRPC's callback
// API over raw byte buffers:
//  * it owns itself from Own() until ReleaseSelf() (OnDone), so resumptions
//    queued elsewhere (weak pointers) never outlive it;
//  * every reaction runs in Locked(), under the one mutex, with exceptions
//    caught (handler_guard.h) and turned into the call's end;
//  * at most one write is in flight, and Finish is sent once, after it: a
//    finish requested while a write is outstanding waits for its completion.
//
// Contract:
//  * Thread-safety: reactions (gRPC's threads) and resumptions (the
//    WorkQueue) are serialized by mu_; Finish itself is called with mu_
//    released, since its completion may run OnDone inline.
//  * Ownership: gRPC holds the reactor from its creation until OnDone; the
//    derived class calls Own() once at creation and ReleaseSelf() in OnDone.
//  * Errors: an exception thrown by a body finishes the call with the
//    status Guarded makes of it (RESOURCE_EXHAUSTED, INTERNAL).
#ifndef TF_REVERB_SERVER_SERVICE_STREAM_REACTOR_H_
#define TF_REVERB_SERVER_SERVICE_STREAM_REACTOR_H_

#include <memory>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/server_callback.h"
#include "grpcpp/support/status.h"
#include "server/service/handler_guard.h"

namespace tf_reverb {

template <typename Derived>
class StreamReactor : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>,
                      public std::enable_shared_from_this<Derived> {
 protected:
  // `method` names the call in the statuses of caught exceptions.
  explicit StreamReactor(const char* method) : method_(method) {}

  // Makes the reactor `self` (this one) own itself (until ReleaseSelf()).
  void Own(std::shared_ptr<Derived> self) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    self_ = std::move(self);
  }

  // The reactor's own reference, for OnDone to drop with mu_ released (it
  // may be the last one: the reactor is deleted when it goes).
  std::shared_ptr<Derived> ReleaseSelfLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return std::move(self_);
  }

  // Runs `body` under mu_ (an exception in it finishes the call), then
  // sends Finish if it became due.
  template <typename Body>
  void Locked(Body&& body) ABSL_LOCKS_EXCLUDED(mu_) {
    bool finish = false;
    grpc::Status status;
    // Keeps the reactor alive until Finish returns: its completion may run
    // OnDone inline, which drops self_.
    std::shared_ptr<Derived> keep;
    {
      absl::MutexLock lock(&mu_);
      grpc::Status thrown = Guarded(method_, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        body();
        return grpc::Status::OK;
      });
      if (!thrown.ok()) static_cast<Derived*>(this)->FinishLocked(std::move(thrown));
      if (finish_wanted_ && !finish_sent_ && !write_in_flight_) {
        finish_sent_ = true;
        finish = true;
        status = finish_status_;
        keep = self_;
      }
    }
    if (finish) this->Finish(std::move(status));
  }

  // Records that the call is to end with `status`, sent once no write is in
  // flight. False (and nothing recorded) when an end was requested before.
  bool RequestFinishLocked(grpc::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finish_wanted_) return false;
    finish_wanted_ = true;
    finish_status_ = std::move(status);
    return true;
  }

  // Starts writing `buffer` (which must live until OnWriteDone).
  void StartWriteLocked(const grpc::ByteBuffer* buffer) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    write_in_flight_ = true;
    this->StartWrite(buffer);
  }
  // Called first by OnWriteDone.
  void WriteDoneLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { write_in_flight_ = false; }
  bool write_in_flight() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return write_in_flight_; }

  absl::Mutex mu_;

 private:
  const char* const method_;
  bool write_in_flight_ ABSL_GUARDED_BY(mu_) = false;
  bool finish_wanted_ ABSL_GUARDED_BY(mu_) = false;
  bool finish_sent_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status finish_status_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<Derived> self_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_SERVICE_STREAM_REACTOR_H_
