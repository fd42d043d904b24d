#include "server/service/insert_request.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "google/protobuf/stubs/logging.h"
#include "grpcpp/support/slice.h"
#include "server/chunk_view.h"
#include "server/service/raw_request.h"
#include "server/wire_reader.h"

namespace tf_reverb {
namespace {

constexpr int kChunksField = 1;  // InsertStreamRequest.chunks

// Reads a message spread over gRPC slices from the front, copying out what
// it reads.
class SliceReader {
 public:
  explicit SliceReader(const std::vector<grpc::Slice>& slices) : slices_(slices) {
    for (const grpc::Slice& slice : slices) left_ += slice.size();
    SkipEmpty();
  }

  bool done() const { return index_ == slices_.size(); }

  // Reads a varint of at most `max_bytes` bytes, appending its bytes to
  // `*raw`.
  bool Varint(size_t max_bytes, uint64_t* value, std::string* raw) {
    uint64_t result = 0;
    for (size_t i = 0; i < max_bytes && !done(); ++i) {
      const uint8_t byte = Current()[offset_];
      raw->push_back(static_cast<char>(byte));
      Advance(1);
      result |= uint64_t{byte & 0x7fu} << (7 * i);
      if ((byte & 0x80u) == 0) {
        *value = result;
        return true;
      }
    }
    return false;
  }

  // Appends the next `n` bytes to `*out` (nothing when fewer are left).
  bool Copy(size_t n, std::string* out) {
    if (n > left_) return false;
    if (out->empty()) out->reserve(n);  // a chunk's own string: one allocation, no zero-fill
    while (n > 0) {
      const size_t here = std::min(n, slices_[index_].size() - offset_);
      out->append(reinterpret_cast<const char*>(Current() + offset_), here);
      n -= here;
      Advance(here);
    }
    return true;
  }

 private:
  const uint8_t* Current() const { return slices_[index_].begin(); }
  void Advance(size_t n) {
    left_ -= n;
    offset_ += n;
    if (offset_ == slices_[index_].size()) {
      ++index_;
      offset_ = 0;
      SkipEmpty();
    }
  }
  void SkipEmpty() {
    while (index_ < slices_.size() && slices_[index_].size() == 0) ++index_;
  }

  const std::vector<grpc::Slice>& slices_;
  size_t index_ = 0;
  size_t offset_ = 0;
  size_t left_ = 0;  // bytes not read yet
};

// Splits the request into its plain chunks and the bytes of everything else;
// false for anything it leaves to protobuf.
bool Split(const grpc::ByteBuffer& bytes, std::string* rest,
           std::vector<ServerInsertStream::WireChunk>* wire_chunks) {
  std::vector<grpc::Slice> slices;
  if (!bytes.Dump(&slices).ok()) return false;
  SliceReader reader(slices);
  std::string prefix;
  while (!reader.done()) {
    prefix.clear();
    uint64_t tag = 0;
    if (!reader.Varint(WireReader::kMaxPrefixBytes, &tag, &prefix)) return false;
    const uint64_t field = tag >> 3;
    const int type = static_cast<int>(tag & 7);
    if (field == 0 || field > (uint64_t{1} << 29)) return false;
    uint64_t value = 0;
    switch (type) {
      case WireReader::kVarint:
        if (!reader.Varint(10, &value, &prefix)) return false;
        rest->append(prefix);
        break;
      case WireReader::kFixed64:
      case WireReader::kFixed32:
        rest->append(prefix);
        if (!reader.Copy(type == WireReader::kFixed64 ? 8 : 4, rest)) return false;
        break;
      case WireReader::kLengthDelimited: {
        if (!reader.Varint(WireReader::kMaxPrefixBytes, &value, &prefix) ||
            value >= WireReader::kMaxProtobufLength) {
          return false;
        }
        if (field != kChunksField) {
          rest->append(prefix);
          if (!reader.Copy(value, rest)) return false;
          break;
        }
        ServerInsertStream::WireChunk chunk;
        if (!reader.Copy(value, &chunk.wire)) return false;
        bool plain = false;
        absl::StatusOr<ChunkView> view = ChunkViewOfWire(chunk.wire, &plain);
        if (!view.ok() || !plain) return false;
        chunk.key = view->key;
        wire_chunks->push_back(std::move(chunk));
        break;
      }
      default:  // groups (protobuf skips them as unknown fields), bad wire types
        return false;
    }
  }
  return true;
}

}  // namespace

absl::Status ReadInsertRequest(const grpc::ByteBuffer& bytes,
                               deepmind::reverb::InsertStreamRequest* request,
                               std::vector<ServerInsertStream::WireChunk>* wire_chunks) {
  std::string rest;
  wire_chunks->clear();
  if (Split(bytes, &rest, wire_chunks)) {
    google::protobuf::LogSilencer quiet;  // as ParseRequest: no log line per bad string
    if (request->ParseFromString(rest)) return absl::OkStatus();
  }
  wire_chunks->clear();
  return ParseRequest(bytes, request);  // parsing clears `request` first
}

}  // namespace tf_reverb
