// The service's handling of what the generated gRPC code cannot tell apart:
// requests that do not parse (sent here as raw bytes, over a real socket),
// and exceptions inside a handler.
#include "server/service/reverb_service.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "grpcpp/channel.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/impl/client_unary_call.h"
#include "grpcpp/impl/rpc_method.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"
#include "grpcpp/support/status.h"
#include "grpcpp/support/sync_stream.h"
#include "gtest/gtest.h"
#include "reverb_service.pb.h"
#include "server/service/server.h"
#include "server/table.h"
#include "server/table_extension.h"
#include "server/testing/table_testing.h"

namespace tf_reverb {
namespace {

using ::deepmind::reverb::InsertStreamRequest;
using ::deepmind::reverb::InsertStreamResponse;
using ::testing::HasSubstr;
using ::tf_reverb::testing::MakeChunk;
using ::tf_reverb::testing::MakeItem;
using ::tf_reverb::testing::MakeTable;
using ::tf_reverb::testing::MinSize;
using ::tf_reverb::testing::Uniform;

std::string Method(const std::string& name) {
  return absl::StrCat("/deepmind.reverb.ReverbService/", name);
}

grpc::ByteBuffer Bytes(const std::string& bytes) {
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

std::chrono::system_clock::time_point Deadline() {
  return std::chrono::system_clock::now() + std::chrono::seconds(60);
}

// Throws from OnInsert what the test asks for.
class ThrowingExtension : public TableExtension {
 public:
  enum class Throw { kNothing, kBadAlloc, kRuntimeError };
  void OnInsert(const ExtensionItem&) override {
    if (mode == Throw::kBadAlloc) throw std::bad_alloc();
    if (mode == Throw::kRuntimeError) throw std::runtime_error("extension bug");
  }
  std::string DebugString() const override { return "ThrowingExtension"; }
  // Set by the test thread, read by the server's (the socket in between
  // orders them, but TSan cannot see through the uninstrumented gRPC).
  std::atomic<Throw> mode{Throw::kNothing};
};

class ReverbServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    extension_ = std::make_shared<ThrowingExtension>();
    table_ = MakeTable(Uniform(), Uniform(), 100, 0, MinSize(1), "t", {extension_});
    absl::StatusOr<std::unique_ptr<Server>> server = Server::Start({table_}, 0);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    channel_ = grpc::CreateChannel(absl::StrCat("127.0.0.1:", server_->port()),
                                   grpc::InsecureChannelCredentials());
  }

  // One unary call with `request` as its raw bytes.
  grpc::Status Unary(const std::string& method, const std::string& request) {
    grpc::ClientContext context;
    context.set_deadline(Deadline());
    grpc::ByteBuffer response;
    return grpc::internal::BlockingUnaryCall<grpc::ByteBuffer, grpc::ByteBuffer>(
        channel_.get(),
        grpc::internal::RpcMethod(Method(method).c_str(), grpc::internal::RpcMethod::NORMAL_RPC),
        &context, Bytes(request), &response);
  }

  // One bidi stream: writes `requests` as raw bytes, reads until the end;
  // returns the status and counts the responses.
  grpc::Status Stream(const std::string& method, const std::vector<std::string>& requests,
                      int* responses = nullptr) {
    grpc::ClientContext context;
    context.set_deadline(Deadline());
    std::unique_ptr<grpc::ClientReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>> stream(
        grpc::internal::ClientReaderWriterFactory<grpc::ByteBuffer, grpc::ByteBuffer>::Create(
            channel_.get(),
            grpc::internal::RpcMethod(Method(method).c_str(),
                                      grpc::internal::RpcMethod::BIDI_STREAMING),
            &context));
    for (const std::string& request : requests) {
      if (!stream->Write(Bytes(request))) break;
    }
    stream->WritesDone();
    grpc::ByteBuffer response;
    int n = 0;
    while (stream->Read(&response)) ++n;
    if (responses != nullptr) *responses = n;
    return stream->Finish();
  }

  static std::string InsertRequest(uint64_t key, uint64_t chunk_key) {
    auto chunk = MakeChunk(chunk_key, 1, 2);
    InsertStreamRequest request;
    *request.add_chunks() = chunk->ToProto();
    *request.add_items() = MakeItem(key, 1.0, {chunk}).item.ToProto();
    return request.SerializeAsString();
  }

  std::shared_ptr<ThrowingExtension> extension_;
  std::shared_ptr<Table> table_;
  std::unique_ptr<Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
};

TEST_F(ReverbServiceTest, GarbageOnAStreamIsInvalidArgumentNotAHalfClose) {
  const std::string garbage("\xff\xff\xff\xff\x0f garbage", 14);
  for (const char* method : {"InsertStream", "SampleStream", "InitializeConnection"}) {
    grpc::Status status = Stream(method, {garbage});
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << method;
    EXPECT_THAT(status.error_message(), HasSubstr("Could not parse the deepmind.reverb."))
        << method;
  }
}

TEST_F(ReverbServiceTest, MessageCutShortEndsTheStreamAndKeepsEarlierItems) {
  const std::string cut = InsertRequest(11, 2).substr(0, 20);
  int responses = 0;
  grpc::Status status = Stream("InsertStream", {InsertRequest(10, 1), cut}, &responses);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  EXPECT_THAT(status.error_message(), HasSubstr("InsertStreamRequest"));
  EXPECT_EQ(responses, 1);  // item 10 was confirmed
  EXPECT_EQ(table_->size(), 1);
}

TEST_F(ReverbServiceTest, GarbageUnaryRequestsAreInvalidArgumentWithAMessage) {
  const std::string garbage("\x0a\xff\xff\xff\xff\x0f", 6);
  for (const char* method : {"MutatePriorities", "Reset", "Checkpoint", "ServerInfo"}) {
    grpc::Status status = Unary(method, garbage);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << method;
    EXPECT_THAT(status.error_message(), HasSubstr("Could not parse the deepmind.reverb."))
        << method;
  }
  // Well-formed raw requests still work.
  EXPECT_TRUE(Unary("ServerInfo", "").ok());
}

TEST_F(ReverbServiceTest, ExceptionsInAHandlerBecomeStatusesAndTheServerGoesOn) {
  extension_->mode = ThrowingExtension::Throw::kBadAlloc;
  grpc::Status status = Stream("InsertStream", {InsertRequest(10, 1)});
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(status.error_message(), HasSubstr("InsertStream: the server ran out of memory"));
  extension_->mode = ThrowingExtension::Throw::kRuntimeError;
  status = Stream("InsertStream", {InsertRequest(11, 2)});
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INTERNAL);
  EXPECT_THAT(status.error_message(), HasSubstr("unexpected error: extension bug"));
  extension_->mode = ThrowingExtension::Throw::kNothing;
  int responses = 0;
  EXPECT_TRUE(Stream("InsertStream", {InsertRequest(12, 3)}, &responses).ok());
  EXPECT_EQ(responses, 1);
  EXPECT_TRUE(Unary("ServerInfo", "").ok());
}

}  // namespace
}  // namespace tf_reverb
