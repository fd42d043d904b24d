#include "server/service/sample_response.h"

#include <algorithm>
#include <cstddef>
#include <memory>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream.h"
#include "grpcpp/support/slice.h"
#include "reverb_service.pb.h"
#include "server/chunk_codec.h"

namespace tf_reverb {
namespace {

using ::deepmind::reverb::SampleStreamResponse;

int64_t ChunkWireBytes(const ChunkData& chunk) {
  int64_t bytes = 0;
  for (const auto& tensor : chunk.data().tensors()) bytes += tensor.tensor_content().size();
  return bytes;
}

// A SampleStreamResponse whose entries borrow the (immutable, shared) chunks
// of the sampled items instead of copying them: the chunks are added with
// UnsafeArenaAddAllocated and released again before the response is cleared
// or destroyed. Serializing a shared const message from several threads at
// once is safe (protobuf's cached sizes are relaxed atomics). Borrow() keeps
// a reference to the chunk until Clear(), so transcoded copies live exactly
// as long as they are needed.
class BorrowingResponse {
 public:
  ~BorrowingResponse() { Clear(); }

  SampleStreamResponse& proto() { return response_; }
  void Borrow(SampleStreamResponse::SampleEntry* entry, std::shared_ptr<const ChunkData> chunk) {
    entry->mutable_data()->UnsafeArenaAddAllocated(const_cast<ChunkData*>(chunk.get()));
    borrowed_.push_back(std::move(chunk));
  }
  // The chunks borrowed since the last Clear(), as one owner.
  std::shared_ptr<const void> Borrowed() const {
    return std::make_shared<const std::vector<std::shared_ptr<const ChunkData>>>(borrowed_);
  }
  void Clear() {
    for (auto& entry : *response_.mutable_entries()) {
      while (entry.data_size() > 0) entry.mutable_data()->UnsafeArenaReleaseLast();
    }
    response_.Clear();
    borrowed_.clear();
  }

 private:
  SampleStreamResponse response_;
  std::vector<std::shared_ptr<const ChunkData>> borrowed_;
};

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
  BorrowingResponse response;
  int64_t bytes = 0;
  absl::flat_hash_map<uint64_t, std::shared_ptr<const ChunkData>> transcoded;
  auto flush = [&]() -> absl::Status {
    absl::StatusOr<grpc::ByteBuffer> buffer =
        SerializeAliasingLargeFields(response.proto(), response.Borrowed());
    response.Clear();
    bytes = 0;
    if (!buffer.ok()) {
      return absl::InternalError(
          absl::StrCat("Serializing a SampleStreamResponse failed: ", buffer.status().message()));
    }
    out.push_back(*std::move(buffer));
    return absl::OkStatus();
  };
  auto sendable = [&](const std::shared_ptr<const ChunkData>& chunk)
      -> absl::StatusOr<std::shared_ptr<const ChunkData>> {
    if (client_accepts_zstd || chunk->compression() == kSnappy) return chunk;
    auto it = transcoded.find(chunk->chunk_key());
    if (it != transcoded.end()) return it->second;
    auto copy = std::make_shared<ChunkData>(*chunk);
    if (absl::Status s = TranscodeChunk(copy.get(), kSnappy); !s.ok()) return s;
    transcoded.emplace(chunk->chunk_key(), copy);
    return copy;
  };
  for (const SampledItem& sample : samples) {
    auto* entry = response.proto().add_entries();
    *entry->mutable_info() = SampleInfoOf(sample);
    for (const auto& stored : sample.data->chunks) {
      absl::StatusOr<std::shared_ptr<const ChunkData>> chunk = sendable(stored);
      if (!chunk.ok()) return chunk.status();
      if (bytes >= kMaxSampleResponseBytes) {
        if (absl::Status s = flush(); !s.ok()) return s;
        entry = response.proto().add_entries();
      }
      bytes += ChunkWireBytes(**chunk);
      response.Borrow(entry, *std::move(chunk));
    }
    entry->set_end_of_sequence(true);
    if (bytes >= kMaxSampleResponseBytes) {
      if (absl::Status s = flush(); !s.ok()) return s;
    }
  }
  if (response.proto().entries_size() > 0) {
    if (absl::Status s = flush(); !s.ok()) return s;
  }
  return out;
}

}  // namespace tf_reverb
