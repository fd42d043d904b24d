// Validation of a chunk a client sends (InsertStreamRequest.chunks), done
// once when it arrives, so that nothing is stored that a later sample cannot
// decode (docs/architecture/wire-protocol.md for the encoding).
//
// Contract: pure functions, thread-safe; nothing is allocated in proportion
// to a number the chunk claims (only to the bytes it actually carries).
// Errors are INVALID_ARGUMENT with a message naming the chunk key, the tensor
// index and the field at fault.
#ifndef TF_REVERB_SERVER_CHUNK_VALIDATION_H_
#define TF_REVERB_SERVER_CHUNK_VALIDATION_H_

#include "absl/status/status.h"
#include "schema.pb.h"
#include "server/chunk_view.h"

namespace tf_reverb {

// TensorFlow's largest tensor rank.
inline constexpr int kMaxChunkTensorRank = 254;

// Checks `chunk` completely: a codec this build decodes, at least one
// tensor, and every tensor with a leading (time) dimension, at most
// kMaxChunkTensorRank dimensions and a payload ValidateTensor (chunk_codec.h) accepts
// (dtype stored by the core, size within kMaxChunkTensorBytes, declared and
// actual decoded sizes equal to shape x dtype size, strings parsable).
absl::Status ValidateChunk(const deepmind::reverb::ChunkData& chunk);
// The same checks on a chunk's view (for a chunk kept as its wire bytes).
absl::Status ValidateChunkView(const ChunkView& chunk);

}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_CHUNK_VALIDATION_H_
