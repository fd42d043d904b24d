#include "server/trajectory_columns.h"

#include <cstddef>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/chunk_codec.h"
#include "tensor.pb.h"

namespace tf_reverb {
namespace {

// The tensor a slice names, or INVALID_ARGUMENT when its chunk has none.
absl::StatusOr<const TensorView*> SliceTensor(
    const ChunkView& chunk, const deepmind::reverb::FlatTrajectory::ChunkSlice& slice, int column) {
  if (slice.index() < 0 || static_cast<size_t>(slice.index()) >= chunk.tensors.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Column ", column, " references a missing tensor of chunk ", slice.chunk_key()));
  }
  return &chunk.tensors[slice.index()];
}

// Decodes column `column` into `dst`; with `expect`, first checks every
// slice against it (false, with dst partly written, on a difference: dst
// never receives more than expect's bytes).
absl::StatusOr<bool> UnpackColumn(const deepmind::reverb::FlatTrajectory& trajectory, int column,
                                  FindChunk find, const ColumnSpec* expect, char* dst) {
  const auto& spec = trajectory.columns(column);
  // Rows expect allows and the dims of one row it has.
  int64_t rows_left = 0;
  size_t row_dims = 0;
  if (expect != nullptr) {
    const bool squeeze = spec.squeeze();
    if (!squeeze && expect->shape.empty()) return false;
    rows_left = squeeze ? 1 : expect->shape[0];
    row_dims = squeeze ? 0 : 1;
  }
  for (const auto& slice : spec.chunk_slices()) {
    absl::StatusOr<const ChunkView*> chunk = find(slice.chunk_key());
    if (!chunk.ok()) return chunk.status();
    absl::StatusOr<const TensorView*> found = SliceTensor(**chunk, slice, column);
    if (!found.ok()) return found.status();
    const TensorView& tensor = **found;
    const auto& dims = tensor.shape;
    if (expect != nullptr) {
      if (tensor.dtype != expect->dtype || slice.length() < 0 || slice.length() > rows_left ||
          dims.size() != expect->shape.size() - row_dims + 1) {
        return false;
      }
      for (size_t d = 1; d < dims.size(); ++d) {
        if (dims[d] != expect->shape[row_dims + d - 1]) return false;
      }
      rows_left -= slice.length();
    }
    absl::StatusOr<int64_t> elem = DataTypeSize(tensor.dtype);
    if (!elem.ok()) return elem.status();
    // Bytes of one row: the product of the non-leading dims.
    int64_t row_bytes = *elem;
    for (size_t d = 1; d < dims.size(); ++d) row_bytes *= dims[d];
    if (!dims.empty() && dims[0] == 0) row_bytes = 0;
    absl::Status s = DecompressRowsInto(tensor, (*chunk)->delta_encoded, (*chunk)->compression,
                                        slice.offset(), slice.length(), dst);
    if (!s.ok()) return s;
    dst += row_bytes * slice.length();
  }
  return expect == nullptr || rows_left == 0;
}

}  // namespace

absl::StatusOr<std::vector<ColumnSpec>> TrajectoryColumnSpecs(
    const deepmind::reverb::FlatTrajectory& trajectory, FindChunk find) {
  std::vector<ColumnSpec> specs;
  specs.reserve(trajectory.columns_size());
  for (int c = 0; c < trajectory.columns_size(); ++c) {
    const auto& column = trajectory.columns(c);
    ColumnSpec spec{tf::DT_INVALID, {}};
    int64_t rows = 0;
    for (const auto& slice : column.chunk_slices()) {
      absl::StatusOr<const ChunkView*> chunk = find(slice.chunk_key());
      if (!chunk.ok()) return chunk.status();
      absl::StatusOr<const TensorView*> tensor = SliceTensor(**chunk, slice, c);
      if (!tensor.ok()) return tensor.status();
      const auto& dims = (*tensor)->shape;
      if (dims.empty()) {
        return absl::InvalidArgumentError("Chunk tensors must have a time axis.");
      }
      if (spec.dtype == tf::DT_INVALID) {
        spec.dtype = (*tensor)->dtype;
        spec.shape.assign(dims.begin() + 1, dims.end());
      } else {
        bool same = spec.dtype == (*tensor)->dtype && spec.shape.size() + 1 == dims.size();
        for (size_t d = 1; same && d < dims.size(); ++d) same = spec.shape[d - 1] == dims[d];
        if (!same) {
          return absl::InvalidArgumentError(
              absl::StrCat("Column ", c, " mixes chunks of different specs."));
        }
      }
      // Every slice within its chunk, so that decoding writes what the spec
      // says (a trajectory from the wire is not trusted).
      if (slice.offset() < 0 || slice.length() < 0 ||
          int64_t{slice.offset()} + slice.length() > dims[0]) {
        return absl::InvalidArgumentError(absl::StrCat(
            "Column ", c, " slices rows [", slice.offset(), ", ",
            int64_t{slice.offset()} + slice.length(), ") of a chunk of ", dims[0], " rows."));
      }
      rows += slice.length();
    }
    if (column.squeeze() && rows != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("Column ", c, " is squeezed but has ", rows, " rows."));
    }
    if (!column.squeeze()) spec.shape.insert(spec.shape.begin(), rows);
    specs.push_back(std::move(spec));
  }
  return specs;
}

absl::Status UnpackTrajectoryColumnInto(const deepmind::reverb::FlatTrajectory& trajectory,
                                        int column, FindChunk find, char* dst) {
  return UnpackColumn(trajectory, column, find, nullptr, dst).status();
}

absl::StatusOr<bool> UnpackTrajectoryColumnIfSpec(
    const deepmind::reverb::FlatTrajectory& trajectory, int column, FindChunk find,
    const ColumnSpec& expect, char* dst) {
  return UnpackColumn(trajectory, column, find, &expect, dst);
}

absl::Status UnpackTrajectoryStrings(const deepmind::reverb::FlatTrajectory& trajectory, int column,
                                     FindChunk find, std::vector<std::string>* out) {
  for (const auto& slice : trajectory.columns(column).chunk_slices()) {
    absl::StatusOr<const ChunkView*> chunk = find(slice.chunk_key());
    if (!chunk.ok()) return chunk.status();
    // String payloads are never left in pieces (sample_stream_parser.h).
    absl::StatusOr<Tensor> whole = DecompressChunkTensor(**chunk, slice.index());
    if (!whole.ok()) return whole.status();
    const int64_t per_row = whole->num_rows() == 0 ? 0 : whole->num_elements() / whole->num_rows();
    if (slice.offset() < 0 || slice.length() < 0 ||
        int64_t{slice.offset()} + slice.length() > whole->num_rows()) {
      return absl::InvalidArgumentError(
          absl::StrCat("Column ", column, " slices rows [", slice.offset(), ", ",
                       int64_t{slice.offset()} + slice.length(), ") of a chunk of ",
                       whole->num_rows(), " rows."));
    }
    out->insert(out->end(), whole->strings.begin() + slice.offset() * per_row,
                whole->strings.begin() + (slice.offset() + slice.length()) * per_row);
  }
  return absl::OkStatus();
}

int64_t ColumnBytes(const ColumnSpec& spec) {
  absl::StatusOr<int64_t> elem = DataTypeSize(spec.dtype);
  if (spec.dtype == tf::DT_STRING || !elem.ok()) return 0;
  int64_t bytes = *elem;
  for (int64_t dim : spec.shape) bytes *= dim;
  return bytes;
}

}  // namespace tf_reverb
