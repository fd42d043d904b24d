#include "server/selectors/prioritized.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <random>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/selectors/selector.h"

namespace tf_reverb {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Samples `n` times; returns key -> count and checks that every reported
// probability equals `expected_probability[key]` when that map is given.
std::map<Key, int> SampleCounts(PrioritizedSelector& selector, int n,
                                const std::map<Key, double>* expected = nullptr) {
  std::map<Key, int> counts;
  for (int i = 0; i < n; ++i) {
    auto sample = selector.Sample();
    EXPECT_TRUE(sample.ok()) << sample.status();
    if (!sample.ok()) break;
    ++counts[sample->key];
    if (expected != nullptr) {
      auto it = expected->find(sample->key);
      EXPECT_NE(it, expected->end()) << "unexpected key " << sample->key;
      if (it != expected->end()) {
        EXPECT_NEAR(sample->probability, it->second, 1e-12 + 1e-9 * it->second);
      }
    }
  }
  return counts;
}

// Pearson chi-square of `counts` against `probabilities` over `n` samples.
double ChiSquare(const std::map<Key, int>& counts, const std::map<Key, double>& probabilities,
                 int n) {
  double chi2 = 0;
  for (const auto& [key, p] : probabilities) {
    const double expected = p * n;
    auto it = counts.find(key);
    const double observed = it == counts.end() ? 0 : it->second;
    chi2 += (observed - expected) * (observed - expected) / expected;
  }
  return chi2;
}

TEST(PrioritizedSelectorTest, SpecExample) {
  PrioritizedSelector selector(0.8);
  ASSERT_TRUE(selector.Insert(1, 2.0).ok());
  ASSERT_TRUE(selector.Insert(2, 0.5).ok());
  std::map<Key, double> probabilities;
  for (int i = 0; i < 1000 && probabilities.size() < 2; ++i) {
    auto sample = selector.Sample();
    ASSERT_TRUE(sample.ok());
    probabilities[sample->key] = sample->probability;
  }
  ASSERT_EQ(probabilities.size(), 2u);
  EXPECT_NEAR(probabilities[1], 0.75195, 1e-5);
  EXPECT_NEAR(probabilities[2], 0.24805, 1e-5);
  EXPECT_NEAR(selector.total_weight(), std::pow(2.0, 0.8) + std::pow(0.5, 0.8), 1e-12);
}

TEST(PrioritizedSelectorTest, SamplingFrequenciesMatchProbabilities) {
  PrioritizedSelector selector(0.7);
  std::map<Key, double> weights;
  // Some churn first so the tree has moved nodes around.
  for (Key k = 0; k < 40; ++k) ASSERT_TRUE(selector.Insert(k, 1.0 + k).ok());
  for (Key k = 0; k < 40; k += 3) ASSERT_TRUE(selector.Delete(k).ok());
  for (Key k = 1; k < 40; k += 3) ASSERT_TRUE(selector.Update(k, 0.25 * k).ok());
  double total = 0;
  for (Key k = 0; k < 40; ++k) {
    if (k % 3 == 0) continue;
    const double p = (k % 3 == 1) ? 0.25 * k : 1.0 + k;
    weights[k] = std::pow(p, 0.7);
    total += weights[k];
  }
  std::map<Key, double> probabilities;
  for (const auto& [k, w] : weights) probabilities[k] = w / total;
  constexpr int kSamples = 400000;
  auto counts = SampleCounts(selector, kSamples, &probabilities);
  // 26 keys -> 25 degrees of freedom; P(chi2 > 80) is about 1e-7.
  EXPECT_LT(ChiSquare(counts, probabilities, kSamples), 80.0);
}

TEST(PrioritizedSelectorTest, ZeroPriorityIsNeverSampled) {
  for (double exponent : {0.0, 0.5, 1.0, -1.0}) {
    PrioritizedSelector selector(exponent);
    ASSERT_TRUE(selector.Insert(1, 0.0).ok());
    ASSERT_TRUE(selector.Insert(2, 3.0).ok());
    ASSERT_TRUE(selector.Insert(3, 0.0).ok());
    for (int i = 0; i < 2000; ++i) {
      auto sample = selector.Sample();
      ASSERT_TRUE(sample.ok());
      EXPECT_EQ(sample->key, 2u) << "exponent " << exponent;
      EXPECT_DOUBLE_EQ(sample->probability, 1.0);
    }
  }
}

TEST(PrioritizedSelectorTest, AllZeroPrioritiesSampleUniformly) {
  PrioritizedSelector selector(0.0);
  for (Key k = 0; k < 4; ++k) ASSERT_TRUE(selector.Insert(k, 0.0).ok());
  EXPECT_EQ(selector.total_weight(), 0.0);
  std::map<Key, double> probabilities = {{0, .25}, {1, .25}, {2, .25}, {3, .25}};
  constexpr int kSamples = 40000;
  auto counts = SampleCounts(selector, kSamples, &probabilities);
  EXPECT_LT(ChiSquare(counts, probabilities, kSamples), 30.0);
  // A single non-zero priority takes over.
  ASSERT_TRUE(selector.Update(2, 1e-300).ok());
  for (int i = 0; i < 100; ++i) EXPECT_EQ(selector.Sample()->key, 2u);
}

TEST(PrioritizedSelectorTest, ExponentZeroIsUniformOverNonZero) {
  PrioritizedSelector selector(0.0);
  ASSERT_TRUE(selector.Insert(0, 1e-9).ok());
  ASSERT_TRUE(selector.Insert(1, 1.0).ok());
  ASSERT_TRUE(selector.Insert(2, 1e9).ok());
  ASSERT_TRUE(selector.Insert(3, 0.0).ok());
  EXPECT_EQ(selector.total_weight(), 3.0);
  std::map<Key, double> probabilities = {{0, 1. / 3}, {1, 1. / 3}, {2, 1. / 3}};
  constexpr int kSamples = 60000;
  auto counts = SampleCounts(selector, kSamples, &probabilities);
  EXPECT_EQ(counts.count(3), 0u);
  EXPECT_LT(ChiSquare(counts, probabilities, kSamples), 30.0);
}

TEST(PrioritizedSelectorTest, NegativeExponentIsAllowed) {
  PrioritizedSelector selector(-1.0);
  ASSERT_TRUE(selector.Insert(1, 1.0).ok());
  ASSERT_TRUE(selector.Insert(2, 3.0).ok());
  std::map<Key, double> probabilities = {{1, 0.75}, {2, 0.25}};
  constexpr int kSamples = 40000;
  auto counts = SampleCounts(selector, kSamples, &probabilities);
  EXPECT_LT(ChiSquare(counts, probabilities, kSamples), 25.0);
}

TEST(PrioritizedSelectorTest, NegativeAndNanRejectedWithStateUnchanged) {
  PrioritizedSelector selector(1.0);
  ASSERT_TRUE(selector.Insert(1, 2.0).ok());
  ASSERT_TRUE(selector.Insert(2, 6.0).ok());

  absl::Status status = selector.ValidatePriority(-1.0);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "Priority must not be negative.");
  status = selector.ValidatePriority(kNaN);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "Priority must not be NaN.");
  EXPECT_TRUE(selector.ValidatePriority(0.0).ok());
  EXPECT_TRUE(selector.ValidatePriority(kInf).ok());

  EXPECT_EQ(selector.Insert(3, -0.5).message(), "Priority must not be negative.");
  EXPECT_EQ(selector.Insert(3, kNaN).message(), "Priority must not be NaN.");
  EXPECT_EQ(selector.Insert(3, -kInf).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(selector.Update(1, -1e-300).message(), "Priority must not be negative.");
  EXPECT_EQ(selector.Update(1, kNaN).message(), "Priority must not be NaN.");
  // Invalid priority on a missing key: still an invalid-argument error.
  EXPECT_EQ(selector.Update(9, kNaN).code(), absl::StatusCode::kInvalidArgument);

  EXPECT_EQ(selector.size(), 2);
  EXPECT_EQ(selector.total_weight(), 8.0);
  std::map<Key, double> probabilities = {{1, 0.25}, {2, 0.75}};
  SampleCounts(selector, 1000, &probabilities);
  // Key 3 was never inserted.
  EXPECT_EQ(selector.Delete(3).message(), "Key 3 not found.");
  EXPECT_TRUE(selector.Insert(3, 0.0).ok());
}

TEST(PrioritizedSelectorTest, KeyErrorsAndEmptySample) {
  PrioritizedSelector selector(1.0);
  EXPECT_EQ(selector.Sample().status().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(selector.Insert(5, 1.0).ok());
  EXPECT_EQ(selector.Insert(5, 2.0).message(), "Key 5 already inserted.");
  EXPECT_EQ(selector.Insert(5, 2.0).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(selector.Update(6, 2.0).message(), "Key 6 not found.");
  EXPECT_EQ(selector.Delete(6).message(), "Key 6 not found.");
  EXPECT_EQ(selector.total_weight(), 1.0);
  ASSERT_TRUE(selector.Delete(5).ok());
  EXPECT_EQ(selector.size(), 0);
  EXPECT_EQ(selector.total_weight(), 0.0);
  EXPECT_EQ(selector.Sample().status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(PrioritizedSelectorTest, InfinitePrioritiesAreSampledUniformly) {
  PrioritizedSelector selector(1.0);
  ASSERT_TRUE(selector.Insert(1, 5.0).ok());
  ASSERT_TRUE(selector.Insert(2, kInf).ok());
  ASSERT_TRUE(selector.Insert(3, 1.0).ok());
  ASSERT_TRUE(selector.Insert(4, kInf).ok());
  std::map<Key, double> probabilities = {{2, 0.5}, {4, 0.5}};
  constexpr int kSamples = 20000;
  auto counts = SampleCounts(selector, kSamples, &probabilities);
  EXPECT_LT(ChiSquare(counts, probabilities, kSamples), 20.0);
  ASSERT_TRUE(selector.Update(2, 1.0).ok());
  ASSERT_TRUE(selector.Delete(4).ok());
  probabilities = {{1, 5.0 / 7}, {2, 1.0 / 7}, {3, 1.0 / 7}};
  SampleCounts(selector, 1000, &probabilities);
  // Finite weights whose sum overflows: uniform, never NaN.
  PrioritizedSelector huge(1.0);
  ASSERT_TRUE(huge.Insert(1, 1e308).ok());
  ASSERT_TRUE(huge.Insert(2, 1e308).ok());
  probabilities = {{1, 0.5}, {2, 0.5}};
  SampleCounts(huge, 1000, &probabilities);
}

TEST(PrioritizedSelectorTest, NoDriftAfterManyUpdates) {
  PrioritizedSelector selector(1.0);
  constexpr int kKeys = 1000;
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> log_priority(-30, 30);
  for (Key k = 0; k < kKeys; ++k) ASSERT_TRUE(selector.Insert(k, 1.0).ok());
  for (int i = 0; i < 100000; ++i) {
    ASSERT_TRUE(selector.Update(rng() % kKeys, std::pow(10.0, log_priority(rng))).ok());
  }
  for (Key k = 0; k < kKeys; ++k) ASSERT_TRUE(selector.Update(k, 1.0).ok());
  // Sums are recomputed from the children, so they are exact again.
  EXPECT_EQ(selector.total_weight(), static_cast<double>(kKeys));
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(selector.Sample()->probability, 1.0 / kKeys);
  }
}

// Thousands of random operations against a brute-force model.
TEST(PrioritizedSelectorTest, RandomOperationsMatchBruteForceModel) {
  for (double exponent : {0.0, 0.6, 1.0, 2.5}) {
    PrioritizedSelector selector(exponent);
    std::map<Key, double> weights;
    std::mt19937_64 rng(1234);
    std::uniform_int_distribution<Key> key_dist(0, 400);
    std::uniform_real_distribution<double> priority_dist(0.0, 10.0);
    for (int op = 0; op < 8000; ++op) {
      const Key key = key_dist(rng);
      // One priority in ten is exactly zero.
      const double p = (rng() % 10 == 0) ? 0.0 : priority_dist(rng);
      const double w = p == 0 ? 0.0 : std::pow(p, exponent);
      const bool present = weights.count(key) > 0;
      const int kind = static_cast<int>(rng() % 10);
      if (kind < 4) {
        ASSERT_EQ(selector.Insert(key, p).ok(), !present);
        if (!present) weights[key] = w;
      } else if (kind < 7) {
        ASSERT_EQ(selector.Update(key, p).ok(), present);
        if (present) weights[key] = w;
      } else {
        ASSERT_EQ(selector.Delete(key).ok(), present);
        weights.erase(key);
      }
      ASSERT_EQ(selector.size(), static_cast<int64_t>(weights.size()));
      long double total = 0;
      for (const auto& [k, v] : weights) total += v;
      ASSERT_NEAR(selector.total_weight(), static_cast<double>(total),
                  1e-9 * static_cast<double>(total) + 1e-300)
          << "op " << op;
      if (weights.empty()) continue;
      std::map<Key, double> probabilities;
      for (const auto& [k, v] : weights) {
        if (total > 0) {
          if (v > 0) probabilities[k] = v / static_cast<double>(total);
        } else {
          probabilities[k] = 1.0 / weights.size();
        }
      }
      SampleCounts(selector, 3, &probabilities);
      if (HasFatalFailure() || HasNonfatalFailure()) {
        FAIL() << "op " << op << " exponent " << exponent;
      }
    }
  }
}

TEST(PrioritizedSelectorTest, MemoryGrowsAndShrinksWithSize) {
  PrioritizedSelector selector(1.0);
  EXPECT_LE(selector.capacity(), 2 * PrioritizedSelector::kMinCapacity);
  constexpr Key kKeys = 100000;
  for (Key k = 0; k < kKeys; ++k) {
    ASSERT_TRUE(selector.Insert(k, 1.0 + (k % 7)).ok());
  }
  EXPECT_GE(selector.capacity(), kKeys);
  EXPECT_LE(selector.capacity(), 2 * kKeys);
  double expected_total = 0;
  for (Key k = 0; k < kKeys; ++k) expected_total += 1.0 + (k % 7);
  EXPECT_NEAR(selector.total_weight(), expected_total, 1e-6);

  // Delete all but 100 keys, oldest first, so the last node keeps moving
  // into holes near the root.
  for (Key k = 0; k < kKeys; ++k) {
    if (k % 1000 != 0) {
      ASSERT_TRUE(selector.Delete(k).ok());
    }
  }
  EXPECT_EQ(selector.size(), 100);
  EXPECT_LE(selector.capacity(), 4 * 100u);
  expected_total = 0;
  std::map<Key, double> weights;
  for (Key k = 0; k < kKeys; k += 1000) {
    weights[k] = 1.0 + (k % 7);
    expected_total += weights[k];
  }
  EXPECT_DOUBLE_EQ(selector.total_weight(), expected_total);
  std::map<Key, double> probabilities;
  for (const auto& [k, w] : weights) probabilities[k] = w / expected_total;
  SampleCounts(selector, 2000, &probabilities);

  for (Key k = 0; k < kKeys; k += 1000) ASSERT_TRUE(selector.Delete(k).ok());
  EXPECT_EQ(selector.size(), 0);
  EXPECT_LE(selector.capacity(), 2 * PrioritizedSelector::kMinCapacity);
  // Still usable after shrinking to the minimum.
  ASSERT_TRUE(selector.Insert(1, 1.0).ok());
  EXPECT_EQ(selector.Sample()->key, 1u);
}

TEST(PrioritizedSelectorTest, ClearResetsEverything) {
  PrioritizedSelector selector(1.0);
  for (Key k = 0; k < 1000; ++k) ASSERT_TRUE(selector.Insert(k, 1.0).ok());
  selector.Clear();
  EXPECT_EQ(selector.size(), 0);
  EXPECT_EQ(selector.total_weight(), 0.0);
  EXPECT_LE(selector.capacity(), 2 * PrioritizedSelector::kMinCapacity);
  EXPECT_FALSE(selector.Sample().ok());
  ASSERT_TRUE(selector.Insert(999, 2.0).ok());
  EXPECT_EQ(selector.Sample()->key, 999u);
}

TEST(PrioritizedSelectorTest, OptionsAndDebugString) {
  PrioritizedSelector selector(0.8);
  ASSERT_TRUE(selector.options().has_prioritized());
  EXPECT_EQ(selector.options().prioritized().priority_exponent(), 0.8);
  EXPECT_FALSE(selector.options().is_deterministic());
  EXPECT_EQ(selector.DebugString(), "PrioritizedSelector(priority_exponent=0.8)");
  EXPECT_EQ(PrioritizedSelector(1.0).DebugString(), "PrioritizedSelector(priority_exponent=1)");
  EXPECT_EQ(PrioritizedSelector(-0.25).DebugString(),
            "PrioritizedSelector(priority_exponent=-0.25)");
}

}  // namespace
}  // namespace tf_reverb
