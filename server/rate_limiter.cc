#include "server/rate_limiter.h"

#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tf_reverb {
namespace {

// a + b - c without signed overflow; saturates (only compared against
// min_size_to_sample, so saturation cannot change the outcome for sane
// counters and keeps absurd n from being undefined behaviour).
int64_t SaturatingSizeAfter(int64_t inserts, int64_t n, int64_t deletes) {
  int64_t sum;
  if (__builtin_add_overflow(inserts, n, &sum)) return INT64_MAX;
  int64_t size;
  if (__builtin_sub_overflow(sum, deletes, &size)) {
    return deletes > 0 ? INT64_MIN : INT64_MAX;
  }
  return size;
}

}  // namespace

absl::StatusOr<RateLimiter> RateLimiter::Create(double samples_per_insert,
                                                int64_t min_size_to_sample, double min_diff,
                                                double max_diff) {
  if (std::isnan(samples_per_insert) || !(samples_per_insert > 0)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("samples_per_insert must be > 0, got %g", samples_per_insert));
  }
  if (min_size_to_sample < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("min_size_to_sample must be >= 1, got %d", min_size_to_sample));
  }
  if (std::isnan(min_diff) || std::isnan(max_diff)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("min_diff and max_diff must not be NaN, got "
                        "min_diff=%g, max_diff=%g",
                        min_diff, max_diff));
  }
  if (min_diff > max_diff) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "min_diff must be <= max_diff, got min_diff=%g > max_diff=%g", min_diff, max_diff));
  }
  return RateLimiter(samples_per_insert, min_size_to_sample, min_diff, max_diff);
}

bool RateLimiter::CanSample(int64_t num_samples) const {
  if (num_samples < 1) return false;
  if (inserts_ - deletes_ < min_size_to_sample_) return false;
  const double cursor_after = static_cast<double>(inserts_ - retired_) * samples_per_insert_ -
                              (static_cast<double>(samples_) + static_cast<double>(num_samples));
  return cursor_after >= min_diff_;
}

bool RateLimiter::CanInsert(int64_t num_inserts) const {
  if (num_inserts < 1) return false;
  if (SaturatingSizeAfter(inserts_, num_inserts, deletes_) <= min_size_to_sample_) {
    return true;
  }
  const double cursor_after =
      (static_cast<double>(inserts_ - retired_) + static_cast<double>(num_inserts)) *
          samples_per_insert_ -
      static_cast<double>(samples_);
  return cursor_after <= max_diff_;
}

void RateLimiter::Reset() {
  inserts_ = 0;
  samples_ = 0;
  deletes_ = 0;
  retired_ = 0;
}

deepmind::reverb::RateLimiterInfo RateLimiter::Info() const {
  deepmind::reverb::RateLimiterInfo info;
  info.set_samples_per_insert(samples_per_insert_);
  info.set_min_diff(min_diff_);
  info.set_max_diff(max_diff_);
  info.set_min_size_to_sample(min_size_to_sample_);
  info.mutable_insert_stats()->set_completed(inserts_);
  info.mutable_sample_stats()->set_completed(samples_);
  return info;
}

deepmind::reverb::RateLimiterCheckpoint RateLimiter::ToCheckpoint() const {
  deepmind::reverb::RateLimiterCheckpoint checkpoint;
  checkpoint.set_samples_per_insert(samples_per_insert_);
  checkpoint.set_min_diff(min_diff_);
  checkpoint.set_max_diff(max_diff_);
  checkpoint.set_min_size_to_sample(min_size_to_sample_);
  checkpoint.set_insert_count(inserts_);
  checkpoint.set_sample_count(samples_);
  checkpoint.set_delete_count(deletes_);
  checkpoint.set_retired_count(retired_);
  return checkpoint;
}

absl::StatusOr<RateLimiter> RateLimiter::FromCheckpoint(
    const deepmind::reverb::RateLimiterCheckpoint& checkpoint) {
  absl::StatusOr<RateLimiter> limiter =
      Create(checkpoint.samples_per_insert(), checkpoint.min_size_to_sample(),
             checkpoint.min_diff(), checkpoint.max_diff());
  if (!limiter.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("Invalid rate limiter checkpoint: ", limiter.status().message()));
  }
  if (checkpoint.insert_count() < 0 || checkpoint.sample_count() < 0 ||
      checkpoint.delete_count() < 0 || checkpoint.delete_count() > checkpoint.insert_count() ||
      checkpoint.retired_count() < 0 || checkpoint.retired_count() > checkpoint.insert_count()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("Invalid rate limiter checkpoint: counters must be >= 0 with "
                        "delete_count and retired_count <= insert_count, got insert_count=%d, "
                        "sample_count=%d, delete_count=%d, retired_count=%d",
                        checkpoint.insert_count(), checkpoint.sample_count(),
                        checkpoint.delete_count(), checkpoint.retired_count()));
  }
  limiter->inserts_ = checkpoint.insert_count();
  limiter->samples_ = checkpoint.sample_count();
  limiter->deletes_ = checkpoint.delete_count();
  limiter->retired_ = checkpoint.retired_count();
  return limiter;
}

std::string RateLimiter::DebugString() const {
  return absl::StrFormat(
      "RateLimiter(samples_per_insert=%g, min_diff_=%g, max_diff=%g, "
      "min_size_to_sample=%d)",
      samples_per_insert_, min_diff_, max_diff_, min_size_to_sample_);
}

}  // namespace tf_reverb
