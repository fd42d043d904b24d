#include "server/table_item.h"

#include <memory>
#include <string>

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "schema.pb.h"
#include "server/item_record.h"

namespace tf_reverb {
namespace {

TEST(SampleInfoWireTest, ParsesAsSampleInfoOf) {
  PrioritizedItem proto;
  proto.set_key(77);
  proto.set_table("t");
  proto.set_priority(1.0);
  proto.set_times_sampled(9);
  proto.set_policy_version(4);
  auto* slice = proto.mutable_flat_trajectory()->add_columns()->add_chunk_slices();
  slice->set_chunk_key(5);
  slice->set_length(1);
  for (const ItemRecord& record :
       {ItemRecord::FromProto(proto), ItemRecord::FromProto(proto).Inserted(absl::Now(), 3)}) {
    SampledItem sampled;
    sampled.data = std::make_shared<const TableItem>(TableItem{record, {}});
    sampled.priority = 0.25;
    sampled.times_sampled = 2;
    sampled.probability = 0.125;
    sampled.table_size = 1 << 20;
    sampled.rate_limited = true;
    deepmind::reverb::SampleInfo parsed;
    ASSERT_TRUE(parsed.ParseFromString(SampleInfoWire(sampled)));
    EXPECT_EQ(parsed.SerializeAsString(), SampleInfoOf(sampled).SerializeAsString());
    EXPECT_EQ(parsed.item().priority(), 0.25);
    EXPECT_EQ(parsed.item().times_sampled(), 2);
    EXPECT_EQ(parsed.item().policy_version(), 4);
    EXPECT_EQ(parsed.table_size(), 1 << 20);
    EXPECT_TRUE(parsed.rate_limited());
    // A first sample of a fresh table: zeros are written too and parse so.
    sampled.times_sampled = 0;
    sampled.rate_limited = false;
    ASSERT_TRUE(parsed.ParseFromString(SampleInfoWire(sampled)));
    EXPECT_EQ(parsed.SerializeAsString(), SampleInfoOf(sampled).SerializeAsString());
  }
}

}  // namespace
}  // namespace tf_reverb
