// The SampleStream protocol over a raw stub and through the client's gRPC
// sampler (docs/architecture/wire-protocol.md): request validation, rate
// limiter timeouts, what the entries carry, large items split over
// responses, Server::Stop cancelling blocked calls, many clients at once.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/status.h"
#include "gtest/gtest.h"
#include "reverb_service.grpc.pb.h"
#include "reverb_service.pb.h"
#include "schema.pb.h"
#include "server/chunk_codec.h"
#include "server/client/client.h"
#include "server/client/sample.h"
#include "server/client/sampler.h"
#include "server/item_record.h"
#include "server/service/server.h"
#include "server/table.h"
#include "server/table_chunk.h"
#include "server/table_item.h"
#include "server/tensor.h"
#include "server/testing/server_testing.h"
#include "server/testing/table_testing.h"
#include "server/testing/tensor_testing.h"

namespace tf_reverb {
namespace {

namespace tfp = ::tf_reverb::tf;
using ::deepmind::reverb::InsertStreamRequest;
using ::deepmind::reverb::SampleStreamResponse;
using ::tf_reverb::tensor_testing::Int32Tensor;
using ::tf_reverb::tensor_testing::Values;
using ::tf_reverb::testing::Fifo;
using ::tf_reverb::testing::GrpcOnlyAddress;
using ::tf_reverb::testing::InsertResult;
using ::tf_reverb::testing::kBlockCheck;
using ::tf_reverb::testing::kRpcDeadline;
using ::tf_reverb::testing::kUnblockTimeout;
using ::tf_reverb::testing::MakeTable;
using ::tf_reverb::testing::QueueLimiter;
using ::tf_reverb::testing::RawStub;
using ::tf_reverb::testing::RunInsertStream;
using ::tf_reverb::testing::SampleRequest;
using ::tf_reverb::testing::ServedTable;
using ::tf_reverb::testing::ShortcutAddress;
using ::tf_reverb::testing::StartServer;
using ::tf_reverb::testing::WireChunk;
using ::tf_reverb::testing::WireItem;

TEST(SampleStreamRpcTest, NonPositiveNumSamplesIsInvalid) {
  auto server = StartServer({ServedTable("t")});
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

TEST(SampleStreamRpcTest, UnknownTableIsNotFound) {
  auto server = StartServer({ServedTable("t")});
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

TEST(SampleStreamRpcTest, RateLimiterTimeoutIsDeadlineExceeded) {
  auto server = StartServer({ServedTable("t")});
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

TEST(SampleStreamRpcTest, ZeroOrNegativeTimeoutMeansWaitForever) {
  auto table = ServedTable("t");
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
                    ->InsertOrAssign(
                        TableItem{ItemRecord::FromProto(WireItem(timeout_ms + 10, "t", 1.0, {1})),
                                  {TableChunk::FromProto(WireChunk(1))}},
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

TEST(SampleStreamRpcTest, EntriesCarryInfoChunksAndEndOfSequence) {
  auto table = ServedTable("t", Fifo());
  auto server = StartServer({table});
  ASSERT_NE(server, nullptr);
  auto stub = RawStub(server->port());
  InsertStreamRequest request;
  *request.add_chunks() = WireChunk(1);
  *request.add_chunks() = WireChunk(2);
  *request.add_items() = WireItem(7, "t", 2.0, {1, 2});
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

TEST(SampleStreamRpcTest, StopCancelsBlockedSamplers) {
  auto table = ServedTable("t");
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

TEST(SampleStreamRpcTest, StopCancelsBlockedInsertStream) {
  auto table = MakeTable(Fifo(), Fifo(), 100, 1, QueueLimiter(1), "q");
  auto server = StartServer({table});
  ASSERT_NE(server, nullptr);
  auto stub = RawStub(server->port());
  InsertStreamRequest request;
  *request.add_chunks() = WireChunk(1);
  *request.add_items() = WireItem(1, "q", 1.0, {1});
  *request.add_items() = WireItem(2, "q", 1.0, {1});  // blocks: queue of 1
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

TEST(SampleStreamRpcTest, LargeItemArrivesIntact) {
  auto table = ServedTable("t");
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
  auto item = WireItem(77, "t", 1.0, chunk_keys, 0, kRows);
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
    EXPECT_EQ(sample->meta().key, 77u);
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

TEST(SampleStreamRpcTest, ManyClientsConcurrently) {
  auto table = ServedTable("t");
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

}  // namespace
}  // namespace tf_reverb
