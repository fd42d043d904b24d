#include "server/metrics/rpc_observer.h"

#include <cstddef>
#include <cstring>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/interceptor.h"
#include "server/logging/event_log.h"

namespace tf_reverb {
namespace {

constexpr char kServicePrefix[] = "/deepmind.reverb.ReverbService/";
// gRPC's health service ends every Watch a client closes with UNKNOWN
// "OnCancel()": counted, never logged.
constexpr char kHealthPrefix[] = "/grpc.health.v1.Health/";
constexpr const char* kKnownMethods[] = {
    "InsertStream", "SampleStream", "MutatePriorities",     "Reset",
    "ServerInfo",   "Checkpoint",   "InitializeConnection",
};

constexpr const char* kCodeNames[RpcObserver::kNumCodes] = {
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
};

int CodeIndex(grpc::StatusCode code) {
  const int index = static_cast<int>(code);
  return index >= 0 && index < RpcObserver::kNumCodes ? index : 2;  // UNKNOWN
}

// "ipv4:127.0.0.1:5000" -> "ipv4:127.0.0.1"; "ipv6:[::1]:5000" -> "ipv6:[::1]".
std::string PeerHost(const std::string& peer) {
  const size_t colon = peer.rfind(':');
  const size_t scheme = peer.find(':');
  if (colon == std::string::npos || colon == scheme) return peer;
  return peer.substr(0, colon);
}

class Interceptor final : public grpc::experimental::Interceptor {
 public:
  Interceptor(std::shared_ptr<RpcObserver> observer, RpcObserver::MethodStats* stats,
              grpc::experimental::ServerRpcInfo* info)
      : observer_(std::move(observer)), stats_(stats), info_(info), start_(absl::Now()) {
    observer_->CallStarted(stats_);
  }
  ~Interceptor() override {
    if (!finished_) {
      observer_->CallFinished(stats_, grpc::Status(grpc::StatusCode::CANCELLED, ""),
                              absl::Now() - start_, peer_);
    }
    observer_->CallEnded(stats_, peer_);
  }

  // Hooks of one call may run concurrently (a read and a write in flight),
  // but each of the two used here runs once per call, in order: the initial
  // metadata is received before the handler runs, the status sent after it.
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    using grpc::experimental::InterceptionHookPoints;
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_INITIAL_METADATA) &&
        info_->server_context() != nullptr) {
      // The call's peer is known from here on (not yet when the interceptor
      // is made).
      peer_ = info_->server_context()->peer();
      if (!peer_.empty()) observer_->CallPeer(peer_);
    }
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      finished_ = true;
      observer_->CallFinished(stats_, methods->GetSendStatus(), absl::Now() - start_, peer_);
    }
    methods->Proceed();
  }

 private:
  const std::shared_ptr<RpcObserver> observer_;
  RpcObserver::MethodStats* const stats_;
  grpc::experimental::ServerRpcInfo* const info_;
  const absl::Time start_;
  std::string peer_;
  bool finished_ = false;
};

class Factory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit Factory(std::shared_ptr<RpcObserver> observer) : observer_(std::move(observer)) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    return new Interceptor(observer_, observer_->Stats(info->method()), info);
  }

 private:
  const std::shared_ptr<RpcObserver> observer_;
};

}  // namespace

RpcObserver::RpcObserver(absl::Duration summary_interval)
    : summary_interval_(summary_interval), last_summary_ns_(absl::ToUnixNanos(absl::Now())) {
  for (const char* name : kKnownMethods) known_.push_back(std::make_unique<MethodStats>(name));
}

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
RpcObserver::NewInterceptorFactory() {
  return std::make_unique<Factory>(shared_from_this());
}

RpcObserver::MethodStats* RpcObserver::Stats(const char* method) {
  absl::string_view path = method != nullptr ? method : "";
  if (absl::ConsumePrefix(&path, kServicePrefix)) {
    for (const auto& stats : known_) {
      if (stats->name == path) return stats.get();
    }
    path = method;
  }
  absl::MutexLock lock(&mu_);
  for (const auto& stats : others_) {
    if (stats->name == path) return stats.get();
  }
  others_.push_back(std::make_unique<MethodStats>(std::string(path)));
  return others_.back().get();
}

std::vector<const RpcObserver::MethodStats*> RpcObserver::methods() const {
  std::vector<const MethodStats*> result;
  for (const auto& stats : known_) result.push_back(stats.get());
  absl::MutexLock lock(&mu_);
  for (const auto& stats : others_) result.push_back(stats.get());
  return result;
}

void RpcObserver::CallStarted(MethodStats* stats) {
  stats->started.fetch_add(1, std::memory_order_relaxed);
  stats->active.fetch_add(1, std::memory_order_relaxed);
  calls_.fetch_add(1, std::memory_order_relaxed);
  MaybeLogSummary();
}

void RpcObserver::CallFinished(MethodStats* stats, const grpc::Status& status, absl::Duration took,
                               const std::string& peer) {
  const int code = CodeIndex(status.error_code());
  stats->finished[code].fetch_add(1, std::memory_order_relaxed);
  stats->seconds.Observe(absl::ToDoubleSeconds(took));
  if (status.ok()) return;
  failed_.fetch_add(1, std::memory_order_relaxed);
  if (status.error_code() == grpc::StatusCode::CANCELLED ||
      status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ||
      absl::StartsWith(stats->name, kHealthPrefix)) {
    return;
  }
  {
    absl::MutexLock lock(&mu_);
    if (logged_errors_ >= kMaxErrorLinesPerInterval) {
      ++suppressed_errors_;
      return;
    }
    ++logged_errors_;
  }
  LogEvent("rpc", "rpc_error",
           {{"method", stats->name},
            {"code", kCodeNames[code]},
            {"peer", peer.empty() ? "unknown" : peer},
            {"message", status.error_message()}});
}

void RpcObserver::CallPeer(const std::string& peer) {
  absl::MutexLock lock(&mu_);
  ++peers_[PeerHost(peer)];
}

void RpcObserver::CallEnded(MethodStats* stats, const std::string& peer) {
  stats->active.fetch_sub(1, std::memory_order_relaxed);
  if (!peer.empty()) {
    absl::MutexLock lock(&mu_);
    auto it = peers_.find(PeerHost(peer));
    if (it != peers_.end() && --it->second <= 0) peers_.erase(it);
  }
  MaybeLogSummary();
}

const char* RpcObserver::CodeName(int code) {
  return code >= 0 && code < kNumCodes ? kCodeNames[code] : "UNKNOWN";
}

void RpcObserver::MaybeLogSummary() {
  const int64_t now = absl::ToUnixNanos(absl::Now());
  int64_t last = last_summary_ns_.load(std::memory_order_relaxed);
  if (now - last < absl::ToInt64Nanoseconds(summary_interval_)) return;
  // One caller wins the interval; the others return.
  if (!last_summary_ns_.compare_exchange_strong(last, now)) return;
  int64_t insert_streams = 0, sample_streams = 0, active = 0;
  for (const auto& stats : known_) {
    const int64_t open = stats->active.load(std::memory_order_relaxed);
    active += open;
    if (stats->name == "InsertStream") insert_streams = open;
    if (stats->name == "SampleStream") sample_streams = open;
  }
  const int64_t calls = calls_.load(std::memory_order_relaxed);
  const int64_t failed = failed_.load(std::memory_order_relaxed);
  int64_t clients, suppressed, new_calls, new_failed;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& stats : others_) active += stats->active.load(std::memory_order_relaxed);
    clients = static_cast<int64_t>(peers_.size());
    suppressed = suppressed_errors_;
    suppressed_errors_ = 0;
    logged_errors_ = 0;
    new_calls = calls - calls_at_summary_;
    new_failed = failed - failed_at_summary_;
    calls_at_summary_ = calls;
    failed_at_summary_ = failed;
  }
  LogEvent("rpc", "clients",
           {{"client_addresses", clients},
            {"insert_streams", insert_streams},
            {"sample_streams", sample_streams},
            {"active_calls", active},
            {"calls", new_calls},
            {"failed_calls", new_failed},
            {"errors_not_logged", suppressed},
            {"interval_s", absl::ToDoubleSeconds(absl::Nanoseconds(now - last))}});
}

}  // namespace tf_reverb
