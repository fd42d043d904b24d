// ShardTarget: which replay servers ("shards") a client target names, and how
// a channel over several of them is configured.
//
// A target names several shards when it is
//   * "ipv4:A:P,B:Q,..." or "ipv6:[A]:P,[B]:Q,..." with more than one address
//     (gRPC's sockaddr schemes; "ipv4:///A:P" is accepted too), or
//   * "dns:///NAME:PORT" (or "dns:NAME:PORT", "dns://AUTHORITY/NAME:PORT"):
//     every address NAME resolves to is one shard (e.g. a headless
//     Kubernetes Service). The port is required.
// Anything else — "host:port", "localhost:port", a one-address "ipv4:" list,
// "unix:" paths — is one server, exactly as before sharding existed.
//
// Streams of a sharded channel are spread by gRPC's own round_robin policy
// and go only to shards whose grpc.health.v1 status (service "") is SERVING
// (client-side health checking, set by the service config below); a shard
// that does not implement the health service counts as healthy. Admin calls
// need every shard, so ResolveShards lists them: the parsed list for ipv4:/
// ipv6:, getaddrinfo(NAME) at call time for dns: (the system resolver, so a
// dns://AUTHORITY/ server is not used there; a name's IPv4 addresses are its
// shards when it has any, else its IPv6 ones, so a dual-stack server with an
// A and an AAAA record, or "localhost", is one shard).
//
// Contract: pure functions, thread-safe. Errors: INVALID_ARGUMENT naming the
// problem for a malformed sharded target; UNAVAILABLE when a dns: name does
// not resolve.
#ifndef TF_REVERB_SERVER_CLIENT_SHARD_TARGET_H_
#define TF_REVERB_SERVER_CLIENT_SHARD_TARGET_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "grpcpp/support/channel_arguments.h"

namespace tf_reverb {

struct ShardTarget {
  enum class Kind {
    kSingle,  // one server: the target goes to gRPC as is, no fan-out
    kList,    // ipv4:/ipv6: with two or more addresses
    kDns,     // dns: name, resolved for each fan-out
  };
  Kind kind = Kind::kSingle;
  // The target as given (the channel's target).
  std::string target;
  // kList: "A:P" / "[A]:P" per shard, in the order given; kSingle: {target}.
  std::vector<std::string> addresses;
  // kDns: the name and port to resolve.
  std::string dns_host;
  std::string dns_port;

  bool sharded() const { return kind != Kind::kSingle; }
};

// Parses `target` (see above). Never fails for a target that is not one of
// the sharded forms: those are kSingle and left to gRPC.
absl::StatusOr<ShardTarget> ParseShardTarget(absl::string_view target);

// The shards' addresses ("A:P" or "[A]:P") now: kSingle and kList give their
// addresses, kDns resolves its name (duplicates removed, resolver order).
absl::StatusOr<std::vector<std::string>> ResolveShards(const ShardTarget& target);

// The gRPC target of one shard's own channel: "ipv4:A:P" or "ipv6:[A]:P"
// for IP literals (no resolver involved), else `address` as is.
std::string ShardChannelTarget(const std::string& address);

// Service config of a sharded channel: round_robin over the resolved
// addresses, client-side health checking of service "".
inline constexpr char kShardedServiceConfigJson[] =
    R"({"loadBalancingConfig":[{"round_robin":{}}],)"
    R"("healthCheckConfig":{"serviceName":""}})";

// Sets the channel arguments that make a channel sharded: the service config
// above (resolvers' service configs ignored, so ours is the one in force) and
// a reconnect backoff capped at kShardReconnectMaxBackoffMs, so a restarted
// shard takes new streams within seconds.
inline constexpr int kShardReconnectMaxBackoffMs = 2000;
void ConfigureShardedChannel(grpc::ChannelArguments* args);

}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_CLIENT_SHARD_TARGET_H_
