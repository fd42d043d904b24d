// ChunkView: a chunk's tensors as a decoder reads them, wherever the chunk
// lives — a ChunkData proto (a writer's, or one received over gRPC whose
// large payloads are still in the slices they arrived in) or a table's
// TableChunk (server/table_chunk.h), which keeps only the chunk's wire bytes.
// The chunk codec (chunk_codec.h) decodes TensorViews, so every holder of a
// chunk shares one decoder.
//
// Contract: plain values that borrow: a view points into the proto, the
// payload pieces or the wire bytes it was made from, which must outlive it
// and stay unchanged. Errors: ChunkViewOfWire and TensorViewOfWire return
// DATA_LOSS for bytes that are not a well-formed ChunkData / TensorProto.
#ifndef TF_REVERB_SERVER_CHUNK_VIEW_H_
#define TF_REVERB_SERVER_CHUNK_VIEW_H_

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "schema.pb.h"
#include "server/tensor.h"
#include "tensor.pb.h"

namespace tf_reverb {

using ChunkCompression = ::deepmind::reverb::ChunkData::Compression;

// One TensorProto of a chunk: its dtype, its shape, its payload
// (tensor_content) as pieces in order (one piece when contiguous, none when
// empty) and, for DT_STRING tensors in TensorFlow's other layout, its
// string_val elements.
struct TensorView {
  DataType dtype = ::tf_reverb::tf::DT_INVALID;
  absl::InlinedVector<int64_t, 4> shape;
  absl::InlinedVector<absl::string_view, 1> content;
  std::vector<absl::string_view> string_val;
  bool unknown_rank = false;

  // Bytes of the payload over all pieces.
  size_t content_size() const;
};

struct ChunkView {
  uint64_t key = 0;
  uint64_t episode_id = 0;        // ChunkData.sequence_range.episode_id
  int64_t uncompressed_size = 0;  // ChunkData.data_uncompressed_size
  bool delta_encoded = false;
  ChunkCompression compression = ::deepmind::reverb::ChunkData::COMPRESSION_SNAPPY;
  absl::InlinedVector<TensorView, 1> tensors;  // ChunkData.data.tensors
};

TensorView TensorViewOf(const ::tf_reverb::tf::TensorProto& tensor);

// A view of `chunk`. With `payloads` (empty, or one entry per tensor: empty
// when the tensor's payload is its tensor_content, else the payload's pieces
// in order), a tensor's payload is taken from there instead.
ChunkView ChunkViewOf(const deepmind::reverb::ChunkData& chunk,
                      const std::vector<std::vector<absl::string_view>>* payloads = nullptr);

// A view of the serialized ChunkData `wire` (fields it does not use are
// skipped). DATA_LOSS when `wire` is not a well-formed encoding.
//
// With `plain`, also tells whether `wire` keeps to the plain subset of the
// encoding, what writers send: only ChunkData's fields other than
// deprecated_data, each with its own wire type, the same within the nested
// messages (no TensorProto field beyond dtype, tensor_shape, version_number,
// tensor_content and string_val; no dimension name) and enum values within
// int32. For a plain encoding the view holds exactly what protobuf parses
// (repeated fields accumulate, the last of a singular field wins), and
// protobuf would accept it: so a plain chunk can be kept as the bytes it
// came in, and anything else is left to protobuf.
absl::StatusOr<ChunkView> ChunkViewOfWire(absl::string_view wire, bool* plain = nullptr);

// A view of the serialized TensorProto `wire`, read as ChunkViewOfWire reads
// each tensor of a chunk (`plain` likewise). Its content and string_val
// point into `wire`. DATA_LOSS when `wire` is not a well-formed encoding.
absl::StatusOr<TensorView> TensorViewOfWire(absl::string_view wire, bool* plain = nullptr);

// The views of an item's or a sample's chunks, found by key.
class ChunkViews {
 public:
  // Views of `chunks` (pointers to anything with a View() giving
  // absl::StatusOr<ChunkView>, such as TableChunks) replace those held.
  template <typename Chunks>
  absl::Status Reset(const Chunks& chunks) {
    views_.clear();
    views_.reserve(chunks.size());
    for (const auto& chunk : chunks) {
      absl::StatusOr<ChunkView> view = chunk->View();
      if (!view.ok()) return view.status();
      views_.push_back(*std::move(view));
    }
    return absl::OkStatus();
  }
  void Reserve(size_t n) { views_.reserve(n); }
  void Add(ChunkView view) { views_.push_back(std::move(view)); }
  // INVALID_ARGUMENT naming `key` when no view has it.
  absl::StatusOr<const ChunkView*> Find(uint64_t key) const;

 private:
  std::vector<ChunkView> views_;
};

}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_CHUNK_VIEW_H_
