// The InsertStream protocol over a raw stub (docs/architecture/wire-protocol.md):
// chunks sent once serve items of later requests until released, and what
// fails the stream with which status. The handler's own tests are
// server_insert_stream_test.cc.
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "grpcpp/support/status.h"
#include "gtest/gtest.h"
#include "reverb_service.grpc.pb.h"
#include "reverb_service.pb.h"
#include "server/client/sample.h"
#include "server/service/server.h"
#include "server/table.h"
#include "server/table_item.h"
#include "server/testing/server_testing.h"
#include "server/testing/table_testing.h"
#include "server/testing/tensor_testing.h"

namespace tf_reverb {
namespace {

using ::deepmind::reverb::InsertStreamRequest;
using ::deepmind::reverb::ReverbService;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::tf_reverb::tensor_testing::Values;
using ::tf_reverb::testing::Fifo;
using ::tf_reverb::testing::InsertResult;
using ::tf_reverb::testing::MinSize;
using ::tf_reverb::testing::RawStub;
using ::tf_reverb::testing::RunInsertStream;
using ::tf_reverb::testing::ServedTable;
using ::tf_reverb::testing::StartServer;
using ::tf_reverb::testing::WireChunk;
using ::tf_reverb::testing::WireItem;

class InsertStreamRpcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    table_ = ServedTable("t", Fifo(), MinSize(1), /*max_times_sampled=*/1);
    server_ = StartServer({table_});
    ASSERT_NE(server_, nullptr);
    stub_ = RawStub(server_->port());
  }

  std::shared_ptr<Table> table_;
  std::unique_ptr<Server> server_;
  std::unique_ptr<ReverbService::Stub> stub_;
};

TEST_F(InsertStreamRpcTest, RequestWithNeitherChunksNorItemsIsInvalid) {
  InsertResult r = RunInsertStream(*stub_, {InsertStreamRequest()});
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(r.status.error_message(), "Request lacks both chunks and item");
}

TEST_F(InsertStreamRpcTest, ItemNamingUnsentChunkIsInvalidArgument) {
  InsertStreamRequest request;
  *request.add_chunks() = WireChunk(1);
  *request.add_items() = WireItem(10, "t", 1.0, {1, 2});
  InsertResult r = RunInsertStream(*stub_, {request});
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(r.status.error_message(), HasSubstr("Could not find sequence chunk 2 of item 10"));
  EXPECT_EQ(table_->size(), 0);
}

TEST_F(InsertStreamRpcTest, KeepingAnUnknownChunkIsFailedPrecondition) {
  InsertStreamRequest request;
  *request.add_chunks() = WireChunk(1);
  *request.add_items() = WireItem(10, "t", 1.0, {1});
  request.add_keep_chunk_keys(1);
  request.add_keep_chunk_keys(99);
  InsertResult r = RunInsertStream(*stub_, {request});
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(r.status.error_message(), HasSubstr("ReleaseOutOfRangeChunks"));
  EXPECT_EQ(table_->size(), 1);  // the item itself was inserted
}

TEST_F(InsertStreamRpcTest, ChunkSentOnceServesItemsInLaterRequests) {
  // [CHUNK C1] [CHUNK C2] [ITEM using C1,C2; keep C2] [CHUNK C3]
  // [ITEM using C2,C3] [ITEM using C2 only, keep nothing].
  InsertStreamRequest c1, c2, item_a, c3, item_b, item_c;
  *c1.add_chunks() = WireChunk(1);
  *c2.add_chunks() = WireChunk(2);
  *item_a.add_items() = WireItem(100, "t", 1.0, {1, 2});
  item_a.add_keep_chunk_keys(2);
  *c3.add_chunks() = WireChunk(3);
  *item_b.add_items() = WireItem(200, "t", 1.0, {2, 3}, /*offset=*/1, /*length=*/1);
  item_b.add_keep_chunk_keys(2);
  *item_c.add_items() = WireItem(300, "t", 1.0, {2});
  InsertResult r = RunInsertStream(*stub_, {c1, c2, item_a, c3, item_b, item_c});
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_THAT(r.confirmed, ElementsAre(100, 200, 300));
  EXPECT_EQ(table_->size(), 3);

  std::vector<SampledItem> batch;
  ASSERT_TRUE(table_->SampleBatch(3, absl::ZeroDuration(), &batch).ok());
  ASSERT_EQ(batch.size(), 3u);
  // Item B: row 1 of chunk 2 then row 1 of chunk 3.
  Sample b = Sample::FromSampledItem(batch[1]);
  EXPECT_EQ(b.meta().key, 200u);
  EXPECT_THAT(Values<int32_t>(b.UnpackColumn(0).value()), ElementsAre(21, 22, 31, 32));
  // Items share the stream's chunk objects.
  EXPECT_EQ(batch[1].data->chunks[0], batch[2].data->chunks[0]);

  // After item_c released chunk 2, using it again fails.
  InsertStreamRequest item_d;
  *item_d.add_items() = WireItem(400, "t", 1.0, {2});
  r = RunInsertStream(*stub_, {c2, item_c, item_d});
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(r.status.error_message(), HasSubstr("Could not find sequence chunk 2 of item 400"));
  EXPECT_THAT(r.confirmed, ElementsAre(300));
}

TEST_F(InsertStreamRpcTest, ChunkOnlyMessagesDoNotReleaseChunks) {
  InsertStreamRequest c1, c2, item;
  *c1.add_chunks() = WireChunk(1);
  *c2.add_chunks() = WireChunk(2);
  *item.add_items() = WireItem(5, "t", 1.0, {1, 2});
  InsertResult r = RunInsertStream(*stub_, {c1, c2, item});
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_THAT(r.confirmed, ElementsAre(5));
}

TEST_F(InsertStreamRpcTest, BadItemsFailTheStream) {
  InsertStreamRequest request;
  *request.add_chunks() = WireChunk(1);
  *request.add_items() = WireItem(5, "t", 1.0, {1}, /*offset=*/1, /*length=*/5);
  InsertResult r = RunInsertStream(*stub_, {request});
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  InsertStreamRequest unknown;
  *unknown.add_chunks() = WireChunk(1);
  *unknown.add_items() = WireItem(5, "nope", 1.0, {1});
  r = RunInsertStream(*stub_, {unknown});
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(r.status.error_message(), "Priority table nope was not found");

  InsertStreamRequest empty_item;
  *empty_item.add_chunks() = WireChunk(1);
  empty_item.add_items()->set_table("t");
  r = RunInsertStream(*stub_, {empty_item});
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(table_->size(), 0);
}

TEST_F(InsertStreamRpcTest, ReinsertingAKeyIsConfirmedAndUpdatesPriority) {
  InsertStreamRequest request;
  *request.add_chunks() = WireChunk(1);
  *request.add_items() = WireItem(5, "t", 1.0, {1});
  *request.add_items() = WireItem(5, "t", 3.0, {1});
  InsertResult r = RunInsertStream(*stub_, {request});
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_THAT(r.confirmed, ElementsAre(5, 5));
  EXPECT_EQ(table_->size(), 1);
  EXPECT_EQ(table_->Info().rate_limiter_info().insert_stats().completed(), 1);
}

}  // namespace
}  // namespace tf_reverb
