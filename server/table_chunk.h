// TableChunk: a chunk as tables store it (docs/concepts/items-and-chunks.md).
//
// A chunk arrives as a ChunkData proto: a tree of about ten messages, some
// 800 bytes of heap for a chunk of a few floats. A table keeps instead the
// chunk's wire encoding in one buffer, beside the few fields the table reads
// (key, episode, byte counts, codec). That is what sample responses,
// checkpoints and the write-ahead log send and write as they are;
// decoders read it through a ChunkView (chunk_view.h) without copying.
//
// Contract: immutable once made, so shared freely between threads (tables,
// samples in flight, insert streams) by std::shared_ptr<const TableChunk>.
// FromProto takes a chunk ValidateChunk (chunk_validation.h) accepted;
// FromWire validates itself and returns INVALID_ARGUMENT as ValidateChunk
// does for what it rejects, DATA_LOSS for unparsable bytes; FromPlainWire
// validates the same way and returns FAILED_PRECONDITION for bytes that are
// not a plain encoding (chunk_view.h), which its caller parses instead.
#ifndef TF_REVERB_SERVER_TABLE_CHUNK_H_
#define TF_REVERB_SERVER_TABLE_CHUNK_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "schema.pb.h"
#include "server/chunk_view.h"

namespace tf_reverb {

using ChunkData = deepmind::reverb::ChunkData;

class TableChunk {
 public:
  // `chunk` must be valid (ValidateChunk).
  static std::shared_ptr<const TableChunk> FromProto(const ChunkData& chunk);
  // Validates a serialized ChunkData and keeps a copy of its bytes: read
  // where they lie when in the plain encoding (ChunkViewOfWire), parsed by
  // protobuf otherwise. How checkpoints are loaded.
  static absl::StatusOr<std::shared_ptr<const TableChunk>> FromWire(absl::string_view wire);
  // Validates a serialized ChunkData in the plain encoding
  // (ChunkViewOfWire) and keeps `wire` itself, without parsing or copying
  // it: how an inserted chunk is stored (server/service/insert_request.h).
  static absl::StatusOr<std::shared_ptr<const TableChunk>> FromPlainWire(std::string wire);

  TableChunk(const TableChunk&) = delete;
  TableChunk& operator=(const TableChunk&) = delete;

  uint64_t key() const { return key_; }
  uint64_t episode_id() const { return episode_id_; }
  ChunkCompression compression() const { return compression_; }
  // Bytes of the tensors' payloads as stored (compressed).
  int64_t stored_bytes() const { return stored_bytes_; }
  // ChunkData.data_uncompressed_size.
  int64_t uncompressed_bytes() const { return uncompressed_bytes_; }
  // The ChunkData's wire encoding.
  absl::string_view wire() const { return wire_; }

  // The chunk's tensors, pointing into wire(). DATA_LOSS if the bytes do
  // not parse (they are this process's own encoding of a valid chunk).
  absl::StatusOr<ChunkView> View() const;
  // The chunk as a proto (a copy: for the rare paths that change it).
  ChunkData ToProto() const;

  // Only for the factories above (a token they alone can make), so that
  // std::make_shared holds the chunk and its count in one allocation.
  class Token {
   private:
    friend class TableChunk;
    Token() = default;
  };
  // `view` is of the chunk `wire` encodes (only its scalars are read).
  TableChunk(Token, const ChunkView& view, std::string wire);

 private:
  // Validates `view`, the chunk `wire` encodes, and keeps `wire`.
  static absl::StatusOr<std::shared_ptr<const TableChunk>> FromView(const ChunkView& view,
                                                                    std::string wire);

  const std::string wire_;
  const uint64_t key_;
  const uint64_t episode_id_;
  const int64_t stored_bytes_;
  const int64_t uncompressed_bytes_;
  const ChunkCompression compression_;
};

}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_TABLE_CHUNK_H_
