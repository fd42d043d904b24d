#include "server/service/work_queue.h"

#include <atomic>
#include <vector>

#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tf_reverb {
namespace {

using ::testing::ElementsAre;

TEST(WorkQueueTest, RunsEveryClosureOnItsThreads) {
  WorkQueue queue(3);
  EXPECT_EQ(queue.num_threads(), 3);
  constexpr int kClosures = 1000;
  absl::BlockingCounter done(kClosures);
  std::atomic<int> ran{0};
  for (int i = 0; i < kClosures; ++i) {
    queue.Schedule([&] {
      ++ran;
      done.DecrementCount();
    });
  }
  done.Wait();
  EXPECT_EQ(ran.load(), kClosures);
}

TEST(WorkQueueTest, DelayedClosuresRunAfterTheirTimeInTimeOrder) {
  WorkQueue queue(1);
  absl::Mutex mu;
  std::vector<int> order;
  absl::Notification last;
  // The worker waits behind a gate until everything is queued, so the order
  // does not depend on how fast this thread schedules.
  absl::Notification gate;
  queue.Schedule([&] { gate.WaitForNotification(); });
  const absl::Time start = absl::Now();
  absl::Time ran_at;
  queue.ScheduleAt(start + absl::Milliseconds(30), [&] {
    absl::MutexLock lock(&mu);
    order.push_back(2);
    ran_at = absl::Now();
    last.Notify();
  });
  queue.ScheduleAt(start + absl::Milliseconds(10), [&] {
    absl::MutexLock lock(&mu);
    order.push_back(1);
  });
  queue.Schedule([&] {
    absl::MutexLock lock(&mu);
    order.push_back(0);
  });
  gate.Notify();
  last.WaitForNotification();
  absl::MutexLock lock(&mu);
  EXPECT_THAT(order, ElementsAre(0, 1, 2));
  EXPECT_GE(ran_at, start + absl::Milliseconds(30));
}

TEST(WorkQueueTest, AnIdleWorkerWakesForAClosureDueBeforeEverythingElse) {
  WorkQueue queue(1);
  absl::Notification first;
  queue.Schedule([&] { first.Notify(); });
  first.WaitForNotification();  // the worker now waits for more work
  queue.ScheduleAt(absl::Now() + absl::Hours(1), [] {});
  absl::Notification soon;
  queue.ScheduleAt(absl::Now() + absl::Milliseconds(1), [&] { soon.Notify(); });
  soon.WaitForNotification();  // a worker still sleeping until the hour is up hangs here
}

TEST(WorkQueueTest, DestructionDropsWhatHasNotStarted) {
  std::atomic<int> ran{0};
  {
    WorkQueue queue(2);
    queue.ScheduleAt(absl::Now() + absl::Hours(1), [&] { ++ran; });
  }
  EXPECT_EQ(ran.load(), 0);
}

}  // namespace
}  // namespace tf_reverb
