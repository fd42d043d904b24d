#include "reverb_service.h"

#include <unistd.h>

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "chunk_codec.h"
#include "grpc_status.h"

namespace tf_reverb {
namespace {

using ::deepmind::reverb::InsertStreamRequest;
using ::deepmind::reverb::InsertStreamResponse;
using ::deepmind::reverb::SampleStreamRequest;
using ::deepmind::reverb::SampleStreamResponse;

// Counts a handler as inside a table call for its lifetime.
class InTableCall {
 public:
  explicit InTableCall(std::atomic<int>* counter) : counter_(counter) { ++*counter_; }
  ~InTableCall() { --*counter_; }

 private:
  std::atomic<int>* counter_;
};

int64_t ChunkWireBytes(const ChunkData& chunk) {
  int64_t bytes = 0;
  for (const auto& tensor : chunk.data().tensors()) bytes += tensor.tensor_content().size();
  return bytes;
}

// A SampleStreamResponse whose entries borrow the (immutable, shared) chunks
// of the sampled items instead of copying them: the chunks are added with
// UnsafeArenaAddAllocated and released again before the response is cleared
// or destroyed. Write() serializes synchronously, and serializing a shared
// const message from several streams at once is safe (protobuf's cached
// sizes are relaxed atomics). Borrow() keeps a reference to the chunk until
// Clear(), so transcoded copies live exactly as long as they are needed.
class BorrowingResponse {
 public:
  ~BorrowingResponse() { Clear(); }

  SampleStreamResponse& proto() { return response_; }
  void Borrow(deepmind::reverb::SampleStreamResponse::SampleEntry* entry,
              std::shared_ptr<const ChunkData> chunk) {
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

// Whether the client's request metadata announced that it decodes zstd.
bool ClientAcceptsZstd(const grpc::ServerContext& context) {
  auto range = context.client_metadata().equal_range(kChunkCodecsMetadataKey);
  for (auto it = range.first; it != range.second; ++it) {
    if (CodecsListZstd(absl::string_view(it->second.data(), it->second.size()))) {
      return true;
    }
  }
  return false;
}

// Writes `samples` as SampleEntries (reverb-spec.md §4.4): several items per
// response, an item's chunks split over responses once a response holds
// kMaxSampleResponseBytes; the first entry of an item carries its info, the
// last one end_of_sequence. Unless `client_accepts_zstd`, zstd chunks are
// sent transcoded to Snappy (once per chunk per call). Returns CANCELLED when
// the client went away, DATA_LOSS for a chunk that cannot be transcoded.
grpc::Status WriteSamples(
    const std::vector<SampledItem>& samples, bool client_accepts_zstd,
    grpc::ServerReaderWriter<SampleStreamResponse, SampleStreamRequest>* stream) {
  BorrowingResponse response;
  int64_t bytes = 0;
  absl::flat_hash_map<uint64_t, std::shared_ptr<const ChunkData>> transcoded;
  auto flush = [&]() {
    bool ok = stream->Write(response.proto());
    response.Clear();
    bytes = 0;
    return ok;
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
      if (!chunk.ok()) return ToGrpcStatus(chunk.status());
      if (bytes >= kMaxSampleResponseBytes) {
        if (!flush()) return grpc::Status::CANCELLED;
        entry = response.proto().add_entries();
      }
      bytes += ChunkWireBytes(**chunk);
      response.Borrow(entry, *std::move(chunk));
    }
    entry->set_end_of_sequence(true);
    if (bytes >= kMaxSampleResponseBytes && !flush()) return grpc::Status::CANCELLED;
  }
  if (response.proto().entries_size() > 0 && !flush()) return grpc::Status::CANCELLED;
  return grpc::Status::OK;
}

}  // namespace

ReverbServiceImpl::ReverbServiceImpl(std::vector<std::shared_ptr<Table>> tables,
                                     std::shared_ptr<Checkpointer> checkpointer)
    : tables_(std::move(tables)),
      checkpointer_(std::move(checkpointer)),
      announce_zstd_(ZstdEnabledByEnvironment()) {
  for (const auto& table : tables_) by_name_[table->name()] = table;
  absl::BitGen gen;
  tables_state_id_.set_high(absl::Uniform<uint64_t>(gen));
  tables_state_id_.set_low(absl::Uniform<uint64_t>(gen));
}

absl::StatusOr<std::shared_ptr<Table>> ReverbServiceImpl::GetTable(
    const std::string& name) const {
  auto it = by_name_.find(name);
  if (it == by_name_.end()) {
    return absl::NotFoundError(absl::StrCat("Priority table ", name, " was not found"));
  }
  return it->second;
}

void ReverbServiceImpl::Close() {
  for (const auto& table : tables_) table->Close();
}

std::string ReverbServiceImpl::DebugString() const {
  std::vector<std::string> parts;
  for (const auto& table : tables_) parts.push_back(table->DebugString());
  return absl::StrCat("ReverbService(tables=[", absl::StrJoin(parts, ", "), "])");
}

grpc::Status ReverbServiceImpl::Checkpoint(grpc::ServerContext*,
                                           const deepmind::reverb::CheckpointRequest*,
                                           deepmind::reverb::CheckpointResponse* response) {
  if (checkpointer_ == nullptr) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "no Checkpointer configured for the replay service.");
  }
  absl::StatusOr<std::string> path = checkpointer_->Save(tables_);
  if (!path.ok()) return ToGrpcStatus(path.status());
  response->set_checkpoint_path(*path);
  return grpc::Status::OK;
}

grpc::Status ReverbServiceImpl::InsertStream(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<InsertStreamResponse, InsertStreamRequest>* stream) {
  // Sent at once (not with the first response) so that writers learn the
  // codecs before their first chunk; Reverb clients ignore it.
  if (announce_zstd()) context->AddInitialMetadata(kChunkCodecsMetadataKey, kZstdCodecName);
  stream->SendInitialMetadata();
  absl::flat_hash_map<uint64_t, std::shared_ptr<const ChunkData>> chunks;
  auto cancelled = [context]() { return context->IsCancelled(); };
  InsertStreamRequest request;
  while (stream->Read(&request)) {
    if (request.chunks_size() == 0 && request.items_size() == 0) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "Request lacks both chunks and item");
    }
    for (auto& chunk : *request.mutable_chunks()) {
      if (absl::Status s = CheckCompression(chunk.compression()); !s.ok()) {
        return ToGrpcStatus(s);
      }
      const uint64_t key = chunk.chunk_key();
      if (!chunks.contains(key)) {
        chunks.emplace(key, std::make_shared<const ChunkData>(std::move(chunk)));
      }
    }
    if (request.items_size() == 0) continue;
    InsertStreamResponse response;
    for (auto& item : *request.mutable_items()) {
      absl::StatusOr<std::shared_ptr<Table>> table = GetTable(item.table());
      if (!table.ok()) return ToGrpcStatus(table.status());
      TableItem table_item;
      for (uint64_t key : UniqueChunkKeys(item.flat_trajectory())) {
        auto it = chunks.find(key);
        if (it == chunks.end()) {
          return grpc::Status(grpc::StatusCode::INTERNAL,
                              absl::StrCat("Could not find sequence chunk ", key, "."));
        }
        table_item.chunks.push_back(it->second);
      }
      const uint64_t key = item.key();
      table_item.item = std::make_shared<const PrioritizedItem>(std::move(item));
      // About to block in the rate limiter: confirm the items already
      // inserted first, so a writer's flush is not held up by later items.
      if (response.keys_size() > 0 && !(*table)->CanInsert(1)) {
        if (!stream->Write(response)) return grpc::Status::OK;
        response.Clear();
      }
      absl::Status status;
      {
        InTableCall in_table(&calls_in_tables_);
        status = (*table)->InsertOrAssign(std::move(table_item),
                                          absl::InfiniteDuration(), cancelled);
      }
      if (!status.ok()) return ToGrpcStatus(status);
      response.add_keys(key);
    }
    absl::flat_hash_set<uint64_t> keep(request.keep_chunk_keys().begin(),
                                       request.keep_chunk_keys().end());
    absl::erase_if(chunks, [&keep](const auto& entry) { return !keep.contains(entry.first); });
    if (chunks.size() != keep.size()) {
      return grpc::Status(
          grpc::StatusCode::FAILED_PRECONDITION,
          absl::StrCat("ReleaseOutOfRangeChunks: Kept less chunks than expected (",
                       chunks.size(), " of ", keep.size(), ")."));
    }
    if (!stream->Write(response)) break;
  }
  return grpc::Status::OK;
}

grpc::Status ReverbServiceImpl::MutatePriorities(
    grpc::ServerContext*, const deepmind::reverb::MutatePrioritiesRequest* request,
    deepmind::reverb::MutatePrioritiesResponse*) {
  absl::StatusOr<std::shared_ptr<Table>> table = GetTable(request->table());
  if (!table.ok()) return ToGrpcStatus(table.status());
  std::vector<deepmind::reverb::KeyWithPriority> updates(request->updates().begin(),
                                                         request->updates().end());
  std::vector<uint64_t> deletes(request->delete_keys().begin(),
                                request->delete_keys().end());
  return ToGrpcStatus((*table)->MutateItems(updates, deletes));
}

grpc::Status ReverbServiceImpl::Reset(grpc::ServerContext*,
                                      const deepmind::reverb::ResetRequest* request,
                                      deepmind::reverb::ResetResponse*) {
  absl::StatusOr<std::shared_ptr<Table>> table = GetTable(request->table());
  if (!table.ok()) return ToGrpcStatus(table.status());
  (*table)->Reset();
  return grpc::Status::OK;
}

grpc::Status ReverbServiceImpl::SampleStream(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<SampleStreamResponse, SampleStreamRequest>* stream) {
  auto cancelled = [context]() { return context->IsCancelled(); };
  const bool client_accepts_zstd = ClientAcceptsZstd(*context);
  SampleStreamRequest request;
  while (stream->Read(&request)) {
    if (request.num_samples() <= 0) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          absl::StrCat("num_samples must be > 0, got ",
                                       request.num_samples()));
    }
    absl::StatusOr<std::shared_ptr<Table>> table = GetTable(request.table());
    if (!table.ok()) return ToGrpcStatus(table.status());
    // Reverb clients send 0 or -1 for "no timeout"; only > 0 is a timeout.
    const int64_t timeout_ms = request.rate_limiter_timeout().milliseconds();
    const absl::Duration timeout =
        timeout_ms > 0 ? absl::Milliseconds(timeout_ms) : absl::InfiniteDuration();
    int64_t remaining = request.num_samples();
    int64_t last_batch = 64;
    while (remaining > 0) {
      std::vector<SampledItem> batch;
      absl::Status status;
      {
        InTableCall in_table(&calls_in_tables_);
        status = (*table)->SampleBatch(std::min(2 * last_batch, remaining), timeout,
                                       &batch, cancelled);
      }
      if (!status.ok()) return ToGrpcStatus(status);
      last_batch = static_cast<int64_t>(batch.size());
      remaining -= last_batch;
      if (grpc::Status s = WriteSamples(batch, client_accepts_zstd, stream); !s.ok()) {
        return s;
      }
    }
  }
  return grpc::Status::OK;
}

grpc::Status ReverbServiceImpl::ServerInfo(grpc::ServerContext*,
                                           const deepmind::reverb::ServerInfoRequest*,
                                           deepmind::reverb::ServerInfoResponse* response) {
  *response->mutable_tables_state_id() = tables_state_id_;
  for (const auto& table : tables_) *response->add_table_info() = table->Info();
  return grpc::Status::OK;
}

grpc::Status ReverbServiceImpl::InitializeConnection(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<deepmind::reverb::InitializeConnectionResponse,
                             deepmind::reverb::InitializeConnectionRequest>* stream) {
  // Sharing table pointers across implementations is unsafe, so every client
  // is told to use gRPC (address 0); our own client finds in-process tables
  // through the server registry instead.
  deepmind::reverb::InitializeConnectionRequest request;
  if (!stream->Read(&request)) return grpc::Status::OK;
  if (!GetTable(request.table_name()).ok()) {
    return ToGrpcStatus(GetTable(request.table_name()).status());
  }
  deepmind::reverb::InitializeConnectionResponse response;
  response.set_address(0);
  stream->Write(response);
  return grpc::Status::OK;
}

}  // namespace tf_reverb
