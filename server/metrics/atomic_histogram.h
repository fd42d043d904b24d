// AtomicHistogram: a fixed-bucket histogram that observers update with
// relaxed atomics and a scraper reads without stopping them.
//
// Contract:
//  * Thread-safety: Observe and Read may be called from any threads at
//    once; neither takes a lock. A Read racing Observes may see a value in
//    its bucket but not yet in the sum (or the reverse); counts are always
//    consistent with each other (the count is the sum of the buckets read).
//  * Ownership: plain value type, not copyable (atomics).
//  * Errors: none; NaN observations land in the +Inf bucket.
#ifndef TF_REVERB_SERVER_METRICS_ATOMIC_HISTOGRAM_H_
#define TF_REVERB_SERVER_METRICS_ATOMIC_HISTOGRAM_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <utility>
#include <vector>

namespace tf_reverb {

class AtomicHistogram {
 public:
  // `upper_bounds` must be ascending; +Inf is implicit.
  explicit AtomicHistogram(std::vector<double> upper_bounds)
      : bounds_(std::move(upper_bounds)), counts_(new std::atomic<uint64_t>[bounds_.size() + 1]) {
    for (size_t i = 0; i <= bounds_.size(); ++i) counts_[i].store(0, std::memory_order_relaxed);
  }
  AtomicHistogram(const AtomicHistogram&) = delete;
  AtomicHistogram& operator=(const AtomicHistogram&) = delete;

  void Observe(double value) {
    const size_t bucket = std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
    counts_[value == value ? bucket : bounds_.size()].fetch_add(1, std::memory_order_relaxed);
    double sum = sum_.load(std::memory_order_relaxed);
    while (!sum_.compare_exchange_weak(sum, sum + value, std::memory_order_relaxed)) {
    }
  }

  struct Snapshot {
    std::vector<double> upper_bounds;  // without +Inf
    std::vector<uint64_t> cumulative;  // one more than upper_bounds (+Inf last)
    uint64_t count = 0;
    double sum = 0;
  };
  Snapshot Read() const {
    Snapshot snapshot;
    snapshot.upper_bounds = bounds_;
    snapshot.cumulative.reserve(bounds_.size() + 1);
    uint64_t total = 0;
    for (size_t i = 0; i <= bounds_.size(); ++i) {
      total += counts_[i].load(std::memory_order_relaxed);
      snapshot.cumulative.push_back(total);
    }
    snapshot.count = total;
    snapshot.sum = sum_.load(std::memory_order_relaxed);
    return snapshot;
  }

  // Buckets for waits and call durations, 100 us to 5 min.
  static std::vector<double> SecondsBuckets() {
    return {0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300};
  }

 private:
  const std::vector<double> bounds_;
  const std::unique_ptr<std::atomic<uint64_t>[]> counts_;
  std::atomic<double> sum_{0};
};

}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_METRICS_ATOMIC_HISTOGRAM_H_
