// Fuzz target: how the insert stream reads a request off the wire
// (server/service/insert_request.h), against protobuf's reading of it.
//
// Input: one byte giving the size of the gRPC slices the rest arrives in
// (1-256 bytes), then the bytes of one InsertStreamRequest.
//
// Properties: ReadInsertRequest returns exactly ParseRequest's status; when
// both succeed, its chunks that came as bytes are, in order, the request's
// chunks as protobuf parses them, and the rest of the request is the same
// message; every such chunk is accepted by TableChunk::FromPlainWire exactly
// when ValidateChunk accepts the parsed chunk, with the same status, and
// the stored chunk reads the same fields and decodes the same tensors as
// the one TableChunk::FromProto stores.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"
#include "reverb_service.pb.h"
#include "schema.pb.h"
#include "server/chunk_codec.h"
#include "server/chunk_validation.h"
#include "server/chunk_view.h"
#include "server/fuzz/fuzz_check.h"
#include "server/service/insert_request.h"
#include "server/service/raw_request.h"
#include "server/service/server_insert_stream.h"
#include "server/table_chunk.h"
#include "server/tensor.h"

namespace tf_reverb {
namespace {

using ::deepmind::reverb::ChunkData;
using ::deepmind::reverb::InsertStreamRequest;

// Decoding a tensor may legitimately take this much (zstd compresses runs
// ~30000-fold); beyond it the target compares the statuses only.
constexpr int64_t kMaxTensorBytes = int64_t{64} << 20;

void CheckSameChunk(const ChunkData& parsed, const std::string& wire) {
  const absl::Status valid = ValidateChunk(parsed);
  absl::StatusOr<std::shared_ptr<const TableChunk>> kept = TableChunk::FromPlainWire(wire);
  FUZZ_CHECK(kept.status() == valid, absl::StrCat("FromPlainWire: ", kept.status().ToString(),
                                                  " ValidateChunk: ", valid.ToString()));
  if (!valid.ok()) return;
  const std::shared_ptr<const TableChunk> stored = TableChunk::FromProto(parsed);
  const TableChunk& a = **kept;
  FUZZ_CHECK(a.key() == stored->key() && a.episode_id() == stored->episode_id() &&
                 a.compression() == stored->compression() &&
                 a.stored_bytes() == stored->stored_bytes() &&
                 a.uncompressed_bytes() == stored->uncompressed_bytes(),
             "the kept chunk's fields differ from the parsed chunk's");
  absl::StatusOr<ChunkView> view_a = a.View();
  absl::StatusOr<ChunkView> view_b = stored->View();
  FUZZ_CHECK_OK(view_a.status());
  FUZZ_CHECK_OK(view_b.status());
  FUZZ_CHECK(view_a->tensors.size() == view_b->tensors.size(), "tensor counts differ");
  for (size_t i = 0; i < view_a->tensors.size(); ++i) {
    int64_t elements = 1;
    for (int64_t d : view_b->tensors[i].shape) {
      elements = d <= 0 ? 0 : (elements > kMaxTensorBytes / d ? kMaxTensorBytes : elements * d);
    }
    if (elements > kMaxTensorBytes / 16) continue;
    absl::StatusOr<Tensor> ta = DecompressChunkTensor(*view_a, static_cast<int>(i));
    absl::StatusOr<Tensor> tb = DecompressChunkTensor(*view_b, static_cast<int>(i));
    FUZZ_CHECK(ta.status() == tb.status(), "decoding statuses differ");
    if (!ta.ok()) continue;
    FUZZ_CHECK(ta->dtype == tb->dtype && ta->shape == tb->shape && ta->data == tb->data &&
                   ta->strings == tb->strings,
               absl::StrCat("tensor ", i, " decodes differently"));
  }
}

}  // namespace
}  // namespace tf_reverb

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ::tf_reverb;  // NOLINT(build/namespaces)
  if (size == 0) return 0;
  const size_t slice_size = size_t{data[0]} + 1;
  std::vector<grpc::Slice> slices;
  for (size_t at = 1; at < size; at += slice_size) {
    slices.emplace_back(data + at, std::min(slice_size, size - at));
  }
  const grpc::ByteBuffer bytes(slices.data(), slices.size());

  InsertStreamRequest read;
  std::vector<ServerInsertStream::WireChunk> wire_chunks;
  const absl::Status status = ReadInsertRequest(bytes, &read, &wire_chunks);
  InsertStreamRequest parsed;
  const absl::Status expected = ParseRequest(bytes, &parsed);
  FUZZ_CHECK(status == expected, absl::StrCat("ReadInsertRequest: ", status.ToString(),
                                              " ParseRequest: ", expected.ToString()));
  if (!status.ok()) return 0;
  if (wire_chunks.empty()) {
    FUZZ_CHECK(read.SerializeAsString() == parsed.SerializeAsString(),
               "a request read whole differs from protobuf's parse");
    return 0;
  }
  FUZZ_CHECK(read.chunks_size() == 0, "chunks both as bytes and parsed");
  FUZZ_CHECK(
      static_cast<int>(wire_chunks.size()) == parsed.chunks_size(),
      absl::StrCat(wire_chunks.size(), " chunks as bytes, ", parsed.chunks_size(), " parsed"));
  for (size_t i = 0; i < wire_chunks.size(); ++i) {
    ChunkData chunk;
    FUZZ_CHECK(chunk.ParseFromString(wire_chunks[i].wire), "a chunk's bytes do not parse");
    FUZZ_CHECK(chunk.SerializeAsString() == parsed.chunks(static_cast<int>(i)).SerializeAsString(),
               absl::StrCat("chunk ", i, " differs from protobuf's parse"));
    FUZZ_CHECK(wire_chunks[i].key == chunk.chunk_key(), "the chunk's key differs");
    CheckSameChunk(chunk, wire_chunks[i].wire);
  }
  parsed.clear_chunks();
  FUZZ_CHECK(read.SerializeAsString() == parsed.SerializeAsString(),
             "the rest of the request differs from protobuf's parse");
  return 0;
}
