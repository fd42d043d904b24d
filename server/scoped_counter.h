// ScopedCounter: increments an atomic counter for the lifetime of a scope
// (e.g. "handlers inside a table call", which Server::Stop waits on).
//
// Contract: the counter (may be null: nothing is counted) must outlive the
// ScopedCounter; thread-safe as the atomic is.
#ifndef TF_REVERB_SERVER_SCOPED_COUNTER_H_
#define TF_REVERB_SERVER_SCOPED_COUNTER_H_

#include <atomic>

namespace tf_reverb {

class ScopedCounter {
 public:
  explicit ScopedCounter(std::atomic<int>* counter) : counter_(counter) {
    if (counter_ != nullptr) ++*counter_;
  }
  ~ScopedCounter() {
    if (counter_ != nullptr) --*counter_;
  }
  ScopedCounter(const ScopedCounter&) = delete;
  ScopedCounter& operator=(const ScopedCounter&) = delete;

 private:
  std::atomic<int>* counter_;
};

}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_SCOPED_COUNTER_H_
