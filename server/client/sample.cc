#include "server/client/sample.h"

#include <cstddef>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/chunk_codec.h"
#include "tensor.pb.h"

namespace tf_reverb {

Sample::Sample(deepmind::reverb::SampleInfo info,
               std::vector<std::shared_ptr<const ChunkData>> chunks)
    : info_(std::move(info)) {
  chunks_.reserve(chunks.size());
  for (auto& chunk : chunks) chunks_.push_back(SampleChunk{std::move(chunk), {}, nullptr});
}

Sample Sample::FromChunks(deepmind::reverb::SampleInfo info, std::vector<SampleChunk> chunks) {
  Sample sample;
  sample.info_ = std::move(info);
  sample.chunks_ = std::move(chunks);
  return sample;
}

Sample Sample::FromSampledItem(const SampledItem& sampled) {
  return Sample(SampleInfoOf(sampled), sampled.data.chunks);
}

absl::StatusOr<const SampleChunk*> Sample::Chunk(uint64_t key) const {
  // Items reference few chunks: a scan beats building a map per sample.
  for (const SampleChunk& chunk : chunks_) {
    if (chunk.data->chunk_key() == key) return &chunk;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("Sample references chunk ", key, " which was not received."));
}

absl::StatusOr<std::vector<ColumnSpec>> Sample::ColumnSpecs() const {
  std::vector<ColumnSpec> specs;
  const auto& trajectory = info_.item().flat_trajectory();
  for (int c = 0; c < trajectory.columns_size(); ++c) {
    const auto& column = trajectory.columns(c);
    ColumnSpec spec{::tf_reverb::tf::DT_INVALID, {}};
    int64_t rows = 0;
    for (const auto& slice : column.chunk_slices()) {
      absl::StatusOr<const SampleChunk*> chunk = Chunk(slice.chunk_key());
      if (!chunk.ok()) return chunk.status();
      const ChunkData& data = *(*chunk)->data;
      if (slice.index() < 0 || slice.index() >= data.data().tensors_size()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "Column ", c, " references a missing tensor of chunk ", slice.chunk_key()));
      }
      const auto& tensor = data.data().tensors(slice.index());
      const auto& dims = tensor.tensor_shape().dim();
      if (dims.empty()) {
        return absl::InvalidArgumentError("Chunk tensors must have a time axis.");
      }
      if (spec.dtype == ::tf_reverb::tf::DT_INVALID) {
        spec.dtype = tensor.dtype();
        spec.shape.reserve(dims.size());
        for (int d = 1; d < dims.size(); ++d) spec.shape.push_back(dims[d].size());
      } else {
        bool same = spec.dtype == tensor.dtype() &&
                    spec.shape.size() + 1 == static_cast<size_t>(dims.size());
        for (int d = 1; same && d < dims.size(); ++d) {
          same = spec.shape[d - 1] == dims[d].size();
        }
        if (!same) {
          return absl::InvalidArgumentError(
              absl::StrCat("Column ", c, " mixes chunks of different specs."));
        }
      }
      rows += slice.length();
    }
    if (!column.squeeze()) spec.shape.insert(spec.shape.begin(), rows);
    specs.push_back(std::move(spec));
  }
  return specs;
}

absl::Status Sample::UnpackColumnInto(int column, char* dst) const {
  const auto& slices = info_.item().flat_trajectory().columns(column).chunk_slices();
  for (const auto& slice : slices) {
    absl::StatusOr<const SampleChunk*> chunk = Chunk(slice.chunk_key());
    if (!chunk.ok()) return chunk.status();
    const ChunkData& data = *(*chunk)->data;
    if (slice.index() < 0 || slice.index() >= data.data().tensors_size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Column ", column, " references a missing tensor of chunk ", slice.chunk_key()));
    }
    const auto& tensor = data.data().tensors(slice.index());
    absl::StatusOr<int64_t> elem = DataTypeSize(tensor.dtype());
    if (!elem.ok()) return elem.status();
    // Bytes of one row: the product of the non-leading dims.
    int64_t row_bytes = *elem;
    const auto& dims = tensor.tensor_shape().dim();
    for (int d = 1; d < dims.size(); ++d) row_bytes *= dims[d].size();
    if (!dims.empty() && dims[0].size() == 0) row_bytes = 0;
    const auto& payloads = (*chunk)->payloads;
    const bool in_pieces =
        static_cast<size_t>(slice.index()) < payloads.size() && !payloads[slice.index()].empty();
    absl::Status s =
        in_pieces ? DecompressRowsInto(tensor, payloads[slice.index()], data.delta_encoded(),
                                       data.compression(), slice.offset(), slice.length(), dst)
                  : DecompressRowsInto(tensor, data.delta_encoded(), data.compression(),
                                       slice.offset(), slice.length(), dst);
    if (!s.ok()) return s;
    dst += row_bytes * slice.length();
  }
  return absl::OkStatus();
}

absl::StatusOr<Tensor> Sample::UnpackColumn(int column) const {
  absl::StatusOr<std::vector<ColumnSpec>> specs = ColumnSpecs();
  if (!specs.ok()) return specs.status();
  Tensor out;
  out.dtype = (*specs)[column].dtype;
  out.shape = (*specs)[column].shape;
  if (out.dtype != ::tf_reverb::tf::DT_STRING) {
    absl::StatusOr<int64_t> elem = DataTypeSize(out.dtype);
    if (!elem.ok()) return elem.status();
    out.data.resize(out.num_elements() * *elem);
    if (absl::Status s = UnpackColumnInto(column, out.data.data()); !s.ok()) return s;
    return out;
  }
  for (const auto& slice : info_.item().flat_trajectory().columns(column).chunk_slices()) {
    absl::StatusOr<const SampleChunk*> chunk = Chunk(slice.chunk_key());
    if (!chunk.ok()) return chunk.status();
    // String payloads are never left in pieces (sample_stream_parser.h).
    absl::StatusOr<Tensor> whole = DecompressChunkTensor(*(*chunk)->data, slice.index());
    if (!whole.ok()) return whole.status();
    const int64_t per_row = whole->num_rows() == 0 ? 0 : whole->num_elements() / whole->num_rows();
    out.strings.insert(out.strings.end(), whole->strings.begin() + slice.offset() * per_row,
                       whole->strings.begin() + (slice.offset() + slice.length()) * per_row);
  }
  return out;
}

}  // namespace tf_reverb
