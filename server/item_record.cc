#include "server/item_record.h"

#include <cstddef>

#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/timestamp.pb.h"
#include "server/wire_reader.h"

namespace tf_reverb {
namespace {

constexpr int kTimesSampledField = PrioritizedItem::kTimesSampledFieldNumber;
constexpr int kInsertedAtField = PrioritizedItem::kInsertedAtFieldNumber;
constexpr int kPolicyVersionField = PrioritizedItem::kPolicyVersionFieldNumber;
constexpr int kTrajectoryField = PrioritizedItem::kFlatTrajectoryFieldNumber;

// Any timestamp a client sends, without overflow (absl::Time saturates).
absl::Time TimeOf(const google::protobuf::Timestamp& t) {
  return absl::FromUnixSeconds(t.seconds()) + absl::Nanoseconds(t.nanos());
}

}  // namespace

ItemRecord ItemRecord::FromProto(const PrioritizedItem& item) {
  ItemRecord record;
  record.wire_ = item.SerializeAsString();
  record.key_ = item.key();
  record.priority_ = item.priority();
  record.has_policy_version_ = item.has_policy_version();
  record.policy_version_ = item.policy_version();
  record.inserted_at_ = TimeOf(item.inserted_at());
  return record;
}

ItemRecord ItemRecord::Inserted(absl::Time now, int64_t policy_version) const {
  // The fields kept, as they are; then the new ones (a parser takes the
  // last occurrence of a field, and these are left out above).
  ItemRecord record = *this;
  record.wire_.clear();
  WireReader reader(wire_);
  int field = 0, type = 0;
  while (!reader.done()) {
    const absl::string_view start = reader.rest();
    if (!reader.NextTag(&field, &type) || !reader.Skip(type)) break;
    if (field == kTimesSampledField || field == kInsertedAtField) continue;
    record.wire_.append(start.data(), start.size() - reader.rest().size());
  }
  google::protobuf::Timestamp inserted;
  const int64_t seconds = absl::ToUnixSeconds(now);
  inserted.set_seconds(seconds);
  inserted.set_nanos(
      static_cast<int32_t>(absl::ToInt64Nanoseconds(now - absl::FromUnixSeconds(seconds))));
  {
    google::protobuf::io::StringOutputStream stream(&record.wire_);
    google::protobuf::io::CodedOutputStream out(&stream);
    out.WriteTag((kInsertedAtField << 3) | WireReader::kLengthDelimited);
    out.WriteVarint32(static_cast<uint32_t>(inserted.ByteSizeLong()));
    inserted.SerializeWithCachedSizes(&out);
    if (!has_policy_version_) {
      out.WriteTag(kPolicyVersionField << 3);
      out.WriteVarint64(static_cast<uint64_t>(policy_version));
    }
  }
  record.inserted_at_ = TimeOf(inserted);
  if (!has_policy_version_) {
    record.has_policy_version_ = true;
    record.policy_version_ = policy_version;
  }
  return record;
}

ItemRecord ItemRecord::WithPolicyVersion(int64_t policy_version) const {
  PrioritizedItem item = ToProto();
  item.set_policy_version(policy_version);
  return FromProto(item);
}

PrioritizedItem ItemRecord::ToProto() const {
  PrioritizedItem item;
  item.ParseFromArray(wire_.data(), static_cast<int>(wire_.size()));
  return item;
}

absl::Status ItemRecord::Trajectory(deepmind::reverb::FlatTrajectory* out) const {
  out->Clear();
  WireReader reader(wire_);
  int field = 0, type = 0;
  while (!reader.done() && reader.NextTag(&field, &type)) {
    absl::string_view bytes;
    if (field == kTrajectoryField && type == WireReader::kLengthDelimited) {
      // Repeated occurrences of a message field merge, as in a parser.
      if (!reader.Bytes(&bytes)) break;
      google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data()),
                                                static_cast<int>(bytes.size()));
      if (!out->MergeFromCodedStream(&in)) {
        return absl::DataLossError("A stored item's trajectory does not parse.");
      }
    } else {
      reader.Skip(type);
    }
  }
  if (!reader.ok()) return absl::DataLossError("A stored item does not parse.");
  return absl::OkStatus();
}

}  // namespace tf_reverb
