// ReverbServiceImpl: the gRPC service `deepmind.reverb.ReverbService` over a
// fixed set of tables (reverb-spec.md §4).
//
// Contract:
//  * Thread-safety: thread-safe; gRPC calls the handlers from its own thread
//    pool, each stream on one thread, and all shared state lives in the
//    (thread-safe) tables. The table map is immutable after construction.
//  * Ownership: shares the tables with the Server and in-process users.
//  * Errors are gRPC statuses: NOT_FOUND "Priority table X was not found",
//    INVALID_ARGUMENT for malformed requests, INTERNAL "Could not find
//    sequence chunk K." for an item naming a chunk the stream never sent,
//    DEADLINE_EXCEEDED for rate-limiter timeouts, CANCELLED after Close(),
//    INVALID_ARGUMENT for a chunk with a codec we do not know.
//  * Chunk codecs (chunk_codec.h): every InsertStream starts by sending its
//    initial metadata, announcing zstd ("x-tf-reverb-codecs: zstd") unless
//    announce_zstd() is off; chunks are stored as received (Snappy or zstd).
//    SampleStream sends zstd chunks as they are only to clients whose request
//    metadata announced zstd; for every other client (Reverb's) they are
//    transcoded to Snappy per response, so Reverb never sees zstd.
#ifndef TF_REVERB_SERVER_REVERB_SERVICE_H_
#define TF_REVERB_SERVER_REVERB_SERVICE_H_

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "reverb_service.grpc.pb.h"
#include "server/checkpointing/checkpointer.h"
#include "table.h"

namespace tf_reverb {

// A SampleStreamResponse is closed once it holds this many bytes of chunks.
inline constexpr int64_t kMaxSampleResponseBytes = 2 << 20;

class ReverbServiceImpl final : public deepmind::reverb::ReverbService::Service {
 public:
  // `checkpointer` may be null (Checkpoint then fails with INVALID_ARGUMENT).
  ReverbServiceImpl(std::vector<std::shared_ptr<Table>> tables,
                    std::shared_ptr<Checkpointer> checkpointer);

  grpc::Status Checkpoint(grpc::ServerContext* context,
                          const deepmind::reverb::CheckpointRequest* request,
                          deepmind::reverb::CheckpointResponse* response) override;
  grpc::Status InsertStream(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<deepmind::reverb::InsertStreamResponse,
                               deepmind::reverb::InsertStreamRequest>* stream) override;
  grpc::Status MutatePriorities(
      grpc::ServerContext* context,
      const deepmind::reverb::MutatePrioritiesRequest* request,
      deepmind::reverb::MutatePrioritiesResponse* response) override;
  grpc::Status Reset(grpc::ServerContext* context,
                     const deepmind::reverb::ResetRequest* request,
                     deepmind::reverb::ResetResponse* response) override;
  grpc::Status SampleStream(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<deepmind::reverb::SampleStreamResponse,
                               deepmind::reverb::SampleStreamRequest>* stream) override;
  grpc::Status ServerInfo(grpc::ServerContext* context,
                          const deepmind::reverb::ServerInfoRequest* request,
                          deepmind::reverb::ServerInfoResponse* response) override;
  grpc::Status InitializeConnection(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<deepmind::reverb::InitializeConnectionResponse,
                               deepmind::reverb::InitializeConnectionRequest>* stream)
      override;

  // NOT_FOUND "Priority table X was not found" for unknown names.
  absl::StatusOr<std::shared_ptr<Table>> GetTable(const std::string& name) const;
  const std::vector<std::shared_ptr<Table>>& tables() const { return tables_; }
  // Closes every table, failing blocked inserts and samples.
  void Close();
  // Number of handlers currently inside a (possibly blocked) table call.
  int calls_in_tables() const { return calls_in_tables_.load(); }
  std::string DebugString() const;
  // Whether InsertStreams announce zstd; defaults to
  // ZstdEnabledByEnvironment(). Affects streams opened afterwards.
  void set_announce_zstd(bool announce) { announce_zstd_.store(announce); }
  bool announce_zstd() const { return announce_zstd_.load(); }

 private:
  const std::vector<std::shared_ptr<Table>> tables_;
  const std::shared_ptr<Checkpointer> checkpointer_;
  absl::flat_hash_map<std::string, std::shared_ptr<Table>> by_name_;
  deepmind::reverb::Uint128 tables_state_id_;
  std::atomic<int> calls_in_tables_{0};
  std::atomic<bool> announce_zstd_;
};

}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_REVERB_SERVICE_H_
