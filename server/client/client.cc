#include "server/client/client.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/random/random.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "google/protobuf/repeated_ptr_field.h"
#include "grpc/grpc.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/impl/codegen/sync_stream.h"
#include "grpcpp/impl/rpc_method.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/channel_arguments.h"
#include "grpcpp/support/status.h"
#include "grpcpp/support/sync_stream.h"
#include "reverb_service.pb.h"
#include "schema.pb.h"
#include "server/chunk_codec.h"
#include "server/client/grpc_sampler_worker.h"
#include "server/client/heap_tuning.h"
#include "server/client/in_process_sampler_worker.h"
#include "server/client/shard_target.h"
#include "server/client/shard_warm_up.h"
#include "server/client/sharded_sampler_worker.h"
#include "server/error_kind.h"
#include "server/grpc_status.h"
#include "server/in_process_tables.h"
#include "server/table_chunk.h"
#include "server/table_item.h"

namespace tf_reverb {
namespace {

// Attempts of a single-step insert that fails with UNAVAILABLE.
constexpr int kMaxInsertAttempts = 5;

uint64_t NewKey() {
  thread_local absl::BitGen gen;
  return absl::Uniform<uint64_t>(gen);
}

}  // namespace

Client::Client(std::string server_address)
    : Client(server_address, ResolveChannelSecurity(server_address)) {}

Client::Client(std::string server_address, const absl::StatusOr<ChannelSecurity>& security)
    : server_address_(std::move(server_address)) {
  absl::StatusOr<ShardTarget> target = ParseShardTarget(server_address_);
  if (target.ok()) {
    target_ = *std::move(target);
  } else {
    target_status_ = target.status();
    target_.target = server_address_;
    target_.addresses = {server_address_};
  }
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  // Servers may send us HTTP/2 DATA frames of up to 1 MiB instead of 16 KiB:
  // fewer frames (and slices) per sampled chunk; a loopback stream of large
  // items moves 20-35% more (benchmarks/loopback_ceiling.cc).
  args.SetInt(GRPC_ARG_HTTP2_MAX_FRAME_SIZE, 1 << 20);
  if (target_.sharded()) {
    ConfigureShardedChannel(&args);
  } else {
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 30000);
    args.SetLoadBalancingPolicyName("round_robin");
  }
  // The security is resolved for the whole target string (the key the
  // Python API registers under); the shards' own channels (Shards()) use
  // the same.
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      security.ok() ? BuildChannelCredentials(server_address_, *security, &args)
                    : absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>>(security.status());
  if (security.ok()) {
    tls_ = security->tls;
    security_ = *security;
  }
  if (!credentials.ok()) {
    setup_status_ = credentials.status();
    // A channel nobody uses keeps channel() valid.
    credentials = grpc::InsecureChannelCredentials();
  }
  channel_ = grpc::CreateCustomChannel(server_address_, *credentials, args);
  stub_ = deepmind::reverb::ReverbService::NewStub(channel_);
  if (target_.kind == ShardTarget::Kind::kList) {
    insert_streams_to_spread_ =
        std::min(kMaxIdleInsertStreams, static_cast<int>(target_.addresses.size()));
  } else if (target_.kind == ShardTarget::Kind::kDns) {
    insert_streams_to_spread_ = kMaxIdleInsertStreams;  // the count may change
  }
  // Connect to every shard now (no RPC): streams opened while only some
  // shards are connected all go to those.
  if (target_.sharded()) {
    channel_->GetState(/*try_to_connect=*/true);
    warm_up_ = std::make_shared<ShardWarmUp>();
    warm_up_->channel = channel_;
    warm_up_->target = target_;
  }
}

const std::shared_ptr<grpc::Channel>& Client::StreamChannel() {
  if (warm_up_ != nullptr && !warm_up_->done.load()) {
    absl::call_once(warm_up_->once, [this] {
      std::unique_ptr<grpc::ClientContext> context;
      AwaitShardConnections(
          *warm_up_,
          [&context] {
            context = std::make_unique<grpc::ClientContext>();
            return context.get();
          },
          [&context] { context.reset(); });
    });
  }
  return channel_;
}

absl::StatusOr<std::vector<std::string>> Client::ShardAddresses() const {
  if (!target_status_.ok()) return target_status_;
  return ResolveShards(target_);
}

absl::StatusOr<std::vector<std::shared_ptr<Client::Shard>>> Client::Shards() {
  absl::StatusOr<std::vector<std::string>> addresses = ShardAddresses();
  if (!addresses.ok()) return addresses.status();
  std::vector<std::shared_ptr<Shard>> shards;
  shards.reserve(addresses->size());
  absl::MutexLock lock(&shards_mu_);
  for (const std::string& address : *addresses) {
    std::shared_ptr<Shard>& shard = shards_[address];
    if (shard == nullptr) {
      grpc::ChannelArguments args;
      args.SetMaxReceiveMessageSize(-1);
      args.SetMaxSendMessageSize(-1);
      args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
      args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, kShardReconnectMaxBackoffMs);
      // The credentials (and their channel arguments) of the main channel:
      // the security was resolved for the client's whole target string.
      absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
          BuildChannelCredentials(server_address_, security_, &args);
      if (!credentials.ok()) return credentials.status();
      shard = std::make_shared<Shard>();
      shard->address = address;
      shard->channel = grpc::CreateCustomChannel(ShardChannelTarget(address), *credentials, args);
      shard->stub = deepmind::reverb::ReverbService::NewStub(shard->channel);
    }
    shards.push_back(shard);
  }
  return shards;
}

std::vector<absl::Status> Client::FanOut(const std::vector<std::shared_ptr<Shard>>& shards,
                                         absl::Time deadline, const StartCall& start) {
  std::vector<grpc::ClientContext> contexts(shards.size());
  std::vector<absl::Status> statuses(shards.size());
  absl::BlockingCounter pending(static_cast<int>(shards.size()));
  for (size_t i = 0; i < shards.size(); ++i) {
    if (deadline != absl::InfiniteFuture()) contexts[i].set_deadline(absl::ToChronoTime(deadline));
    start(i, *shards[i], &contexts[i], [&statuses, &pending, i](grpc::Status status) {
      statuses[i] = FromGrpcStatus(status);
      pending.DecrementCount();
    });
  }
  pending.Wait();
  return statuses;
}

absl::Status Client::ShardTransportMismatch(const std::vector<std::shared_ptr<Shard>>& shards,
                                            std::vector<absl::Status>* statuses) const {
  absl::Status mismatch;
  for (size_t i = 0; i < statuses->size(); ++i) {
    absl::Status& status = (*statuses)[i];
    if (status.ok()) continue;
    // A definite handshake failure is rewritten at once; a peer closing the
    // connections it accepted (plaintext against TLS) is confirmed on that
    // shard's channel (bounded); "connection refused" (a shard that is
    // down) is left as it is, so fan-outs still skip down shards.
    status = CheckTransportFailure(shards[i]->channel.get(), status, tls_, shards[i]->address);
    if (mismatch.ok() && ErrorKindOf(status) == ErrorKind::kTransportSecurityMismatch) {
      mismatch = status;
    }
  }
  return mismatch;
}

namespace {

// A shard that could not be reached (as opposed to one that refused the call).
bool ShardDown(const absl::Status& status) {
  return absl::IsUnavailable(status) || absl::IsDeadlineExceeded(status);
}

// "A: status; B: status" of the failed shards.
std::string DescribeFailures(const std::vector<std::string>& addresses,
                             const std::vector<absl::Status>& statuses) {
  std::string text;
  for (size_t i = 0; i < statuses.size(); ++i) {
    if (statuses[i].ok()) continue;
    absl::StrAppend(&text, text.empty() ? "" : "; ", addresses[i], ": ", statuses[i].ToString());
  }
  return text;
}

// The first failure's code with every failure named, or OK.
absl::Status FailedOnShards(absl::string_view what, const std::vector<std::string>& addresses,
                            const std::vector<absl::Status>& statuses) {
  int failed = 0;
  absl::StatusCode code = absl::StatusCode::kOk;
  for (const absl::Status& status : statuses) {
    if (status.ok()) continue;
    if (failed++ == 0) code = status.code();
  }
  if (failed == 0) return absl::OkStatus();
  return absl::Status(
      code, absl::StrCat(what, " failed on ", failed, " of ", statuses.size(),
                         " shards (done on the others): ", DescribeFailures(addresses, statuses)));
}

// The addresses of Client::Shard-s (a template: the struct is private).
template <typename Shard>
std::vector<std::string> AddressesOf(const std::vector<std::shared_ptr<Shard>>& shards) {
  std::vector<std::string> addresses;
  for (const auto& shard : shards) addresses.push_back(shard->address);
  return addresses;
}

}  // namespace

absl::StatusOr<std::vector<Client::ShardInfo>> Client::ShardServerInfo(absl::Duration timeout) {
  if (!target_status_.ok()) return target_status_;
  if (!sharded()) {
    absl::StatusOr<deepmind::reverb::ServerInfoResponse> info = ServerInfo(timeout);
    if (!info.ok()) return info.status();
    std::vector<ShardInfo> infos(1);
    infos[0].address = server_address_;
    infos[0].response = *std::move(info);
    return infos;
  }
  const absl::Time deadline =
      timeout == absl::InfiniteDuration() ? absl::InfiniteFuture() : absl::Now() + timeout;
  absl::Duration backoff = absl::Milliseconds(10);
  for (;;) {
    absl::Status last;
    absl::StatusOr<std::vector<std::shared_ptr<Shard>>> shards = Shards();
    if (shards.ok()) {
      std::vector<ShardInfo> infos(shards->size());
      std::vector<absl::Status> statuses = FanOut(
          *shards, deadline,
          [&infos](size_t i, Shard& shard, grpc::ClientContext* context,
                   std::function<void(grpc::Status)> done) {
            static const deepmind::reverb::ServerInfoRequest* const kRequest =
                new deepmind::reverb::ServerInfoRequest();
            shard.stub->async()->ServerInfo(context, kRequest, &infos[i].response, std::move(done));
          });
      if (absl::Status mismatch = ShardTransportMismatch(*shards, &statuses); !mismatch.ok()) {
        return mismatch;
      }
      bool any_ok = false;
      for (size_t i = 0; i < infos.size(); ++i) {
        infos[i].address = (*shards)[i]->address;
        infos[i].status = statuses[i];
        any_ok |= statuses[i].ok();
      }
      if (any_ok) return infos;
      for (const absl::Status& status : statuses) {
        if (!ShardDown(status)) return status;  // e.g. not a Reverb server
      }
      last = absl::UnavailableError(DescribeFailures(AddressesOf(*shards), statuses));
    } else if (absl::IsUnavailable(shards.status())) {
      last = shards.status();  // a dns: name that does not resolve (yet)
    } else {
      return shards.status();
    }
    const absl::Time now = absl::Now();
    if (now >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("Deadline exceeded: no shard of ", server_address_,
                       " answered ServerInfo in time: ", last.message()));
    }
    absl::SleepFor(std::min(backoff, deadline - now));
    backoff = std::min(2 * backoff, absl::Seconds(1));
  }
}

deepmind::reverb::ServerInfoResponse Client::MergeShardInfos(const std::vector<ShardInfo>& infos) {
  deepmind::reverb::ServerInfoResponse merged;
  absl::flat_hash_map<std::string, deepmind::reverb::TableInfo*> tables;
  uint64_t high = 0, low = 0;
  for (const ShardInfo& info : infos) {
    if (!info.status.ok()) continue;
    // Order-dependent mix, so a change of any shard's tables changes the id.
    high = (high ^ info.response.tables_state_id().high()) * 0x9e3779b97f4a7c15ULL + 1;
    low = (low ^ info.response.tables_state_id().low()) * 0xc2b2ae3d27d4eb4fULL + 1;
    for (const deepmind::reverb::TableInfo& table : info.response.table_info()) {
      deepmind::reverb::TableInfo*& sum = tables[table.name()];
      if (sum == nullptr) {
        sum = merged.add_table_info();
        *sum = table;
        continue;
      }
      sum->set_max_size(sum->max_size() + table.max_size());
      sum->set_current_size(sum->current_size() + table.current_size());
      sum->set_num_episodes(sum->num_episodes() + table.num_episodes());
      sum->set_num_deleted_episodes(sum->num_deleted_episodes() + table.num_deleted_episodes());
      sum->set_num_unique_samples(sum->num_unique_samples() + table.num_unique_samples());
      auto* limiter = sum->mutable_rate_limiter_info();
      const auto& other = table.rate_limiter_info();
      limiter->mutable_insert_stats()->set_completed(limiter->insert_stats().completed() +
                                                     other.insert_stats().completed());
      limiter->mutable_sample_stats()->set_completed(limiter->sample_stats().completed() +
                                                     other.sample_stats().completed());
      auto* time = sum->mutable_table_worker_time();
      const auto& t = table.table_worker_time();
      time->set_running_ms(time->running_ms() + t.running_ms());
      time->set_sampling_ms(time->sampling_ms() + t.sampling_ms());
      time->set_inserting_ms(time->inserting_ms() + t.inserting_ms());
      time->set_sleeping_ms(time->sleeping_ms() + t.sleeping_ms());
      time->set_waiting_for_sampling_ms(time->waiting_for_sampling_ms() +
                                        t.waiting_for_sampling_ms());
    }
  }
  merged.mutable_tables_state_id()->set_high(high);
  merged.mutable_tables_state_id()->set_low(low);
  return merged;
}

absl::Status Client::AwaitTransport(absl::Time deadline) {
  if (!setup_status_.ok()) return setup_status_;
  if (channel_->GetState(/*try_to_connect=*/false) == GRPC_CHANNEL_READY) return absl::OkStatus();
  return tf_reverb::AwaitTransport(channel_.get(), deadline, tls_, server_address_);
}

Client::~Client() {
  std::vector<std::unique_ptr<PooledInsertStream>> idle;
  {
    absl::MutexLock lock(&insert_streams_mu_);
    idle.swap(idle_insert_streams_);
  }
  for (auto& insert : idle) insert->Close().IgnoreError();
}

absl::StatusOr<deepmind::reverb::ServerInfoResponse> Client::ServerInfo(absl::Duration timeout) {
  if (!target_status_.ok()) return target_status_;
  if (!setup_status_.ok()) return setup_status_;
  if (sharded()) {
    absl::StatusOr<std::vector<ShardInfo>> infos = ShardServerInfo(timeout);
    if (!infos.ok()) return infos.status();
    deepmind::reverb::ServerInfoResponse merged = MergeShardInfos(*infos);
    CacheSignatures(merged);
    return merged;
  }
  const absl::Time deadline =
      timeout == absl::InfiniteDuration() ? absl::InfiniteFuture() : absl::Now() + timeout;
  if (absl::Status transport = AwaitTransport(deadline); !transport.ok()) return transport;
  grpc::ClientContext context;
  context.set_wait_for_ready(true);
  if (timeout != absl::InfiniteDuration()) context.set_deadline(absl::ToChronoTime(deadline));
  deepmind::reverb::ServerInfoResponse response;
  absl::Status status =
      FromGrpcStatus(stub_->ServerInfo(&context, deepmind::reverb::ServerInfoRequest(), &response));
  if (!status.ok()) return status;
  CacheSignatures(response);
  return response;
}

void Client::CacheSignatures(const deepmind::reverb::ServerInfoResponse& response) {
  {
    absl::MutexLock lock(&signatures_mu_);
    if (signatures_ != nullptr &&
        signatures_->tables_state_id.high() == response.tables_state_id().high() &&
        signatures_->tables_state_id.low() == response.tables_state_id().low()) {
      return;
    }
  }
  auto signatures = std::make_shared<TableSignatures>();
  signatures->tables_state_id = response.tables_state_id();
  for (const auto& info : response.table_info()) {
    std::shared_ptr<const std::vector<SignatureSpec>>& columns = signatures->tables[info.name()];
    if (info.signature().empty()) continue;
    // A signature we cannot read is left to the server to enforce.
    absl::StatusOr<std::vector<SignatureSpec>> parsed = ParseSignature(info.signature());
    if (parsed.ok())
      columns = std::make_shared<const std::vector<SignatureSpec>>(*std::move(parsed));
  }
  absl::MutexLock lock(&signatures_mu_);
  signatures_ = std::move(signatures);
}

absl::StatusOr<std::shared_ptr<const Client::TableSignatures>> Client::Signatures() {
  {
    absl::MutexLock lock(&signatures_mu_);
    if (signatures_ != nullptr) return signatures_;
  }
  absl::StatusOr<deepmind::reverb::ServerInfoResponse> info = ServerInfo(absl::InfiniteDuration());
  if (!info.ok()) return info.status();
  absl::MutexLock lock(&signatures_mu_);
  return signatures_;
}

absl::Status Client::MutatePriorities(const std::string& table,
                                      const std::vector<deepmind::reverb::KeyWithPriority>& updates,
                                      const std::vector<uint64_t>& deletes) {
  deepmind::reverb::MutatePrioritiesRequest request;
  request.set_table(table);
  for (const auto& update : updates) *request.add_updates() = update;
  for (uint64_t key : deletes) request.add_delete_keys(key);
  return CallServers(
             "MutatePriorities",
             &deepmind::reverb::ReverbService::StubInterface::async_interface::MutatePriorities,
             request, absl::InfiniteDuration())
      .status();
}

template <typename Request, typename Response>
absl::StatusOr<std::vector<Response>> Client::CallServers(const char* what,
                                                          AsyncMethod<Request, Response> method,
                                                          const Request& request,
                                                          absl::Duration timeout) {
  if (!target_status_.ok()) return target_status_;
  if (!setup_status_.ok()) return setup_status_;
  const absl::Time deadline =
      timeout == absl::InfiniteDuration() ? absl::InfiniteFuture() : absl::Now() + timeout;
  if (!sharded()) {
    if (absl::Status transport = AwaitTransport(deadline); !transport.ok()) return transport;
    grpc::ClientContext context;
    context.set_wait_for_ready(true);
    if (deadline != absl::InfiniteFuture()) context.set_deadline(absl::ToChronoTime(deadline));
    std::vector<Response> responses(1);
    absl::Notification finished;
    grpc::Status status;
    (stub_->async()->*method)(&context, &request, &responses[0], [&](grpc::Status s) {
      status = std::move(s);
      finished.Notify();
    });
    finished.WaitForNotification();
    if (!status.ok()) return FromGrpcStatus(status);
    return responses;
  }
  absl::StatusOr<std::vector<std::shared_ptr<Shard>>> shards = Shards();
  if (!shards.ok()) return shards.status();
  std::vector<Response> responses(shards->size());
  std::vector<absl::Status> statuses =
      FanOut(*shards, deadline,
             [&](size_t i, Shard& shard, grpc::ClientContext* context,
                 std::function<void(grpc::Status)> done) {
               (shard.stub->async()->*method)(context, &request, &responses[i], std::move(done));
             });
  if (absl::Status mismatch = ShardTransportMismatch(*shards, &statuses); !mismatch.ok()) {
    return mismatch;
  }
  std::vector<Response> answered;
  for (size_t i = 0; i < statuses.size(); ++i) {
    if (statuses[i].ok()) {
      answered.push_back(std::move(responses[i]));
    } else if (!ShardDown(statuses[i])) {
      return absl::Status(statuses[i].code(), absl::StrCat("Shard ", (*shards)[i]->address, ": ",
                                                           statuses[i].message()));
    }
  }
  if (answered.empty()) {
    return absl::UnavailableError(absl::StrCat(what, " reached no shard of ", server_address_, ": ",
                                               DescribeFailures(AddressesOf(*shards), statuses)));
  }
  return answered;
}

namespace {

// The entries of a Lookup or Scan response as Samples.
std::vector<Sample> EntriesToSamples(
    google::protobuf::RepeatedPtrField<deepmind::reverb::SampleStreamResponse::SampleEntry>*
        entries) {
  std::vector<Sample> samples;
  samples.reserve(entries->size());
  for (auto& entry : *entries) {
    std::vector<std::shared_ptr<const ChunkData>> chunks;
    for (auto& chunk : *entry.mutable_data()) {
      chunks.push_back(std::make_shared<const ChunkData>(std::move(chunk)));
    }
    samples.emplace_back(std::move(*entry.mutable_info()), std::move(chunks));
  }
  return samples;
}

}  // namespace

absl::StatusOr<Client::LookupResult> Client::Lookup(const std::string& table,
                                                    const std::vector<uint64_t>& keys,
                                                    absl::Duration timeout) {
  deepmind::reverb::LookupRequest request;
  request.set_table(table);
  request.mutable_keys()->Add(keys.begin(), keys.end());
  absl::StatusOr<std::vector<deepmind::reverb::LookupResponse>> responses = CallServers(
      "Lookup", &deepmind::reverb::ReverbService::StubInterface::async_interface::Lookup, request,
      timeout);
  if (!responses.ok()) return responses.status();
  LookupResult result;
  absl::flat_hash_set<uint64_t> found;
  for (auto& response : *responses) {
    for (Sample& sample : EntriesToSamples(response.mutable_entries())) {
      if (!found.insert(sample.meta().key).second) continue;
      result.found.push_back(std::move(sample));
    }
  }
  for (uint64_t key : keys) {
    if (!found.contains(key)) result.missing.push_back(key);
  }
  return result;
}

absl::StatusOr<deepmind::reverb::TableStatsResponse> Client::TableStats(const std::string& table,
                                                                        absl::Duration timeout) {
  deepmind::reverb::TableStatsRequest request;
  request.set_table(table);
  absl::StatusOr<std::vector<deepmind::reverb::TableStatsResponse>> responses = CallServers(
      "TableStats", &deepmind::reverb::ReverbService::StubInterface::async_interface::TableStats,
      request, timeout);
  if (!responses.ok()) return responses.status();
  return MergeTableStats(*responses);
}

absl::StatusOr<int64_t> Client::SetPolicyVersion(const std::string& table, int64_t version,
                                                 absl::Duration timeout) {
  deepmind::reverb::SetPolicyVersionRequest request;
  request.set_table(table);
  request.set_version(version);
  absl::StatusOr<std::vector<deepmind::reverb::SetPolicyVersionResponse>> responses = CallServers(
      "SetPolicyVersion",
      &deepmind::reverb::ReverbService::StubInterface::async_interface::SetPolicyVersion, request,
      timeout);
  if (!responses.ok()) return responses.status();
  int64_t stale = 0;
  for (const auto& response : *responses) stale += response.stale_items();
  return stale;
}

deepmind::reverb::TableStatsResponse Client::MergeTableStats(
    const std::vector<deepmind::reverb::TableStatsResponse>& stats) {
  deepmind::reverb::TableStatsResponse merged;
  bool any = false;
  for (const auto& shard : stats) {
    if (merged.age_bucket_seconds_size() == 0) {
      *merged.mutable_age_bucket_seconds() = shard.age_bucket_seconds();
      merged.mutable_age_counts()->Resize(shard.age_counts_size(), 0);
    }
    for (int i = 0; i < shard.age_counts_size() && i < merged.age_counts_size(); ++i) {
      merged.set_age_counts(i, merged.age_counts(i) + shard.age_counts(i));
    }
    for (const auto& [times, count] : shard.times_sampled()) {
      (*merged.mutable_times_sampled())[times] += count;
    }
    merged.set_policy_version(std::max(merged.policy_version(), shard.policy_version()));
    merged.set_stale_items(merged.stale_items() + shard.stale_items());
    if (shard.size() == 0) continue;
    merged.set_min_priority(any ? std::min(merged.min_priority(), shard.min_priority())
                                : shard.min_priority());
    merged.set_max_priority(any ? std::max(merged.max_priority(), shard.max_priority())
                                : shard.max_priority());
    merged.set_min_age_seconds(any ? std::min(merged.min_age_seconds(), shard.min_age_seconds())
                                   : shard.min_age_seconds());
    merged.set_max_age_seconds(any ? std::max(merged.max_age_seconds(), shard.max_age_seconds())
                                   : shard.max_age_seconds());
    merged.set_size(merged.size() + shard.size());
    merged.set_total_priority(merged.total_priority() + shard.total_priority());
    any = true;
  }
  return merged;
}

absl::StatusOr<Client::ScanBatch> Client::Scan(const std::string& table, size_t server,
                                               uint64_t start, int64_t max_items,
                                               absl::Duration timeout) {
  if (max_items < 1) {
    return absl::InvalidArgumentError(absl::StrCat("max_items must be >= 1, got ", max_items));
  }
  if (!target_status_.ok()) return target_status_;
  if (!setup_status_.ok()) return setup_status_;
  deepmind::reverb::ReverbService::StubInterface* stub = stub_.get();
  std::string name = server_address_;
  if (sharded()) {
    absl::StatusOr<std::vector<std::shared_ptr<Shard>>> shards = Shards();
    if (!shards.ok()) return shards.status();
    if (server >= shards->size()) {
      return absl::OutOfRangeError(
          absl::StrCat("Server ", server, " of a scan of ", shards->size(), " shards"));
    }
    stub = (*shards)[server]->stub.get();
    name = (*shards)[server]->address;
  } else if (server != 0) {
    return absl::OutOfRangeError(absl::StrCat("Server ", server, " of a scan of one server"));
  } else if (absl::Status transport =
                 AwaitTransport(timeout == absl::InfiniteDuration() ? absl::InfiniteFuture()
                                                                    : absl::Now() + timeout);
             !transport.ok()) {
    return transport;
  }
  deepmind::reverb::ScanRequest request;
  request.set_table(table);
  request.set_start(start);
  request.set_max_items(max_items);
  grpc::ClientContext context;
  // A shard that is down fails the scan at once (fan-outs are fail-fast too).
  context.set_wait_for_ready(!sharded());
  if (timeout != absl::InfiniteDuration()) {
    context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  }
  deepmind::reverb::ScanResponse response;
  if (grpc::Status status = stub->Scan(&context, request, &response); !status.ok()) {
    absl::Status error = FromGrpcStatus(status);
    if (!sharded()) return error;
    return absl::Status(error.code(), absl::StrCat("Shard ", name, ": ", error.message()));
  }
  ScanBatch batch;
  batch.items = EntriesToSamples(response.mutable_entries());
  batch.next = response.next();
  batch.done = response.done();
  return batch;
}

absl::Status Client::Reset(const std::string& table) {
  if (!target_status_.ok()) return target_status_;
  if (!setup_status_.ok()) return setup_status_;
  if (!sharded()) {
    if (absl::Status transport = AwaitTransport(absl::InfiniteFuture()); !transport.ok()) {
      return transport;
    }
  }
  deepmind::reverb::ResetRequest request;
  request.set_table(table);
  if (sharded()) {
    absl::StatusOr<std::vector<std::shared_ptr<Shard>>> shards = Shards();
    if (!shards.ok()) return shards.status();
    std::vector<deepmind::reverb::ResetResponse> responses(shards->size());
    std::vector<absl::Status> statuses =
        FanOut(*shards, absl::InfiniteFuture(),
               [&](size_t i, Shard& shard, grpc::ClientContext* context,
                   std::function<void(grpc::Status)> done) {
                 shard.stub->async()->Reset(context, &request, &responses[i], std::move(done));
               });
    if (absl::Status mismatch = ShardTransportMismatch(*shards, &statuses); !mismatch.ok()) {
      return mismatch;
    }
    return FailedOnShards("Reset", AddressesOf(*shards), statuses);
  }
  grpc::ClientContext context;
  context.set_wait_for_ready(true);
  deepmind::reverb::ResetResponse response;
  return FromGrpcStatus(stub_->Reset(&context, request, &response));
}

absl::StatusOr<std::vector<std::string>> Client::Checkpoint(bool full) {
  if (!target_status_.ok()) return target_status_;
  if (!setup_status_.ok()) return setup_status_;
  deepmind::reverb::CheckpointRequest request;
  request.set_full(full);
  if (sharded()) {
    absl::StatusOr<std::vector<std::shared_ptr<Shard>>> shards = Shards();
    if (!shards.ok()) return shards.status();
    std::vector<deepmind::reverb::CheckpointResponse> responses(shards->size());
    std::vector<absl::Status> statuses =
        FanOut(*shards, absl::InfiniteFuture(),
               [&](size_t i, Shard& shard, grpc::ClientContext* context,
                   std::function<void(grpc::Status)> done) {
                 shard.stub->async()->Checkpoint(context, &request, &responses[i], std::move(done));
               });
    if (absl::Status mismatch = ShardTransportMismatch(*shards, &statuses); !mismatch.ok()) {
      return mismatch;
    }
    absl::Status failed = FailedOnShards("Checkpoint", AddressesOf(*shards), statuses);
    if (!failed.ok()) return failed;
    std::vector<std::string> paths;
    for (const auto& response : responses) paths.push_back(response.checkpoint_path());
    return paths;
  }
  grpc::ClientContext context;
  deepmind::reverb::CheckpointResponse response;
  absl::Status status = CheckTransportFailure(
      channel_.get(), FromGrpcStatus(stub_->Checkpoint(&context, request, &response)), tls_,
      server_address_);
  if (!status.ok()) return status;
  return std::vector<std::string>{response.checkpoint_path()};
}

absl::Status Client::InsertStep(const std::vector<Tensor>& step,
                                const std::vector<std::pair<std::string, double>>& priorities,
                                std::optional<int64_t> policy_version) {
  if (!target_status_.ok()) return target_status_;
  if (policy_version.has_value() && *policy_version < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("policy_version (", *policy_version, ") must be >= 0"));
  }
  if (step.empty()) return absl::InvalidArgumentError("Cannot insert a step without data.");
  if (priorities.empty()) return absl::InvalidArgumentError("priorities must not be empty");
  absl::StatusOr<std::shared_ptr<const TableSignatures>> signatures = Signatures();
  if (!signatures.ok()) return signatures.status();
  std::vector<ItemColumn> item_columns;
  for (const auto& [table, unused] : priorities) {
    auto it = (*signatures)->tables.find(table);
    // Unknown tables are left to the server (NOT_FOUND).
    if (it == (*signatures)->tables.end() || it->second == nullptr) continue;
    if (item_columns.empty()) {
      item_columns.reserve(step.size());
      for (const Tensor& tensor : step) {
        ItemColumn& column = item_columns.emplace_back();
        column.dtype = tensor.dtype;
        column.shape.reserve(tensor.shape.size() + 1);
        column.shape.push_back(1);
        column.shape.insert(column.shape.end(), tensor.shape.begin(), tensor.shape.end());
      }
    }
    if (absl::Status s = CheckItemColumns(table, *it->second, item_columns); !s.ok()) return s;
  }
  std::vector<Tensor> columns;
  columns.reserve(step.size());
  for (const Tensor& tensor : step) {
    absl::StatusOr<Tensor> stacked = StackTensors({&tensor});
    if (!stacked.ok()) return stacked.status();
    columns.push_back(std::move(*stacked));
  }
  const uint64_t chunk_key = NewKey();
  absl::StatusOr<ChunkData> chunk = BuildChunk(chunk_key, columns, NewKey(), 0, 0, false);
  if (!chunk.ok()) return chunk.status();

  deepmind::reverb::InsertStreamRequest request;
  *request.add_chunks() = std::move(*chunk);
  std::vector<uint64_t> keys;
  for (const auto& [table, priority] : priorities) {
    auto* item = request.add_items();
    item->set_key(NewKey());
    item->set_table(table);
    item->set_priority(priority);
    if (policy_version.has_value()) item->set_policy_version(*policy_version);
    for (size_t c = 0; c < columns.size(); ++c) {
      auto* slice = item->mutable_flat_trajectory()->add_columns()->add_chunk_slices();
      slice->set_chunk_key(chunk_key);
      slice->set_offset(0);
      slice->set_length(1);
      slice->set_index(static_cast<int32_t>(c));
    }
    keys.push_back(item->key());
  }
  // A connection broken by a server restart surfaces as UNAVAILABLE: resend
  // the same request. The item keys are fixed above, so an item the server
  // already inserted is only re-prioritised, never duplicated. A reused idle
  // stream that turns out dead is replaced without counting an attempt.
  StreamChannel();
  absl::Duration backoff = absl::Milliseconds(10);
  for (int attempt = 1;;) {
    bool reused = false;
    absl::Status status = InsertOnce(request, static_cast<int>(keys.size()), &reused);
    if (status.ok()) return status;
    const bool retryable = absl::IsUnavailable(status) || (reused && absl::IsCancelled(status));
    if (!retryable) return status;
    if (reused) continue;
    if (attempt++ == kMaxInsertAttempts) return status;
    absl::SleepFor(backoff);
    backoff = std::min(2 * backoff, absl::Seconds(1));
  }
}

absl::Status Client::PooledInsertStream::Close() {
  context.TryCancel();
  return FromGrpcStatus(stream->Finish());
}

absl::Status Client::InsertOnce(const deepmind::reverb::InsertStreamRequest& request, int num_items,
                                bool* reused) {
  std::unique_ptr<PooledInsertStream> insert;
  {
    absl::MutexLock lock(&insert_streams_mu_);
    // Sharded: open streams until there is one per shard (round_robin puts
    // each on the next shard), then take the oldest, so consecutive calls
    // rotate over the shards. Unsharded: the most recently used.
    const int idle = static_cast<int>(idle_insert_streams_.size());
    if (idle > 0 && idle >= insert_streams_to_spread_) {
      if (insert_streams_to_spread_ > 0) {
        insert = std::move(idle_insert_streams_.front());
        idle_insert_streams_.erase(idle_insert_streams_.begin());
      } else {
        insert = std::move(idle_insert_streams_.back());
        idle_insert_streams_.pop_back();
      }
    }
  }
  *reused = insert != nullptr;
  if (insert == nullptr) {
    if (absl::Status transport = AwaitTransport(absl::InfiniteFuture()); !transport.ok()) {
      return transport;
    }
    insert = std::make_unique<PooledInsertStream>();
    insert->context.set_wait_for_ready(true);
    insert->stream = stub_->InsertStream(&insert->context);
  }
  bool ok = insert->stream->Write(request);
  deepmind::reverb::InsertStreamResponse response;
  for (int confirmed = 0; ok && confirmed < num_items; confirmed += response.keys_size()) {
    ok = insert->stream->Read(&response);
  }
  if (!ok) {
    // The server ended the stream (an error, or it is going away).
    insert->stream->WritesDone();
    absl::Status status = FromGrpcStatus(insert->stream->Finish());
    return status.ok() ? absl::UnavailableError("The insert stream ended.") : status;
  }
  {
    absl::MutexLock lock(&insert_streams_mu_);
    if (static_cast<int>(idle_insert_streams_.size()) < kMaxIdleInsertStreams) {
      idle_insert_streams_.push_back(std::move(insert));
      return absl::OkStatus();
    }
  }
  insert->Close().IgnoreError();  // a surplus stream
  return absl::OkStatus();
}

int Client::LoopbackPort() const {
  // Only the plain forms: "ipv4:127.0.0.1:P" and other URIs always use gRPC.
  for (const char* prefix : {"localhost:", "127.0.0.1:", "[::1]:"}) {
    if (absl::StartsWith(server_address_, prefix)) {
      int port = -1;
      if (absl::SimpleAtoi(server_address_.substr(strlen(prefix)), &port)) return port;
    }
  }
  return -1;
}

std::unique_ptr<Sampler> Client::NewSampler(const std::string& table, SamplerOptions options) {
  if (!target_status_.ok()) return Sampler::Failed(target_status_);
  if (!setup_status_.ok()) return Sampler::Failed(setup_status_);
  // Received chunks and batches are freed in waves; keep that memory mapped
  // rather than faulting it back in for every wave (heap_tuning.h).
  KeepFreedHeapMapped();
  if (sharded() && options.num_workers == -1) {
    // One worker (one stream) per shard, so every shard is sampled from the
    // start rather than after max_samples_per_stream samples.
    absl::StatusOr<std::vector<std::string>> shards = ShardAddresses();
    if (shards.ok() && shards->size() > 1)
      options.num_workers = static_cast<int64_t>(shards->size());
  }
  const int port = LoopbackPort();
  const int64_t per_stream = options.EffectiveMaxSamplesPerStream();
  if (target_.kind == ShardTarget::Kind::kList) {
    // Samples spread over the shards as one table's would be
    // (sharded_sampler_worker.h), each shard read on its own channel. A
    // dns: target's shards may change while it samples: its workers use the
    // load-balanced channel, each stream one shard.
    absl::StatusOr<std::vector<std::shared_ptr<Shard>>> shards = Shards();
    if (!shards.ok()) return Sampler::Failed(shards.status());
    auto weights = std::make_shared<ShardWeights>(shards->size());
    ShardedSamplerWorker::Refresh refresh = [shards = *shards, table](ShardWeights& weights) {
      for (size_t i = 0; i < shards.size(); ++i) {
        grpc::ClientContext context;
        context.set_deadline(absl::ToChronoTime(absl::Now() + kShardWeightsMaxAge));
        deepmind::reverb::ServerInfoResponse response;
        bool found = false;
        if (shards[i]->stub->ServerInfo(&context, {}, &response).ok()) {
          for (const auto& info : response.table_info()) {
            if (info.name() != table) continue;
            weights.SetFromInfo(i, info);
            found = true;
          }
        }
        if (!found) weights.MarkDown(i);
      }
    };
    absl::StatusOr<std::unique_ptr<Sampler>> sampler = Sampler::Create(
        [shards = *shards, table, per_stream, weights, refresh,
         tls = tls_]() -> std::unique_ptr<SamplerWorker> {
          std::vector<std::unique_ptr<SamplerWorker>> workers;
          for (const auto& shard : shards) {
            workers.push_back(std::make_unique<GrpcSamplerWorker>(
                shard->channel, table, per_stream, /*warm_up=*/nullptr, tls, shard->address));
          }
          return std::make_unique<ShardedSamplerWorker>(std::move(workers), weights, refresh);
        },
        options);
    if (!sampler.ok()) return Sampler::Failed(sampler.status());
    return *std::move(sampler);
  }
  absl::StatusOr<std::unique_ptr<Sampler>> sampler = Sampler::Create(
      [this, table, port, per_stream, warm_up = warm_up_]() -> std::unique_ptr<SamplerWorker> {
        // A table of a server in this process is read directly.
        if (port > 0) {
          std::shared_ptr<Table> local = InProcessTables::Find(port, table);
          if (local != nullptr) return std::make_unique<InProcessSamplerWorker>(std::move(local));
        }
        return std::make_unique<GrpcSamplerWorker>(channel_, table, per_stream, warm_up, tls_,
                                                   server_address_);
      },
      options);
  if (!sampler.ok()) return Sampler::Failed(sampler.status());
  return *std::move(sampler);
}

}  // namespace tf_reverb
