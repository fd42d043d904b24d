#include "server/selectors/uniform.h"

#include <cmath>
#include <map>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/selectors/selector.h"

namespace tf_reverb {
namespace {

using ::testing::HasSubstr;

TEST(UniformSelectorTest, SampleOnEmptyIsFailedPrecondition) {
  UniformSelector selector;
  EXPECT_EQ(selector.Sample().status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(UniformSelectorTest, DuplicateAndMissingKeys) {
  UniformSelector selector;
  ASSERT_TRUE(selector.Insert(3, 1.0).ok());
  absl::Status dup = selector.Insert(3, 2.0);
  EXPECT_EQ(dup.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(dup.message(), "Key 3 already inserted.");
  absl::Status missing = selector.Update(4, 1.0);
  EXPECT_EQ(missing.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(missing.message(), "Key 4 not found.");
  EXPECT_EQ(selector.Delete(4).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(selector.size(), 1);
}

TEST(UniformSelectorTest, ProbabilityIsOneOverN) {
  UniformSelector selector;
  for (Key k = 0; k < 4; ++k) ASSERT_TRUE(selector.Insert(k, k * 10.0).ok());
  auto sample = selector.Sample();
  ASSERT_TRUE(sample.ok());
  EXPECT_DOUBLE_EQ(sample->probability, 0.25);
  ASSERT_TRUE(selector.Delete(0).ok());
  sample = selector.Sample();
  ASSERT_TRUE(sample.ok());
  EXPECT_DOUBLE_EQ(sample->probability, 1.0 / 3);
}

TEST(UniformSelectorTest, DistributionIsUniformAndIgnoresPriorities) {
  UniformSelector selector;
  constexpr int kKeys = 10;
  constexpr int kSamples = 200000;
  for (Key k = 0; k < kKeys; ++k) {
    ASSERT_TRUE(selector.Insert(k, k == 0 ? 1000.0 : 0.0).ok());
  }
  std::map<Key, int> counts;
  for (int i = 0; i < kSamples; ++i) ++counts[selector.Sample()->key];
  // Chi-square with 9 degrees of freedom; 40 is far beyond p = 1e-5.
  double chi2 = 0;
  const double expected = static_cast<double>(kSamples) / kKeys;
  for (Key k = 0; k < kKeys; ++k) {
    chi2 += std::pow(counts[k] - expected, 2) / expected;
  }
  EXPECT_LT(chi2, 40.0);
}

TEST(UniformSelectorTest, DeletedKeysAreNeverSampled) {
  UniformSelector selector;
  for (Key k = 0; k < 100; ++k) ASSERT_TRUE(selector.Insert(k, 1.0).ok());
  // Delete from the middle, the front and the back (swap-with-last paths).
  for (Key k = 0; k < 100; k += 2) ASSERT_TRUE(selector.Delete(k).ok());
  ASSERT_TRUE(selector.Delete(99).ok());
  ASSERT_TRUE(selector.Delete(1).ok());
  EXPECT_EQ(selector.size(), 48);
  std::map<Key, int> counts;
  for (int i = 0; i < 48000; ++i) {
    auto sample = selector.Sample();
    ASSERT_TRUE(sample.ok());
    EXPECT_DOUBLE_EQ(sample->probability, 1.0 / 48);
    ++counts[sample->key];
  }
  EXPECT_EQ(counts.size(), 48u);
  for (const auto& [key, count] : counts) {
    EXPECT_EQ(key % 2, 1u);
    EXPECT_NE(key, 99u);
    EXPECT_NE(key, 1u);
    EXPECT_GT(count, 700);  // Expected 1000; 700 is > 9 sigma away.
  }
  // Deleted keys can be inserted again; present keys can be updated.
  EXPECT_TRUE(selector.Insert(0, 1.0).ok());
  EXPECT_TRUE(selector.Update(3, 5.0).ok());
}

TEST(UniformSelectorTest, ClearEmptiesAndAllowsReinsert) {
  UniformSelector selector;
  for (Key k = 0; k < 10; ++k) ASSERT_TRUE(selector.Insert(k, 1.0).ok());
  selector.Clear();
  EXPECT_EQ(selector.size(), 0);
  EXPECT_FALSE(selector.Sample().ok());
  EXPECT_TRUE(selector.Insert(5, 1.0).ok());
  EXPECT_EQ(selector.Sample()->key, 5u);
}

TEST(UniformSelectorTest, OptionsAndDebugString) {
  UniformSelector selector;
  EXPECT_TRUE(selector.options().uniform());
  EXPECT_FALSE(selector.options().is_deterministic());
  EXPECT_EQ(selector.DebugString(), "UniformSelector");
  EXPECT_THAT(selector.Sample().status().message(), HasSubstr("empty"));
}

}  // namespace
}  // namespace tf_reverb
