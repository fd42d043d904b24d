// Client: the C++ client of a Reverb server — unary RPCs, the single-step
// insert used by Client.insert and TFClient.insert, and samplers.
//
// Contract:
//  * Thread-safety: thread-safe; the gRPC channel is shared by every call.
//    Samplers are thread-safe too (sampler.h).
//  * Ownership: the Client owns its channel; samplers keep the channel alive.
//    It also owns the insert streams InsertStep reuses between calls (one
//    per concurrent caller, up to kMaxIdleInsertStreams kept open; each
//    holds one stream of the server while idle, so a server's Drain waits
//    for them like for an open writer); destroying the Client cancels them.
//  * Errors: server statuses are returned as they are (NOT_FOUND for unknown
//    tables, INVALID_ARGUMENT for bad input, DEADLINE_EXCEEDED for timeouts);
//    transport failures are UNAVAILABLE. Sampler errors: see sampler.h.
//  * Signatures: InsertStep checks its item against the tables' signatures
//    (signature.h) before sending. They come from the first ServerInfo
//    response (InsertStep makes that call when none was made yet) and are
//    refreshed by later ServerInfo calls whose tables_state_id differs; the
//    server checks every item again, so a stale cache never lets a bad item
//    in.
//  * Chunk codecs: gRPC samplers announce zstd on SampleStream (request
//    metadata "x-tf-reverb-codecs: zstd", unless TF_REVERB_ZSTD=0), so our
//    servers send zstd chunks as stored; Insert always writes Snappy.
#ifndef TF_REVERB_SERVER_CLIENT_H_
#define TF_REVERB_SERVER_CLIENT_H_

#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "reverb_service.grpc.pb.h"
#include "sample.h"
#include "sampler.h"
#include "signature.h"
#include "table.h"
#include "tensor.h"

namespace tf_reverb {

class Client {
 public:
  // Idle insert streams kept for reuse by InsertStep.
  static constexpr int kMaxIdleInsertStreams = 4;

  explicit Client(std::string server_address);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  const std::string& server_address() const { return server_address_; }
  // The channel every call of this client uses (writers and samplers too).
  const std::shared_ptr<grpc::Channel>& channel() const { return channel_; }

  // Waits for the server up to `timeout` (InfiniteDuration: wait for ready).
  // Also refreshes the signatures InsertStep checks against.
  absl::StatusOr<deepmind::reverb::ServerInfoResponse> ServerInfo(absl::Duration timeout);
  absl::Status MutatePriorities(const std::string& table,
                                const std::vector<deepmind::reverb::KeyWithPriority>& updates,
                                const std::vector<uint64_t>& deletes);
  absl::Status Reset(const std::string& table);
  absl::StatusOr<std::string> Checkpoint();

  // Writes one step (one tensor per column) as one chunk and creates one item
  // per (table, priority) over it; returns once every item is confirmed.
  // An item inconsistent with its table's signature (column count, dtype, or
  // a shape compatible with neither [1, *step] nor the step's) is
  // INVALID_ARGUMENT naming the table, the column and both specs, and
  // nothing is sent.
  // The request goes over an insert stream kept open from an earlier call
  // (or a new one), so a call costs one round trip. UNAVAILABLE (e.g. a
  // server restart) is retried a few times with the same item keys, so a
  // retry never duplicates an item; so is any failure of a reused idle
  // stream that may have died since its last use (UNAVAILABLE, CANCELLED),
  // on a fresh stream. Thread-safe; concurrent calls use separate streams.
  absl::Status InsertStep(const std::vector<Tensor>& step,
                          const std::vector<std::pair<std::string, double>>& priorities);

  // A Sampler of `table` (sampler.h) whose workers each use one gRPC
  // stream or, when a server of this process listens on the loopback port of
  // `server_address`, read that server's table directly (reverb-spec.md
  // §4.6). The shortcut shares the table by std::shared_ptr, so stopping the
  // server while samplers run is safe: their next request fails with
  // CANCELLED "RateLimiter has been cancelled", which, unlike a gRPC
  // CANCELLED, is not retried (a stopped in-process table never comes back).
  // Invalid options give a sampler whose Next() returns INVALID_ARGUMENT.
  std::unique_ptr<Sampler> NewSampler(const std::string& table, SamplerOptions options);

 private:
  // Port of a plain loopback address ("localhost:P", "127.0.0.1:P", "[::1]:P"),
  // or -1; any other form (e.g. "ipv4:127.0.0.1:P") always uses gRPC.
  int LoopbackPort() const;

  // An open InsertStream (and its call context) InsertStep may reuse.
  struct InsertStream {
    grpc::ClientContext context;
    std::unique_ptr<grpc::ClientReaderWriter<deepmind::reverb::InsertStreamRequest,
                                             deepmind::reverb::InsertStreamResponse>>
        stream;
    // Cancels the call and collects its status.
    absl::Status Close();
  };
  // Sends `request` over one stream and waits for `num_items` confirmations;
  // on failure the stream is closed and its status returned (UNAVAILABLE if
  // it ended without an error). `reused`: whether the stream came idle from
  // the pool (it may have died since).
  absl::Status InsertOnce(const deepmind::reverb::InsertStreamRequest& request, int num_items,
                          bool* reused);

  // Table name -> the columns of its signature (null: none, or one that
  // cannot be checked), from one ServerInfo response.
  struct TableSignatures {
    deepmind::reverb::Uint128 tables_state_id;
    absl::flat_hash_map<std::string, std::shared_ptr<const std::vector<SignatureSpec>>> tables;
  };
  // The cached signatures, fetched with ServerInfo (waiting for the server)
  // when there are none yet.
  absl::StatusOr<std::shared_ptr<const TableSignatures>> Signatures();
  // Caches the signatures of `response` unless its tables_state_id is the
  // cached one.
  void CacheSignatures(const deepmind::reverb::ServerInfoResponse& response);

  const std::string server_address_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<deepmind::reverb::ReverbService::Stub> stub_;
  absl::Mutex insert_streams_mu_;
  std::vector<std::unique_ptr<InsertStream>> idle_insert_streams_
      ABSL_GUARDED_BY(insert_streams_mu_);
  absl::Mutex signatures_mu_;
  std::shared_ptr<const TableSignatures> signatures_ ABSL_GUARDED_BY(signatures_mu_);
};

}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_CLIENT_H_
