// End-to-end tests of Server and Client over real gRPC on real ports: the
// server's lifecycle, then the client's calls (InsertStep, samplers over gRPC
// and through the in-process shortcut, the admin calls). The protocol itself
// is tested with raw stubs in insert_stream_rpc_test.cc and
// sample_stream_rpc_test.cc, signature checks in signature_check_test.cc.
#include "server/service/server.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "reverb_service.pb.h"
#include "schema.pb.h"
#include "server/client/client.h"
#include "server/client/sample.h"
#include "server/client/sampler.h"
#include "server/in_process_tables.h"
#include "server/table_item.h"
#include "server/tensor.h"
#include "server/testing/grpc_call_counter.h"
#include "server/testing/server_testing.h"
#include "server/testing/table_testing.h"
#include "server/testing/tensor_testing.h"
#include "server/trajectory_columns.h"

namespace tf_reverb {
namespace {

namespace tfp = ::tf_reverb::tf;
using ::deepmind::reverb::InsertStreamRequest;
using ::deepmind::reverb::KeyWithPriority;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;
using ::tf_reverb::tensor_testing::FloatScalar;
using ::tf_reverb::tensor_testing::Int32Tensor;
using ::tf_reverb::tensor_testing::StringScalar;
using ::tf_reverb::tensor_testing::Values;
using ::tf_reverb::testing::GrpcCalls;
using ::tf_reverb::testing::GrpcOnlyAddress;
using ::tf_reverb::testing::Heap;
using ::tf_reverb::testing::InsertResult;
using ::tf_reverb::testing::kInsertStreamMethod;
using ::tf_reverb::testing::kRpcDeadline;
using ::tf_reverb::testing::kSampleStreamMethod;
using ::tf_reverb::testing::kUnblockTimeout;
using ::tf_reverb::testing::Prioritized;
using ::tf_reverb::testing::RawStub;
using ::tf_reverb::testing::RunInsertStream;
using ::tf_reverb::testing::ServedTable;
using ::tf_reverb::testing::ShortcutAddress;
using ::tf_reverb::testing::StartServer;
using ::tf_reverb::testing::WireChunk;
using ::tf_reverb::testing::WireItem;

// ---------------------------------------------------------------------------
// Server lifecycle

TEST(ServerTest, PortZeroBindsARealPort) {
  auto server = StartServer({ServedTable("t")});
  ASSERT_NE(server, nullptr);
  EXPECT_GT(server->port(), 0);
  EXPECT_LT(server->port(), 65536);
  Client client(ShortcutAddress(server->port()));
  absl::StatusOr<deepmind::reverb::ServerInfoResponse> info = client.ServerInfo(kRpcDeadline);
  ASSERT_TRUE(info.ok()) << info.status();
  ASSERT_EQ(info->table_info_size(), 1);
  EXPECT_EQ(info->table_info(0).name(), "t");
  EXPECT_THAT(server->DebugString(), HasSubstr(absl::StrCat("port=", server->port())));
  EXPECT_EQ(InProcessTables::Find(server->port(), "t"), server->service()->tables()[0]);
  EXPECT_EQ(InProcessTables::Find(server->port(), "nope"), nullptr);
}

TEST(ServerTest, StartValidatesTables) {
  absl::StatusOr<std::unique_ptr<Server>> none = Server::Start({}, 0);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kInvalidArgument);
  absl::StatusOr<std::unique_ptr<Server>> dup =
      Server::Start({ServedTable("a"), ServedTable("b"), ServedTable("a")}, 0);
  EXPECT_EQ(dup.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(dup.status().message()), HasSubstr("'a'"));
  EXPECT_EQ(Server::Start({ServedTable("a")}, -1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Server::Start({ServedTable("a")}, 70000).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ServerTest, PortInUseIsUnavailable) {
  // A port held by a plain socket (IPv6 wildcard, or IPv4 without IPv6).
  int port = 0;
  int fd = socket(AF_INET6, SOCK_STREAM, 0);
  if (fd >= 0) {
    sockaddr_in6 addr{};
    addr.sin6_family = AF_INET6;
    addr.sin6_addr = in6addr_any;
    ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    socklen_t len = sizeof(addr);
    ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
    port = ntohs(addr.sin6_port);
  } else {
    fd = socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_GE(fd, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    socklen_t len = sizeof(addr);
    ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
    port = ntohs(addr.sin_port);
  }
  ASSERT_EQ(listen(fd, 1), 0);
  absl::StatusOr<std::unique_ptr<Server>> taken = Server::Start({ServedTable("t")}, port);
  EXPECT_EQ(taken.status().code(), absl::StatusCode::kUnavailable) << taken.status();
  close(fd);

  // A port held by another server of this process: two servers must not
  // share a port (the OS would spread connections over both, and the
  // in-process registry is keyed by port).
  auto first = StartServer({ServedTable("t")});
  ASSERT_NE(first, nullptr);
  absl::StatusOr<std::unique_ptr<Server>> second = Server::Start({ServedTable("t")}, first->port());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable) << second.status();
  EXPECT_NE(InProcessTables::Find(first->port(), "t"), nullptr);
}

TEST(ServerTest, StopIsIdempotentAndUnregisters) {
  auto table = ServedTable("t");
  auto server = StartServer({table});
  ASSERT_NE(server, nullptr);
  const int port = server->port();
  absl::Notification waited;
  std::thread waiter([&] {
    server->Wait();
    waited.Notify();
  });
  EXPECT_FALSE(waited.WaitForNotificationWithTimeout(absl::Milliseconds(100)));
  std::thread other([&] { server->Stop(); });
  server->Stop();
  other.join();
  EXPECT_TRUE(waited.WaitForNotificationWithTimeout(kUnblockTimeout));
  waiter.join();
  server->Stop();
  EXPECT_EQ(InProcessTables::Find(port, "t"), nullptr);
  // The tables were closed.
  std::vector<SampledItem> out;
  EXPECT_EQ(table->SampleBatch(1, absl::ZeroDuration(), &out).code(), absl::StatusCode::kCancelled);
  // Nobody answers any more.
  Client client(GrpcOnlyAddress(port));
  EXPECT_FALSE(client.ServerInfo(absl::Milliseconds(300)).ok());
  server.reset();  // destructor after Stop is fine
}

// ---------------------------------------------------------------------------
// Client round trips

void CheckInsertStepRoundTrip(const std::string& address, bool via_grpc) {
  Client client(address);
  const int inserts_before = GrpcCalls().count(kInsertStreamMethod);
  const int samples_before = GrpcCalls().count(kSampleStreamMethod);
  ASSERT_TRUE(client
                  .InsertStep({Int32Tensor({2}, {7, -8}), FloatScalar(2.5f),
                               StringScalar(std::string("h\0i", 3))},
                              {{"t", 1.5}, {"u", 0.25}})
                  .ok());
  // Writers always use gRPC.
  EXPECT_EQ(GrpcCalls().count(kInsertStreamMethod), inserts_before + 1);

  SamplerOptions options;
  options.max_samples = 2;
  options.rate_limiter_timeout = kRpcDeadline;
  std::unique_ptr<Sampler> sampler = client.NewSampler("t", options);
  absl::StatusOr<Sample> sample = sampler->Next();
  ASSERT_TRUE(sample.ok()) << sample.status();
  EXPECT_EQ(GrpcCalls().count(kSampleStreamMethod), samples_before + (via_grpc ? 1 : 0));

  const auto& info = sample->info();
  EXPECT_EQ(info.item().table(), "t");
  EXPECT_DOUBLE_EQ(info.item().priority(), 1.5);
  EXPECT_EQ(info.item().times_sampled(), 1);
  EXPECT_DOUBLE_EQ(info.probability(), 1.0);
  EXPECT_EQ(info.table_size(), 1);
  EXPECT_GT(info.item().inserted_at().seconds(), 0);
  ASSERT_EQ(sample->num_columns(), 3);

  absl::StatusOr<std::vector<ColumnSpec>> specs = sample->ColumnSpecs();
  ASSERT_TRUE(specs.ok()) << specs.status();
  EXPECT_EQ((*specs)[0].dtype, tfp::DT_INT32);
  EXPECT_EQ((*specs)[0].shape, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ((*specs)[1].dtype, tfp::DT_FLOAT);
  EXPECT_EQ((*specs)[1].shape, (std::vector<int64_t>{1}));
  EXPECT_EQ((*specs)[2].dtype, tfp::DT_STRING);

  absl::StatusOr<Tensor> c0 = sample->UnpackColumn(0);
  ASSERT_TRUE(c0.ok()) << c0.status();
  EXPECT_THAT(Values<int32_t>(*c0), ElementsAre(7, -8));
  absl::StatusOr<Tensor> c1 = sample->UnpackColumn(1);
  ASSERT_TRUE(c1.ok()) << c1.status();
  EXPECT_THAT(Values<float>(*c1), ElementsAre(2.5f));
  absl::StatusOr<Tensor> c2 = sample->UnpackColumn(2);
  ASSERT_TRUE(c2.ok()) << c2.status();
  EXPECT_THAT(c2->strings, ElementsAre(std::string("h\0i", 3)));

  // Same item again, then max_samples is reached.
  absl::StatusOr<Sample> again = sampler->Next();
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->meta().key, info.item().key());
  EXPECT_EQ(again->meta().times_sampled, 2);
  EXPECT_EQ(sampler->Next().status().code(), absl::StatusCode::kOutOfRange);

  // The other table got its own item over the same step.
  absl::StatusOr<Sample> other = client.NewSampler("u", options)->Next();
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_DOUBLE_EQ(other->meta().priority, 0.25);
  EXPECT_NE(other->meta().key, info.item().key());
  EXPECT_THAT(Values<int32_t>(other->UnpackColumn(0).value()), ElementsAre(7, -8));
}

TEST(ServerTest, InsertStepAndSampleThroughInProcessShortcut) {
  auto server = StartServer({ServedTable("t"), ServedTable("u")});
  ASSERT_NE(server, nullptr);
  CheckInsertStepRoundTrip(ShortcutAddress(server->port()), /*via_grpc=*/false);
}

TEST(ServerTest, InsertStepAndSampleThroughGrpc) {
  auto server = StartServer({ServedTable("t"), ServedTable("u")});
  ASSERT_NE(server, nullptr);
  CheckInsertStepRoundTrip(GrpcOnlyAddress(server->port()), /*via_grpc=*/true);
}

TEST(ServerTest, ShortcutOnlyForServersOfThisProcess) {
  auto server = StartServer({ServedTable("t")});
  ASSERT_NE(server, nullptr);
  Client client(ShortcutAddress(server->port()));
  ASSERT_TRUE(client.InsertStep({FloatScalar(1)}, {{"t", 1.0}}).ok());
  // Unknown table: no table of this process has the name, so the sampler
  // reads over gRPC, which reports NOT_FOUND.
  const int before = GrpcCalls().count(kSampleStreamMethod);
  SamplerOptions options;
  options.rate_limiter_timeout = absl::Seconds(5);
  absl::StatusOr<Sample> missing = client.NewSampler("nope", options)->Next();
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message(), "Priority table nope was not found");
  EXPECT_EQ(GrpcCalls().count(kSampleStreamMethod), before + 1);
}

TEST(ServerTest, ServerInfoListsTables) {
  auto server = StartServer({ServedTable("a"), ServedTable("b", Heap(/*min_heap=*/false))});
  ASSERT_NE(server, nullptr);
  Client client(GrpcOnlyAddress(server->port()));
  ASSERT_TRUE(client.InsertStep({FloatScalar(1)}, {{"a", 1.0}, {"b", 2.0}}).ok());
  ASSERT_TRUE(client.InsertStep({FloatScalar(2)}, {{"a", 1.0}}).ok());
  absl::StatusOr<deepmind::reverb::ServerInfoResponse> info = client.ServerInfo(kRpcDeadline);
  ASSERT_TRUE(info.ok()) << info.status();
  std::map<std::string, deepmind::reverb::TableInfo> by_name;
  for (const auto& t : info->table_info()) by_name[t.name()] = t;
  ASSERT_EQ(by_name.size(), 2u);
  EXPECT_EQ(by_name["a"].current_size(), 2);
  EXPECT_EQ(by_name["b"].current_size(), 1);
  EXPECT_TRUE(by_name["a"].sampler_options().uniform());
  EXPECT_FALSE(by_name["b"].sampler_options().heap().min_heap());
  EXPECT_TRUE(by_name["b"].sampler_options().has_heap());
  EXPECT_EQ(by_name["a"].max_size(), 1000);
  EXPECT_EQ(by_name["a"].rate_limiter_info().insert_stats().completed(), 2);
  EXPECT_EQ(by_name["a"].num_episodes(), 2);
  EXPECT_TRUE(info->tables_state_id().high() != 0 || info->tables_state_id().low() != 0);
  // The state id is constant for the server's lifetime.
  absl::StatusOr<deepmind::reverb::ServerInfoResponse> again = client.ServerInfo(kRpcDeadline);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->tables_state_id().high(), info->tables_state_id().high());
  EXPECT_EQ(again->tables_state_id().low(), info->tables_state_id().low());
}

TEST(ServerTest, InsertStepsReuseOneStream) {
  auto server = StartServer({ServedTable("t")});
  ASSERT_NE(server, nullptr);
  Client client(GrpcOnlyAddress(server->port()));
  const int before = GrpcCalls().count(kInsertStreamMethod);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(client.InsertStep({FloatScalar(i)}, {{"t", 1.0}}).ok());
  EXPECT_EQ(GrpcCalls().count(kInsertStreamMethod), before + 1);
  EXPECT_EQ(server->service()->GetTable("t").value()->size(), 5);
}

TEST(ServerTest, InsertStepAfterAnErrorOrAServerRestartOpensANewStream) {
  auto server = StartServer({ServedTable("t")});
  ASSERT_NE(server, nullptr);
  const int port = server->port();
  Client client(GrpcOnlyAddress(port));
  ASSERT_TRUE(client.InsertStep({FloatScalar(1)}, {{"t", 1.0}}).ok());
  // The server ends the stream on an unknown table; the next call still works.
  EXPECT_EQ(client.InsertStep({FloatScalar(2)}, {{"x", 1.0}}).code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(client.InsertStep({FloatScalar(3)}, {{"t", 1.0}}).ok());
  EXPECT_EQ(server->service()->GetTable("t").value()->size(), 2);
  // The idle stream dies with the server; a new server on the same port gets
  // the next insert, exactly once.
  server->Stop();
  server.reset();
  absl::StatusOr<std::unique_ptr<Server>> restarted = Server::Start({ServedTable("t")}, port);
  ASSERT_TRUE(restarted.ok()) << restarted.status();
  ASSERT_TRUE(client.InsertStep({FloatScalar(4)}, {{"t", 1.0}}).ok());
  EXPECT_EQ((*restarted)->service()->GetTable("t").value()->size(), 1);
}

TEST(ServerTest, UnknownTableIsNotFound) {
  auto server = StartServer({ServedTable("t")});
  ASSERT_NE(server, nullptr);
  Client client(GrpcOnlyAddress(server->port()));
  absl::Status s = client.InsertStep({FloatScalar(1)}, {{"x", 1.0}});
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "Priority table x was not found");
  s = client.MutatePriorities("x", {}, {1});
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "Priority table x was not found");
  s = client.Reset("x");
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "Priority table x was not found");
  absl::StatusOr<Sample> sample = client.NewSampler("x", SamplerOptions())->Next();
  EXPECT_EQ(sample.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(sample.status().message(), "Priority table x was not found");
  // Checkpoint is not configured.
  EXPECT_EQ(client.Checkpoint().status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ServerTest, MutatePrioritiesAndResetOverGrpc) {
  auto heap = ServedTable("heap", Heap(/*min_heap=*/false));
  auto prioritized = ServedTable("prio", Prioritized(1.0));
  auto server = StartServer({heap, prioritized});
  ASSERT_NE(server, nullptr);
  auto stub = RawStub(server->port());
  InsertStreamRequest request;
  *request.add_chunks() = WireChunk(100);
  for (uint64_t k = 1; k <= 3; ++k) {
    *request.add_items() = WireItem(k, "heap", k, {100});
    *request.add_items() = WireItem(k, "prio", k, {100});
  }
  InsertResult inserted = RunInsertStream(*stub, {request});
  ASSERT_TRUE(inserted.status.ok()) << inserted.status.error_message();
  EXPECT_THAT(inserted.confirmed, UnorderedElementsAre(1, 1, 2, 2, 3, 3));

  Client client(GrpcOnlyAddress(server->port()));
  KeyWithPriority update;
  update.set_key(1);
  update.set_priority(10.0);
  ASSERT_TRUE(client.MutatePriorities("heap", {update}, {2, 12345}).ok());
  EXPECT_EQ(heap->size(), 2);
  absl::StatusOr<Sample> top = client.NewSampler("heap", SamplerOptions())->Next();
  ASSERT_TRUE(top.ok()) << top.status();
  EXPECT_EQ(top->meta().key, 1u);
  EXPECT_DOUBLE_EQ(top->meta().priority, 10.0);

  // A negative priority on a prioritized table is rejected as a whole.
  KeyWithPriority bad;
  bad.set_key(2);
  bad.set_priority(-1.0);
  absl::Status s = client.MutatePriorities("prio", {update, bad}, {3});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("negative"));
  EXPECT_EQ(prioritized->size(), 3);

  ASSERT_TRUE(client.Reset("heap").ok());
  EXPECT_EQ(heap->size(), 0);
  absl::StatusOr<deepmind::reverb::ServerInfoResponse> info = client.ServerInfo(kRpcDeadline);
  ASSERT_TRUE(info.ok());
  for (const auto& t : info->table_info()) {
    EXPECT_EQ(t.current_size(), t.name() == "heap" ? 0 : 3) << t.name();
    if (t.name() == "heap") {
      EXPECT_EQ(t.rate_limiter_info().insert_stats().completed(), 0);
    }
  }
}

}  // namespace
}  // namespace tf_reverb
