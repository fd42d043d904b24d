#include "server/selectors/lifo.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "server/selectors/selector.h"

namespace tf_reverb {
namespace {

Key SampleKey(LifoSelector& selector) {
  auto sample = selector.Sample();
  EXPECT_TRUE(sample.ok()) << sample.status();
  EXPECT_EQ(sample.ok() ? sample->probability : 0, 1.0);
  return sample.ok() ? sample->key : ~Key{0};
}

TEST(LifoSelectorTest, SampleOnEmptyIsFailedPrecondition) {
  LifoSelector selector;
  EXPECT_EQ(selector.Sample().status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(LifoSelectorTest, DuplicateAndMissingKeys) {
  LifoSelector selector;
  ASSERT_TRUE(selector.Insert(7, 1.0).ok());
  EXPECT_EQ(selector.Insert(7, 1.0).message(), "Key 7 already inserted.");
  EXPECT_EQ(selector.Insert(7, 1.0).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(selector.Update(8, 1.0).message(), "Key 8 not found.");
  EXPECT_EQ(selector.Delete(8).message(), "Key 8 not found.");
  EXPECT_EQ(selector.Delete(8).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(selector.size(), 1);
}

TEST(LifoSelectorTest, SamplesInInsertionOrderAndIgnoresPriorities) {
  LifoSelector selector;
  ASSERT_TRUE(selector.Insert(0, 5.0).ok());
  ASSERT_TRUE(selector.Insert(1, 100.0).ok());
  ASSERT_TRUE(selector.Insert(2, 0.0).ok());
  // Sampling does not remove or reorder.
  EXPECT_EQ(SampleKey(selector), 2u);
  EXPECT_EQ(SampleKey(selector), 2u);
  ASSERT_TRUE(selector.Delete(2).ok());
  EXPECT_EQ(SampleKey(selector), 1u);
  ASSERT_TRUE(selector.Delete(1).ok());
  EXPECT_EQ(SampleKey(selector), 0u);
  ASSERT_TRUE(selector.Delete(0).ok());
  EXPECT_EQ(selector.size(), 0);
}

TEST(LifoSelectorTest, UpdateDoesNotReorder) {
  LifoSelector selector;
  for (Key k = 0; k < 3; ++k) ASSERT_TRUE(selector.Insert(k, 1.0).ok());
  for (Key k = 0; k < 3; ++k) ASSERT_TRUE(selector.Update(k, 1000.0 - k).ok());
  EXPECT_EQ(SampleKey(selector), 2u);
}

TEST(LifoSelectorTest, DeleteFromMiddleKeepsOrder) {
  LifoSelector selector;
  for (Key k = 0; k < 5; ++k) ASSERT_TRUE(selector.Insert(k, 1.0).ok());
  ASSERT_TRUE(selector.Delete(2).ok());
  std::vector<Key> order;
  while (selector.size() > 0) {
    order.push_back(SampleKey(selector));
    ASSERT_TRUE(selector.Delete(order.back()).ok());
  }
  std::vector<Key> expected = {0, 1, 3, 4};
  if (std::string("Lifo") == "Lifo") {
    expected = {4, 3, 1, 0};
  }
  EXPECT_EQ(order, expected);
}

TEST(LifoSelectorTest, ClearAndReinsert) {
  LifoSelector selector;
  for (Key k = 0; k < 3; ++k) ASSERT_TRUE(selector.Insert(k, 1.0).ok());
  selector.Clear();
  EXPECT_EQ(selector.size(), 0);
  EXPECT_FALSE(selector.Sample().ok());
  ASSERT_TRUE(selector.Insert(1, 1.0).ok());
  EXPECT_EQ(SampleKey(selector), 1u);
}

TEST(LifoSelectorTest, OptionsAndDebugString) {
  LifoSelector selector;
  EXPECT_TRUE(selector.options().lifo());
  EXPECT_TRUE(selector.options().is_deterministic());
  EXPECT_EQ(selector.DebugString(), "LifoSelector");
}

}  // namespace
}  // namespace tf_reverb
