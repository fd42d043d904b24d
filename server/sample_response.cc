#include "sample_response.h"

#include <memory>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "chunk_codec.h"
#include "grpcpp/impl/codegen/proto_utils.h"
#include "reverb_service.pb.h"

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

}  // namespace

absl::StatusOr<std::vector<grpc::ByteBuffer>> EncodeSampleResponses(
    const std::vector<SampledItem>& samples, bool client_accepts_zstd) {
  std::vector<grpc::ByteBuffer> out;
  BorrowingResponse response;
  int64_t bytes = 0;
  absl::flat_hash_map<uint64_t, std::shared_ptr<const ChunkData>> transcoded;
  auto flush = [&]() -> absl::Status {
    grpc::ByteBuffer buffer;
    bool own = false;
    grpc::Status s = grpc::SerializationTraits<SampleStreamResponse>::Serialize(
        response.proto(), &buffer, &own);
    response.Clear();
    bytes = 0;
    if (!s.ok()) {
      return absl::InternalError(absl::StrCat("Serializing a SampleStreamResponse failed: ",
                                              s.error_message()));
    }
    out.push_back(std::move(buffer));
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
    auto* info = entry->mutable_info();
    *info->mutable_item() = *sample.data.item;
    info->mutable_item()->set_priority(sample.priority);
    info->mutable_item()->set_times_sampled(sample.times_sampled);
    info->set_probability(sample.probability);
    info->set_table_size(sample.table_size);
    info->set_rate_limited(sample.rate_limited);
    for (const auto& stored : sample.data.chunks) {
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
