#include "server/service/reverb_service.h"

#include <cstdint>
#include <utility>

#include "absl/random/random.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/repeated_ptr_field.h"
#include "grpcpp/impl/call_op_set.h"
#include "grpcpp/impl/codegen/proto_utils.h"
#include "grpcpp/impl/serialization_traits.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/server_callback.h"
#include "grpcpp/support/status.h"
#include "reverb_service.pb.h"
#include "schema.pb.h"
#include "server/chunk_codec.h"
#include "server/grpc_status.h"
#include "server/service/handler_guard.h"
#include "server/service/insert_stream_reactor.h"
#include "server/service/raw_request.h"
#include "server/service/sample_stream_reactor.h"
#include "server/service/server_insert_stream.h"
#include "server/table_item.h"
#include "server/wal/write_ahead_log.h"

namespace tf_reverb {
namespace {

// Method indices: positions of the rpcs in proto/reverb_service.proto.
enum MethodIndex {
  kCheckpoint = 0,
  kInsertStream = 1,
  kMutatePriorities = 2,
  kReset = 3,
  kSampleStream = 4,
  kServerInfo = 5,
  kInitializeConnection = 6,
  kLookup = 7,
  kScan = 8,
  kTableStats = 9,
  kSetPolicyVersion = 10,
};

// Threads of the WorkQueue: resumptions are short (a table call and a
// write), so a few threads serve any number of streams.
constexpr int kWorkThreads = 4;

using RawBidiReactor = grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>;

// InitializeConnection (docs/architecture/wire-protocol.md): sharing table pointers across
// implementations is unsafe, so every client is told to use gRPC (address
// 0); our own client finds in-process tables through the server registry.
class InitializeConnectionReactor : public RawBidiReactor {
 public:
  explicit InitializeConnectionReactor(ServerInsertStream::TableLookup tables)
      : tables_(std::move(tables)) {
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status::OK);
      return;
    }
    grpc::Status status = Guarded("InitializeConnection", [&]() -> grpc::Status {
      deepmind::reverb::InitializeConnectionRequest request;
      if (absl::Status s = ParseRequest(request_, &request); !s.ok()) return ToGrpcStatus(s);
      if (absl::StatusOr<std::shared_ptr<Table>> table = tables_(request.table_name());
          !table.ok()) {
        return ToGrpcStatus(table.status());
      }
      deepmind::reverb::InitializeConnectionResponse response;
      response.set_address(0);
      bool own = false;
      return grpc::SerializationTraits<deepmind::reverb::InitializeConnectionResponse>::Serialize(
          response, &response_, &own);
    });
    if (!status.ok()) {
      Finish(status);
      return;
    }
    StartWriteAndFinish(&response_, grpc::WriteOptions(), grpc::Status::OK);
  }
  void OnDone() override { delete this; }

 private:
  const ServerInsertStream::TableLookup tables_;
  grpc::ByteBuffer request_;
  grpc::ByteBuffer response_;
};

}  // namespace

ReverbServiceImpl::ReverbServiceImpl(std::vector<std::shared_ptr<Table>> tables,
                                     std::shared_ptr<Checkpointer> checkpointer)
    : tables_(std::move(tables)),
      checkpointer_(std::move(checkpointer)),
      announce_zstd_(ZstdEnabledByEnvironment()),
      work_(std::make_unique<WorkQueue>(kWorkThreads)) {
  for (const auto& table : tables_) by_name_[table->name()] = table;
  absl::BitGen gen;
  tables_state_id_.set_high(absl::Uniform<uint64_t>(gen));
  tables_state_id_.set_low(absl::Uniform<uint64_t>(gen));

  auto lookup = [this](const std::string& name) { return GetTable(name); };
  // Confirmations of inserts wait for it (set by Checkpointer::Recover).
  std::shared_ptr<WriteAheadLog> log = checkpointer_ != nullptr ? checkpointer_->log() : nullptr;
  RegisterUnary(kCheckpoint, "Checkpoint", &ReverbServiceImpl::HandleCheckpoint,
                /*offload=*/true);
  MarkMethodRawCallback(
      kInsertStream,
      new grpc::internal::CallbackBidiHandler<grpc::ByteBuffer, grpc::ByteBuffer>(
          [this, lookup, log](grpc::CallbackServerContext* context) -> RawBidiReactor* {
            return InsertStreamReactor::Create(context, lookup, work_.get(), &calls_in_tables_,
                                               announce_zstd(), log);
          }));
  RegisterUnary(kMutatePriorities, "MutatePriorities", &ReverbServiceImpl::HandleMutatePriorities);
  RegisterUnary(kReset, "Reset", &ReverbServiceImpl::HandleReset);
  MarkMethodRawCallback(
      kSampleStream, new grpc::internal::CallbackBidiHandler<grpc::ByteBuffer, grpc::ByteBuffer>(
                         [this, lookup](grpc::CallbackServerContext* context) -> RawBidiReactor* {
                           return SampleStreamReactor::Create(context, lookup, work_.get(),
                                                              &calls_in_tables_);
                         }));
  RegisterUnary(kServerInfo, "ServerInfo", &ReverbServiceImpl::HandleServerInfo);
  RegisterUnary(kLookup, "Lookup", &ReverbServiceImpl::HandleLookup);
  RegisterUnary(kScan, "Scan", &ReverbServiceImpl::HandleScan);
  RegisterUnary(kTableStats, "TableStats", &ReverbServiceImpl::HandleTableStats);
  // Offloaded: with a write-ahead log it waits until its record is durable.
  RegisterUnary(kSetPolicyVersion, "SetPolicyVersion", &ReverbServiceImpl::HandleSetPolicyVersion,
                /*offload=*/true);
  MarkMethodRawCallback(kInitializeConnection,
                        new grpc::internal::CallbackBidiHandler<grpc::ByteBuffer, grpc::ByteBuffer>(
                            [lookup](grpc::CallbackServerContext*) -> RawBidiReactor* {
                              return new InitializeConnectionReactor(lookup);
                            }));
}

template <typename Request, typename Response>
void ReverbServiceImpl::RegisterUnary(int index, const char* name,
                                      grpc::Status (ReverbServiceImpl::*handler)(const Request&,
                                                                                 Response*),
                                      bool offload) {
  MarkMethodRawCallback(
      index, new grpc::internal::CallbackUnaryHandler<grpc::ByteBuffer, grpc::ByteBuffer>(
                 [this, name, handler, offload](grpc::CallbackServerContext* context,
                                                const grpc::ByteBuffer* request,
                                                grpc::ByteBuffer* response) {
                   grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
                   auto run = [this, name, handler, reactor, bytes = *request, response]() {
                     reactor->Finish(Guarded(name, [&]() -> grpc::Status {
                       Request parsed;
                       if (absl::Status s = ParseRequest(bytes, &parsed); !s.ok()) {
                         return ToGrpcStatus(s);
                       }
                       Response out;
                       grpc::Status status = (this->*handler)(parsed, &out);
                       if (!status.ok()) return status;
                       bool own = false;
                       return grpc::SerializationTraits<Response>::Serialize(out, response, &own);
                     }));
                   };
                   if (offload) {
                     work_->Schedule(std::move(run));
                   } else {
                     run();
                   }
                   return reactor;
                 }));
}

absl::StatusOr<std::shared_ptr<Table>> ReverbServiceImpl::GetTable(const std::string& name) const {
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

grpc::Status ReverbServiceImpl::HandleCheckpoint(const deepmind::reverb::CheckpointRequest& request,
                                                 deepmind::reverb::CheckpointResponse* response) {
  if (checkpointer_ == nullptr) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "no Checkpointer configured for the replay service.");
  }
  absl::StatusOr<std::string> path = checkpointer_->Save(tables_, request.full());
  if (!path.ok()) return ToGrpcStatus(path.status());
  response->set_checkpoint_path(*path);
  return grpc::Status::OK;
}

grpc::Status ReverbServiceImpl::HandleMutatePriorities(
    const deepmind::reverb::MutatePrioritiesRequest& request,
    deepmind::reverb::MutatePrioritiesResponse*) {
  absl::StatusOr<std::shared_ptr<Table>> table = GetTable(request.table());
  if (!table.ok()) return ToGrpcStatus(table.status());
  std::vector<deepmind::reverb::KeyWithPriority> updates(request.updates().begin(),
                                                         request.updates().end());
  std::vector<uint64_t> deletes(request.delete_keys().begin(), request.delete_keys().end());
  return ToGrpcStatus((*table)->MutateItems(updates, deletes));
}

grpc::Status ReverbServiceImpl::HandleReset(const deepmind::reverb::ResetRequest& request,
                                            deepmind::reverb::ResetResponse*) {
  absl::StatusOr<std::shared_ptr<Table>> table = GetTable(request.table());
  if (!table.ok()) return ToGrpcStatus(table.status());
  (*table)->Reset();
  return grpc::Status::OK;
}

grpc::Status ReverbServiceImpl::HandleServerInfo(const deepmind::reverb::ServerInfoRequest&,
                                                 deepmind::reverb::ServerInfoResponse* response) {
  *response->mutable_tables_state_id() = tables_state_id_;
  for (const auto& table : tables_) *response->add_table_info() = table->Info();
  return grpc::Status::OK;
}

namespace {

// One entry per item: its info and every chunk as stored.
void AddEntries(
    const std::vector<SampledItem>& items,
    google::protobuf::RepeatedPtrField<deepmind::reverb::SampleStreamResponse::SampleEntry>*
        entries) {
  for (const SampledItem& item : items) {
    auto* entry = entries->Add();
    *entry->mutable_info() = SampleInfoOf(item);
    for (const auto& chunk : item.data->chunks) *entry->add_data() = chunk->ToProto();
    entry->set_end_of_sequence(true);
  }
}

}  // namespace

grpc::Status ReverbServiceImpl::HandleLookup(const deepmind::reverb::LookupRequest& request,
                                             deepmind::reverb::LookupResponse* response) {
  absl::StatusOr<std::shared_ptr<Table>> table = GetTable(request.table());
  if (!table.ok()) return ToGrpcStatus(table.status());
  std::vector<SampledItem> found;
  std::vector<uint64_t> missing;
  (*table)->Lookup({request.keys().begin(), request.keys().end()}, &found, &missing);
  AddEntries(found, response->mutable_entries());
  response->mutable_missing_keys()->Add(missing.begin(), missing.end());
  return grpc::Status::OK;
}

grpc::Status ReverbServiceImpl::HandleScan(const deepmind::reverb::ScanRequest& request,
                                           deepmind::reverb::ScanResponse* response) {
  absl::StatusOr<std::shared_ptr<Table>> table = GetTable(request.table());
  if (!table.ok()) return ToGrpcStatus(table.status());
  std::vector<SampledItem> items;
  bool done = false;
  const int64_t max_items = request.max_items() > 0 ? request.max_items() : kDefaultScanItems;
  response->set_next((*table)->Scan(request.start(), max_items, &items, &done));
  response->set_done(done);
  AddEntries(items, response->mutable_entries());
  return grpc::Status::OK;
}

grpc::Status ReverbServiceImpl::HandleTableStats(const deepmind::reverb::TableStatsRequest& request,
                                                 deepmind::reverb::TableStatsResponse* response) {
  absl::StatusOr<std::shared_ptr<Table>> table = GetTable(request.table());
  if (!table.ok()) return ToGrpcStatus(table.status());
  *response = (*table)->Stats();
  return grpc::Status::OK;
}

grpc::Status ReverbServiceImpl::HandleSetPolicyVersion(
    const deepmind::reverb::SetPolicyVersionRequest& request,
    deepmind::reverb::SetPolicyVersionResponse* response) {
  absl::StatusOr<std::shared_ptr<Table>> table = GetTable(request.table());
  if (!table.ok()) return ToGrpcStatus(table.status());
  absl::StatusOr<int64_t> stale = (*table)->SetPolicyVersion(request.version());
  if (!stale.ok()) return ToGrpcStatus(stale.status());
  // Confirmed as inserts are: once the log holds the new version (else a
  // crash could bring the items it made stale back).
  if (std::shared_ptr<WriteAheadLog> log =
          checkpointer_ != nullptr ? checkpointer_->log() : nullptr) {
    if (absl::Status s = log->WaitConfirmed(log->last_sequence()); !s.ok()) {
      return ToGrpcStatus(s);
    }
  }
  response->set_stale_items(*stale);
  return grpc::Status::OK;
}

}  // namespace tf_reverb
