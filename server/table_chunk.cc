#include "server/table_chunk.h"

#include <utility>

#include "absl/status/status.h"
#include "server/chunk_codec.h"
#include "server/chunk_validation.h"

namespace tf_reverb {
TableChunk::TableChunk(Token, const ChunkData& chunk, std::string wire)
    : wire_(std::move(wire)),
      key_(chunk.chunk_key()),
      episode_id_(chunk.sequence_range().episode_id()),
      stored_bytes_(ChunkPayloadBytes(chunk)),
      uncompressed_bytes_(chunk.data_uncompressed_size()),
      compression_(chunk.compression()) {}

std::shared_ptr<const TableChunk> TableChunk::FromProto(const ChunkData& chunk) {
  return std::make_shared<const TableChunk>(Token(), chunk, chunk.SerializeAsString());
}

absl::StatusOr<std::shared_ptr<const TableChunk>> TableChunk::FromWire(absl::string_view wire) {
  ChunkData chunk;
  if (!chunk.ParseFromArray(wire.data(), static_cast<int>(wire.size()))) {
    return absl::DataLossError("A stored chunk is not a readable ChunkData.");
  }
  if (absl::Status s = ValidateChunk(chunk); !s.ok()) return s;
  return std::make_shared<const TableChunk>(Token(), chunk, std::string(wire));
}

absl::StatusOr<ChunkView> TableChunk::View() const { return ChunkViewOfWire(wire_); }

ChunkData TableChunk::ToProto() const {
  ChunkData chunk;
  chunk.ParseFromArray(wire_.data(), static_cast<int>(wire_.size()));
  return chunk;
}

}  // namespace tf_reverb
