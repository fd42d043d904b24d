// Client over a sharded target: two in-process servers behind one ipv4: list.
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "reverb_service.pb.h"
#include "schema.pb.h"
#include "server/client/client.h"
#include "server/client/sample.h"
#include "server/client/sampler.h"
#include "server/service/server.h"
#include "server/table.h"
#include "server/table_item.h"
#include "server/testing/table_testing.h"
#include "server/testing/tensor_testing.h"

namespace tf_reverb {
namespace {

using ::testing::HasSubstr;
using ::tf_reverb::tensor_testing::Int32Scalar;
using ::tf_reverb::testing::Fifo;
using ::tf_reverb::testing::Heap;
using ::tf_reverb::testing::MakeTable;
using ::tf_reverb::testing::MinSize;

std::shared_ptr<Table> HeapTable() {
  // A max-heap: its top item shows priority updates.
  return MakeTable(Heap(/*min_heap=*/false), Fifo(), 100, 0, MinSize(1));
}

struct Shards {
  Shards() {
    for (int i = 0; i < 2; ++i) {
      tables.push_back(HeapTable());
      servers.push_back(Server::Start({tables.back()}, 0).value());
    }
  }
  std::string Target() const {
    return absl::StrCat("ipv4:127.0.0.1:", servers[0]->port(), ",127.0.0.1:", servers[1]->port());
  }
  std::vector<std::shared_ptr<Table>> tables;
  std::vector<std::unique_ptr<Server>> servers;
};

TEST(ClientShardTest, InsertsRotateAndAdminCallsReachEveryShard) {
  Shards shards;
  Client client(shards.Target());
  ASSERT_TRUE(client.sharded());
  EXPECT_EQ(client.ShardAddresses().value().size(), 2u);
  for (int i = 0; i < 6; ++i) {
    ASSERT_TRUE(client.InsertStep({Int32Scalar(i)}, {{"t", 1.0}}).ok());
  }
  EXPECT_EQ(shards.tables[0]->size(), 3);
  EXPECT_EQ(shards.tables[1]->size(), 3);

  absl::StatusOr<deepmind::reverb::ServerInfoResponse> info = client.ServerInfo(absl::Seconds(60));
  ASSERT_TRUE(info.ok()) << info.status();
  ASSERT_EQ(info->table_info_size(), 1);
  EXPECT_EQ(info->table_info(0).current_size(), 6);
  EXPECT_EQ(info->table_info(0).max_size(), 200);
  EXPECT_EQ(info->table_info(0).rate_limiter_info().insert_stats().completed(), 6);

  // The top item of shard 1, raised through the sharded client.
  Client shard1(absl::StrCat("127.0.0.1:", shards.servers[1]->port()));
  std::unique_ptr<Sampler> sampler = shard1.NewSampler("t", SamplerOptions());
  absl::StatusOr<Sample> top = sampler->Next(absl::Seconds(60));
  ASSERT_TRUE(top.ok()) << top.status();
  sampler->Close();
  deepmind::reverb::KeyWithPriority update;
  update.set_key(top->meta().key);
  update.set_priority(42);
  ASSERT_TRUE(client.MutatePriorities("t", {update}, {}).ok());
  std::vector<SampledItem> items;
  ASSERT_TRUE(shards.tables[1]->SampleBatch(1, absl::Seconds(60), &items).ok());
  EXPECT_EQ(items[0].data->item.key(), top->meta().key);
  EXPECT_EQ(items[0].priority, 42);

  ASSERT_TRUE(client.Reset("t").ok());
  EXPECT_EQ(shards.tables[0]->size(), 0);
  EXPECT_EQ(shards.tables[1]->size(), 0);
}

TEST(ClientShardTest, StoppedShardIsLeftOutOrNamed) {
  Shards shards;
  Client client(shards.Target());
  ASSERT_TRUE(client.InsertStep({Int32Scalar(1)}, {{"t", 1.0}}).ok());
  ASSERT_TRUE(client.InsertStep({Int32Scalar(2)}, {{"t", 1.0}}).ok());
  const std::string stopped = absl::StrCat("127.0.0.1:", shards.servers[0]->port());
  shards.servers[0]->Stop();

  absl::StatusOr<std::vector<Client::ShardInfo>> infos = client.ShardServerInfo(absl::Seconds(60));
  ASSERT_TRUE(infos.ok()) << infos.status();
  ASSERT_EQ(infos->size(), 2u);
  EXPECT_EQ((*infos)[0].address, stopped);
  EXPECT_TRUE(absl::IsUnavailable((*infos)[0].status)) << (*infos)[0].status;
  EXPECT_TRUE((*infos)[1].status.ok());
  EXPECT_EQ(Client::MergeShardInfos(*infos).table_info(0).current_size(), 1);

  absl::Status reset = client.Reset("t");
  EXPECT_TRUE(absl::IsUnavailable(reset)) << reset;
  EXPECT_THAT(std::string(reset.message()), HasSubstr("Reset failed on 1 of 2 shards"));
  EXPECT_THAT(std::string(reset.message()), HasSubstr(stopped));
  EXPECT_EQ(shards.tables[1]->size(), 0);                     // done on the live shard
  EXPECT_TRUE(client.MutatePriorities("t", {}, {123}).ok());  // skips it
  // Inserts go on over the live shard.
  ASSERT_TRUE(client.InsertStep({Int32Scalar(3)}, {{"t", 1.0}}).ok());
  EXPECT_EQ(shards.tables[1]->size(), 1);
}

TEST(ClientShardTest, MalformedTargetFailsEveryCall) {
  Client client("ipv4:127.0.0.1:1,localhost:2");
  EXPECT_FALSE(client.sharded());
  EXPECT_TRUE(absl::IsInvalidArgument(client.target_status()));
  EXPECT_TRUE(absl::IsInvalidArgument(client.ServerInfo(absl::Seconds(1)).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(client.Reset("t")));
  EXPECT_TRUE(absl::IsInvalidArgument(client.Checkpoint().status()));
  EXPECT_TRUE(absl::IsInvalidArgument(client.InsertStep({Int32Scalar(1)}, {{"t", 1.0}})));
  absl::Status sampled = client.NewSampler("t", SamplerOptions())->Next(absl::Seconds(1)).status();
  EXPECT_TRUE(absl::IsInvalidArgument(sampled)) << sampled;
  EXPECT_THAT(std::string(sampled.message()), HasSubstr("localhost:2"));
}

TEST(ClientShardTest, MergeSumsPerTableAndSkipsFailedShards) {
  std::vector<Client::ShardInfo> infos(3);
  for (int i = 0; i < 3; ++i) {
    infos[i].address = absl::StrCat("s", i);
    infos[i].response.mutable_tables_state_id()->set_low(i + 1);
    auto* table = infos[i].response.add_table_info();
    table->set_name("a");
    table->set_current_size(10 * (i + 1));
    table->set_max_size(100);
    table->set_num_episodes(i);
    table->mutable_rate_limiter_info()->mutable_sample_stats()->set_completed(5);
    table->mutable_rate_limiter_info()->set_samples_per_insert(2.0);
  }
  infos[1].response.add_table_info()->set_name("only_on_1");
  infos[2].status = absl::UnavailableError("down");
  deepmind::reverb::ServerInfoResponse merged = Client::MergeShardInfos(infos);
  ASSERT_EQ(merged.table_info_size(), 2);
  const auto& a = merged.table_info(0);
  EXPECT_EQ(a.name(), "a");
  EXPECT_EQ(a.current_size(), 30);
  EXPECT_EQ(a.max_size(), 200);
  EXPECT_EQ(a.num_episodes(), 1);
  EXPECT_EQ(a.rate_limiter_info().sample_stats().completed(), 10);
  EXPECT_EQ(a.rate_limiter_info().samples_per_insert(), 2.0);
  EXPECT_EQ(merged.table_info(1).name(), "only_on_1");
  // A change of any shard's tables changes the merged id.
  deepmind::reverb::ServerInfoResponse before = merged;
  infos[0].response.mutable_tables_state_id()->set_low(99);
  merged = Client::MergeShardInfos(infos);
  EXPECT_NE(merged.tables_state_id().low(), before.tables_state_id().low());
}

}  // namespace
}  // namespace tf_reverb
