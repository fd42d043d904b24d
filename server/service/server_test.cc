// End-to-end tests of Server, ReverbServiceImpl and Client over real gRPC on
// real ports, plus raw-stub tests of the InsertStream / SampleStream protocol.
#include "server/service/server.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cfloat>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "grpcpp/support/client_interceptor.h"
#include "grpcpp/support/interceptor.h"
#include "grpcpp/support/status.h"
#include "gtest/gtest.h"
#include "reverb_service.grpc.pb.h"
#include "reverb_service.pb.h"
#include "schema.pb.h"
#include "server/chunk_codec.h"
#include "server/client/client.h"
#include "server/client/sample.h"
#include "server/client/sampler.h"
#include "server/in_process_tables.h"
#include "server/rate_limiter.h"
#include "server/selectors/selector.h"
#include "server/table.h"
#include "server/table_item.h"
#include "server/tensor.h"
#include "server/testing/tensor_testing.h"
#include "struct.pb.h"
#include "tensor.pb.h"

namespace tf_reverb {
namespace {

using ::tf_reverb::tensor_testing::FloatScalar;
using ::tf_reverb::tensor_testing::Int32Scalar;
using ::tf_reverb::tensor_testing::Int32Tensor;
using ::tf_reverb::tensor_testing::StringScalar;
using ::tf_reverb::tensor_testing::Values;

namespace tfp = ::tf_reverb::tf;
using ::deepmind::reverb::ChunkData;
using ::deepmind::reverb::InsertStreamRequest;
using ::deepmind::reverb::InsertStreamResponse;
using ::deepmind::reverb::KeyDistributionOptions;
using ::deepmind::reverb::KeyWithPriority;
using ::deepmind::reverb::ReverbService;
using ::deepmind::reverb::SampleStreamRequest;
using ::deepmind::reverb::SampleStreamResponse;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;

// How long a check that a call stays blocked looks (a busy machine can only
// make it miss a bug, never fail a correct server).
constexpr absl::Duration kBlockCheck = absl::Milliseconds(200);
// Deadline of calls and waits that must succeed: only a hung test reaches
// it, however loaded the machine.
constexpr absl::Duration kUnblockTimeout = absl::Seconds(120);
constexpr absl::Duration kRpcDeadline = absl::Seconds(120);

// Counts the client RPCs this process starts, per method, so tests can tell
// whether a sampler went through gRPC or took the in-process shortcut.
class CallCounter : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  class PassThrough : public grpc::experimental::Interceptor {
   public:
    void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
      methods->Proceed();
    }
  };

  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo* info) override {
    absl::MutexLock lock(&mu_);
    ++counts_[info->method()];
    return new PassThrough();  // gRPC does not accept nullptr from a global factory
  }
  int count(const std::string& method) {
    absl::MutexLock lock(&mu_);
    return counts_[method];
  }

 private:
  absl::Mutex mu_;
  std::map<std::string, int> counts_;
};

CallCounter* Calls() {
  static CallCounter* counter = [] {
    auto* c = new CallCounter();
    grpc::experimental::RegisterGlobalClientInterceptorFactory(c);
    return c;
  }();
  return counter;
}
// Registered before main(), i.e. before any gRPC activity.
[[maybe_unused]] const CallCounter* const kRegistered = Calls();

constexpr char kSampleStream[] = "/deepmind.reverb.ReverbService/SampleStream";
constexpr char kInsertStream[] = "/deepmind.reverb.ReverbService/InsertStream";

KeyDistributionOptions Fifo() {
  KeyDistributionOptions o;
  o.set_fifo(true);
  return o;
}
KeyDistributionOptions Uniform() {
  KeyDistributionOptions o;
  o.set_uniform(true);
  return o;
}
KeyDistributionOptions MaxHeap() {
  KeyDistributionOptions o;
  o.mutable_heap()->set_min_heap(false);
  return o;
}
KeyDistributionOptions Prioritized() {
  KeyDistributionOptions o;
  o.mutable_prioritized()->set_priority_exponent(1.0);
  return o;
}

RateLimiter MinSize(int64_t k) { return RateLimiter::Create(1.0, k, -DBL_MAX, DBL_MAX).value(); }

std::shared_ptr<Table> MakeTable(const std::string& name,
                                 KeyDistributionOptions sampler = Uniform(),
                                 RateLimiter limiter = MinSize(1), int32_t max_times_sampled = 0) {
  return Table::Create(Table::Config{name, CreateSelector(sampler).value(),
                                     CreateSelector(Fifo()).value(), 1000, max_times_sampled,
                                     limiter, ""})
      .value();
}

std::unique_ptr<Server> StartServer(std::vector<std::shared_ptr<Table>> tables) {
  absl::StatusOr<std::unique_ptr<Server>> server = Server::Start(std::move(tables), 0);
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? *std::move(server) : nullptr;
}

// An address of the server that Client::LoopbackPort() does not recognise,
// so samplers must use gRPC.
std::string GrpcOnlyAddress(int port) { return absl::StrCat("ipv4:127.0.0.1:", port); }
std::string ShortcutAddress(int port) { return absl::StrCat("localhost:", port); }

std::unique_ptr<ReverbService::Stub> RawStub(int port) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  return ReverbService::NewStub(grpc::CreateCustomChannel(
      absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials(), args));
}

// A chunk of `rows` int32 rows [v, v+1] with v = key * 10 + row.
ChunkData MakeChunk(uint64_t key, int rows = 2, uint64_t episode = 1) {
  std::vector<int32_t> values;
  for (int r = 0; r < rows; ++r) {
    values.push_back(static_cast<int32_t>(key * 10 + r));
    values.push_back(static_cast<int32_t>(key * 10 + r + 1));
  }
  return BuildChunk(key, {Int32Tensor({rows, 2}, values)}, episode, 0, rows - 1, false).value();
}

// An item whose single column is rows [offset, offset+length) of each chunk.
deepmind::reverb::PrioritizedItem MakeItem(uint64_t key, const std::string& table, double priority,
                                           const std::vector<uint64_t>& chunk_keys, int offset = 0,
                                           int length = 2) {
  deepmind::reverb::PrioritizedItem item;
  item.set_key(key);
  item.set_table(table);
  item.set_priority(priority);
  auto* column = item.mutable_flat_trajectory()->add_columns();
  for (uint64_t chunk_key : chunk_keys) {
    auto* slice = column->add_chunk_slices();
    slice->set_chunk_key(chunk_key);
    slice->set_offset(offset);
    slice->set_length(length);
    slice->set_index(0);
  }
  return item;
}

// Runs one InsertStream with `requests`, collecting confirmed keys.
struct InsertResult {
  grpc::Status status;
  std::vector<uint64_t> confirmed;
};
InsertResult RunInsertStream(ReverbService::Stub& stub,
                             const std::vector<InsertStreamRequest>& requests) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
  auto stream = stub.InsertStream(&context);
  InsertResult result;
  size_t expected = 0;
  for (const auto& request : requests) {
    if (!stream->Write(request)) break;
    expected += request.items_size();
  }
  stream->WritesDone();
  InsertStreamResponse response;
  while (stream->Read(&response)) {
    result.confirmed.insert(result.confirmed.end(), response.keys().begin(), response.keys().end());
  }
  result.status = stream->Finish();
  return result;
}

SampleStreamRequest SampleRequest(const std::string& table, int64_t n, int64_t timeout_ms = -1) {
  SampleStreamRequest request;
  request.set_table(table);
  request.set_num_samples(n);
  request.mutable_rate_limiter_timeout()->set_milliseconds(timeout_ms);
  return request;
}

// ---------------------------------------------------------------------------
// Server lifecycle

TEST(ServerTest, PortZeroBindsARealPort) {
  auto server = StartServer({MakeTable("t")});
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
      Server::Start({MakeTable("a"), MakeTable("b"), MakeTable("a")}, 0);
  EXPECT_EQ(dup.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(dup.status().message()), HasSubstr("'a'"));
  EXPECT_EQ(Server::Start({MakeTable("a")}, -1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Server::Start({MakeTable("a")}, 70000).status().code(),
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
  absl::StatusOr<std::unique_ptr<Server>> taken = Server::Start({MakeTable("t")}, port);
  EXPECT_EQ(taken.status().code(), absl::StatusCode::kUnavailable) << taken.status();
  close(fd);

  // A port held by another server of this process: two servers must not
  // share a port (the OS would spread connections over both, and the
  // in-process registry is keyed by port).
  auto first = StartServer({MakeTable("t")});
  ASSERT_NE(first, nullptr);
  absl::StatusOr<std::unique_ptr<Server>> second = Server::Start({MakeTable("t")}, first->port());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable) << second.status();
  EXPECT_NE(InProcessTables::Find(first->port(), "t"), nullptr);
}

TEST(ServerTest, StopIsIdempotentAndUnregisters) {
  auto table = MakeTable("t");
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
  const int inserts_before = Calls()->count(kInsertStream);
  const int samples_before = Calls()->count(kSampleStream);
  ASSERT_TRUE(client
                  .InsertStep({Int32Tensor({2}, {7, -8}), FloatScalar(2.5f),
                               StringScalar(std::string("h\0i", 3))},
                              {{"t", 1.5}, {"u", 0.25}})
                  .ok());
  // Writers always use gRPC.
  EXPECT_EQ(Calls()->count(kInsertStream), inserts_before + 1);

  SamplerOptions options;
  options.max_samples = 2;
  options.rate_limiter_timeout = kRpcDeadline;
  std::unique_ptr<Sampler> sampler = client.NewSampler("t", options);
  absl::StatusOr<Sample> sample = sampler->Next();
  ASSERT_TRUE(sample.ok()) << sample.status();
  EXPECT_EQ(Calls()->count(kSampleStream), samples_before + (via_grpc ? 1 : 0));

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
  EXPECT_EQ(again->info().item().key(), info.item().key());
  EXPECT_EQ(again->info().item().times_sampled(), 2);
  EXPECT_EQ(sampler->Next().status().code(), absl::StatusCode::kOutOfRange);

  // The other table got its own item over the same step.
  absl::StatusOr<Sample> other = client.NewSampler("u", options)->Next();
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_DOUBLE_EQ(other->info().item().priority(), 0.25);
  EXPECT_NE(other->info().item().key(), info.item().key());
  EXPECT_THAT(Values<int32_t>(other->UnpackColumn(0).value()), ElementsAre(7, -8));
}

TEST(ServerTest, InsertStepAndSampleThroughInProcessShortcut) {
  auto server = StartServer({MakeTable("t"), MakeTable("u")});
  ASSERT_NE(server, nullptr);
  CheckInsertStepRoundTrip(ShortcutAddress(server->port()), /*via_grpc=*/false);
}

TEST(ServerTest, InsertStepAndSampleThroughGrpc) {
  auto server = StartServer({MakeTable("t"), MakeTable("u")});
  ASSERT_NE(server, nullptr);
  CheckInsertStepRoundTrip(GrpcOnlyAddress(server->port()), /*via_grpc=*/true);
}

TEST(ServerTest, ShortcutOnlyForServersOfThisProcess) {
  auto server = StartServer({MakeTable("t")});
  ASSERT_NE(server, nullptr);
  Client client(ShortcutAddress(server->port()));
  ASSERT_TRUE(client.InsertStep({FloatScalar(1)}, {{"t", 1.0}}).ok());
  // Unknown table: no local table, so the sampler falls back to gRPC, which
  // reports NOT_FOUND.
  const int before = Calls()->count(kSampleStream);
  SamplerOptions options;
  options.rate_limiter_timeout = absl::Seconds(5);
  absl::StatusOr<Sample> missing = client.NewSampler("nope", options)->Next();
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message(), "Priority table nope was not found");
  EXPECT_EQ(Calls()->count(kSampleStream), before + 1);
}

TEST(ServerTest, ServerInfoListsTables) {
  auto server = StartServer({MakeTable("a"), MakeTable("b", MaxHeap())});
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
  auto server = StartServer({MakeTable("t")});
  ASSERT_NE(server, nullptr);
  Client client(GrpcOnlyAddress(server->port()));
  const int before = Calls()->count(kInsertStream);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(client.InsertStep({FloatScalar(i)}, {{"t", 1.0}}).ok());
  EXPECT_EQ(Calls()->count(kInsertStream), before + 1);
  EXPECT_EQ(server->service()->GetTable("t").value()->size(), 5);
}

TEST(ServerTest, InsertStepAfterAnErrorOrAServerRestartOpensANewStream) {
  auto server = StartServer({MakeTable("t")});
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
  absl::StatusOr<std::unique_ptr<Server>> restarted = Server::Start({MakeTable("t")}, port);
  ASSERT_TRUE(restarted.ok()) << restarted.status();
  ASSERT_TRUE(client.InsertStep({FloatScalar(4)}, {{"t", 1.0}}).ok());
  EXPECT_EQ((*restarted)->service()->GetTable("t").value()->size(), 1);
}

TEST(ServerTest, UnknownTableIsNotFound) {
  auto server = StartServer({MakeTable("t")});
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
  auto heap = MakeTable("heap", MaxHeap());
  auto prioritized = MakeTable("prio", Prioritized());
  auto server = StartServer({heap, prioritized});
  ASSERT_NE(server, nullptr);
  auto stub = RawStub(server->port());
  InsertStreamRequest request;
  *request.add_chunks() = MakeChunk(100);
  for (uint64_t k = 1; k <= 3; ++k) {
    *request.add_items() = MakeItem(k, "heap", k, {100});
    *request.add_items() = MakeItem(k, "prio", k, {100});
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
  EXPECT_EQ(top->info().item().key(), 1u);
  EXPECT_DOUBLE_EQ(top->info().item().priority(), 10.0);

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

// ---------------------------------------------------------------------------
// InsertStream protocol (raw stub)

class InsertStreamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    table_ = MakeTable("t", Fifo(), MinSize(1), /*max_times_sampled=*/1);
    server_ = StartServer({table_});
    ASSERT_NE(server_, nullptr);
    stub_ = RawStub(server_->port());
  }

  std::shared_ptr<Table> table_;
  std::unique_ptr<Server> server_;
  std::unique_ptr<ReverbService::Stub> stub_;
};

TEST_F(InsertStreamTest, RequestWithNeitherChunksNorItemsIsInvalid) {
  InsertResult r = RunInsertStream(*stub_, {InsertStreamRequest()});
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(r.status.error_message(), "Request lacks both chunks and item");
}

TEST_F(InsertStreamTest, ItemNamingUnsentChunkIsInvalidArgument) {
  InsertStreamRequest request;
  *request.add_chunks() = MakeChunk(1);
  *request.add_items() = MakeItem(10, "t", 1.0, {1, 2});
  InsertResult r = RunInsertStream(*stub_, {request});
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(r.status.error_message(), HasSubstr("Could not find sequence chunk 2 of item 10"));
  EXPECT_EQ(table_->size(), 0);
}

TEST_F(InsertStreamTest, KeepingAnUnknownChunkIsFailedPrecondition) {
  InsertStreamRequest request;
  *request.add_chunks() = MakeChunk(1);
  *request.add_items() = MakeItem(10, "t", 1.0, {1});
  request.add_keep_chunk_keys(1);
  request.add_keep_chunk_keys(99);
  InsertResult r = RunInsertStream(*stub_, {request});
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(r.status.error_message(), HasSubstr("ReleaseOutOfRangeChunks"));
  EXPECT_EQ(table_->size(), 1);  // the item itself was inserted
}

TEST_F(InsertStreamTest, ChunkSentOnceServesItemsInLaterRequests) {
  // [CHUNK C1] [CHUNK C2] [ITEM using C1,C2; keep C2] [CHUNK C3]
  // [ITEM using C2,C3] [ITEM using C2 only, keep nothing].
  InsertStreamRequest c1, c2, item_a, c3, item_b, item_c;
  *c1.add_chunks() = MakeChunk(1);
  *c2.add_chunks() = MakeChunk(2);
  *item_a.add_items() = MakeItem(100, "t", 1.0, {1, 2});
  item_a.add_keep_chunk_keys(2);
  *c3.add_chunks() = MakeChunk(3);
  *item_b.add_items() = MakeItem(200, "t", 1.0, {2, 3}, /*offset=*/1, /*length=*/1);
  item_b.add_keep_chunk_keys(2);
  *item_c.add_items() = MakeItem(300, "t", 1.0, {2});
  InsertResult r = RunInsertStream(*stub_, {c1, c2, item_a, c3, item_b, item_c});
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_THAT(r.confirmed, ElementsAre(100, 200, 300));
  EXPECT_EQ(table_->size(), 3);

  std::vector<SampledItem> batch;
  ASSERT_TRUE(table_->SampleBatch(3, absl::ZeroDuration(), &batch).ok());
  ASSERT_EQ(batch.size(), 3u);
  // Item B: row 1 of chunk 2 then row 1 of chunk 3.
  Sample b = Sample::FromSampledItem(batch[1]);
  EXPECT_EQ(b.info().item().key(), 200u);
  EXPECT_THAT(Values<int32_t>(b.UnpackColumn(0).value()), ElementsAre(21, 22, 31, 32));
  // Items share the stream's chunk objects.
  EXPECT_EQ(batch[1].data.chunks[0], batch[2].data.chunks[0]);

  // After item_c released chunk 2, using it again fails.
  InsertStreamRequest item_d;
  *item_d.add_items() = MakeItem(400, "t", 1.0, {2});
  r = RunInsertStream(*stub_, {c2, item_c, item_d});
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(r.status.error_message(), HasSubstr("Could not find sequence chunk 2 of item 400"));
  EXPECT_THAT(r.confirmed, ElementsAre(300));
}

TEST_F(InsertStreamTest, ChunkOnlyMessagesDoNotReleaseChunks) {
  InsertStreamRequest c1, c2, item;
  *c1.add_chunks() = MakeChunk(1);
  *c2.add_chunks() = MakeChunk(2);
  *item.add_items() = MakeItem(5, "t", 1.0, {1, 2});
  InsertResult r = RunInsertStream(*stub_, {c1, c2, item});
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_THAT(r.confirmed, ElementsAre(5));
}

TEST_F(InsertStreamTest, BadItemsFailTheStream) {
  InsertStreamRequest request;
  *request.add_chunks() = MakeChunk(1);
  *request.add_items() = MakeItem(5, "t", 1.0, {1}, /*offset=*/1, /*length=*/5);
  InsertResult r = RunInsertStream(*stub_, {request});
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  InsertStreamRequest unknown;
  *unknown.add_chunks() = MakeChunk(1);
  *unknown.add_items() = MakeItem(5, "nope", 1.0, {1});
  r = RunInsertStream(*stub_, {unknown});
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(r.status.error_message(), "Priority table nope was not found");

  InsertStreamRequest empty_item;
  *empty_item.add_chunks() = MakeChunk(1);
  empty_item.add_items()->set_table("t");
  r = RunInsertStream(*stub_, {empty_item});
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(table_->size(), 0);
}

TEST_F(InsertStreamTest, ReinsertingAKeyIsConfirmedAndUpdatesPriority) {
  InsertStreamRequest request;
  *request.add_chunks() = MakeChunk(1);
  *request.add_items() = MakeItem(5, "t", 1.0, {1});
  *request.add_items() = MakeItem(5, "t", 3.0, {1});
  InsertResult r = RunInsertStream(*stub_, {request});
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_THAT(r.confirmed, ElementsAre(5, 5));
  EXPECT_EQ(table_->size(), 1);
  EXPECT_EQ(table_->Info().rate_limiter_info().insert_stats().completed(), 1);
}

// ---------------------------------------------------------------------------
// SampleStream protocol (raw stub)

TEST(SampleStreamTest, NonPositiveNumSamplesIsInvalid) {
  auto server = StartServer({MakeTable("t")});
  ASSERT_NE(server, nullptr);
  auto stub = RawStub(server->port());
  for (int64_t n : {0, -3}) {
    grpc::ClientContext context;
    auto stream = stub->SampleStream(&context);
    ASSERT_TRUE(stream->Write(SampleRequest("t", n)));
    SampleStreamResponse response;
    EXPECT_FALSE(stream->Read(&response));
    grpc::Status status = stream->Finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << n;
  }
}

TEST(SampleStreamTest, UnknownTableIsNotFound) {
  auto server = StartServer({MakeTable("t")});
  ASSERT_NE(server, nullptr);
  auto stub = RawStub(server->port());
  grpc::ClientContext context;
  auto stream = stub->SampleStream(&context);
  ASSERT_TRUE(stream->Write(SampleRequest("x", 1)));
  SampleStreamResponse response;
  EXPECT_FALSE(stream->Read(&response));
  grpc::Status status = stream->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(status.error_message(), "Priority table x was not found");
}

TEST(SampleStreamTest, RateLimiterTimeoutIsDeadlineExceeded) {
  auto server = StartServer({MakeTable("t")});
  ASSERT_NE(server, nullptr);
  auto stub = RawStub(server->port());
  grpc::ClientContext context;
  auto stream = stub->SampleStream(&context);
  const absl::Time start = absl::Now();
  ASSERT_TRUE(stream->Write(SampleRequest("t", 1, /*timeout_ms=*/100)));
  SampleStreamResponse response;
  EXPECT_FALSE(stream->Read(&response));
  grpc::Status status = stream->Finish();
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(100));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_EQ(status.error_message(), kRateLimiterTimeoutMessage);

  // The client-side sampler reports the same.
  Client client(GrpcOnlyAddress(server->port()));
  SamplerOptions options;
  options.rate_limiter_timeout = absl::Milliseconds(50);
  absl::StatusOr<Sample> sample = client.NewSampler("t", options)->Next();
  EXPECT_EQ(sample.status().code(), absl::StatusCode::kDeadlineExceeded);
}

TEST(SampleStreamTest, ZeroOrNegativeTimeoutMeansWaitForever) {
  auto table = MakeTable("t");
  auto server = StartServer({table});
  ASSERT_NE(server, nullptr);
  auto stub = RawStub(server->port());
  for (int64_t timeout_ms : {0, -1}) {
    grpc::ClientContext context;
    auto stream = stub->SampleStream(&context);
    ASSERT_TRUE(stream->Write(SampleRequest("t", 1, timeout_ms)));
    absl::Notification got;
    SampleStreamResponse response;
    bool read_ok = false;
    std::thread reader([&] {
      read_ok = stream->Read(&response);
      got.Notify();
    });
    EXPECT_FALSE(got.WaitForNotificationWithTimeout(kBlockCheck)) << timeout_ms;
    ASSERT_TRUE(table
                    ->InsertOrAssign(TableItem{std::make_shared<deepmind::reverb::PrioritizedItem>(
                                                   MakeItem(timeout_ms + 10, "t", 1.0, {1})),
                                               {std::make_shared<const ChunkData>(MakeChunk(1))}},
                                     absl::ZeroDuration())
                    .ok());
    EXPECT_TRUE(got.WaitForNotificationWithTimeout(kUnblockTimeout));
    reader.join();
    EXPECT_TRUE(read_ok);
    ASSERT_EQ(response.entries_size(), 1);
    EXPECT_TRUE(response.entries(0).info().rate_limited());
    stream->WritesDone();
    EXPECT_TRUE(stream->Finish().ok());
    table->Reset();
  }
}

TEST(SampleStreamTest, EntriesCarryInfoChunksAndEndOfSequence) {
  auto table = MakeTable("t", Fifo());
  auto server = StartServer({table});
  ASSERT_NE(server, nullptr);
  auto stub = RawStub(server->port());
  InsertStreamRequest request;
  *request.add_chunks() = MakeChunk(1);
  *request.add_chunks() = MakeChunk(2);
  *request.add_items() = MakeItem(7, "t", 2.0, {1, 2});
  ASSERT_TRUE(RunInsertStream(*stub, {request}).status.ok());

  grpc::ClientContext context;
  auto stream = stub->SampleStream(&context);
  // Two requests on one stream.
  for (int round = 0; round < 2; ++round) {
    ASSERT_TRUE(stream->Write(SampleRequest("t", 3)));
    int items = 0;
    SampleStreamResponse response;
    while (items < 3 && stream->Read(&response)) {
      for (const auto& entry : response.entries()) {
        ASSERT_TRUE(entry.has_info());
        EXPECT_EQ(entry.info().item().key(), 7u);
        EXPECT_EQ(entry.info().item().times_sampled(), round * 3 + items + 1);
        EXPECT_EQ(entry.info().table_size(), 1);
        ASSERT_EQ(entry.data_size(), 2);
        EXPECT_EQ(entry.data(0).chunk_key(), 1u);
        EXPECT_EQ(entry.data(1).chunk_key(), 2u);
        EXPECT_TRUE(entry.end_of_sequence());
        ++items;
      }
    }
    EXPECT_EQ(items, 3);
  }
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());
}

TEST(SampleStreamTest, StopCancelsBlockedSamplers) {
  auto table = MakeTable("t");
  auto server = StartServer({table});
  ASSERT_NE(server, nullptr);
  Client grpc_client(GrpcOnlyAddress(server->port()));
  Client local_client(ShortcutAddress(server->port()));
  ASSERT_TRUE(grpc_client.ServerInfo(kRpcDeadline).ok());  // connected

  absl::StatusOr<Sample> grpc_result = absl::UnknownError("unset");
  absl::StatusOr<Sample> local_result = absl::UnknownError("unset");
  absl::Notification grpc_done, local_done;
  std::unique_ptr<Sampler> grpc_sampler = grpc_client.NewSampler("t", SamplerOptions());
  std::unique_ptr<Sampler> local_sampler = local_client.NewSampler("t", SamplerOptions());
  std::thread t1([&] {
    // A gRPC sampler retries CANCELLED/UNAVAILABLE (the server may come back,
    // docs/architecture/wire-protocol.md): only the consumer's own timeout ends the wait.
    grpc_result = grpc_sampler->Next(absl::Seconds(3));
    grpc_done.Notify();
  });
  std::thread t2([&] {
    local_result = local_sampler->Next();
    local_done.Notify();
  });
  EXPECT_FALSE(grpc_done.WaitForNotificationWithTimeout(kBlockCheck));
  EXPECT_FALSE(local_done.HasBeenNotified());
  server->Stop();
  EXPECT_TRUE(grpc_done.WaitForNotificationWithTimeout(kUnblockTimeout));
  EXPECT_TRUE(local_done.WaitForNotificationWithTimeout(kUnblockTimeout));
  t1.join();
  t2.join();
  EXPECT_EQ(grpc_result.status().code(), absl::StatusCode::kDeadlineExceeded)
      << grpc_result.status();
  EXPECT_EQ(local_result.status().code(), absl::StatusCode::kCancelled) << local_result.status();
  EXPECT_EQ(local_result.status().message(), kTableClosedMessage);
  server->Stop();  // idempotent
}

TEST(SampleStreamTest, StopCancelsBlockedInsertStream) {
  auto table = Table::Create(Table::Config{"q", CreateSelector(Fifo()).value(),
                                           CreateSelector(Fifo()).value(), 100, 1,
                                           RateLimiter::Create(1.0, 1, 0.0, 1.0).value(), ""})
                   .value();
  auto server = StartServer({table});
  ASSERT_NE(server, nullptr);
  auto stub = RawStub(server->port());
  InsertStreamRequest request;
  *request.add_chunks() = MakeChunk(1);
  *request.add_items() = MakeItem(1, "q", 1.0, {1});
  *request.add_items() = MakeItem(2, "q", 1.0, {1});  // blocks: queue of 1
  InsertResult result;
  absl::Notification done;
  std::thread writer([&] {
    result = RunInsertStream(*stub, {request});
    done.Notify();
  });
  // The first item goes in, the second waits for room.
  const absl::Time deadline = absl::Now() + kUnblockTimeout;
  while (table->size() < 1 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(5));
  EXPECT_EQ(table->size(), 1);
  EXPECT_FALSE(done.WaitForNotificationWithTimeout(kBlockCheck));
  server->Stop();
  EXPECT_TRUE(done.WaitForNotificationWithTimeout(kUnblockTimeout));
  writer.join();
  EXPECT_EQ(result.status.error_code(), grpc::StatusCode::CANCELLED);
}

TEST(SampleStreamTest, LargeItemArrivesIntact) {
  auto table = MakeTable("t");
  auto server = StartServer({table});
  ASSERT_NE(server, nullptr);
  // 5 chunks of 1 MiB of incompressible bytes: 4 rows of 256 KiB each.
  constexpr int kChunks = 5;
  constexpr int kRows = 4;
  constexpr int kRowBytes = 256 * 1024;
  std::mt19937_64 gen(42);
  std::string expected;
  InsertStreamRequest request;
  std::vector<uint64_t> chunk_keys;
  for (int c = 0; c < kChunks; ++c) {
    Tensor t;
    t.dtype = tfp::DT_UINT8;
    t.shape = {kRows, kRowBytes};
    t.data.resize(kRows * kRowBytes);
    for (size_t i = 0; i < t.data.size(); i += 8) {
      const uint64_t v = gen();
      std::memcpy(&t.data[i], &v, 8);
    }
    expected += t.data;
    *request.add_chunks() =
        BuildChunk(1000 + c, {t}, 9, c * kRows, c * kRows + kRows - 1, false).value();
    chunk_keys.push_back(1000 + c);
  }
  auto item = MakeItem(77, "t", 1.0, chunk_keys, 0, kRows);
  // A second column: one middle row of the third chunk, squeezed.
  auto* column = item.mutable_flat_trajectory()->add_columns();
  auto* slice = column->add_chunk_slices();
  slice->set_chunk_key(1002);
  slice->set_offset(2);
  slice->set_length(1);
  column->set_squeeze(true);
  *request.add_items() = item;
  auto stub = RawStub(server->port());
  InsertResult inserted = RunInsertStream(*stub, {request});
  ASSERT_TRUE(inserted.status.ok()) << inserted.status.error_message();

  // Through the client's gRPC sampler.
  Client client(GrpcOnlyAddress(server->port()));
  SamplerOptions options;
  options.max_in_flight_samples_per_worker = 2;
  std::unique_ptr<Sampler> sampler = client.NewSampler("t", options);
  for (int i = 0; i < 2; ++i) {
    absl::StatusOr<Sample> sample = sampler->Next();
    ASSERT_TRUE(sample.ok()) << sample.status();
    EXPECT_EQ(sample->info().item().key(), 77u);
    absl::StatusOr<Tensor> big = sample->UnpackColumn(0);
    ASSERT_TRUE(big.ok()) << big.status();
    EXPECT_EQ(big->shape, (std::vector<int64_t>{kChunks * kRows, kRowBytes}));
    EXPECT_TRUE(big->data == expected) << "payload differs";
    absl::StatusOr<Tensor> row = sample->UnpackColumn(1);
    ASSERT_TRUE(row.ok()) << row.status();
    EXPECT_EQ(row->shape, (std::vector<int64_t>{kRowBytes}));
    EXPECT_TRUE(row->data ==
                expected.substr((2 * kRows + 2) * static_cast<size_t>(kRowBytes), kRowBytes));
  }

  // On the wire: the item's chunks are split over several responses; only
  // the first entry of an item has info, only the last ends the sequence.
  grpc::ClientContext context;
  auto stream = stub->SampleStream(&context);
  ASSERT_TRUE(stream->Write(SampleRequest("t", 2)));
  int responses = 0, items = 0, chunks = 0;
  bool expect_info = true;
  SampleStreamResponse response;
  while (items < 2 && stream->Read(&response)) {
    ++responses;
    for (const auto& entry : response.entries()) {
      EXPECT_EQ(entry.has_info(), expect_info);
      chunks += entry.data_size();
      expect_info = entry.end_of_sequence();
      if (entry.end_of_sequence()) ++items;
    }
  }
  EXPECT_EQ(items, 2);
  EXPECT_EQ(chunks, 2 * kChunks);
  EXPECT_GE(responses, 3);
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());
}

TEST(SampleStreamTest, ManyClientsConcurrently) {
  auto table = MakeTable("t");
  auto server = StartServer({table});
  ASSERT_NE(server, nullptr);
  constexpr int kWriters = 3, kSteps = 50;
  std::vector<std::thread> threads;
  std::atomic<int> sampled{0};
  for (int w = 0; w < kWriters; ++w) {
    threads.emplace_back([&, w] {
      Client client(w % 2 ? GrpcOnlyAddress(server->port()) : ShortcutAddress(server->port()));
      for (int i = 0; i < kSteps; ++i) {
        EXPECT_TRUE(client.InsertStep({Int32Tensor({1}, {w * 1000 + i})}, {{"t", 1.0}}).ok());
      }
    });
  }
  for (int s = 0; s < 2; ++s) {
    threads.emplace_back([&, s] {
      Client client(s ? GrpcOnlyAddress(server->port()) : ShortcutAddress(server->port()));
      SamplerOptions options;
      options.max_samples = 60;
      options.max_in_flight_samples_per_worker = 4;
      options.rate_limiter_timeout = kRpcDeadline;
      auto sampler = client.NewSampler("t", options);
      for (int i = 0; i < 60; ++i) {
        absl::StatusOr<Sample> sample = sampler->Next();
        ASSERT_TRUE(sample.ok()) << sample.status();
        absl::StatusOr<Tensor> value = sample->UnpackColumn(0);
        ASSERT_TRUE(value.ok());
        const int v = Values<int32_t>(*value)[0];
        EXPECT_TRUE(v % 1000 < kSteps && v / 1000 < kWriters) << v;
        ++sampled;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(sampled.load(), 120);
  EXPECT_EQ(table->size(), kWriters * kSteps);
}

// ---------------------------------------------------------------------------
// Signatures: the server checks every item, Client::InsertStep checks first.

// {'obs': float32[?, 2] (name 'obs'), 'step': int32[]}.
std::string ObsStepSignature() {
  tfp::StructuredValue root;
  auto& fields = *root.mutable_dict_value()->mutable_fields();
  auto* obs = fields["obs"].mutable_tensor_spec_value();
  obs->set_name("obs");
  obs->set_dtype(tfp::DT_FLOAT);
  obs->mutable_shape()->add_dim()->set_size(-1);
  obs->mutable_shape()->add_dim()->set_size(2);
  auto* step = fields["step"].mutable_tensor_spec_value();
  step->set_dtype(tfp::DT_INT32);
  step->mutable_shape();
  return root.SerializeAsString();
}

// A table with the obs/step signature that refuses items inconsistent with
// it (Config::check_item_signatures).
std::shared_ptr<Table> SignatureTable(const std::string& name) {
  return Table::Create(Table::Config{name,
                                     CreateSelector(Uniform()).value(),
                                     CreateSelector(Fifo()).value(),
                                     1000,
                                     0,
                                     MinSize(1),
                                     ObsStepSignature(),
                                     {},
                                     /*check_item_signatures=*/true})
      .value();
}

Tensor FloatRow(const std::vector<float>& values) {
  return tensor_testing::FromValues(tfp::DT_FLOAT, {static_cast<int64_t>(values.size())}, values);
}

TEST(SignatureTest, ServerRejectsItemsInconsistentWithTheSignature) {
  auto table = SignatureTable("sig");
  auto server = StartServer({table});
  ASSERT_NE(server, nullptr);
  auto stub = RawStub(server->port());
  // MakeItem's single int32 [2, 2] column is one column short of the
  // signature: the first request's item is fine, the second's is not.
  InsertStreamRequest good;
  const Tensor obs = tensor_testing::FromValues<float>(tfp::DT_FLOAT, {2, 2}, {1, 2, 3, 4});
  *good.add_chunks() = BuildChunk(1, {obs, Int32Tensor({2}, {4, 5})}, 1, 0, 1, false).value();
  auto* item = good.add_items();
  item->set_key(10);
  item->set_table("sig");
  item->set_priority(1.0);
  for (int c = 0; c < 2; ++c) {
    auto* column = item->mutable_flat_trajectory()->add_columns();
    auto* slice = column->add_chunk_slices();
    slice->set_chunk_key(1);
    slice->set_offset(1);
    slice->set_length(1);
    slice->set_index(c);
    column->set_squeeze(c == 1);  // obs [1, 2], step []
  }
  InsertStreamRequest bad;
  *bad.add_chunks() = MakeChunk(2);
  *bad.add_items() = MakeItem(20, "sig", 1.0, {2});
  InsertResult r = RunInsertStream(*stub, {good, bad});
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(r.status.error_message(), HasSubstr("table 'sig'"));
  EXPECT_THAT(r.status.error_message(), HasSubstr("1 columns but the signature has 2"));
  EXPECT_THAT(r.confirmed, ElementsAre(10));
  EXPECT_EQ(table->size(), 1);

  // Right count, wrong dtype: the int32 [2, 2] column where obs is float32.
  InsertStreamRequest wrong_dtype;
  *wrong_dtype.add_chunks() = MakeChunk(3);
  auto* two = wrong_dtype.add_items();
  *two = MakeItem(30, "sig", 1.0, {3});
  *two->mutable_flat_trajectory()->add_columns() = two->flat_trajectory().columns(0);
  r = RunInsertStream(*stub, {wrong_dtype});
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(r.status.error_message(),
              HasSubstr("column 0 ('obs',) (name 'obs') is " + DataTypeName(tfp::DT_FLOAT) +
                        "[?,2] in the signature but the item provides " +
                        DataTypeName(tfp::DT_INT32) + "[2,2]"));
  EXPECT_EQ(table->size(), 1);
}

TEST(SignatureTest, InsertStepChecksBeforeSending) {
  auto server = StartServer({SignatureTable("sig"), MakeTable("free")});
  ASSERT_NE(server, nullptr);
  Client client(GrpcOnlyAddress(server->port()));
  const int streams = Calls()->count(kInsertStream);
  const int infos = Calls()->count("/deepmind.reverb.ReverbService/ServerInfo");

  absl::Status count = client.InsertStep({FloatRow({1, 2})}, {{"sig", 1.0}});
  EXPECT_TRUE(absl::IsInvalidArgument(count)) << count;
  EXPECT_THAT(count.message(), HasSubstr("1 columns but the signature has 2"));

  absl::Status dtype = client.InsertStep({FloatRow({1, 2}), FloatScalar(1)}, {{"sig", 1.0}});
  EXPECT_TRUE(absl::IsInvalidArgument(dtype)) << dtype;
  EXPECT_THAT(dtype.message(), HasSubstr("column 1 ('step',) is " + DataTypeName(tfp::DT_INT32) +
                                         "[] in the signature but the item provides " +
                                         DataTypeName(tfp::DT_FLOAT) + "[1]"));

  absl::Status shape = client.InsertStep({FloatRow({1, 2, 3}), Int32Scalar(1)}, {{"sig", 1.0}});
  EXPECT_TRUE(absl::IsInvalidArgument(shape)) << shape;
  EXPECT_THAT(shape.message(), HasSubstr("column 0 ('obs',) (name 'obs') is " +
                                         DataTypeName(tfp::DT_FLOAT) + "[?,2]"));
  EXPECT_THAT(shape.message(), HasSubstr("provides " + DataTypeName(tfp::DT_FLOAT) + "[1,3]"));
  // Nothing was sent.
  EXPECT_EQ(Calls()->count(kInsertStream), streams);

  // [1, 2] fits obs [?, 2] and [1] fits step [] as a step; tables without a
  // signature take anything, and the one chunk serves both tables.
  ASSERT_TRUE(
      client.InsertStep({FloatRow({1, 2}), Int32Scalar(7)}, {{"sig", 1.0}, {"free", 1.0}}).ok());
  ASSERT_TRUE(client.InsertStep({FloatScalar(1)}, {{"free", 1.0}}).ok());
  EXPECT_EQ(server->service()->GetTable("sig").value()->size(), 1);
  EXPECT_EQ(server->service()->GetTable("free").value()->size(), 2);
  // Unknown tables are still the server's NOT_FOUND.
  EXPECT_EQ(client.InsertStep({FloatScalar(1)}, {{"nope", 1.0}}).code(),
            absl::StatusCode::kNotFound);
  // The signatures were fetched once.
  EXPECT_EQ(Calls()->count("/deepmind.reverb.ReverbService/ServerInfo"), infos + 1);
}

}  // namespace
}  // namespace tf_reverb
