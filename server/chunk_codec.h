// Chunk codec: the TensorProto encoding of chunk tensors (docs/architecture/wire-protocol.md)
// and our zstd extension of it.
//
// Numeric tensors become TensorProto{dtype, tensor_shape, tensor_content}
// where tensor_content is the compressed little-endian C-order bytes: a raw
// Snappy block (Reverb's encoding, ChunkData.compression COMPRESSION_SNAPPY,
// the proto default) or, our extension, one zstd frame with its content size
// (COMPRESSION_ZSTD). The codec is a property of the whole chunk. DT_STRING
// tensors are stored uncompressed in TensorFlow's standard tensor_content
// string encoding (all varint lengths, then all bytes) whatever the codec.
// Optional delta encoding (legacy writer) applies to integer tensors of rank
// >= 2: row i > 0 holds row[i] - row[i-1] in wrap-around arithmetic.
//
// zstd negotiation (Reverb never sees a zstd chunk): a peer that decodes zstd
// says so in gRPC metadata kChunkCodecsMetadataKey ("x-tf-reverb-codecs",
// a comma-separated list of codec names besides Snappy):
//  * our server sends it in the initial metadata of every InsertStream, and
//    a writer compresses with zstd only on streams that carried it (chunks
//    made for an earlier stream are transcoded to Snappy when needed);
//  * our sampler sends it in the request metadata of SampleStream, and the
//    server transcodes zstd chunks to Snappy for clients that did not.
// Writers choose per chunk (CodecPolicy::kAuto): zstd where it pays, Snappy
// elsewhere. The environment variable TF_REVERB_ZSTD=0 (or false/off/no)
// turns the extension off in this process: no announcement, no zstd written
// or asked for (zstd chunks received are still decoded); TF_REVERB_ZSTD=always
// makes writers use zstd for every chunk a server accepts it for.
//
// Contract: pure functions, thread-safe. Errors: INVALID_ARGUMENT for
// unsupported dtypes and codecs; DATA_LOSS for corrupt payloads
// (decompression failures and size mismatches are detected, unlike Reverb,
// which ignores them).
#ifndef TF_REVERB_SERVER_CHUNK_CODEC_H_
#define TF_REVERB_SERVER_CHUNK_CODEC_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "schema.pb.h"
#include "server/chunk_view.h"
#include "server/tensor.h"
#include "tensor.pb.h"

namespace tf_reverb {

inline constexpr ChunkCompression kSnappy = ::deepmind::reverb::ChunkData::COMPRESSION_SNAPPY;
inline constexpr ChunkCompression kZstd = ::deepmind::reverb::ChunkData::COMPRESSION_ZSTD;

// The zstd level used when none is given (benchmarks/chunk_codec_benchmark.cc:
// on frame-like data level 3 compresses ~30% smaller than level 1 and
// decodes faster, at about the same compression speed).
inline constexpr int kDefaultZstdLevel = 3;

// How a writer picks the codec of a chunk.
enum class CodecPolicy {
  kSnappy,  // always Snappy (the only codec Reverb understands)
  kZstd,    // always zstd
  // zstd for chunks of at least kAutoZstdMinBytes raw bytes that Snappy
  // shrinks at least kAutoZstdMinSnappyRatio-fold (frames, structured data:
  // zstd compresses those ~3x smaller than Snappy and decodes as fast);
  // Snappy for the rest (noise-like floats, small chunks), where zstd saves
  // <10% and decodes an order of magnitude slower. Costs one Snappy pass on
  // chunks that end up zstd.
  kAuto,
};
inline constexpr int64_t kAutoZstdMinBytes = 16 << 10;
inline constexpr double kAutoZstdMinSnappyRatio = 2.0;

// gRPC metadata key (lower case, as gRPC requires) of the codec announcement.
inline constexpr char kChunkCodecsMetadataKey[] = "x-tf-reverb-codecs";
inline constexpr char kZstdCodecName[] = "zstd";

// Whether a kChunkCodecsMetadataKey value lists zstd.
bool CodecsListZstd(absl::string_view value);
// False when TF_REVERB_ZSTD is set to 0/false/off/no (read on every call).
bool ZstdEnabledByEnvironment();
// The policy of a writer whose server announced zstd: kSnappy when disabled
// by the environment, kZstd for TF_REVERB_ZSTD=always, else kAuto.
CodecPolicy CodecPolicyFromEnvironment();
// INVALID_ARGUMENT unless `compression` is a codec this build decodes.
absl::Status CheckCompression(int compression);

// The largest number of bytes a chunk tensor may decode to: a chunk must fit
// in one protobuf message (< 2 GiB) when it is sent, Snappy-coded, to a client.
inline constexpr int64_t kMaxChunkTensorBytes = (int64_t{1} << 31) - 1;

// Checks that DecompressTensor(proto, *, compression) would succeed, without
// allocating anything sized by the proto's claims: a dtype the core stores,
// non-negative dimensions decoding to at most kMaxChunkTensorBytes, a payload
// that declares and actually decodes to exactly shape x dtype-size bytes
// (Snappy: a valid block; zstd: one complete frame with its content size and
// nothing after it), DT_STRING contents whose length prefixes account for
// every byte. INVALID_ARGUMENT for dtypes/codecs, DATA_LOSS for the rest.
absl::Status ValidateTensor(const TensorView& tensor, ChunkCompression compression);

// Encodes `tensor` (already stacked, [T, ...]) as a chunk TensorProto.
absl::StatusOr<::tf_reverb::tf::TensorProto> CompressTensor(const Tensor& tensor, bool delta_encode,
                                                            ChunkCompression compression = kSnappy,
                                                            int zstd_level = kDefaultZstdLevel);

// Bytes of the tensors' payloads of `chunk` as stored (compressed).
int64_t ChunkPayloadBytes(const deepmind::reverb::ChunkData& chunk);

// Shape stored in a chunk TensorProto.
std::vector<int64_t> ProtoShape(const ::tf_reverb::tf::TensorProto& proto);

// Decodes a whole chunk tensor stored with `compression`.
absl::StatusOr<Tensor> DecompressTensor(const TensorView& tensor, bool delta_encoded,
                                        ChunkCompression compression);
absl::StatusOr<Tensor> DecompressTensor(const ::tf_reverb::tf::TensorProto& proto,
                                        bool delta_encoded, ChunkCompression compression);
// Decodes tensor `index` of `chunk` (codec and delta flag from the chunk).
absl::StatusOr<Tensor> DecompressChunkTensor(const ChunkView& chunk, int index);
absl::StatusOr<Tensor> DecompressChunkTensor(const deepmind::reverb::ChunkData& chunk, int index);

// Decodes rows [offset, offset + length) of a numeric chunk tensor into
// `dst`, which must hold length * row_bytes bytes. Whole tensors decompress
// straight into `dst`; a zstd slice (without delta encoding) also goes
// straight to `dst`, decoding only the frame up to its last row. A payload
// in several pieces (still in the gRPC slices it arrived in) is decoded from
// the pieces when it is a whole Snappy tensor, else joined first in a
// per-thread buffer (a copy of the compressed bytes, not of the decoded ones).
absl::Status DecompressRowsInto(const TensorView& tensor, bool delta_encoded,
                                ChunkCompression compression, int64_t offset, int64_t length,
                                char* dst);
absl::Status DecompressRowsInto(const ::tf_reverb::tf::TensorProto& proto, bool delta_encoded,
                                ChunkCompression compression, int64_t offset, int64_t length,
                                char* dst);

// Builds ChunkData for step-stacked column tensors (one tensor per column),
// with the codec `policy` picks for the chunk as a whole.
absl::StatusOr<deepmind::reverb::ChunkData> BuildChunk(uint64_t chunk_key,
                                                       const std::vector<Tensor>& columns,
                                                       uint64_t episode_id, int32_t start,
                                                       int32_t end, bool delta_encode,
                                                       CodecPolicy policy = CodecPolicy::kSnappy,
                                                       int zstd_level = kDefaultZstdLevel);

// Re-encodes the numeric tensors of `chunk` with `target` (delta encoding and
// everything else unchanged); a no-op when the chunk already uses it.
absl::Status TranscodeChunk(deepmind::reverb::ChunkData* chunk, ChunkCompression target,
                            int zstd_level = kDefaultZstdLevel);

}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_CHUNK_CODEC_H_
