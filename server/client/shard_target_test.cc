#include "server/client/shard_target.h"

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "grpc/grpc.h"
#include "grpcpp/support/channel_arguments.h"
#include "gtest/gtest.h"

namespace tf_reverb {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ParseShardTargetTest, PlainAddressesAreOneServer) {
  for (const char* target : {"localhost:9001", "127.0.0.1:9001", "[::1]:9001", "replay.svc:8000",
                             "unix:/tmp/socket", "ipv4:127.0.0.1:9001", "ipv6:[::1]:9001"}) {
    absl::StatusOr<ShardTarget> parsed = ParseShardTarget(target);
    ASSERT_TRUE(parsed.ok()) << target << ": " << parsed.status();
    EXPECT_FALSE(parsed->sharded()) << target;
    EXPECT_EQ(parsed->kind, ShardTarget::Kind::kSingle);
    EXPECT_THAT(parsed->addresses, ElementsAre(target));
    EXPECT_EQ(parsed->target, target);
  }
}

TEST(ParseShardTargetTest, Ipv4List) {
  absl::StatusOr<ShardTarget> parsed = ParseShardTarget("ipv4:127.0.0.1:9001,10.0.0.2:9002");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_TRUE(parsed->sharded());
  EXPECT_EQ(parsed->kind, ShardTarget::Kind::kList);
  EXPECT_THAT(parsed->addresses, ElementsAre("127.0.0.1:9001", "10.0.0.2:9002"));
  absl::StatusOr<std::vector<std::string>> shards = ResolveShards(*parsed);
  ASSERT_TRUE(shards.ok());
  EXPECT_THAT(*shards, ElementsAre("127.0.0.1:9001", "10.0.0.2:9002"));
}

TEST(ParseShardTargetTest, Ipv4UriForm) {
  absl::StatusOr<ShardTarget> parsed = ParseShardTarget("ipv4:///127.0.0.1:1,127.0.0.1:2");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_THAT(parsed->addresses, ElementsAre("127.0.0.1:1", "127.0.0.1:2"));
}

TEST(ParseShardTargetTest, Ipv6List) {
  absl::StatusOr<ShardTarget> parsed = ParseShardTarget("ipv6:[::1]:9001,[fe80::1%lo]:9002");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->kind, ShardTarget::Kind::kList);
  EXPECT_THAT(parsed->addresses, ElementsAre("[::1]:9001", "[fe80::1%lo]:9002"));
}

TEST(ParseShardTargetTest, MalformedListsNameTheProblem) {
  struct Case {
    const char* target;
    const char* message;
  };
  for (const Case& c : std::vector<Case>{
           {"ipv4:", "names no address"},
           {"ipv4:127.0.0.1:9001,", "Invalid address ''"},
           {"ipv4:127.0.0.1:9001,localhost:9002", "Invalid address 'localhost:9002'"},
           {"ipv4:127.0.0.1", "Invalid address '127.0.0.1'"},
           {"ipv4:127.0.0.1:0", "IPV4_ADDRESS:PORT"},
           {"ipv4:127.0.0.1:65536", "IPV4_ADDRESS:PORT"},
           {"ipv4:127.0.0.1:9x", "IPV4_ADDRESS:PORT"},
           {"ipv4:[::1]:9001", "IPV4_ADDRESS:PORT"},
           {"ipv6:::1:9001", "[IPV6_ADDRESS]:PORT"},
           {"ipv6:[::1]:9001,[127.0.0.1]:9002", "Invalid address '[127.0.0.1]:9002'"},
           {"ipv4:127.0.0.1:1,127.0.0.1:1", "names the server 127.0.0.1:1 twice"},
           {"dns:///replay", "needs NAME:PORT"},
           {"dns:///:8000", "needs NAME:PORT"},
           {"dns://replay:8000", "expected dns:///NAME:PORT"},
       }) {
    absl::StatusOr<ShardTarget> parsed = ParseShardTarget(c.target);
    ASSERT_FALSE(parsed.ok()) << c.target;
    EXPECT_TRUE(absl::IsInvalidArgument(parsed.status())) << c.target;
    EXPECT_THAT(std::string(parsed.status().message()), HasSubstr(c.message)) << c.target;
    EXPECT_THAT(std::string(parsed.status().message()), HasSubstr(c.target)) << c.target;
  }
}

TEST(ParseShardTargetTest, DnsForms) {
  for (const char* target :
       {"dns:///replay.svc:8000", "dns:replay.svc:8000", "dns://10.0.0.53:53/replay.svc:8000"}) {
    absl::StatusOr<ShardTarget> parsed = ParseShardTarget(target);
    ASSERT_TRUE(parsed.ok()) << target << ": " << parsed.status();
    EXPECT_EQ(parsed->kind, ShardTarget::Kind::kDns) << target;
    EXPECT_EQ(parsed->dns_host, "replay.svc");
    EXPECT_EQ(parsed->dns_port, "8000");
  }
  absl::StatusOr<ShardTarget> bracketed = ParseShardTarget("dns:///[::1]:8000");
  ASSERT_TRUE(bracketed.ok());
  EXPECT_EQ(bracketed->dns_host, "::1");
}

TEST(ResolveShardsTest, DnsResolvesAtCallTime) {
  absl::StatusOr<ShardTarget> parsed = ParseShardTarget("dns:///127.0.0.1:8000");
  ASSERT_TRUE(parsed.ok());
  absl::StatusOr<std::vector<std::string>> shards = ResolveShards(*parsed);
  ASSERT_TRUE(shards.ok()) << shards.status();
  EXPECT_THAT(*shards, ElementsAre("127.0.0.1:8000"));

  parsed = ParseShardTarget("dns:///[::1]:8000");
  ASSERT_TRUE(parsed.ok());
  shards = ResolveShards(*parsed);
  ASSERT_TRUE(shards.ok()) << shards.status();
  EXPECT_THAT(*shards, ElementsAre("[::1]:8000"));
}

TEST(ResolveShardsTest, UnknownNameIsUnavailable) {
  // ".invalid" never resolves (RFC 2606).
  absl::StatusOr<ShardTarget> parsed = ParseShardTarget("dns:///no-such-host.invalid:8000");
  ASSERT_TRUE(parsed.ok());
  absl::StatusOr<std::vector<std::string>> shards = ResolveShards(*parsed);
  ASSERT_FALSE(shards.ok());
  EXPECT_TRUE(absl::IsUnavailable(shards.status())) << shards.status();
  EXPECT_THAT(std::string(shards.status().message()), HasSubstr("no-such-host.invalid"));
}

TEST(ShardChannelTargetTest, LiteralsSkipTheResolver) {
  EXPECT_EQ(ShardChannelTarget("127.0.0.1:9001"), "ipv4:127.0.0.1:9001");
  EXPECT_EQ(ShardChannelTarget("[::1]:9001"), "ipv6:[::1]:9001");
  EXPECT_EQ(ShardChannelTarget("replay-0.svc:9001"), "replay-0.svc:9001");
}

TEST(ConfigureShardedChannelTest, SetsRoundRobinAndHealthChecking) {
  grpc::ChannelArguments args;
  ConfigureShardedChannel(&args);
  grpc_channel_args c_args = args.c_channel_args();
  std::string service_config;
  for (size_t i = 0; i < c_args.num_args; ++i) {
    if (std::string(c_args.args[i].key) == GRPC_ARG_SERVICE_CONFIG) {
      service_config = c_args.args[i].value.string;
    }
  }
  EXPECT_THAT(service_config, HasSubstr(R"("round_robin")"));
  EXPECT_THAT(service_config, HasSubstr(R"("healthCheckConfig":{"serviceName":""})"));
}

}  // namespace
}  // namespace tf_reverb
