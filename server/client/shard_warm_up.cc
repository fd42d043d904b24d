#include "server/client/shard_warm_up.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "grpcpp/support/status.h"
#include "reverb_service.grpc.pb.h"
#include "reverb_service.pb.h"

namespace tf_reverb {

void AwaitShardConnections(ShardWarmUp& state,
                           const std::function<grpc::ClientContext*()>& begin_call,
                           const std::function<void()>& end_call) {
  if (state.done.load()) return;
  absl::StatusOr<std::vector<std::string>> shards = ResolveShards(state.target);
  const size_t num_shards = shards.ok() ? shards->size() : 0;
  auto stub = deepmind::reverb::ReverbService::NewStub(state.channel);
  absl::flat_hash_set<std::pair<uint64_t, uint64_t>> seen;
  const absl::Time give_up = absl::Now() + kShardWarmUpGiveUp;
  absl::Time deadline = give_up;
  while (seen.size() < num_shards && num_shards > 1 && !state.done.load() &&
         absl::Now() < deadline) {
    grpc::ClientContext* context = begin_call();
    if (context == nullptr) return;
    context->set_wait_for_ready(true);
    context->set_deadline(absl::ToChronoTime(deadline));
    deepmind::reverb::ServerInfoResponse response;
    const grpc::Status status =
        stub->ServerInfo(context, deepmind::reverb::ServerInfoRequest(), &response);
    end_call();
    if (status.error_code() == grpc::StatusCode::CANCELLED) return;
    if (!status.ok()) break;
    if (seen.empty()) deadline = std::min(give_up, absl::Now() + kShardWarmUp);
    if (!seen.emplace(response.tables_state_id().high(), response.tables_state_id().low()).second) {
      absl::SleepFor(absl::Milliseconds(2));  // a shard still connecting
    }
  }
  state.done.store(true);
}

}  // namespace tf_reverb
