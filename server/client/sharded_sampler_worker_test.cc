#include "server/client/sharded_sampler_worker.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "schema.pb.h"
#include "server/client/sample.h"

namespace tf_reverb {
namespace {

deepmind::reverb::TableInfo Prioritized(double total_weight, int64_t size) {
  deepmind::reverb::TableInfo info;
  info.mutable_sampler_options()->mutable_prioritized()->set_priority_exponent(1.0);
  info.set_current_size(size);
  info.set_sampler_total_weight(total_weight);
  return info;
}

// Shares follow the weights the servers report; a down shard gets nothing.
TEST(ShardWeightsTest, SplitFollowsTheShardsWeights) {
  ShardWeights weights(2);
  weights.SetFromInfo(0, Prioritized(100.0, 10));
  weights.SetFromInfo(1, Prioritized(10.0, 10));
  const std::vector<int64_t> counts = weights.Split(110000);
  EXPECT_EQ(counts[0] + counts[1], 110000);
  // Binomial(110000, 1/11): sd ~ 95; 6 sd.
  EXPECT_NEAR(counts[1], 10000, 600);
  EXPECT_EQ(weights.TotalSize(), 20);
  weights.MarkDown(1);
  EXPECT_EQ(weights.Split(1000)[1], 0);
  EXPECT_EQ(weights.TotalSize(), 10);
  weights.SetFromInfo(1, Prioritized(10.0, 10));  // back
  EXPECT_GT(weights.Split(11000)[1], 0);
}

// A sample gives its shard's weight (priority^exponent / probability) and
// its share of the whole; a server without sampler_total_weight counts by
// size until then.
TEST(ShardWeightsTest, SamplesUpdateTheWeights) {
  ShardWeights weights(2);
  deepmind::reverb::TableInfo dm_reverb = Prioritized(0, 10);
  dm_reverb.clear_sampler_total_weight();
  weights.SetFromInfo(0, dm_reverb);  // weight 10 (its size) for now
  weights.SetFromInfo(1, Prioritized(10.0, 10));
  SampleMeta sample;
  sample.priority = 10.0;
  sample.probability = 0.1;  // 10 of weight 100
  sample.table_size = 10;
  EXPECT_DOUBLE_EQ(weights.UpdateFromSample(0, sample), 100.0 / 110.0);
}

// Uniform shards weigh their size; with every weight 0 (empty prioritized
// mass) the split goes by size.
TEST(ShardWeightsTest, UniformByShardSizeAndZeroMassBySize) {
  ShardWeights weights(2);
  deepmind::reverb::TableInfo uniform;
  uniform.mutable_sampler_options()->set_uniform(true);
  uniform.set_current_size(30);
  uniform.set_sampler_total_weight(30);
  weights.SetFromInfo(0, uniform);
  uniform.set_current_size(0);
  uniform.set_sampler_total_weight(0);
  weights.SetFromInfo(1, uniform);
  EXPECT_EQ(weights.Split(100)[1], 0);
  weights.SetFromInfo(0, Prioritized(0.0, 5));
  weights.SetFromInfo(1, Prioritized(0.0, 15));
  const std::vector<int64_t> counts = weights.Split(40000);
  EXPECT_NEAR(counts[1], 30000, 600);  // Binomial(40000, 3/4): sd ~ 87
}

}  // namespace
}  // namespace tf_reverb
