#include "server/metrics/atomic_histogram.h"

#include <cmath>
#include <cstdint>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace tf_reverb {
namespace {

TEST(AtomicHistogramTest, BucketsAreCumulativeWithUpperBoundsInclusive) {
  AtomicHistogram histogram({1, 2, 5});
  for (double value : {0.5, 1.0, 1.5, 4.0, 9.0, std::nan("")}) histogram.Observe(value);
  const AtomicHistogram::Snapshot snapshot = histogram.Read();
  EXPECT_EQ(snapshot.upper_bounds, (std::vector<double>{1, 2, 5}));
  EXPECT_EQ(snapshot.cumulative, (std::vector<uint64_t>{2, 3, 4, 6}));
  EXPECT_EQ(snapshot.count, 6u);
}

TEST(AtomicHistogramTest, ConcurrentObservationsAreAllCounted) {
  AtomicHistogram histogram(AtomicHistogram::SecondsBuckets());
  constexpr int kThreads = 4, kEach = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kEach; ++i) histogram.Observe(0.25);
    });
  }
  for (auto& thread : threads) thread.join();
  const AtomicHistogram::Snapshot snapshot = histogram.Read();
  EXPECT_EQ(snapshot.count, uint64_t{kThreads * kEach});
  EXPECT_DOUBLE_EQ(snapshot.sum, 0.25 * kThreads * kEach);
}

}  // namespace
}  // namespace tf_reverb
