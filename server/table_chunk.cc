#include "server/table_chunk.h"

#include <utility>

#include "absl/status/status.h"
#include "server/chunk_codec.h"
#include "server/chunk_validation.h"

namespace tf_reverb {
TableChunk::TableChunk(Token, const ChunkData& chunk, std::string wire)
    : wire_(std::move(wire)),
      episode_id_(chunk.sequence_range().episode_id()),
      stored_bytes_(ChunkPayloadBytes(chunk)),
      uncompressed_bytes_(chunk.data_uncompressed_size()) {
  // The factories replace it with the view of wire_ (of the same chunk).
  view_.key = chunk.chunk_key();
  view_.compression = chunk.compression();
}

std::shared_ptr<const TableChunk> TableChunk::FromProto(const ChunkData& chunk) {
  auto made = std::make_shared<TableChunk>(Token(), chunk, chunk.SerializeAsString());
  // protobuf's own encoding, which ChunkViewOfWire reads as it reads any
  // other (chunk_view_test). Were it not to, the view would hold no
  // tensors: decoding the chunk would fail, never read past its bytes.
  absl::StatusOr<ChunkView> view = ChunkViewOfWire(made->wire_);
  if (view.ok()) made->view_ = *std::move(view);
  return made;
}

absl::StatusOr<std::shared_ptr<const TableChunk>> TableChunk::FromWire(absl::string_view wire) {
  ChunkData chunk;
  if (!chunk.ParseFromArray(wire.data(), static_cast<int>(wire.size()))) {
    return absl::DataLossError("A stored chunk is not a readable ChunkData.");
  }
  if (absl::Status s = ValidateChunk(chunk); !s.ok()) return s;
  auto made = std::make_shared<TableChunk>(Token(), chunk, std::string(wire));
  absl::StatusOr<ChunkView> view = ChunkViewOfWire(made->wire_);
  if (!view.ok()) return view.status();
  made->view_ = *std::move(view);
  return made;
}

ChunkData TableChunk::ToProto() const {
  ChunkData chunk;
  chunk.ParseFromArray(wire_.data(), static_cast<int>(wire_.size()));
  return chunk;
}

}  // namespace tf_reverb
