#include "server/testing/server_testing.h"

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "gtest/gtest.h"
#include "reverb_service.grpc.pb.h"
#include "reverb_service.pb.h"
#include "schema.pb.h"
#include "server/chunk_codec.h"
#include "server/rate_limiter.h"
#include "server/service/server.h"
#include "server/table.h"
#include "server/testing/table_testing.h"
#include "server/testing/tensor_testing.h"

namespace tf_reverb {
namespace testing {

using ::deepmind::reverb::ChunkData;
using ::deepmind::reverb::InsertStreamRequest;
using ::deepmind::reverb::InsertStreamResponse;
using ::deepmind::reverb::PrioritizedItem;
using ::deepmind::reverb::ReverbService;
using ::deepmind::reverb::SampleStreamRequest;

std::shared_ptr<Table> ServedTable(std::string name, const KeyDistributionOptions& sampler,
                                   RateLimiter limiter, int32_t max_times_sampled) {
  return MakeTable(sampler, Fifo(), 1000, max_times_sampled, std::move(limiter), std::move(name));
}

std::unique_ptr<Server> StartServer(std::vector<std::shared_ptr<Table>> tables) {
  absl::StatusOr<std::unique_ptr<Server>> server = Server::Start(std::move(tables), 0);
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? *std::move(server) : nullptr;
}

std::string GrpcOnlyAddress(int port) { return absl::StrCat("ipv4:127.0.0.1:", port); }
std::string ShortcutAddress(int port) { return absl::StrCat("localhost:", port); }

std::unique_ptr<ReverbService::Stub> RawStub(int port) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  return ReverbService::NewStub(grpc::CreateCustomChannel(
      absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials(), args));
}

ChunkData WireChunk(uint64_t key, int rows, uint64_t episode) {
  std::vector<int32_t> values;
  for (int r = 0; r < rows; ++r) {
    values.push_back(static_cast<int32_t>(key * 10 + r));
    values.push_back(static_cast<int32_t>(key * 10 + r + 1));
  }
  return BuildChunk(key, {tensor_testing::Int32Tensor({rows, 2}, values)}, episode, 0, rows - 1,
                    false)
      .value();
}

PrioritizedItem WireItem(uint64_t key, const std::string& table, double priority,
                         const std::vector<uint64_t>& chunk_keys, int offset, int length) {
  PrioritizedItem item;
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

InsertResult RunInsertStream(ReverbService::Stub& stub,
                             const std::vector<InsertStreamRequest>& requests) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
  auto stream = stub.InsertStream(&context);
  InsertResult result;
  for (const auto& request : requests) {
    if (!stream->Write(request)) break;
  }
  stream->WritesDone();
  InsertStreamResponse response;
  while (stream->Read(&response)) {
    result.confirmed.insert(result.confirmed.end(), response.keys().begin(), response.keys().end());
  }
  result.status = stream->Finish();
  return result;
}

SampleStreamRequest SampleRequest(const std::string& table, int64_t n, int64_t timeout_ms) {
  SampleStreamRequest request;
  request.set_table(table);
  request.set_num_samples(n);
  request.mutable_rate_limiter_timeout()->set_milliseconds(timeout_ms);
  return request;
}

}  // namespace testing
}  // namespace tf_reverb
