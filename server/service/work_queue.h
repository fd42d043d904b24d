// WorkQueue: a fixed pool of threads running closures as soon as possible or
// at a given time. The gRPC service's reactors use it for the work they must
// not do on gRPC's own threads: retries after a table wake-up, rate-limiter
// timeouts, checkpoints.
//
// Contract:
//  * Thread-safety: thread-safe; closures run on the pool's threads, several
//    at once (one per thread), each exactly once unless the queue is
//    destroyed first.
//  * Ownership: owns its threads. The destructor stops accepting work, drops
//    closures not yet started (delayed ones included) and joins the threads;
//    closures must not destroy the queue they run on.
#ifndef TF_REVERB_SERVER_SERVICE_WORK_QUEUE_H_
#define TF_REVERB_SERVER_SERVICE_WORK_QUEUE_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <queue>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace tf_reverb {

class WorkQueue {
 public:
  // `num_threads` >= 1.
  explicit WorkQueue(int num_threads);
  ~WorkQueue();
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  void Schedule(std::function<void()> fn) ABSL_LOCKS_EXCLUDED(mu_);
  // Runs `fn` once `when` has passed (closures due at the same time run in
  // the order they were scheduled).
  void ScheduleAt(absl::Time when, std::function<void()> fn) ABSL_LOCKS_EXCLUDED(mu_);

  int num_threads() const { return static_cast<int>(threads_.size()); }

 private:
  struct Delayed {
    absl::Time when;
    uint64_t order;
    std::function<void()> fn;
    bool operator>(const Delayed& other) const {
      return when != other.when ? when > other.when : order > other.order;
    }
  };

  void Run() ABSL_LOCKS_EXCLUDED(mu_);

  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<std::function<void()>> ready_ ABSL_GUARDED_BY(mu_);
  std::priority_queue<Delayed, std::vector<Delayed>, std::greater<Delayed>> delayed_
      ABSL_GUARDED_BY(mu_);
  uint64_t next_order_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::thread> threads_;
};

}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_SERVICE_WORK_QUEUE_H_
