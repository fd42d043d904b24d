// RateLimiter: decides when a table may insert or sample, from the counters
// of inserts, samples and deletes (docs/concepts/rate-limiters.md).
//
//   size = inserts - deletes, cursor = inserts * samples_per_insert - samples
//   CanSample(n): size >= min_size_to_sample && cursor - n >= min_diff
//   CanInsert(n): inserts + n - deletes <= min_size_to_sample
//                 || (inserts + n) * samples_per_insert - samples <= max_diff
//
// Contract:
//  * Thread-safety: none; the owning Table calls it under its mutex and does
//    the blocking/waking itself.
//  * Ownership: owned by exactly one Table.
//  * Errors: Create() returns INVALID_ARGUMENT for samples_per_insert <= 0 (or
//    NaN), min_size_to_sample < 1, or min_diff > max_diff. CanSample/CanInsert
//    with n < 1 return false (never abort).
#ifndef TF_REVERB_SERVER_RATE_LIMITER_H_
#define TF_REVERB_SERVER_RATE_LIMITER_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "checkpoint.pb.h"
#include "schema.pb.h"

namespace tf_reverb {

class RateLimiter {
 public:
  static absl::StatusOr<RateLimiter> Create(double samples_per_insert, int64_t min_size_to_sample,
                                            double min_diff, double max_diff);

  bool CanSample(int64_t num_samples) const;
  bool CanInsert(int64_t num_inserts) const;

  // Counter updates; the caller checked CanInsert/CanSample first.
  void RecordInsert() { ++inserts_; }
  void RecordSample() { ++samples_; }
  void RecordDelete() { ++deletes_; }
  // An inserted item that can no longer be sampled (too stale; table.h):
  // its insert leaves the cursor (inserts * samples_per_insert - samples),
  // so inserts and samples do not wait for samples it will never get. The
  // insert and sample counts reported stay as they are.
  void RecordRetire() { ++retired_; }
  // Zeroes the counters; parameters are kept.
  void Reset();
  // Takes the counters of `other`; parameters are kept.
  void RestoreCounters(const RateLimiter& other) {
    inserts_ = other.inserts_;
    samples_ = other.samples_;
    deletes_ = other.deletes_;
    retired_ = other.retired_;
  }

  // Parameters plus insert_stats/sample_stats.completed (= counters).
  deepmind::reverb::RateLimiterInfo Info() const;
  // Parameters and counters, for checkpoints.
  deepmind::reverb::RateLimiterCheckpoint ToCheckpoint() const;
  static absl::StatusOr<RateLimiter> FromCheckpoint(
      const deepmind::reverb::RateLimiterCheckpoint& checkpoint);

  // "RateLimiter(samples_per_insert=1, min_diff_=-1.79769e+308,
  // max_diff=1.79769e+308, min_size_to_sample=1)" (Reverb's format).
  std::string DebugString() const;

  double samples_per_insert() const { return samples_per_insert_; }
  int64_t min_size_to_sample() const { return min_size_to_sample_; }
  double min_diff() const { return min_diff_; }
  double max_diff() const { return max_diff_; }
  int64_t inserts() const { return inserts_; }
  int64_t samples() const { return samples_; }
  int64_t deletes() const { return deletes_; }

 private:
  RateLimiter(double samples_per_insert, int64_t min_size_to_sample, double min_diff,
              double max_diff)
      : samples_per_insert_(samples_per_insert),
        min_size_to_sample_(min_size_to_sample),
        min_diff_(min_diff),
        max_diff_(max_diff) {}

  double samples_per_insert_;
  int64_t min_size_to_sample_;
  double min_diff_;
  double max_diff_;
  int64_t inserts_ = 0;
  int64_t samples_ = 0;
  int64_t deletes_ = 0;
  int64_t retired_ = 0;
};

}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_RATE_LIMITER_H_
