#include "server/client/sampler.h"

#include <algorithm>
#include <cstddef>
#include <utility>

#include "absl/strings/str_cat.h"

namespace tf_reverb {
namespace {

constexpr absl::Duration kInitialBackoff = absl::Milliseconds(1);
constexpr absl::Duration kMaxBackoff = absl::Seconds(1);

bool IsRateLimiterTimeout(const absl::Status& status) { return absl::IsDeadlineExceeded(status); }

}  // namespace

bool SamplerWorker::ShouldRetry(const absl::Status& status) const {
  return absl::IsUnavailable(status) || absl::IsCancelled(status);
}

absl::Status SamplerOptions::Validate() const {
  if (max_samples != -1 && max_samples < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_samples (", max_samples, ") must be -1 or positive"));
  }
  if (max_in_flight_samples_per_worker < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_in_flight_samples_per_worker (", max_in_flight_samples_per_worker, ") must be >= 1"));
  }
  if (num_workers != -1 && num_workers < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_workers_per_iterator (", num_workers, ") must be -1 or positive"));
  }
  if (max_samples_per_stream != -1 && max_samples_per_stream < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_samples_per_stream (", max_samples_per_stream, ") must be -1 or positive"));
  }
  if (rate_limiter_timeout < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("rate_limiter_timeout must be >= 0 (or infinite)");
  }
  return absl::OkStatus();
}

int64_t SamplerOptions::EffectiveNumWorkers() const {
  int64_t workers = num_workers == -1 ? 1 : num_workers;
  if (max_samples > 0) {
    workers =
        std::min(workers, std::max<int64_t>(1, max_samples / max_in_flight_samples_per_worker));
  }
  return std::max<int64_t>(1, workers);
}

absl::StatusOr<std::unique_ptr<Sampler>> Sampler::Create(WorkerFactory factory,
                                                         SamplerOptions options) {
  if (absl::Status s = options.Validate(); !s.ok()) return s;
  std::vector<std::unique_ptr<SamplerWorker>> workers;
  for (int64_t i = 0; i < options.EffectiveNumWorkers(); ++i) {
    workers.push_back(factory());
    if (workers.back() == nullptr) return absl::InternalError("No sampler worker made.");
  }
  return std::unique_ptr<Sampler>(new Sampler(std::move(workers), options));
}

std::unique_ptr<Sampler> Sampler::Failed(absl::Status status) {
  std::unique_ptr<Sampler> sampler(new Sampler({}, SamplerOptions()));
  absl::MutexLock lock(&sampler->mu_);
  sampler->fatal_ = status.ok() ? absl::InternalError("Failed(OK)") : std::move(status);
  return sampler;
}

Sampler::Sampler(std::vector<std::unique_ptr<SamplerWorker>> workers, SamplerOptions options)
    : options_(options),
      capacity_(options.max_in_flight_samples_per_worker * static_cast<int64_t>(workers.size())),
      workers_(std::move(workers)) {
  for (auto& worker : workers_) {
    threads_.emplace_back([this, w = worker.get()] { RunWorker(w); });
  }
}

Sampler::~Sampler() { Close(); }

void Sampler::Close() {
  // Concurrent closers (e.g. a TF cancellation callback and an iterator's
  // destructor) take turns; the later ones find nothing left to join.
  absl::MutexLock close_lock(&close_mu_);
  {
    absl::MutexLock lock(&mu_);
    closed_ = true;
  }
  for (auto& worker : workers_) worker->Cancel();
  for (auto& thread : threads_) {
    if (thread.joinable()) thread.join();
  }
}

absl::StatusOr<Sample> Sampler::Next(absl::Duration timeout) {
  std::vector<Sample> one;
  if (absl::Status s = NextBatch(1, &one, timeout); !s.ok()) return s;
  return std::move(one.front());
}

absl::Status Sampler::NextBatch(int64_t max, std::vector<Sample>* out, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  if (options_.max_samples > 0 && returned_ >= options_.max_samples) {
    return absl::OutOfRangeError("`max_samples` already returned.");
  }
  auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return closed_ || !queue_.empty() || !fatal_.ok();
  };
  if (!ready()) {
    ++waiting_consumers_;
    // Wakes workers waiting for a consumer after a rate-limiter timeout.
    const bool arrived = mu_.AwaitWithTimeout(absl::Condition(&ready), timeout);
    --waiting_consumers_;
    if (!arrived) {
      return absl::DeadlineExceededError(absl::StrCat(
          "Deadline exceeded: no sample arrived within ", absl::FormatDuration(timeout), "."));
    }
  }
  if (closed_) return absl::CancelledError("The sampler was closed.");
  if (queue_.empty()) return fatal_;
  int64_t n = std::min(std::max<int64_t>(max, 1), static_cast<int64_t>(queue_.size()));
  if (options_.max_samples > 0) n = std::min(n, options_.max_samples - returned_);
  out->reserve(out->size() + static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    out->push_back(std::move(queue_.front()));
    queue_.pop_front();
  }
  returned_ += n;
  return absl::OkStatus();
}

int64_t Sampler::NextRequestLocked() const {
  if (options_.max_samples <= 0) return options_.max_in_flight_samples_per_worker;
  return std::min(options_.max_in_flight_samples_per_worker, options_.max_samples - claimed_);
}

int64_t Sampler::FreeSlotsLocked() const {
  return capacity_ - static_cast<int64_t>(queue_.size()) - in_flight_;
}

void Sampler::RunWorker(SamplerWorker* worker) {
  absl::Duration backoff = kInitialBackoff;
  while (true) {
    int64_t wanted = 0;
    {
      absl::MutexLock lock(&mu_);
      auto can_claim = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        if (closed_ || !fatal_.ok()) return true;
        const int64_t unit = NextRequestLocked();
        return unit <= 0 || FreeSlotsLocked() >= unit;
      };
      mu_.Await(absl::Condition(&can_claim));
      if (closed_ || !fatal_.ok()) return;
      wanted = NextRequestLocked();
      if (wanted <= 0) return;  // max_samples are all claimed
      claimed_ += wanted;
      in_flight_ += wanted;
    }

    int64_t received = 0;
    // Whole requests only, as the first claim: the table hands samples out
    // in steps of max_in_flight_samples_per_worker (programs read those
    // counts), and a claim per freed slot would send a request per sample.
    auto claim_more = [&](int64_t limit) -> int64_t {
      absl::MutexLock lock(&mu_);
      if (closed_ || !fatal_.ok()) return 0;
      // The stream's last request may be the rest of its allowance.
      const int64_t more = std::min(limit, NextRequestLocked());
      if (more <= 0 || FreeSlotsLocked() < more) return 0;
      claimed_ += more;
      in_flight_ += more;
      wanted += more;
      return more;
    };
    absl::Status status = worker->StreamSamples(
        wanted, options_.rate_limiter_timeout,
        [&](std::vector<Sample> samples) {
          absl::MutexLock lock(&mu_);
          // After an error, nothing more is queued: a consumer told of the
          // error (the queue was empty) is never handed a sample after it.
          if (!fatal_.ok()) return;
          for (Sample& sample : samples) {
            if (received == wanted) return;  // more than asked for: dropped
            queue_.push_back(std::move(sample));
            --in_flight_;
            ++received;
          }
        },
        claim_more);

    absl::MutexLock lock(&mu_);
    in_flight_ -= wanted - received;
    claimed_ -= wanted - received;
    if (status.ok()) {
      backoff = kInitialBackoff;
      continue;
    }
    if (closed_) return;
    if (IsRateLimiterTimeout(status)) {
      if (waiting_consumers_ > 0 && received == 0) {
        fatal_ = status;
        return;
      }
      // Nobody waited for this sample: try again once somebody does.
      auto consumer_waits = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return closed_ || waiting_consumers_ > 0;
      };
      mu_.Await(absl::Condition(&consumer_waits));
      continue;
    }
    if (worker->ShouldRetry(status)) {
      if (received > 0) backoff = kInitialBackoff;
      const absl::Duration sleep = backoff;
      backoff = std::min(kMaxBackoff, backoff * 2);
      mu_.AwaitWithTimeout(absl::Condition(&closed_), sleep);
      if (closed_) return;
      continue;
    }
    if (fatal_.ok()) fatal_ = status;
    return;
  }
}

}  // namespace tf_reverb
