// Sampler: the client side of sampling (docs/architecture/wire-protocol.md) — worker
// threads that fetch samples from a table and a bounded prefetch queue that
// consumers (Client.sample, the TF datasets, the numpy iterator) pop from.
//
// Contract:
//  * Threads: the constructor starts `num_workers` worker threads. Each owns
//    one SamplerWorker (one gRPC stream, or one in-process table handle) and
//    repeatedly asks it for up to max_in_flight_samples_per_worker samples.
//    Workers reserve queue slots before asking, so at most
//    max_in_flight_samples_per_worker * num_workers samples are ever queued
//    or in flight (the prefetch bound). Samples are queued as they arrive
//    (SamplerWorker::StreamSamples), not once the whole request was served:
//    consumers decode the first samples of a request while the rest are
//    still on the wire. While a request is served, a worker may claim the
//    slots of its next request as soon as consumers have freed them
//    (ClaimMore) and send it ahead on the same stream, so the stream need
//    not drain between requests; the prefetch bound holds throughout. Every
//    request, ahead or not, is a whole max_in_flight_samples_per_worker (or
//    what is left of max_samples, or of a stream's max_samples_per_stream),
//    so the samples a table hands a sampler advance in those steps, as in
//    Reverb.
//  * Thread-safety: Next() and Close() may be called from any threads,
//    concurrently. Samples are handed out in arrival order; with several
//    workers arrival order interleaves streams.
//  * Ownership: the Sampler owns its workers and threads; the destructor
//    closes and joins them. Samples handed out own (shared) their chunks, so
//    they outlive the Sampler and the server they came from.
//  * Options (SamplerOptions, validated by Create):
//     - max_samples: -1 unlimited, else > 0; once that many samples were
//       returned Next() fails with OUT_OF_RANGE "`max_samples` already
//       returned." and no more than max_samples are ever taken from the table.
//     - max_in_flight_samples_per_worker >= 1: samples requested per request.
//     - num_workers: -1 means 1; else >= 1. The workers actually started are
//       min(num_workers, max(1, max_samples / max_in_flight)) when
//       max_samples is set.
//     - max_samples_per_stream: -1 means kDefaultMaxSamplesPerStream (10 000,
//       as in Reverb); else > 0. A gRPC worker reopens its stream after that
//       many samples (spreads load over load-balanced backends).
//     - rate_limiter_timeout: how long one request may wait for the rate
//       limiter. InfiniteDuration(): forever. ZeroDuration() means
//       IMMEDIATELY in our client, in-process and over gRPC alike (over gRPC
//       it is sent as 1 ms, the smallest timeout the protocol can express
//       since Reverb servers — and ours, for Reverb clients — read 0 as
//       "infinite"). Unlike Reverb, 0 therefore never means infinite here.
//  * Rate-limiter timeouts only count while a consumer is blocked in Next():
//    a timeout with nobody waiting makes the worker wait for a consumer and
//    try again; a timeout while a consumer waits is fatal and Next() returns
//    DEADLINE_EXCEEDED (the datasets turn that into end of sequence).
//  * Errors: UNAVAILABLE and CANCELLED from a worker (server restarting,
//    in-process table closed) are retried with exponential backoff (1 ms
//    doubling to 1 s, reset by a success), except the CANCELLED of a worker
//    whose in-process table closed (its server stopped; a stopped server's
//    tables never reopen), which is fatal. Any other error is fatal too: it is stored and,
//    once the samples already queued are consumed, returned by every later
//    Next(); samples other workers receive after it are dropped. Next() after Close() returns
//    CANCELLED. Next(timeout) returns DEADLINE_EXCEEDED when no sample arrived within `timeout`.
//  * Cancellation: Close() cancels every in-flight request (gRPC
//    TryCancel; in-process table waits poll a cancellation flag), wakes
//    blocked consumers and joins the workers. It is idempotent.
#ifndef TF_REVERB_SERVER_CLIENT_SAMPLER_H_
#define TF_REVERB_SERVER_CLIENT_SAMPLER_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/client/sample.h"

namespace tf_reverb {

inline constexpr int64_t kDefaultMaxSamplesPerStream = 10000;
inline constexpr int64_t kDefaultMaxInFlightSamplesPerWorker = 100;

struct SamplerOptions {
  int64_t max_samples = -1;
  int64_t max_in_flight_samples_per_worker = kDefaultMaxInFlightSamplesPerWorker;
  int64_t num_workers = -1;
  int64_t max_samples_per_stream = -1;
  absl::Duration rate_limiter_timeout = absl::InfiniteDuration();

  // INVALID_ARGUMENT naming the first bad option.
  absl::Status Validate() const;
  // Workers actually started (see the contract above).
  int64_t EffectiveNumWorkers() const;
  int64_t EffectiveMaxSamplesPerStream() const {
    return max_samples_per_stream == -1 ? kDefaultMaxSamplesPerStream : max_samples_per_stream;
  }
};

// One source of samples, driven by one worker thread at a time.
class SamplerWorker {
 public:
  // Claims the next request's samples now, from the sampler's free prefetch
  // slots: max_in_flight_samples_per_worker (or what is left of max_samples),
  // at most `limit` (the stream's remaining allowance); returns how many, 0
  // when that many slots are not free yet. The claimed samples join the
  // request: the call returns once they too arrived (or failed).
  using ClaimMore = std::function<int64_t(int64_t limit)>;

  // Takes samples that arrived, in order: all of those that arrived
  // together (one response's) at once, so the sampler queues them in one go.
  using Deliver = std::function<void(std::vector<Sample> samples)>;

  virtual ~SamplerWorker() = default;
  // Hands between 1 and `num_samples` samples to `deliver`, as soon as they
  // arrived (on the calling thread), waiting up to `timeout` for the rate
  // limiter. May deliver samples and still fail (a stream that broke
  // half-way); those samples are valid. A worker that can ask for more while
  // it receives (a gRPC stream) may grow the request with `claim_more`.
  virtual absl::Status StreamSamples(int64_t num_samples, absl::Duration timeout,
                                     const Deliver& deliver, const ClaimMore& claim_more) = 0;
  // Unblocks a StreamSamples in progress from any thread; every later call
  // fails with CANCELLED.
  virtual void Cancel() = 0;
  // Whether `status`, returned by StreamSamples, is worth retrying (with
  // backoff). By default: UNAVAILABLE and CANCELLED.
  virtual bool ShouldRetry(const absl::Status& status) const;
};

class Sampler {
 public:
  using WorkerFactory = std::function<std::unique_ptr<SamplerWorker>()>;

  // Validates `options` and starts the workers, each made by `factory`.
  static absl::StatusOr<std::unique_ptr<Sampler>> Create(WorkerFactory factory,
                                                         SamplerOptions options);
  // A sampler without workers whose Next() always returns `status`.
  static std::unique_ptr<Sampler> Failed(absl::Status status);
  ~Sampler();

  Sampler(const Sampler&) = delete;
  Sampler& operator=(const Sampler&) = delete;

  // The next sample; blocks until one is available, the sampler fails or is
  // closed, or `timeout` passes.
  absl::StatusOr<Sample> Next(absl::Duration timeout = absl::InfiniteDuration());
  // The next samples, between 1 and `max` of them (what is queued, within
  // max_samples), appended to `out`: as many Next() calls in one, with the
  // same errors (appending nothing).
  absl::Status NextBatch(int64_t max, std::vector<Sample>* out,
                         absl::Duration timeout = absl::InfiniteDuration());

  // Cancels in-flight requests, wakes consumers and joins the workers.
  void Close();

  const SamplerOptions& options() const { return options_; }
  int64_t num_workers() const { return static_cast<int64_t>(workers_.size()); }

 private:
  Sampler(std::vector<std::unique_ptr<SamplerWorker>> workers, SamplerOptions options);
  void RunWorker(SamplerWorker* worker);
  // The size of a worker's next request: max_in_flight_samples_per_worker,
  // or what is left of max_samples (<= 0: nothing is left to claim).
  int64_t NextRequestLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Prefetch slots neither queued nor in flight.
  int64_t FreeSlotsLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const SamplerOptions options_;
  const int64_t capacity_;
  std::vector<std::unique_ptr<SamplerWorker>> workers_;
  // Joined by Close() under close_mu_.
  std::vector<std::thread> threads_;
  absl::Mutex close_mu_;

  absl::Mutex mu_;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status fatal_ ABSL_GUARDED_BY(mu_);
  std::deque<Sample> queue_ ABSL_GUARDED_BY(mu_);
  // Samples requested from workers and not yet received.
  int64_t in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  // Samples requested or received in total (bounded by max_samples).
  int64_t claimed_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t returned_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t waiting_consumers_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_CLIENT_SAMPLER_H_
