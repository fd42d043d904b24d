#include "server/service/work_queue.h"

#include <utility>

#include "absl/time/clock.h"

namespace tf_reverb {

WorkQueue::WorkQueue(int num_threads) {
  threads_.reserve(num_threads);
  for (int i = 0; i < num_threads; ++i) threads_.emplace_back([this] { Run(); });
}

WorkQueue::~WorkQueue() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (std::thread& thread : threads_) thread.join();
}

void WorkQueue::Schedule(std::function<void()> fn) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return;
  ready_.push_back(std::move(fn));
}

void WorkQueue::ScheduleAt(absl::Time when, std::function<void()> fn) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return;
  delayed_.push(Delayed{when, next_order_++, std::move(fn)});
}

void WorkQueue::Run() {
  while (true) {
    std::function<void()> fn;
    {
      absl::MutexLock lock(&mu_);
      while (true) {
        if (stopping_) return;
        const absl::Time now = absl::Now();
        while (!delayed_.empty() && delayed_.top().when <= now) {
          // priority_queue::top is const: the closure is copied out.
          ready_.push_back(delayed_.top().fn);
          delayed_.pop();
        }
        if (!ready_.empty()) break;
        // Sleeps until the earliest delayed closure is due, or until
        // something is ready or due earlier than that.
        const absl::Time deadline = delayed_.empty() ? absl::InfiniteFuture() : delayed_.top().when;
        auto wake = [this, deadline]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return stopping_ || !ready_.empty() ||
                 (!delayed_.empty() && delayed_.top().when < deadline);
        };
        mu_.AwaitWithDeadline(absl::Condition(&wake), deadline);
      }
      fn = std::move(ready_.front());
      ready_.pop_front();
    }
    fn();
  }
}

}  // namespace tf_reverb
