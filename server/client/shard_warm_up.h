// ShardWarmUp: the wait before a sharded client's first streams.
//
// gRPC's round_robin sends a new stream only to shards already connected,
// so the first streams of a fresh sharded client would all land on the shard
// that connected first. AwaitShardConnections makes ServerInfo calls over the
// client's channel until each shard answered one (shards are told apart by
// their tables_state_id), for at most kShardWarmUp after the first answer (a
// shard that is down costs that once) and kShardWarmUpGiveUp when none
// answers, then marks the state done. Client::StreamChannel (writers,
// InsertStep) and the gRPC sampler workers run it before their first stream.
//
// Contract:
//  * Thread-safety: `done` is atomic; callers that must run the wait once
//    (Client::StreamChannel) use `once`. Several threads may wait at the
//    same time (each sampler worker waits itself, cancellably).
//  * Ownership: shared by a client and its samplers (shared_ptr).
//  * Errors: none; a failed call ends the wait early (the state is done).
#ifndef TF_REVERB_SERVER_CLIENT_SHARD_WARM_UP_H_
#define TF_REVERB_SERVER_CLIENT_SHARD_WARM_UP_H_

#include <atomic>
#include <functional>
#include <memory>

#include "absl/base/call_once.h"
#include "absl/time/time.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "server/client/shard_target.h"

namespace tf_reverb {

inline constexpr absl::Duration kShardWarmUp = absl::Milliseconds(500);
inline constexpr absl::Duration kShardWarmUpGiveUp = absl::Seconds(5);

struct ShardWarmUp {
  std::shared_ptr<grpc::Channel> channel;
  ShardTarget target;
  std::atomic<bool> done{false};
  absl::once_flag once;  // Client::StreamChannel's
};

// Waits as the contract says, unless `state` is done already. Each call's
// context comes from `begin_call` (nullptr: stop, e.g. cancelled; the state
// stays not done) and `end_call` follows the call, so a caller can cancel
// it from another thread.
void AwaitShardConnections(ShardWarmUp& state,
                           const std::function<grpc::ClientContext*()>& begin_call,
                           const std::function<void()>& end_call);

}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_CLIENT_SHARD_WARM_UP_H_
