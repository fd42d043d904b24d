// Chunk codec: the TensorProto encoding of chunk tensors (reverb-spec.md §1.3).
//
// Numeric tensors become TensorProto{dtype, tensor_shape, tensor_content}
// where tensor_content is the raw Snappy block of the little-endian C-order
// bytes. DT_STRING tensors are stored uncompressed in TensorFlow's standard
// tensor_content string encoding (all varint lengths, then all bytes).
// Optional delta encoding (legacy writer) applies to integer tensors of rank
// >= 2: row i > 0 holds row[i] - row[i-1] in wrap-around arithmetic.
//
// Contract: pure functions, thread-safe. Errors: INVALID_ARGUMENT for
// unsupported dtypes; DATA_LOSS for corrupt payloads (Snappy failures and
// size mismatches are detected, unlike Reverb, which ignores them).
#ifndef TF_REVERB_SERVER_CHUNK_CODEC_H_
#define TF_REVERB_SERVER_CHUNK_CODEC_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "schema.pb.h"
#include "tensor.h"
#include "tensor.pb.h"

namespace tf_reverb {

// Encodes `tensor` (already stacked, [T, ...]) as a chunk TensorProto.
absl::StatusOr<::tf_reverb::tf::TensorProto> CompressTensor(
    const Tensor& tensor, bool delta_encode);

// Shape stored in a chunk TensorProto.
std::vector<int64_t> ProtoShape(const ::tf_reverb::tf::TensorProto& proto);

// Decodes a whole chunk tensor.
absl::StatusOr<Tensor> DecompressTensor(
    const ::tf_reverb::tf::TensorProto& proto, bool delta_encoded);

// Decodes rows [offset, offset + length) of a numeric chunk tensor into
// `dst`, which must hold length * row_bytes bytes. Decompresses straight into
// `dst` when the slice is the whole tensor.
absl::Status DecompressRowsInto(const ::tf_reverb::tf::TensorProto& proto,
                                bool delta_encoded, int64_t offset,
                                int64_t length, char* dst);

// Builds ChunkData for step-stacked column tensors (one tensor per column).
absl::StatusOr<deepmind::reverb::ChunkData> BuildChunk(
    uint64_t chunk_key, const std::vector<Tensor>& columns,
    uint64_t episode_id, int32_t start, int32_t end, bool delta_encode);

}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_CHUNK_CODEC_H_
