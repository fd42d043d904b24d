// Decodes every cell of a stored item the way a sampler would read it: each
// slice of each column, rows [offset, offset + length) of the chunk tensor it
// names. Shared by the fuzz targets that put items into tables.
//
// Contract: pure function, thread-safe; the item's chunks are only read.
// Returns the first decoding error (DATA_LOSS, INVALID_ARGUMENT as the codec
// reports them), INVALID_ARGUMENT for a slice that names a missing chunk or
// tensor, or RESOURCE_EXHAUSTED for a slice whose rows would exceed
// `max_slice_bytes` (the caller's allocation bound, not a codec error).
#ifndef TF_REVERB_SERVER_FUZZ_ITEM_DECODER_H_
#define TF_REVERB_SERVER_FUZZ_ITEM_DECODER_H_

#include <cstddef>
#include <cstdint>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "schema.pb.h"
#include "server/chunk_codec.h"
#include "server/chunk_view.h"
#include "server/table_item.h"
#include "server/tensor.h"
#include "tensor.pb.h"

namespace tf_reverb {
namespace fuzz {

inline absl::Status DecodeItem(const TableItem& item, int64_t max_slice_bytes) {
  // The chunks' views point into the chunks, which `item` keeps alive.
  std::vector<ChunkView> views;
  views.reserve(item.chunks.size());
  absl::flat_hash_map<uint64_t, size_t> by_key;
  for (const auto& chunk : item.chunks) {
    absl::StatusOr<ChunkView> view = chunk->View();
    if (!view.ok()) return view.status();
    by_key.emplace(chunk->key(), views.size());
    views.push_back(*std::move(view));
  }
  deepmind::reverb::FlatTrajectory trajectory;
  if (absl::Status s = item.item.Trajectory(&trajectory); !s.ok()) return s;
  for (const auto& column : trajectory.columns()) {
    for (const auto& slice : column.chunk_slices()) {
      auto it = by_key.find(slice.chunk_key());
      if (it == by_key.end()) {
        return absl::InvalidArgumentError(absl::StrCat("no chunk ", slice.chunk_key()));
      }
      const ChunkView& chunk = views[it->second];
      if (slice.index() < 0 || static_cast<size_t>(slice.index()) >= chunk.tensors.size()) {
        return absl::InvalidArgumentError(absl::StrCat("no tensor ", slice.index()));
      }
      const TensorView& tensor = chunk.tensors[slice.index()];
      if (tensor.dtype == ::tf_reverb::tf::DT_STRING) {
        absl::StatusOr<Tensor> whole = DecompressChunkTensor(chunk, slice.index());
        if (!whole.ok()) return whole.status();
        if (slice.offset() < 0 || slice.length() < 0 ||
            slice.offset() + int64_t{slice.length()} > whole->num_rows()) {
          return absl::InvalidArgumentError("string slice out of range");
        }
        continue;
      }
      absl::StatusOr<int64_t> elem = DataTypeSize(tensor.dtype);
      if (!elem.ok()) return elem.status();
      int64_t bytes = *elem;
      for (size_t d = 1; d < tensor.shape.size(); ++d) {
        const int64_t dim = tensor.shape[d];
        if (dim < 0 || __builtin_mul_overflow(bytes, dim, &bytes)) {
          return absl::DataLossError("implausible row shape");
        }
      }
      if (slice.length() < 0 || __builtin_mul_overflow(bytes, int64_t{slice.length()}, &bytes)) {
        return absl::InvalidArgumentError("implausible slice length");
      }
      if (bytes > max_slice_bytes) {
        return absl::ResourceExhaustedError(absl::StrCat("slice of ", bytes, " bytes"));
      }
      std::string dst(static_cast<size_t>(bytes), '\0');
      if (absl::Status s = DecompressRowsInto(tensor, chunk.delta_encoded, chunk.compression,
                                              slice.offset(), slice.length(), dst.data());
          !s.ok()) {
        return s;
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace fuzz
}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_FUZZ_ITEM_DECODER_H_
