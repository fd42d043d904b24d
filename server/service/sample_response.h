// Encoding of sampled items as SampleStreamResponse messages
// (docs/architecture/wire-protocol.md), serialized into gRPC byte buffers ready to write.
//
// Several items go into one response; an item's chunks are split over
// responses once a response holds kMaxSampleResponseBytes of chunk data; the
// first entry of an item carries its info, the last one end_of_sequence.
// A chunk goes out as the wire bytes the table keeps (TableChunk::wire()),
// never re-encoded, and large ones are not copied either: the byte buffers'
// slices reference them in the stored chunks, which the slices keep alive
// (as SerializeAliasingLargeFields does). Unless the client announced zstd,
// zstd chunks are transcoded to Snappy (once per chunk per call).
//
// Contract: a pure function; thread-safe (serializing the shared, immutable
// chunks from several threads at once is safe). DATA_LOSS for a chunk that
// cannot be transcoded, INTERNAL when serialization fails.
#ifndef TF_REVERB_SERVER_SERVICE_SAMPLE_RESPONSE_H_
#define TF_REVERB_SERVER_SERVICE_SAMPLE_RESPONSE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "google/protobuf/message_lite.h"
#include "grpcpp/support/byte_buffer.h"
#include "server/table_item.h"

namespace tf_reverb {

// A SampleStreamResponse is closed once it holds this many bytes of chunks.
inline constexpr int64_t kMaxSampleResponseBytes = 2 << 20;

// Serializes `message` (protobuf's canonical encoding) into a byte buffer
// whose slices reference, instead of copying, every bytes/string field of
// more than 4 KiB; those slices hold a reference to `owner`, which must keep
// the referenced bytes alive and unchanged (gRPC may release the slices on
// any thread, after the call that sent them ended). INTERNAL for messages of
// 2 GiB or more.
absl::StatusOr<grpc::ByteBuffer> SerializeAliasingLargeFields(
    const google::protobuf::MessageLite& message, std::shared_ptr<const void> owner);

absl::StatusOr<std::vector<grpc::ByteBuffer>> EncodeSampleResponses(
    const std::vector<SampledItem>& samples, bool client_accepts_zstd);

}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_SERVICE_SAMPLE_RESPONSE_H_
