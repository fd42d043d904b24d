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
//  * Sharded targets (shard_target.h: "ipv4:A:P,B:Q", "ipv6:...", "dns:///N:P"):
//    the channel balances streams with round_robin over the healthy shards
//    (a writer's or a sampler worker's stream lives on one shard; the next
//    stream may land on another). Admin calls fan out to every shard at
//    once over one channel per shard (created on first use; dns: names are
//    resolved at each call): MutatePriorities and Reset act on every shard
//    (keys unknown to a shard are ignored there); ServerInfo sums the
//    shards' tables (MergeShardInfos); ShardServerInfo gives each shard's
//    answer; Checkpoint returns one path per shard. A shard whose connection
//    is down (UNAVAILABLE/DEADLINE_EXCEEDED) is skipped by ServerInfo (which
//    waits up to its timeout only while no shard answers) and by
//    MutatePriorities (its items cannot be updated; UNAVAILABLE only when
//    no shard is reachable); Reset and Checkpoint fail naming the shards
//    they could not reach (after acting on the others). Samplers left at
//    num_workers -1 get one worker per shard. A target naming one server
//    (any other form, or a one-address list) is the unsharded client:
//    same channel, same calls, no extra channel.
//  * A malformed sharded target (INVALID_ARGUMENT, shard_target.h) is
//    returned by every call (samplers fail with it).
//  * Security (security/channel_credentials.h): Client(address) uses the
//    ChannelSecurity registered for `address` or the environment's;
//    Client(address, security) uses `security`. Invalid security (e.g. an
//    unreadable TF_REVERB_TLS_ROOT_CA_FILE) makes every call return that
//    error (setup_status()). A TLS mismatch with the server is
//    FAILED_PRECONDITION "Transport security mismatch ..." instead of a
//    wait that never ends; a missing or refused token is the server's
//    UNAUTHENTICATED. In-process shortcuts never apply to servers with TLS
//    or tokens (server.h). A sharded target's security is resolved for
//    the whole target string; the per-shard channels of fan-out calls use
//    the same credentials and channel arguments as the main channel. Writers
//    and samplers check the transport on the main channel; fan-out calls
//    check each failed shard's channel and return a shard's TLS mismatch
//    as it is (naming that shard), before any other failure.
//  * Chunk codecs: gRPC samplers announce zstd on SampleStream (request
//    metadata "x-tf-reverb-codecs: zstd", unless TF_REVERB_ZSTD=0), so our
//    servers send zstd chunks as stored; Insert always writes Snappy.
#ifndef TF_REVERB_SERVER_CLIENT_CLIENT_H_
#define TF_REVERB_SERVER_CLIENT_CLIENT_H_

#include <cstdint>
#include <cstdlib>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/call_once.h"
#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/status.h"
#include "reverb_service.grpc.pb.h"
#include "reverb_service.pb.h"
#include "schema.pb.h"
#include "server/client/sample.h"
#include "server/client/sampler.h"
#include "server/client/shard_target.h"
#include "server/client/shard_warm_up.h"
#include "server/security/channel_credentials.h"
#include "server/signature.h"
#include "server/table.h"
#include "server/tensor.h"

namespace tf_reverb {

class Client {
 public:
  // Idle insert streams kept for reuse by InsertStep.
  static constexpr int kMaxIdleInsertStreams = 4;

  explicit Client(std::string server_address);
  Client(std::string server_address, const absl::StatusOr<ChannelSecurity>& security);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  const std::string& server_address() const { return server_address_; }
  // Whether the target names several servers (shard_target.h).
  bool sharded() const { return target_.sharded(); }
  // INVALID_ARGUMENT for a malformed sharded target, else OK.
  const absl::Status& target_status() const { return target_status_; }
  // The shards' addresses now (dns: resolved); {server_address} when not
  // sharded.
  absl::StatusOr<std::vector<std::string>> ShardAddresses() const;
  // The channel every call of this client uses (writers and samplers too).
  const std::shared_ptr<grpc::Channel>& channel() const { return channel_; }
  // channel() for opening streams (writers). On a sharded client the first
  // call (by any thread; the others wait for it) first waits until streams
  // reach every shard: round_robin sends new streams only to shards already
  // connected, so without this the first streams of a fresh client would
  // all land on the shard that connected first. It makes ServerInfo calls
  // over the channel until each shard answered one (their tables_state_ids
  // differ), for at most kShardWarmUp after the first answer (a shard that
  // is down costs that once) and kShardWarmUpGiveUp when none answers
  // (shard_warm_up.h). Samplers and InsertStep do the same before their
  // first stream (a sampler's workers each wait themselves, cancellably,
  // until one finished).
  const std::shared_ptr<grpc::Channel>& StreamChannel();
  // OK, or why this client's credentials could not be built.
  const absl::Status& setup_status() const { return setup_status_; }
  // Waits up to `deadline` for the channel to connect; the transport
  // security mismatch (or setup error) it fails with, else OK.
  absl::Status AwaitTransport(absl::Time deadline);

  // Waits for the server up to `timeout` (InfiniteDuration: wait for ready).
  // Also refreshes the signatures InsertStep checks against.
  absl::StatusOr<deepmind::reverb::ServerInfoResponse> ServerInfo(absl::Duration timeout);
  // One shard's answer to ServerInfo.
  struct ShardInfo {
    std::string address;
    absl::Status status;                            // why the shard did not answer
    deepmind::reverb::ServerInfoResponse response;  // when status is OK
  };
  // Every shard's ServerInfo (one entry per shard, in ShardAddresses order;
  // unsharded: one entry, the call above). Fails only when no shard
  // answered within `timeout`.
  absl::StatusOr<std::vector<ShardInfo>> ShardServerInfo(absl::Duration timeout);
  // Sums the answers of several shards: per table (by name, in order of
  // first appearance), sizes, episode counts, unique samples, max_size, the
  // rate limiters' completed inserts and samples and worker times; options
  // and signature come from the first shard having the table. The
  // tables_state_id combines the shards' ids.
  static deepmind::reverb::ServerInfoResponse MergeShardInfos(const std::vector<ShardInfo>& infos);

  absl::Status MutatePriorities(const std::string& table,
                                const std::vector<deepmind::reverb::KeyWithPriority>& updates,
                                const std::vector<uint64_t>& deletes);
  absl::Status Reset(const std::string& table);
  // Looking into a table without sampling it (tf_reverb servers only; a
  // dm-reverb server answers UNIMPLEMENTED). Each call waits up to `timeout`
  // (InfiniteDuration: for the server to be ready). On a sharded client
  // every shard is asked; shards that cannot be reached are left out (their
  // items count as missing, their stats are not in the sums), and the call
  // fails (UNAVAILABLE) only when no shard answered.
  //
  // The items of `keys` that exist, as Samples with probability 0 and their
  // current priority and times sampled, and the keys found nowhere.
  struct LookupResult {
    std::vector<Sample> found;
    std::vector<uint64_t> missing;
  };
  absl::StatusOr<LookupResult> Lookup(const std::string& table, const std::vector<uint64_t>& keys,
                                      absl::Duration timeout);
  // Size, priorities, times sampled and ages (summed over shards).
  absl::StatusOr<deepmind::reverb::TableStatsResponse> TableStats(const std::string& table,
                                                                  absl::Duration timeout);
  // One batch of a scan: the items of server `server` (an index into
  // ShardAddresses(); 0 when not sharded) at insertion positions >= `start`
  // in insertion order, at most `max_items`; `next` is the next batch's
  // start and `done` says none is left. A scan reads every server from
  // start 0 until done; writers are not blocked (each batch holds the
  // table's lock only to copy pointers). `timeout` bounds the call.
  struct ScanBatch {
    std::vector<Sample> items;
    uint64_t next = 0;
    bool done = false;
  };
  absl::StatusOr<ScanBatch> Scan(const std::string& table, size_t server, uint64_t start,
                                 int64_t max_items, absl::Duration timeout);
  // Sets the table's current policy version on every server (a learner's
  // staleness limit counts from it). Returns the items made stale, summed.
  // A shard down now misses the new version (setting the same version again
  // is harmless, so learners may repeat it); the call fails only when no
  // shard answered, or with a shard's own error (INVALID_ARGUMENT for a
  // version below its current one).
  absl::StatusOr<int64_t> SetPolicyVersion(const std::string& table, int64_t version,
                                           absl::Duration timeout);
  // Sums the stats of several shards (same age buckets; the newest policy
  // version).
  static deepmind::reverb::TableStatsResponse MergeTableStats(
      const std::vector<deepmind::reverb::TableStatsResponse>& stats);

  // Checkpoints every shard; one path per shard (in ShardAddresses order).
  // `full`: self-contained checkpoints even where the servers write
  // incremental ones (a request field Reverb's servers ignore).
  absl::StatusOr<std::vector<std::string>> Checkpoint(bool full = false);

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
  // Sharded: calls rotate over one idle stream per shard (up to
  // kMaxIdleInsertStreams), so even one thread's items spread over shards.
  // `policy_version`: the items' policy version (nullopt: each table's
  // current version; INVALID_ARGUMENT when negative).
  absl::Status InsertStep(const std::vector<Tensor>& step,
                          const std::vector<std::pair<std::string, double>>& priorities,
                          std::optional<int64_t> policy_version = std::nullopt);

  // A Sampler of `table` (sampler.h) whose workers each use one gRPC
  // stream or, when a server of this process listens on the loopback port of
  // `server_address`, read that server's table directly
  // (docs/architecture/wire-protocol.md). The shortcut shares the table by std::shared_ptr, so
  // stopping the server while samplers run is safe: their next request fails with CANCELLED
  // "RateLimiter has been cancelled", which, unlike a gRPC CANCELLED, is not retried (a stopped
  // in-process table never comes back). Invalid options give a sampler whose Next() returns
  // INVALID_ARGUMENT.
  std::unique_ptr<Sampler> NewSampler(const std::string& table, SamplerOptions options);

 private:
  // Port of a plain loopback address ("localhost:P", "127.0.0.1:P", "[::1]:P"),
  // or -1; any other form (e.g. "ipv4:127.0.0.1:P") always uses gRPC.
  int LoopbackPort() const;

  // An open InsertStream call (and its call context) InsertStep may reuse.
  struct PooledInsertStream {
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

  // A shard's own channel, for fan-out calls.
  struct Shard {
    std::string address;
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<deepmind::reverb::ReverbService::Stub> stub;
  };
  // The shards named now, with their channels (created on first use).
  absl::StatusOr<std::vector<std::shared_ptr<Shard>>> Shards();
  // One unary call of a stub method (e.g. &Stub::async_interface::Lookup).
  template <typename Request, typename Response>
  using AsyncMethod = void (deepmind::reverb::ReverbService::StubInterface::async_interface::*)(
      grpc::ClientContext*, const Request*, Response*, std::function<void(grpc::Status)>);
  // `method` with `request`: on the server, or on every shard at once
  // (skipping shards that are down); the answers, one per answering shard.
  // Waits up to `timeout`. Errors as the contract of the calls above.
  template <typename Request, typename Response>
  absl::StatusOr<std::vector<Response>> CallServers(const char* what,
                                                    AsyncMethod<Request, Response> method,
                                                    const Request& request, absl::Duration timeout);
  // Starts `start` on every shard at once (each call with its own context,
  // fail-fast, deadline `deadline` unless infinite) and waits for all; the
  // callback it is given must be called once with the call's status.
  using StartCall = std::function<void(size_t index, Shard& shard, grpc::ClientContext* context,
                                       std::function<void(grpc::Status)> done)>;
  static std::vector<absl::Status> FanOut(const std::vector<std::shared_ptr<Shard>>& shards,
                                          absl::Time deadline, const StartCall& start);
  // Rewrites the failed shards' statuses that are TLS mismatches as the
  // transport security mismatch (CheckTransportFailure on the shard's
  // channel, naming its address); returns the first such mismatch, else OK.
  absl::Status ShardTransportMismatch(const std::vector<std::shared_ptr<Shard>>& shards,
                                      std::vector<absl::Status>* statuses) const;

  const std::string server_address_;
  ShardTarget target_;
  // The wait of StreamChannel(), shared with samplers (which may outlive
  // the client; their workers' waits are cancellable); null: unsharded.
  std::shared_ptr<ShardWarmUp> warm_up_;
  absl::Status target_status_;
  absl::Status setup_status_;
  bool tls_ = false;
  // The security the channel was built with (also used by Shards()).
  ChannelSecurity security_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<deepmind::reverb::ReverbService::Stub> stub_;
  absl::Mutex insert_streams_mu_;
  std::vector<std::unique_ptr<PooledInsertStream>> idle_insert_streams_
      ABSL_GUARDED_BY(insert_streams_mu_);
  // Sharded: idle streams InsertStep keeps opening new ones below (one per
  // shard, at most kMaxIdleInsertStreams; dns: targets use the maximum),
  // then rotates over; 0: unsharded, reuse the newest.
  int insert_streams_to_spread_ = 0;
  absl::Mutex shards_mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<Shard>> shards_ ABSL_GUARDED_BY(shards_mu_);
  absl::Mutex signatures_mu_;
  std::shared_ptr<const TableSignatures> signatures_ ABSL_GUARDED_BY(signatures_mu_);
};

}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_CLIENT_CLIENT_H_
