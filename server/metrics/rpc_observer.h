// RpcObserver: watches every RPC of a server through a gRPC server
// interceptor and keeps what the metrics exporter and the event log need:
// per method, calls started, calls finished by status code, call latency
// (histogram) and calls in progress (for the streams: open streams); it
// logs failed calls with the peer address and, at most once per
// summary interval, a summary of clients and streams.
//
// Logged errors: every finished call whose code is neither OK, CANCELLED nor
// DEADLINE_EXCEEDED (the last two are how clients end streams and how rate
// limiter timeouts end calls: counted, not logged) and whose method is not
// gRPC's health service (its Watch ends with UNKNOWN when a client leaves), at most
// kMaxErrorLinesPerInterval per summary interval; the next summary says how
// many were not logged.
//
// Contract:
//  * Thread-safety: thread-safe. Per-call work is a few relaxed atomic
//    updates plus two short sections under the observer's own mutex (the
//    peer counts); per message only a hook-point check; nothing under a
//    table's lock.
//  * Ownership: shared (std::shared_ptr) by the interceptor factories handed
//    to grpc::ServerBuilder and by the exporter; outlives every call.
//  * Errors: none; unknown methods (e.g. grpc.health.v1) get their own
//    label, their full path.
#ifndef TF_REVERB_SERVER_METRICS_RPC_OBSERVER_H_
#define TF_REVERB_SERVER_METRICS_RPC_OBSERVER_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/support/server_interceptor.h"
#include "grpcpp/support/status.h"
#include "server/metrics/atomic_histogram.h"

namespace tf_reverb {

class RpcObserver : public std::enable_shared_from_this<RpcObserver> {
 public:
  static constexpr int kNumCodes = 17;  // grpc::StatusCode 0..16
  static constexpr int kMaxErrorLinesPerInterval = 10;

  struct MethodStats {
    explicit MethodStats(std::string label) : name(std::move(label)) {}
    const std::string name;  // "InsertStream", or the full path of others
    std::atomic<int64_t> started{0};
    std::atomic<int64_t> active{0};
    std::array<std::atomic<int64_t>, kNumCodes> finished{};  // by status code
    AtomicHistogram seconds{AtomicHistogram::SecondsBuckets()};
  };

  // `summary_interval`: the least time between two summary lines.
  explicit RpcObserver(absl::Duration summary_interval = absl::Minutes(1));

  // A factory for grpc::ServerBuilder::experimental().SetInterceptorCreators.
  std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> NewInterceptorFactory();

  // Every method seen or known (ReverbService's, always), in a stable order.
  std::vector<const MethodStats*> methods() const;

  // Call bookkeeping (the interceptor's; public for tests).
  MethodStats* Stats(const char* method);
  void CallStarted(MethodStats* stats);
  // Once per call, when its status is sent (or it ends without one).
  void CallFinished(MethodStats* stats, const grpc::Status& status, absl::Duration took,
                    const std::string& peer);
  // `peer` is that of CallPeer, or empty when the call never had one.
  void CallEnded(MethodStats* stats, const std::string& peer);
  // The call's peer address became known ("ipv4:127.0.0.1:5000").
  void CallPeer(const std::string& peer);
  // "OK", "CANCELLED", ... for grpc::StatusCode values 0..16.
  static const char* CodeName(int code);
  // Logs a summary if the interval has passed since the last one.
  void MaybeLogSummary();

 private:
  // Known methods, looked up without a lock; others live in others_.
  std::vector<std::unique_ptr<MethodStats>> known_;
  mutable absl::Mutex mu_;
  std::vector<std::unique_ptr<MethodStats>> others_ ABSL_GUARDED_BY(mu_);
  // Calls in progress per peer address (without its port).
  absl::flat_hash_map<std::string, int64_t> peers_ ABSL_GUARDED_BY(mu_);
  int64_t suppressed_errors_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t logged_errors_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t calls_at_summary_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t failed_at_summary_ ABSL_GUARDED_BY(mu_) = 0;
  const absl::Duration summary_interval_;
  // absl::ToUnixNanos of the last summary (or of construction).
  std::atomic<int64_t> last_summary_ns_;
  std::atomic<int64_t> calls_{0};
  std::atomic<int64_t> failed_{0};
};

}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_METRICS_RPC_OBSERVER_H_
