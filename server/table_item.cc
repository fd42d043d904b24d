#include "server/table_item.h"

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/base/casts.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "server/chunk_view.h"

namespace tf_reverb {

deepmind::reverb::SampleInfo SampleInfoOf(const SampledItem& sampled) {
  deepmind::reverb::SampleInfo info;
  const absl::string_view wire = sampled.data->item.wire();
  info.mutable_item()->ParseFromArray(wire.data(), static_cast<int>(wire.size()));
  info.mutable_item()->set_priority(sampled.priority);
  info.mutable_item()->set_times_sampled(sampled.times_sampled);
  info.set_probability(sampled.probability);
  info.set_table_size(sampled.table_size);
  info.set_rate_limited(sampled.rate_limited);
  return info;
}

std::string SampleInfoWire(const SampledItem& sampled) {
  using google::protobuf::io::CodedOutputStream;
  using Info = deepmind::reverb::SampleInfo;
  constexpr uint32_t kFixed64 = 1, kLengthDelimited = 2;
  const absl::string_view item = sampled.data->item.wire();
  // The fields appended to the item: priority and times_sampled.
  const size_t extra =
      1 + 8 + 1 + CodedOutputStream::VarintSize32SignExtended(sampled.times_sampled);
  const size_t item_size = item.size() + extra;
  std::string out;
  out.reserve(1 + CodedOutputStream::VarintSize64(item_size) + item_size + 32);
  {
    google::protobuf::io::StringOutputStream stream(&out);
    CodedOutputStream coded(&stream);
    coded.WriteTag((Info::kItemFieldNumber << 3) | kLengthDelimited);
    coded.WriteVarint64(item_size);
    coded.WriteRaw(item.data(), static_cast<int>(item.size()));
    coded.WriteTag((PrioritizedItem::kPriorityFieldNumber << 3) | kFixed64);
    coded.WriteLittleEndian64(absl::bit_cast<uint64_t>(sampled.priority));
    coded.WriteTag(PrioritizedItem::kTimesSampledFieldNumber << 3);
    coded.WriteVarint32SignExtended(sampled.times_sampled);
    coded.WriteTag((Info::kProbabilityFieldNumber << 3) | kFixed64);
    coded.WriteLittleEndian64(absl::bit_cast<uint64_t>(sampled.probability));
    coded.WriteTag(Info::kTableSizeFieldNumber << 3);
    coded.WriteVarint64(static_cast<uint64_t>(sampled.table_size));
    coded.WriteTag(Info::kRateLimitedFieldNumber << 3);
    coded.WriteVarint32(sampled.rate_limited ? 1 : 0);
  }
  return out;
}

std::vector<uint64_t> UniqueChunkKeys(const deepmind::reverb::FlatTrajectory& t) {
  std::vector<uint64_t> keys;
  absl::flat_hash_set<uint64_t> seen;
  for (const auto& column : t.columns()) {
    for (const auto& slice : column.chunk_slices()) {
      if (seen.insert(slice.chunk_key()).second) keys.push_back(slice.chunk_key());
    }
  }
  return keys;
}

namespace {

// Records the dtype and row shape of column `c`'s first slice (`tensor`, of
// chunk `chunk_key`) in `out`, or checks a later slice against them.
absl::Status AddSliceSpec(int c, const deepmind::reverb::FlatTrajectory::Column& column, bool first,
                          uint64_t chunk_key, const TensorView& tensor, ItemColumn* out) {
  const auto& dims = tensor.shape;
  if (first) {
    out->dtype = tensor.dtype;
    if (!dims.empty()) out->shape.assign(dims.begin() + 1, dims.end());
    return absl::OkStatus();
  }
  bool same = tensor.dtype == out->dtype && dims.size() == out->shape.size() + 1;
  for (size_t d = 1; same && d < dims.size(); ++d) same = dims[d] == out->shape[d - 1];
  if (same) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("Column ", c, " joins slices of different dtypes or row shapes (chunks ",
                   column.chunk_slices(0).chunk_key(), " and ", chunk_key, ")."));
}

}  // namespace

absl::Status ValidateTableItem(const TableItem& item, std::vector<ItemColumn>* columns) {
  // The column specs are always worked out: a column whose slices disagree
  // would be stored but could never be unpacked by a sampler.
  std::vector<ItemColumn> local_columns;
  if (columns == nullptr) columns = &local_columns;
  deepmind::reverb::FlatTrajectory trajectory;
  if (absl::Status s = item.item.Trajectory(&trajectory); !s.ok()) return s;
  if (trajectory.columns_size() == 0 || trajectory.columns(0).chunk_slices_size() == 0) {
    return absl::InvalidArgumentError("Item trajectory must not be empty.");
  }
  ChunkViews views;
  if (absl::Status s = views.Reset(item.chunks); !s.ok()) return s;
  columns->assign(trajectory.columns_size(), ItemColumn());
  for (int c = 0; c < trajectory.columns_size(); ++c) {
    const auto& column = trajectory.columns(c);
    if (column.chunk_slices_size() == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("Column ", c, " of the item's trajectory has no chunk slices."));
    }
    int64_t rows = 0;
    for (const auto& slice : column.chunk_slices()) {
      absl::StatusOr<const ChunkView*> found = views.Find(slice.chunk_key());
      if (!found.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "Column ", c, " references chunk ", slice.chunk_key(), " which was not provided."));
      }
      const ChunkView& chunk = **found;
      const int tensors = static_cast<int>(chunk.tensors.size());
      if (slice.index() < 0 || slice.index() >= tensors) {
        return absl::InvalidArgumentError(
            absl::StrCat("Column ", c, " references tensor ", slice.index(), " of chunk ",
                         slice.chunk_key(), " which holds ", tensors, " tensors."));
      }
      const TensorView& tensor = chunk.tensors[slice.index()];
      const int64_t chunk_rows = tensor.shape.empty() ? 0 : tensor.shape[0];
      if (slice.offset() < 0 || slice.length() < 1 ||
          slice.offset() + static_cast<int64_t>(slice.length()) > chunk_rows) {
        return absl::InvalidArgumentError(absl::StrCat(
            "Column ", c, " slice [", slice.offset(), ", ",
            slice.offset() + static_cast<int64_t>(slice.length()), ") is out of range for chunk ",
            slice.chunk_key(), " of ", chunk_rows, " rows."));
      }
      if (absl::Status s =
              AddSliceSpec(c, column, rows == 0, slice.chunk_key(), tensor, &(*columns)[c]);
          !s.ok()) {
        return s;
      }
      rows += slice.length();
    }
    if (column.squeeze() && rows != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("Column ", c, " is squeezed but has ", rows, " rows."));
    }
    ItemColumn& out = (*columns)[c];
    out.squeeze = column.squeeze();
    if (!out.squeeze) out.shape.insert(out.shape.begin(), rows);
  }
  return absl::OkStatus();
}

}  // namespace tf_reverb
