#include "server/selectors/heap.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <random>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "server/selectors/selector.h"

namespace tf_reverb {
namespace {

Key Top(HeapSelector& selector) {
  auto sample = selector.Sample();
  EXPECT_TRUE(sample.ok()) << sample.status();
  if (!sample.ok()) return ~Key{0};
  EXPECT_EQ(sample->probability, 1.0);
  return sample->key;
}

TEST(HeapSelectorTest, SampleOnEmptyIsFailedPrecondition) {
  HeapSelector selector(true);
  EXPECT_EQ(selector.Sample().status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(HeapSelectorTest, DuplicateAndMissingKeys) {
  HeapSelector selector(true);
  ASSERT_TRUE(selector.Insert(1, 1.0).ok());
  EXPECT_EQ(selector.Insert(1, 0.0).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(selector.Insert(1, 0.0).message(), "Key 1 already inserted.");
  EXPECT_EQ(selector.Update(2, 0.0).message(), "Key 2 not found.");
  EXPECT_EQ(selector.Delete(2).message(), "Key 2 not found.");
  // The failed Insert(1, 0.0) did not change the priority of key 1.
  ASSERT_TRUE(selector.Insert(3, 0.5).ok());
  EXPECT_EQ(Top(selector), 3u);
}

TEST(HeapSelectorTest, MinHeapSamplesSmallest) {
  HeapSelector selector(true);
  ASSERT_TRUE(selector.Insert(1, 3.0).ok());
  ASSERT_TRUE(selector.Insert(2, 1.0).ok());
  ASSERT_TRUE(selector.Insert(3, 2.0).ok());
  EXPECT_EQ(Top(selector), 2u);
  // Sampling does not change order.
  EXPECT_EQ(Top(selector), 2u);
  ASSERT_TRUE(selector.Delete(2).ok());
  EXPECT_EQ(Top(selector), 3u);
}

TEST(HeapSelectorTest, MaxHeapSamplesLargest) {
  HeapSelector selector(false);
  ASSERT_TRUE(selector.Insert(1, 3.0).ok());
  ASSERT_TRUE(selector.Insert(2, 1.0).ok());
  ASSERT_TRUE(selector.Insert(3, 2.0).ok());
  EXPECT_EQ(Top(selector), 1u);
  ASSERT_TRUE(selector.Delete(1).ok());
  EXPECT_EQ(Top(selector), 3u);
}

TEST(HeapSelectorTest, TiesGoToLeastRecentlyInsertedOrUpdated) {
  for (bool min_heap : {true, false}) {
    HeapSelector selector(min_heap);
    ASSERT_TRUE(selector.Insert(10, 1.0).ok());
    ASSERT_TRUE(selector.Insert(11, 1.0).ok());
    ASSERT_TRUE(selector.Insert(12, 1.0).ok());
    EXPECT_EQ(Top(selector), 10u);
    // Updating to the same priority moves the key behind its equals.
    ASSERT_TRUE(selector.Update(10, 1.0).ok());
    EXPECT_EQ(Top(selector), 11u);
    ASSERT_TRUE(selector.Update(11, 1.0).ok());
    EXPECT_EQ(Top(selector), 12u);
    ASSERT_TRUE(selector.Update(12, 1.0).ok());
    EXPECT_EQ(Top(selector), 10u);
  }
}

TEST(HeapSelectorTest, UpdateReorders) {
  HeapSelector selector(true);
  for (Key k = 0; k < 5; ++k) ASSERT_TRUE(selector.Insert(k, 10.0 + k).ok());
  EXPECT_EQ(Top(selector), 0u);
  ASSERT_TRUE(selector.Update(4, 1.0).ok());  // Moves up to the top.
  EXPECT_EQ(Top(selector), 4u);
  ASSERT_TRUE(selector.Update(4, 100.0).ok());  // Moves down to the bottom.
  EXPECT_EQ(Top(selector), 0u);
  ASSERT_TRUE(selector.Update(0, 50.0).ok());
  EXPECT_EQ(Top(selector), 1u);
  // Drain: ascending priority order 1,2,3,0,4.
  std::vector<Key> order;
  while (selector.size() > 0) {
    order.push_back(Top(selector));
    ASSERT_TRUE(selector.Delete(order.back()).ok());
  }
  EXPECT_EQ(order, (std::vector<Key>{1, 2, 3, 0, 4}));
}

TEST(HeapSelectorTest, NanRanksLastButIsAccepted) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (bool min_heap : {true, false}) {
    HeapSelector selector(min_heap);
    ASSERT_TRUE(selector.Insert(1, nan).ok());
    EXPECT_EQ(Top(selector), 1u);
    ASSERT_TRUE(selector.Insert(2, 5.0).ok());
    EXPECT_EQ(Top(selector), 2u);
    ASSERT_TRUE(selector.Delete(2).ok());
    EXPECT_EQ(Top(selector), 1u);
  }
}

// Random operations against a brute-force model of the ordering.
TEST(HeapSelectorTest, RandomOperationsMatchModel) {
  for (bool min_heap : {true, false}) {
    HeapSelector selector(min_heap);
    const double sign = min_heap ? 1.0 : -1.0;
    std::map<Key, std::pair<double, uint64_t>> model;  // key -> (p, update#)
    uint64_t counter = 0;
    std::mt19937_64 rng(42);
    // Few distinct priorities so ties are frequent.
    std::uniform_int_distribution<int> priority(0, 5);
    std::uniform_int_distribution<Key> key_dist(0, 300);
    for (int op = 0; op < 20000; ++op) {
      const Key key = key_dist(rng);
      const double p = priority(rng);
      const bool present = model.count(key) > 0;
      switch (rng() % 3) {
        case 0:
          EXPECT_EQ(selector.Insert(key, p).ok(), !present);
          if (!present) model[key] = {p, counter++};
          break;
        case 1:
          EXPECT_EQ(selector.Update(key, p).ok(), present);
          if (present) model[key] = {p, counter++};
          break;
        default:
          EXPECT_EQ(selector.Delete(key).ok(), present);
          model.erase(key);
          break;
      }
      ASSERT_EQ(selector.size(), static_cast<int64_t>(model.size()));
      if (model.empty()) continue;
      Key best = 0;
      std::tuple<double, uint64_t> best_rank(std::numeric_limits<double>::infinity(), 0);
      bool first = true;
      for (const auto& [k, v] : model) {
        std::tuple<double, uint64_t> rank(sign * v.first, v.second);
        if (first || rank < best_rank) {
          best = k;
          best_rank = rank;
          first = false;
        }
      }
      ASSERT_EQ(Top(selector), best) << "op " << op;
    }
  }
}

TEST(HeapSelectorTest, ClearAndReinsert) {
  HeapSelector selector(true);
  for (Key k = 0; k < 10; ++k) ASSERT_TRUE(selector.Insert(k, k).ok());
  selector.Clear();
  EXPECT_EQ(selector.size(), 0);
  EXPECT_FALSE(selector.Sample().ok());
  ASSERT_TRUE(selector.Insert(3, 1.0).ok());
  EXPECT_EQ(Top(selector), 3u);
}

TEST(HeapSelectorTest, OptionsAndDebugString) {
  HeapSelector min_heap(true);
  HeapSelector max_heap(false);
  EXPECT_TRUE(min_heap.options().has_heap());
  EXPECT_TRUE(min_heap.options().heap().min_heap());
  EXPECT_TRUE(min_heap.options().is_deterministic());
  EXPECT_TRUE(max_heap.options().has_heap());
  EXPECT_FALSE(max_heap.options().heap().min_heap());
  EXPECT_TRUE(max_heap.options().is_deterministic());
  EXPECT_EQ(min_heap.DebugString(), "HeapSelector(sign=1)");
  EXPECT_EQ(max_heap.DebugString(), "HeapSelector(sign=-1)");
}

}  // namespace
}  // namespace tf_reverb
