#include "server/service/sample_response.h"

#include <algorithm>
#include <cstddef>
#include <memory>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream.h"
#include "grpcpp/support/slice.h"
#include "reverb_service.pb.h"
#include "server/chunk_codec.h"
#include "server/table_chunk.h"

namespace tf_reverb {
namespace {

// A protobuf output stream into gRPC slices that aliases large byte fields
// instead of copying them: protobuf hands every bytes field that does not fit
// the current buffer (so any of more than kBlockBytes) to WriteAliasedRaw,
// which ends the current slice and adds one that references the field's
// bytes, keeping `owner` (the chunks those bytes live in) alive until gRPC
// releases the slice. Everything else (tags, lengths, small fields) is copied
// into one buffer, cut into slices in order at the end.
class AliasingSliceStream : public google::protobuf::io::ZeroCopyOutputStream {
 public:
  // Bytes handed out per Next(): fields larger than this are aliased.
  static constexpr int kBlockBytes = 4096;

  explicit AliasingSliceStream(std::shared_ptr<const void> owner) : owner_(std::move(owner)) {}

  bool Next(void** data, int* size) override {
    if (copied_.size() + kBlockBytes > copied_.capacity()) {
      copied_.reserve(std::max<size_t>(2 * copied_.capacity(), 4 * kBlockBytes));
    }
    const size_t start = copied_.size();
    copied_.resize(start + kBlockBytes);
    *data = copied_.data() + start;
    *size = kBlockBytes;
    return true;
  }
  void BackUp(int count) override { copied_.resize(copied_.size() - count); }
  int64_t ByteCount() const override {
    return static_cast<int64_t>(copied_.size()) + aliased_bytes_;
  }
  bool AllowsAliasing() const override { return true; }
  bool WriteAliasedRaw(const void* data, int size) override {
    EndCopiedSegment();
    segments_.push_back({static_cast<const char*>(data), static_cast<size_t>(size)});
    aliased_bytes_ += size;
    return true;
  }

  // The slices of everything written, in order.
  grpc::ByteBuffer Finish() {
    EndCopiedSegment();
    auto* copied = new std::string(std::move(copied_));
    grpc::Slice whole(
        copied->data(), copied->size(), [](void* p) { delete static_cast<std::string*>(p); },
        copied);
    std::vector<grpc::Slice> slices;
    slices.reserve(segments_.size());
    for (const Segment& segment : segments_) {
      if (segment.data == nullptr) {
        slices.push_back(whole.sub(segment.offset, segment.offset + segment.size));
      } else {
        slices.emplace_back(
            const_cast<char*>(segment.data), segment.size,
            [](void* p) { delete static_cast<std::shared_ptr<const void>*>(p); },
            new std::shared_ptr<const void>(owner_));
      }
    }
    return grpc::ByteBuffer(slices.data(), slices.size());
  }

 private:
  // A range of copied_ (data == nullptr) or aliased bytes.
  struct Segment {
    const char* data;
    size_t size;
    size_t offset = 0;
  };

  void EndCopiedSegment() {
    if (copied_.size() > segment_start_) {
      segments_.push_back({nullptr, copied_.size() - segment_start_, segment_start_});
    }
    segment_start_ = copied_.size();
  }

  const std::shared_ptr<const void> owner_;
  std::string copied_;
  size_t segment_start_ = 0;
  std::vector<Segment> segments_;
  int64_t aliased_bytes_ = 0;
};

// One SampleStreamResponse.SampleEntry: its SampleInfo (serialized) and the
// wire bytes of its chunks (serialized ChunkData messages).
struct ResponseEntry {
  std::string info;
  bool has_info = false;
  std::vector<absl::string_view> chunks;
  bool end_of_sequence = false;
};

// Wire tags of the fields written (field number << 3 | wire type).
constexpr uint32_t kEntriesTag = (1 << 3) | 2;    // SampleStreamResponse.entries
constexpr uint32_t kInfoTag = (1 << 3) | 2;       // SampleEntry.info
constexpr uint32_t kDataTag = (2 << 3) | 2;       // SampleEntry.data
constexpr uint32_t kEndOfSequenceTag = (3 << 3);  // SampleEntry.end_of_sequence

size_t LengthDelimitedSize(size_t size) {
  return 1 + google::protobuf::io::CodedOutputStream::VarintSize64(size) + size;
}

size_t EntrySize(const ResponseEntry& entry) {
  size_t size = entry.has_info ? LengthDelimitedSize(entry.info.size()) : 0;
  for (absl::string_view chunk : entry.chunks) size += LengthDelimitedSize(chunk.size());
  return size + (entry.end_of_sequence ? 2 : 0);
}

// A SampleStreamResponse of `entries` in protobuf's canonical encoding (what
// serializing the message would give), the chunks' large payloads aliased as
// SerializeAliasingLargeFields does; `owner` keeps the chunks' bytes alive.
absl::StatusOr<grpc::ByteBuffer> SerializeEntries(const std::vector<ResponseEntry>& entries,
                                                  std::shared_ptr<const void> owner) {
  size_t total = 0;
  for (const ResponseEntry& entry : entries) total += LengthDelimitedSize(EntrySize(entry));
  if (total > static_cast<size_t>(INT32_MAX)) {
    return absl::InternalError(absl::StrCat("A ", total, "-byte message is too large to send."));
  }
  AliasingSliceStream stream(std::move(owner));
  {
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.EnableAliasing(true);
    for (const ResponseEntry& entry : entries) {
      coded.WriteTag(kEntriesTag);
      coded.WriteVarint64(EntrySize(entry));
      if (entry.has_info) {
        coded.WriteTag(kInfoTag);
        coded.WriteVarint64(entry.info.size());
        coded.WriteRaw(entry.info.data(), static_cast<int>(entry.info.size()));
      }
      for (absl::string_view chunk : entry.chunks) {
        coded.WriteTag(kDataTag);
        coded.WriteVarint64(chunk.size());
        coded.WriteRawMaybeAliased(chunk.data(), static_cast<int>(chunk.size()));
      }
      if (entry.end_of_sequence) {
        coded.WriteTag(kEndOfSequenceTag);
        coded.WriteVarint32(1);
      }
    }
    if (coded.HadError()) return absl::InternalError("Serializing a message failed.");
  }
  if (stream.ByteCount() != static_cast<int64_t>(total)) {
    return absl::InternalError(
        absl::StrCat("Serialized ", stream.ByteCount(), " bytes of a ", total, "-byte message."));
  }
  return stream.Finish();
}

}  // namespace

absl::StatusOr<grpc::ByteBuffer> SerializeAliasingLargeFields(
    const google::protobuf::MessageLite& message, std::shared_ptr<const void> owner) {
  const size_t size = message.ByteSizeLong();
  if (size > static_cast<size_t>(INT32_MAX)) {
    return absl::InternalError(absl::StrCat("A ", size, "-byte message is too large to send."));
  }
  AliasingSliceStream stream(std::move(owner));
  {
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.EnableAliasing(true);
    message.SerializeWithCachedSizes(&coded);
    if (coded.HadError()) return absl::InternalError("Serializing a message failed.");
  }
  if (stream.ByteCount() != static_cast<int64_t>(size)) {
    return absl::InternalError(
        absl::StrCat("Serialized ", stream.ByteCount(), " bytes of a ", size, "-byte message."));
  }
  return stream.Finish();
}

absl::StatusOr<std::vector<grpc::ByteBuffer>> EncodeSampleResponses(
    const std::vector<SampledItem>& samples, bool client_accepts_zstd) {
  std::vector<grpc::ByteBuffer> out;
  // The response being built: its entries and what their bytes live in.
  std::vector<ResponseEntry> entries;
  auto owners = std::make_shared<std::vector<std::shared_ptr<const void>>>();
  int64_t bytes = 0;
  // zstd chunks as Snappy, per chunk key (once per call).
  absl::flat_hash_map<uint64_t, std::shared_ptr<const std::string>> transcoded;
  auto flush = [&]() -> absl::Status {
    absl::StatusOr<grpc::ByteBuffer> buffer = SerializeEntries(entries, std::move(owners));
    entries.clear();
    owners = std::make_shared<std::vector<std::shared_ptr<const void>>>();
    bytes = 0;
    if (!buffer.ok()) {
      return absl::InternalError(
          absl::StrCat("Serializing a SampleStreamResponse failed: ", buffer.status().message()));
    }
    out.push_back(*std::move(buffer));
    return absl::OkStatus();
  };
  // The wire bytes of `chunk` as the client can read them, and their owner.
  using Sendable = std::pair<absl::string_view, std::shared_ptr<const void>>;
  auto sendable = [&](const std::shared_ptr<const TableChunk>& chunk) -> absl::StatusOr<Sendable> {
    if (client_accepts_zstd || chunk->compression() == kSnappy) {
      return Sendable(chunk->wire(), chunk);
    }
    auto it = transcoded.find(chunk->key());
    if (it == transcoded.end()) {
      ChunkData copy = chunk->ToProto();
      if (absl::Status s = TranscodeChunk(&copy, kSnappy); !s.ok()) return s;
      auto wire = std::make_shared<const std::string>(copy.SerializeAsString());
      it = transcoded.emplace(chunk->key(), std::move(wire)).first;
    }
    return Sendable(*it->second, it->second);
  };
  for (const SampledItem& sample : samples) {
    entries.emplace_back();
    entries.back().info = SampleInfoWire(sample);
    entries.back().has_info = true;
    for (const auto& stored : sample.data->chunks) {
      absl::StatusOr<Sendable> chunk = sendable(stored);
      if (!chunk.ok()) return chunk.status();
      if (bytes >= kMaxSampleResponseBytes) {
        if (absl::Status s = flush(); !s.ok()) return s;
        entries.emplace_back();
      }
      // Owned by the response the bytes go in (after any flush above).
      bytes += static_cast<int64_t>(chunk->first.size());
      entries.back().chunks.push_back(chunk->first);
      owners->push_back(std::move(chunk->second));
    }
    entries.back().end_of_sequence = true;
    if (bytes >= kMaxSampleResponseBytes) {
      if (absl::Status s = flush(); !s.ok()) return s;
    }
  }
  if (!entries.empty()) {
    if (absl::Status s = flush(); !s.ok()) return s;
  }
  return out;
}

}  // namespace tf_reverb
