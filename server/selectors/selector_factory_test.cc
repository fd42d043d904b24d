#include <cmath>
#include <limits>
#include <memory>
#include <utility>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "schema.pb.h"
#include "server/selectors/selector.h"

namespace tf_reverb {
namespace {

using ::deepmind::reverb::KeyDistributionOptions;
using ::testing::HasSubstr;

std::unique_ptr<ItemSelector> MustCreate(const KeyDistributionOptions& options) {
  auto selector = CreateSelector(options);
  EXPECT_TRUE(selector.ok()) << selector.status();
  return selector.ok() ? std::move(selector).value() : nullptr;
}

TEST(CreateSelectorTest, EachDistributionRoundTrips) {
  KeyDistributionOptions options;
  options.set_uniform(true);
  auto selector = MustCreate(options);
  ASSERT_NE(selector, nullptr);
  EXPECT_EQ(selector->DebugString(), "UniformSelector");
  EXPECT_TRUE(selector->options().uniform());
  EXPECT_FALSE(selector->options().is_deterministic());

  options.set_fifo(true);
  selector = MustCreate(options);
  ASSERT_NE(selector, nullptr);
  EXPECT_EQ(selector->DebugString(), "FifoSelector");
  EXPECT_TRUE(selector->options().fifo());
  EXPECT_TRUE(selector->options().is_deterministic());

  options.set_lifo(true);
  selector = MustCreate(options);
  ASSERT_NE(selector, nullptr);
  EXPECT_EQ(selector->DebugString(), "LifoSelector");
  EXPECT_TRUE(selector->options().lifo());

  options.mutable_heap()->set_min_heap(true);
  selector = MustCreate(options);
  ASSERT_NE(selector, nullptr);
  EXPECT_EQ(selector->DebugString(), "HeapSelector(sign=1)");
  EXPECT_TRUE(selector->options().heap().min_heap());

  options.mutable_heap()->set_min_heap(false);
  selector = MustCreate(options);
  ASSERT_NE(selector, nullptr);
  EXPECT_EQ(selector->DebugString(), "HeapSelector(sign=-1)");
  EXPECT_TRUE(selector->options().has_heap());
  EXPECT_FALSE(selector->options().heap().min_heap());

  options.mutable_prioritized()->set_priority_exponent(0.8);
  selector = MustCreate(options);
  ASSERT_NE(selector, nullptr);
  EXPECT_EQ(selector->DebugString(), "PrioritizedSelector(priority_exponent=0.8)");
  EXPECT_EQ(selector->options().prioritized().priority_exponent(), 0.8);
  EXPECT_FALSE(selector->options().is_deterministic());
}

TEST(CreateSelectorTest, CreatedSelectorsWork) {
  KeyDistributionOptions options;
  options.mutable_heap()->set_min_heap(false);
  auto selector = MustCreate(options);
  ASSERT_NE(selector, nullptr);
  ASSERT_TRUE(selector->Insert(1, 1.0).ok());
  ASSERT_TRUE(selector->Insert(2, 2.0).ok());
  EXPECT_EQ(selector->Sample()->key, 2u);
  EXPECT_EQ(selector->size(), 2);

  options.mutable_prioritized()->set_priority_exponent(1.0);
  selector = MustCreate(options);
  ASSERT_NE(selector, nullptr);
  EXPECT_EQ(selector->ValidatePriority(-1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(selector->Insert(1, -1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(selector->size(), 0);
}

TEST(CreateSelectorTest, NoDistributionIsInvalidArgument) {
  KeyDistributionOptions options;
  options.set_is_deterministic(true);
  auto selector = CreateSelector(options);
  ASSERT_FALSE(selector.ok());
  EXPECT_EQ(selector.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(selector.status().message(), "KeyDistributionOptions has no distribution set");
}

TEST(CreateSelectorTest, FalseBooleanDistributionIsInvalidArgument) {
  KeyDistributionOptions options;
  options.set_fifo(false);
  auto selector = CreateSelector(options);
  EXPECT_EQ(selector.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(selector.status().message(), HasSubstr("fifo"));

  options.set_uniform(false);
  selector = CreateSelector(options);
  EXPECT_EQ(selector.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(selector.status().message(), HasSubstr("uniform"));

  options.set_lifo(false);
  selector = CreateSelector(options);
  EXPECT_EQ(selector.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(selector.status().message(), HasSubstr("lifo"));
}

TEST(CreateSelectorTest, ParsedFromWireBytes) {
  // Serialised options (as pybind's selector_from_proto receives them).
  KeyDistributionOptions options;
  options.mutable_prioritized()->set_priority_exponent(0.6);
  KeyDistributionOptions parsed;
  ASSERT_TRUE(parsed.ParseFromString(options.SerializeAsString()));
  auto selector = MustCreate(parsed);
  ASSERT_NE(selector, nullptr);
  EXPECT_EQ(selector->DebugString(), "PrioritizedSelector(priority_exponent=0.6)");
}

TEST(CreateSelectorTest, NegativeOrNonFinitePriorityExponentIsInvalidArgument) {
  for (double exponent : {-1.0, std::nan(""), std::numeric_limits<double>::infinity()}) {
    KeyDistributionOptions options;
    options.mutable_prioritized()->set_priority_exponent(exponent);
    EXPECT_EQ(CreateSelector(options).status().code(), absl::StatusCode::kInvalidArgument)
        << exponent;
  }
  KeyDistributionOptions zero;
  zero.mutable_prioritized()->set_priority_exponent(0);
  EXPECT_TRUE(CreateSelector(zero).ok());
}

}  // namespace
}  // namespace tf_reverb
