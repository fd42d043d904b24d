// ReverbServiceImpl: the gRPC service `deepmind.reverb.ReverbService` over a
// fixed set of tables (docs/architecture/wire-protocol.md).
//
// Contract:
//  * Thread-safety: thread-safe. Every method runs on gRPC's callback API
//    (no thread per call): the streams are reactors (insert_stream_reactor.h,
//    sample_stream_reactor.h) that wait on their tables without a thread;
//    the service's WorkQueue resumes them and runs checkpoints. All shared
//    state lives in the (thread-safe) tables; the table map is immutable.
//  * Ownership: shares the tables with the Server and in-process users; owns
//    the WorkQueue (destroy the service only after the gRPC server).
//  * Requests arrive as raw bytes (every method is registered with a
//    grpc::ByteBuffer request) and are parsed here, so that a message that
//    does not parse ends the call with INVALID_ARGUMENT naming the type,
//    where gRPC's generated handler would end a stream with OK (a failed
//    read looks like a half-close) and a unary call with an empty INTERNAL.
//  * Errors are gRPC statuses a client can act on: NOT_FOUND "Priority table
//    X was not found"; INVALID_ARGUMENT for malformed requests, chunks
//    (chunk_validation.h) and items (server_insert_stream.h); FAILED_PRECONDITION
//    for keep_chunk_keys naming chunks the stream does not hold;
//    DEADLINE_EXCEEDED for rate-limiter timeouts; CANCELLED after Close().
//    No exception escapes a handler (handler_guard.h): std::bad_alloc becomes
//    RESOURCE_EXHAUSTED, any other exception INTERNAL with its what() (that
//    is a bug of ours); UNKNOWN is never sent.
//  * Chunk codecs (chunk_codec.h): every InsertStream starts by sending its
//    initial metadata, announcing zstd ("x-tf-reverb-codecs: zstd") unless
//    announce_zstd() is off; chunks are stored as received (Snappy or zstd).
//    SampleStream sends zstd chunks as they are only to clients whose request
//    metadata announced zstd; for every other client (Reverb's) they are
//    transcoded to Snappy per response, so Reverb never sees zstd.
#ifndef TF_REVERB_SERVER_SERVICE_REVERB_SERVICE_H_
#define TF_REVERB_SERVER_SERVICE_REVERB_SERVICE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/status.h"
#include "reverb_service.grpc.pb.h"
#include "reverb_service.pb.h"
#include "schema.pb.h"
#include "server/checkpointing/checkpointer.h"
#include "server/service/work_queue.h"
#include "server/table.h"

namespace tf_reverb {

// Items per Scan batch when the request names no count.
inline constexpr int64_t kDefaultScanItems = 1000;

class ReverbServiceImpl final : public deepmind::reverb::ReverbService::Service {
 public:
  // `checkpointer` may be null (Checkpoint then fails with INVALID_ARGUMENT).
  ReverbServiceImpl(std::vector<std::shared_ptr<Table>> tables,
                    std::shared_ptr<Checkpointer> checkpointer);

  // NOT_FOUND "Priority table X was not found" for unknown names.
  absl::StatusOr<std::shared_ptr<Table>> GetTable(const std::string& name) const;
  const std::vector<std::shared_ptr<Table>>& tables() const { return tables_; }
  // Closes every table, failing blocked inserts and samples.
  void Close();
  // Number of stream calls currently waiting on a table (rate limiter).
  int calls_in_tables() const { return calls_in_tables_.load(); }
  std::string DebugString() const;
  // Whether InsertStreams announce zstd; defaults to
  // ZstdEnabledByEnvironment(). Affects streams opened afterwards.
  void set_announce_zstd(bool announce) { announce_zstd_.store(announce); }
  bool announce_zstd() const { return announce_zstd_.load(); }

 private:
  // Registers the unary method at `index` (its position in
  // reverb_service.proto) with a raw-bytes request parsed as `Request`
  // before `handler` runs: on gRPC's thread, or on the WorkQueue when
  // `offload` (work that takes long, like a checkpoint).
  template <typename Request, typename Response>
  void RegisterUnary(int index, const char* name,
                     grpc::Status (ReverbServiceImpl::*handler)(const Request&, Response*),
                     bool offload = false);

  grpc::Status HandleCheckpoint(const deepmind::reverb::CheckpointRequest& request,
                                deepmind::reverb::CheckpointResponse* response);
  grpc::Status HandleMutatePriorities(const deepmind::reverb::MutatePrioritiesRequest& request,
                                      deepmind::reverb::MutatePrioritiesResponse* response);
  grpc::Status HandleReset(const deepmind::reverb::ResetRequest& request,
                           deepmind::reverb::ResetResponse* response);
  grpc::Status HandleServerInfo(const deepmind::reverb::ServerInfoRequest& request,
                                deepmind::reverb::ServerInfoResponse* response);
  // tf_reverb's look into a table (Table::Lookup, Scan, Stats).
  grpc::Status HandleLookup(const deepmind::reverb::LookupRequest& request,
                            deepmind::reverb::LookupResponse* response);
  grpc::Status HandleScan(const deepmind::reverb::ScanRequest& request,
                          deepmind::reverb::ScanResponse* response);
  grpc::Status HandleTableStats(const deepmind::reverb::TableStatsRequest& request,
                                deepmind::reverb::TableStatsResponse* response);
  grpc::Status HandleSetPolicyVersion(const deepmind::reverb::SetPolicyVersionRequest& request,
                                      deepmind::reverb::SetPolicyVersionResponse* response);

  const std::vector<std::shared_ptr<Table>> tables_;
  const std::shared_ptr<Checkpointer> checkpointer_;
  absl::flat_hash_map<std::string, std::shared_ptr<Table>> by_name_;
  deepmind::reverb::Uint128 tables_state_id_;
  // Stream calls currently waiting on a table.
  std::atomic<int> calls_in_tables_{0};
  std::atomic<bool> announce_zstd_;
  // Resumes waiting streams, runs their timeouts and the checkpoints.
  std::unique_ptr<WorkQueue> work_;
};

}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_SERVICE_REVERB_SERVICE_H_
