#include "server/item_record.h"

#include <cstdint>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "schema.pb.h"

namespace tf_reverb {
namespace {

using ::deepmind::reverb::FlatTrajectory;

PrioritizedItem TwoSliceItem() {
  PrioritizedItem item;
  item.set_key(0xfedcba9876543210u);
  item.set_table("replay");
  item.set_priority(2.5);
  item.set_times_sampled(4);
  item.mutable_inserted_at()->set_seconds(12);
  item.mutable_inserted_at()->set_nanos(34);
  auto* column = item.mutable_flat_trajectory()->add_columns();
  for (uint64_t chunk : {11u, 12u}) {
    auto* slice = column->add_chunk_slices();
    slice->set_chunk_key(chunk);
    slice->set_offset(3);
    slice->set_length(7);
  }
  item.mutable_flat_trajectory()->add_columns()->set_squeeze(true);
  return item;
}

TEST(ItemRecordTest, KeepsTheWireEncodingAndTheFieldsTablesRead) {
  const PrioritizedItem proto = TwoSliceItem();
  const ItemRecord record = ItemRecord::FromProto(proto);
  EXPECT_EQ(record.key(), proto.key());
  EXPECT_EQ(record.priority(), 2.5);
  EXPECT_FALSE(record.has_policy_version());
  EXPECT_EQ(record.inserted_at(), absl::FromUnixSeconds(12) + absl::Nanoseconds(34));
  EXPECT_EQ(record.wire(), proto.SerializeAsString());
  EXPECT_EQ(record.ToProto().SerializeAsString(), proto.SerializeAsString());
  FlatTrajectory trajectory;
  trajectory.add_columns()->set_squeeze(true);  // replaced, not merged into
  ASSERT_TRUE(record.Trajectory(&trajectory).ok());
  EXPECT_EQ(trajectory.SerializeAsString(), proto.flat_trajectory().SerializeAsString());
}

TEST(ItemRecordTest, InsertedSetsTimeTimesSampledAndAMissingVersion) {
  const absl::Time now = absl::FromUnixNanos(1700000000123456789);
  const ItemRecord inserted = ItemRecord::FromProto(TwoSliceItem()).Inserted(now, 9);
  EXPECT_EQ(inserted.inserted_at(), now);
  EXPECT_TRUE(inserted.has_policy_version());
  EXPECT_EQ(inserted.policy_version(), 9);
  PrioritizedItem want = TwoSliceItem();
  want.set_times_sampled(0);
  want.mutable_inserted_at()->set_seconds(1700000000);
  want.mutable_inserted_at()->set_nanos(123456789);
  want.set_policy_version(9);
  EXPECT_EQ(inserted.ToProto().SerializeAsString(), want.SerializeAsString());
  EXPECT_EQ(inserted.key(), want.key());
  EXPECT_EQ(inserted.priority(), 2.5);

  // A version the item has stays; inserting again replaces the time.
  PrioritizedItem versioned = TwoSliceItem();
  versioned.set_policy_version(3);
  const ItemRecord twice =
      ItemRecord::FromProto(versioned).Inserted(now, 9).Inserted(now + absl::Seconds(1), 10);
  EXPECT_EQ(twice.policy_version(), 3);
  EXPECT_EQ(twice.ToProto().policy_version(), 3);
  EXPECT_EQ(twice.inserted_at(), now + absl::Seconds(1));
  EXPECT_EQ(twice.ToProto().inserted_at().seconds(), 1700000001);
  FlatTrajectory trajectory;
  ASSERT_TRUE(twice.Trajectory(&trajectory).ok());
  EXPECT_EQ(trajectory.SerializeAsString(), versioned.flat_trajectory().SerializeAsString());
}

TEST(ItemRecordTest, AnyInsertionTimeIsRead) {
  PrioritizedItem proto = TwoSliceItem();
  proto.mutable_inserted_at()->set_seconds(int64_t{1} << 62);  // far past int64 nanoseconds
  const ItemRecord record = ItemRecord::FromProto(proto);
  EXPECT_GT(record.inserted_at(), absl::FromUnixSeconds(int64_t{1} << 40));
  proto.mutable_inserted_at()->set_seconds(-(int64_t{1} << 62));
  EXPECT_LT(ItemRecord::FromProto(proto).inserted_at(), absl::UnixEpoch());
}

TEST(ItemRecordTest, WithPolicyVersion) {
  const ItemRecord record = ItemRecord::FromProto(TwoSliceItem()).WithPolicyVersion(5);
  EXPECT_EQ(record.policy_version(), 5);
  EXPECT_EQ(record.ToProto().policy_version(), 5);
  EXPECT_EQ(record.ToProto().table(), "replay");
}

}  // namespace
}  // namespace tf_reverb
