#include "reverb_service.h"

#include <unistd.h>

#include <algorithm>
#include <exception>
#include <new>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "chunk_codec.h"
#include "grpc_status.h"
#include "grpcpp/support/method_handler.h"
#include "grpcpp/support/proto_buffer_reader.h"
#include "insert_stream.h"
#include "scoped_counter.h"

namespace tf_reverb {
namespace {

using ::deepmind::reverb::InsertStreamRequest;
using ::deepmind::reverb::InsertStreamResponse;
using ::deepmind::reverb::SampleStreamRequest;
using ::deepmind::reverb::SampleStreamResponse;

// Method indices: positions of the rpcs in proto/reverb_service.proto.
enum MethodIndex {
  kCheckpoint = 0,
  kInsertStream = 1,
  kMutatePriorities = 2,
  kReset = 3,
  kSampleStream = 4,
  kServerInfo = 5,
  kInitializeConnection = 6,
};

// Parses a request that arrived as raw bytes. INVALID_ARGUMENT naming the
// message type when the bytes are not one (garbage, a message cut short).
template <typename Request>
absl::Status ParseRequest(grpc::ByteBuffer* buffer, Request* request) {
  grpc::ProtoBufferReader reader(buffer);
  if (reader.status().ok() && request->ParseFromZeroCopyStream(&reader)) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("Could not parse the ", request->GetTypeName(), " (",
                   buffer->Length(), " bytes): not a valid serialized message."));
}

// Runs a handler body; an exception escaping it (a bug of ours, or memory
// running out) becomes a status instead of gRPC's UNKNOWN.
template <typename Body>
grpc::Status Guarded(const char* method, Body&& body) {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                        absl::StrCat(method, ": the server ran out of memory."));
  } catch (const std::exception& e) {
    return grpc::Status(grpc::StatusCode::INTERNAL,
                        absl::StrCat(method, ": unexpected error: ", e.what()));
  } catch (...) {
    return grpc::Status(grpc::StatusCode::INTERNAL,
                        absl::StrCat(method, ": unexpected error."));
  }
}

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
    grpc::ServerReaderWriter<SampleStreamResponse, grpc::ByteBuffer>* stream) {
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
  RegisterUnary(kCheckpoint, "Checkpoint", &ReverbServiceImpl::HandleCheckpoint);
  RegisterStream(kInsertStream, "InsertStream", &ReverbServiceImpl::HandleInsertStream);
  RegisterUnary(kMutatePriorities, "MutatePriorities", &ReverbServiceImpl::HandleMutatePriorities);
  RegisterUnary(kReset, "Reset", &ReverbServiceImpl::HandleReset);
  RegisterStream(kSampleStream, "SampleStream", &ReverbServiceImpl::HandleSampleStream);
  RegisterUnary(kServerInfo, "ServerInfo", &ReverbServiceImpl::HandleServerInfo);
  RegisterStream(kInitializeConnection, "InitializeConnection", &ReverbServiceImpl::HandleInitializeConnection);
}

template <typename Request, typename Response>
void ReverbServiceImpl::RegisterUnary(
    int index, const char* name,
    grpc::Status (ReverbServiceImpl::*handler)(grpc::ServerContext*, const Request&, Response*)) {
  MarkMethodStreamed(
      index,
      new grpc::internal::StreamedUnaryHandler<grpc::ByteBuffer, Response>(
          [this, name, handler](grpc::ServerContext* context,
                                grpc::ServerUnaryStreamer<grpc::ByteBuffer, Response>* stream) {
            return Guarded(name, [&]() -> grpc::Status {
              grpc::ByteBuffer buffer;
              if (!stream->Read(&buffer)) {
                return grpc::Status(
                    grpc::StatusCode::INVALID_ARGUMENT,
                    absl::StrCat(name, ": the call carried no ", Request().GetTypeName(), "."));
              }
              Request request;
              if (absl::Status s = ParseRequest(&buffer, &request); !s.ok()) {
                return ToGrpcStatus(s);
              }
              Response response;
              grpc::Status status = (this->*handler)(context, request, &response);
              if (status.ok()) stream->Write(response);
              return status;
            });
          }));
}

template <typename Response>
void ReverbServiceImpl::RegisterStream(
    int index, const char* name,
    grpc::Status (ReverbServiceImpl::*handler)(grpc::ServerContext*, RawStream<Response>*)) {
  MarkMethodStreamed(
      index, new grpc::internal::BidiStreamingHandler<ReverbServiceImpl, grpc::ByteBuffer,
                                                      Response>(
                 [name, handler](ReverbServiceImpl* service, grpc::ServerContext* context,
                                 RawStream<Response>* stream) {
                   return Guarded(name, [&]() {
                     return (service->*handler)(context, stream);
                   });
                 },
                 this));
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

grpc::Status ReverbServiceImpl::HandleCheckpoint(
    grpc::ServerContext*, const deepmind::reverb::CheckpointRequest&,
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

grpc::Status ReverbServiceImpl::HandleInsertStream(grpc::ServerContext* context,
                                                   RawStream<InsertStreamResponse>* stream) {
  // Sent at once (not with the first response) so that writers learn the
  // codecs before their first chunk; Reverb clients ignore it.
  if (announce_zstd()) context->AddInitialMetadata(kChunkCodecsMetadataKey, kZstdCodecName);
  stream->SendInitialMetadata();
  InsertStreamHandler handler(
      [this](const std::string& name) { return GetTable(name); },
      [context]() { return context->IsCancelled(); }, &calls_in_tables_);
  InsertStreamResponse response;
  auto write = [&](std::vector<uint64_t>* confirmed) {
    response.Clear();
    response.mutable_keys()->Add(confirmed->begin(), confirmed->end());
    confirmed->clear();
    return stream->Write(response);
  };
  grpc::ByteBuffer buffer;
  std::vector<uint64_t> confirmed;
  while (stream->Read(&buffer)) {
    InsertStreamRequest request;
    if (absl::Status s = ParseRequest(&buffer, &request); !s.ok()) return ToGrpcStatus(s);
    const bool has_items = request.items_size() > 0;
    absl::Status status = handler.Handle(&request, &confirmed, write);
    if (!status.ok()) return ToGrpcStatus(status);
    if (has_items && !write(&confirmed)) break;
  }
  return grpc::Status::OK;
}

grpc::Status ReverbServiceImpl::HandleMutatePriorities(
    grpc::ServerContext*, const deepmind::reverb::MutatePrioritiesRequest& request,
    deepmind::reverb::MutatePrioritiesResponse*) {
  absl::StatusOr<std::shared_ptr<Table>> table = GetTable(request.table());
  if (!table.ok()) return ToGrpcStatus(table.status());
  std::vector<deepmind::reverb::KeyWithPriority> updates(request.updates().begin(),
                                                         request.updates().end());
  std::vector<uint64_t> deletes(request.delete_keys().begin(), request.delete_keys().end());
  return ToGrpcStatus((*table)->MutateItems(updates, deletes));
}

grpc::Status ReverbServiceImpl::HandleReset(grpc::ServerContext*,
                                            const deepmind::reverb::ResetRequest& request,
                                            deepmind::reverb::ResetResponse*) {
  absl::StatusOr<std::shared_ptr<Table>> table = GetTable(request.table());
  if (!table.ok()) return ToGrpcStatus(table.status());
  (*table)->Reset();
  return grpc::Status::OK;
}

grpc::Status ReverbServiceImpl::HandleSampleStream(grpc::ServerContext* context,
                                                   RawStream<SampleStreamResponse>* stream) {
  auto cancelled = [context]() { return context->IsCancelled(); };
  const bool client_accepts_zstd = ClientAcceptsZstd(*context);
  grpc::ByteBuffer buffer;
  while (stream->Read(&buffer)) {
    SampleStreamRequest request;
    if (absl::Status s = ParseRequest(&buffer, &request); !s.ok()) return ToGrpcStatus(s);
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
        ScopedCounter in_table(&calls_in_tables_);
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

grpc::Status ReverbServiceImpl::HandleServerInfo(grpc::ServerContext*,
                                                 const deepmind::reverb::ServerInfoRequest&,
                                                 deepmind::reverb::ServerInfoResponse* response) {
  *response->mutable_tables_state_id() = tables_state_id_;
  for (const auto& table : tables_) *response->add_table_info() = table->Info();
  return grpc::Status::OK;
}

grpc::Status ReverbServiceImpl::HandleInitializeConnection(
    grpc::ServerContext*, RawStream<deepmind::reverb::InitializeConnectionResponse>* stream) {
  // Sharing table pointers across implementations is unsafe, so every client
  // is told to use gRPC (address 0); our own client finds in-process tables
  // through the server registry instead.
  grpc::ByteBuffer buffer;
  if (!stream->Read(&buffer)) return grpc::Status::OK;
  deepmind::reverb::InitializeConnectionRequest request;
  if (absl::Status s = ParseRequest(&buffer, &request); !s.ok()) return ToGrpcStatus(s);
  if (absl::StatusOr<std::shared_ptr<Table>> table = GetTable(request.table_name());
      !table.ok()) {
    return ToGrpcStatus(table.status());
  }
  deepmind::reverb::InitializeConnectionResponse response;
  response.set_address(0);
  stream->Write(response);
  return grpc::Status::OK;
}

}  // namespace tf_reverb
