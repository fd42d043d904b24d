#include "server/table_chunk.h"

#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "server/chunk_codec.h"
#include "server/chunk_validation.h"

namespace tf_reverb {
namespace {

int64_t PayloadBytes(const ChunkView& view) {
  int64_t bytes = 0;
  for (const TensorView& tensor : view.tensors)
    bytes += static_cast<int64_t>(tensor.content_size());
  return bytes;
}

}  // namespace

TableChunk::TableChunk(Token, const ChunkView& view, std::string wire)
    : wire_(std::move(wire)),
      key_(view.key),
      episode_id_(view.episode_id),
      stored_bytes_(PayloadBytes(view)),
      uncompressed_bytes_(view.uncompressed_size),
      compression_(view.compression) {}

std::shared_ptr<const TableChunk> TableChunk::FromProto(const ChunkData& chunk) {
  return std::make_shared<const TableChunk>(Token(), ChunkViewOf(chunk), chunk.SerializeAsString());
}

absl::StatusOr<std::shared_ptr<const TableChunk>> TableChunk::FromPlainWire(std::string wire) {
  bool plain = false;
  absl::StatusOr<ChunkView> view = ChunkViewOfWire(wire, &plain);
  if (!view.ok() || !plain) {
    return absl::FailedPreconditionError("The chunk's bytes are not in the plain encoding.");
  }
  return FromView(*view, std::move(wire));
}

absl::StatusOr<std::shared_ptr<const TableChunk>> TableChunk::FromView(const ChunkView& view,
                                                                       std::string wire) {
  if (absl::Status s = ValidateChunkView(view); !s.ok()) return s;
  // The view may point into `wire`'s buffer, which the move may not keep (a
  // short string's bytes live inside it): the constructor reads only the
  // view's scalars.
  return std::make_shared<const TableChunk>(Token(), view, std::move(wire));
}

absl::StatusOr<std::shared_ptr<const TableChunk>> TableChunk::FromWire(absl::string_view wire) {
  // The plain encoding (every writer's, and so nearly every stored chunk's)
  // is read where it lies: one copy of the bytes, no parse.
  bool plain = false;
  absl::StatusOr<ChunkView> view = ChunkViewOfWire(wire, &plain);
  if (view.ok() && plain) return FromView(*view, std::string(wire));
  ChunkData chunk;
  if (!chunk.ParseFromArray(wire.data(), static_cast<int>(wire.size()))) {
    return absl::DataLossError("A stored chunk is not a readable ChunkData.");
  }
  return FromView(ChunkViewOf(chunk), std::string(wire));
}

absl::StatusOr<ChunkView> TableChunk::View() const { return ChunkViewOfWire(wire_); }

ChunkData TableChunk::ToProto() const {
  ChunkData chunk;
  chunk.ParseFromArray(wire_.data(), static_cast<int>(wire_.size()));
  return chunk;
}

}  // namespace tf_reverb
