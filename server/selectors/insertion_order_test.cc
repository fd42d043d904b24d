// InsertionOrderSelector in both of its configurations, each through its
// public class: FifoSelector (fifo.h) and LifoSelector (lifo.h). Every case
// runs for both; they differ only in which end of the insertion order they
// pick.
#include "server/selectors/insertion_order.h"

#include <algorithm>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "schema.pb.h"
#include "server/selectors/fifo.h"
#include "server/selectors/lifo.h"
#include "server/selectors/selector.h"

namespace tf_reverb {
namespace {

using ::deepmind::reverb::KeyDistributionOptions;

struct Configuration {
  // The class's name without "Selector".
  std::string name;
  std::unique_ptr<InsertionOrderSelector> (*make)();
  // The KeyDistributionOptions flag the selector reports.
  bool (KeyDistributionOptions::*flag)() const;
  // Which end of the insertion order it picks.
  InsertionOrderSelector::Pick pick;
};

// Names the case in gtest's messages.
void PrintTo(const Configuration& configuration, std::ostream* os) { *os << configuration.name; }

const Configuration kFifo = {
    "Fifo",
    []() -> std::unique_ptr<InsertionOrderSelector> { return std::make_unique<FifoSelector>(); },
    &KeyDistributionOptions::fifo, InsertionOrderSelector::Pick::kOldest};
const Configuration kLifo = {
    "Lifo",
    []() -> std::unique_ptr<InsertionOrderSelector> { return std::make_unique<LifoSelector>(); },
    &KeyDistributionOptions::lifo, InsertionOrderSelector::Pick::kNewest};

class InsertionOrderSelectorTest : public ::testing::TestWithParam<Configuration> {
 protected:
  // The key the selector picks, checking that it does so with probability 1.
  Key SampleKey() {
    auto sample = selector_->Sample();
    EXPECT_TRUE(sample.ok()) << sample.status();
    EXPECT_EQ(sample.ok() ? sample->probability : 0, 1.0);
    return sample.ok() ? sample->key : ~Key{0};
  }

  // `keys`, given in insertion order, in the order the selector picks them.
  static std::vector<Key> PickOrder(std::vector<Key> keys) {
    if (GetParam().pick == InsertionOrderSelector::Pick::kNewest) {
      std::reverse(keys.begin(), keys.end());
    }
    return keys;
  }

  std::unique_ptr<InsertionOrderSelector> selector_ = GetParam().make();
};

TEST_P(InsertionOrderSelectorTest, SampleOnEmptyIsFailedPrecondition) {
  EXPECT_EQ(selector_->Sample().status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_P(InsertionOrderSelectorTest, DuplicateAndMissingKeys) {
  ASSERT_TRUE(selector_->Insert(7, 1.0).ok());
  EXPECT_EQ(selector_->Insert(7, 1.0).message(), "Key 7 already inserted.");
  EXPECT_EQ(selector_->Insert(7, 1.0).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(selector_->Update(8, 1.0).message(), "Key 8 not found.");
  EXPECT_EQ(selector_->Delete(8).message(), "Key 8 not found.");
  EXPECT_EQ(selector_->Delete(8).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(selector_->size(), 1);
}

TEST_P(InsertionOrderSelectorTest, SamplesInInsertionOrderAndIgnoresPriorities) {
  ASSERT_TRUE(selector_->Insert(0, 5.0).ok());
  ASSERT_TRUE(selector_->Insert(1, 100.0).ok());
  ASSERT_TRUE(selector_->Insert(2, 0.0).ok());
  const std::vector<Key> order = PickOrder({0, 1, 2});
  // Sampling does not remove or reorder.
  EXPECT_EQ(SampleKey(), order[0]);
  for (Key key : order) {
    EXPECT_EQ(SampleKey(), key);
    ASSERT_TRUE(selector_->Delete(key).ok());
  }
  EXPECT_EQ(selector_->size(), 0);
}

TEST_P(InsertionOrderSelectorTest, UpdateDoesNotReorder) {
  for (Key k = 0; k < 3; ++k) ASSERT_TRUE(selector_->Insert(k, 1.0).ok());
  for (Key k = 0; k < 3; ++k) ASSERT_TRUE(selector_->Update(k, 1000.0 - k).ok());
  EXPECT_EQ(SampleKey(), PickOrder({0, 1, 2})[0]);
}

TEST_P(InsertionOrderSelectorTest, DeleteFromMiddleKeepsOrder) {
  for (Key k = 0; k < 5; ++k) ASSERT_TRUE(selector_->Insert(k, 1.0).ok());
  ASSERT_TRUE(selector_->Delete(2).ok());
  std::vector<Key> order;
  while (selector_->size() > 0) {
    order.push_back(SampleKey());
    ASSERT_TRUE(selector_->Delete(order.back()).ok());
  }
  EXPECT_EQ(order, PickOrder({0, 1, 3, 4}));
}

TEST_P(InsertionOrderSelectorTest, ClearAndReinsert) {
  for (Key k = 0; k < 3; ++k) ASSERT_TRUE(selector_->Insert(k, 1.0).ok());
  selector_->Clear();
  EXPECT_EQ(selector_->size(), 0);
  EXPECT_FALSE(selector_->Sample().ok());
  ASSERT_TRUE(selector_->Insert(1, 1.0).ok());
  EXPECT_EQ(SampleKey(), 1u);
}

TEST_P(InsertionOrderSelectorTest, OptionsAndDebugString) {
  const KeyDistributionOptions options = selector_->options();
  EXPECT_TRUE((options.*GetParam().flag)());
  EXPECT_TRUE(options.is_deterministic());
  EXPECT_EQ(selector_->DebugString(), GetParam().name + "Selector");
}

INSTANTIATE_TEST_SUITE_P(, InsertionOrderSelectorTest, ::testing::Values(kFifo, kLifo),
                         [](const ::testing::TestParamInfo<Configuration>& info) {
                           return info.param.name;
                         });

}  // namespace
}  // namespace tf_reverb
