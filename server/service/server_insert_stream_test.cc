#include "server/service/server_insert_stream.h"

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "reverb_service.pb.h"
#include "server/table.h"
#include "server/table_chunk.h"
#include "server/table_item.h"
#include "server/testing/table_testing.h"

namespace tf_reverb {
namespace {

using ::deepmind::reverb::InsertStreamRequest;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::tf_reverb::testing::MakeChunk;
using ::tf_reverb::testing::MakeItem;
using ::tf_reverb::testing::MakeTable;
using ::tf_reverb::testing::MinSize;
using ::tf_reverb::testing::QueueLimiter;
using ::tf_reverb::testing::Uniform;

class ServerInsertStreamTest : public ::testing::Test {
 protected:
  explicit ServerInsertStreamTest(std::shared_ptr<Table> table = MakeTable(Uniform(), Uniform(),
                                                                           100, 0, MinSize(1)))
      : table_(std::move(table)),
        handler_([this](const std::string& name) -> absl::StatusOr<std::shared_ptr<Table>> {
          if (name == table_->name()) return table_;
          return absl::NotFoundError(absl::StrCat("Priority table ", name, " was not found"));
        }) {}

  // A request holding `chunks` and an item over all their rows.
  static InsertStreamRequest Request(uint64_t key,
                                     std::vector<std::shared_ptr<const TableChunk>> chunks,
                                     bool send_chunks = true) {
    InsertStreamRequest request;
    if (send_chunks) {
      for (const auto& chunk : chunks) *request.add_chunks() = chunk->ToProto();
    }
    *request.add_items() = MakeItem(key, 1.0, chunks).item.ToProto();
    return request;
  }

  absl::Status Handle(InsertStreamRequest request) {
    return handler_.Handle(std::move(request), &confirmed_, [this](std::vector<uint64_t>* keys) {
      flushed_.insert(flushed_.end(), keys->begin(), keys->end());
      keys->clear();
      return flush_result_;
    });
  }

  std::shared_ptr<Table> table_;
  ServerInsertStream handler_;
  std::vector<uint64_t> confirmed_;
  std::vector<uint64_t> flushed_;
  bool flush_result_ = true;
};

TEST_F(ServerInsertStreamTest, InsertsItemsAndKeepsOnlyTheNamedChunks) {
  auto a = MakeChunk(1, 1, 2);
  auto b = MakeChunk(2, 1, 2);
  InsertStreamRequest first = Request(10, {a});
  first.add_keep_chunk_keys(1);
  ASSERT_TRUE(Handle(first).ok());
  EXPECT_EQ(handler_.num_chunks(), 1u);
  // A chunk-only request adds to the stream's chunks and keeps the rest.
  InsertStreamRequest chunks_only;
  *chunks_only.add_chunks() = b->ToProto();
  ASSERT_TRUE(Handle(chunks_only).ok());
  EXPECT_EQ(handler_.num_chunks(), 2u);
  // The next item uses the kept chunk without resending it.
  InsertStreamRequest second = Request(11, {a, b}, /*send_chunks=*/false);
  ASSERT_TRUE(Handle(second).ok());
  EXPECT_EQ(handler_.num_chunks(), 0u);
  EXPECT_THAT(confirmed_, ElementsAre(10, 11));
  EXPECT_EQ(table_->size(), 2);
}

TEST_F(ServerInsertStreamTest, StartBorrowsTheRequestUntilItIsDone) {
  // As the service does: the request is the caller's, borrowed by the
  // handler until Continue returns kDone, and freed by the caller then
  // (under ASan, a later use of it would fail this test).
  std::vector<uint64_t> confirmed;
  const auto wake = std::make_shared<Table::Waker>([] {});
  const auto chunk = MakeChunk(1, 1, 2);
  auto first = std::make_unique<InsertStreamRequest>(Request(10, {chunk}));
  first->add_keep_chunk_keys(1);
  ASSERT_TRUE(handler_.Start(first.get()).ok());
  ASSERT_EQ(*handler_.Continue(&confirmed, wake), ServerInsertStream::Progress::kDone);
  first.reset();
  EXPECT_EQ(handler_.num_chunks(), 1u);  // kept by keep_chunk_keys, not by the request
  // An item over the chunk the first request sent, which is gone.
  auto second = std::make_unique<InsertStreamRequest>(Request(11, {chunk}, /*send_chunks=*/false));
  ASSERT_TRUE(handler_.Start(second.get()).ok());
  ASSERT_EQ(*handler_.Continue(&confirmed, wake), ServerInsertStream::Progress::kDone);
  second.reset();
  EXPECT_THAT(confirmed, ElementsAre(10, 11));
  EXPECT_EQ(handler_.num_chunks(), 0u);  // the second request kept none
  EXPECT_EQ(table_->size(), 2);
}

TEST_F(ServerInsertStreamTest, ChunksThatCameAsBytesAreKeptAsThem) {
  // As the service hands them over (insert_request.h): the request without
  // its chunks, and the chunks' own bytes.
  std::vector<uint64_t> confirmed;
  const auto wake = std::make_shared<Table::Waker>([] {});
  const auto a = MakeChunk(1, 1, 2);
  const auto b = MakeChunk(2, 1, 2);
  InsertStreamRequest request = Request(10, {a, b}, /*send_chunks=*/false);
  request.add_keep_chunk_keys(2);
  std::vector<ServerInsertStream::WireChunk> wires = {{1, std::string(a->wire())},
                                                      {2, std::string(b->wire())}};
  const char* const b_bytes = wires[1].wire.data();
  ASSERT_TRUE(handler_.Start(&request, std::move(wires)).ok());
  ASSERT_EQ(*handler_.Continue(&confirmed, wake), ServerInsertStream::Progress::kDone);
  EXPECT_THAT(confirmed, ElementsAre(10));
  ASSERT_EQ(handler_.num_chunks(), 1u);
  // The table holds the item over the very bytes handed to Start.
  const Table::Snapshot snapshot = table_->TakeSnapshot();
  ASSERT_EQ(snapshot.items.size(), 1u);
  const std::vector<std::shared_ptr<const TableChunk>>& chunks = snapshot.items[0].data->chunks;
  ASSERT_EQ(chunks.size(), 2u);
  EXPECT_EQ(chunks[1]->wire().data(), b_bytes);
  EXPECT_EQ(chunks[0]->wire(), a->wire());

  // A chunk the stream holds is not replaced, even by other bytes; a new
  // one that is not valid fails the request before anything is stored.
  InsertStreamRequest next = Request(11, {b}, /*send_chunks=*/false);
  ChunkData empty;
  empty.set_chunk_key(3);
  std::vector<ServerInsertStream::WireChunk> more = {{2, "other bytes"},
                                                     {3, empty.SerializeAsString()}};
  absl::Status status = handler_.Start(&next, std::move(more));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("Chunk 3 holds no tensors"));
  EXPECT_EQ(handler_.num_chunks(), 1u);
  std::vector<ServerInsertStream::WireChunk> held = {{2, "other bytes"}};
  ASSERT_TRUE(handler_.Start(&next, std::move(held)).ok());
  ASSERT_EQ(*handler_.Continue(&confirmed, wake), ServerInsertStream::Progress::kDone);
  EXPECT_THAT(confirmed, ElementsAre(10, 11));
  EXPECT_EQ(table_->size(), 2);
}

TEST_F(ServerInsertStreamTest, ItemOverAChunkTheStreamDoesNotHoldIsInvalidArgument) {
  ASSERT_TRUE(Handle(Request(10, {MakeChunk(1, 1)})).ok());  // chunk 1 not kept
  absl::Status status = Handle(Request(11, {MakeChunk(1, 1)}, /*send_chunks=*/false));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("Could not find sequence chunk 1 of item 11"));
  EXPECT_EQ(table_->size(), 1);
}

TEST_F(ServerInsertStreamTest, CorruptChunkRejectsTheWholeRequestAndKeepsEarlierItems) {
  ASSERT_TRUE(Handle(Request(10, {MakeChunk(1, 1)})).ok());
  ChunkData corrupt = MakeChunk(2, 1, 4)->ToProto();
  corrupt.mutable_data()->mutable_tensors(0)->mutable_tensor_shape()->mutable_dim(0)->set_size(
      int64_t{1} << 40);
  InsertStreamRequest request = Request(11, {MakeChunk(3, 1)});
  *request.add_chunks() = corrupt;
  absl::Status status = Handle(request);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("Chunk 2 tensor 0"));
  EXPECT_EQ(table_->size(), 1);  // item 10 stays, item 11 was never inserted
  EXPECT_THAT(confirmed_, ElementsAre(10));
}

TEST_F(ServerInsertStreamTest, SlicePastTheChunksRowsIsInvalidArgument) {
  auto chunk = MakeChunk(1, 1, 2);
  InsertStreamRequest request = Request(10, {chunk});
  request.mutable_items(0)
      ->mutable_flat_trajectory()
      ->mutable_columns(0)
      ->mutable_chunk_slices(0)
      ->set_length(3);
  absl::Status status = Handle(request);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("out of range"));
  EXPECT_EQ(table_->size(), 0);
}

TEST_F(ServerInsertStreamTest, OtherClientMistakesGetActionableStatuses) {
  EXPECT_EQ(Handle(InsertStreamRequest()).code(), absl::StatusCode::kInvalidArgument);
  InsertStreamRequest unknown_table = Request(10, {MakeChunk(1, 1)});
  unknown_table.mutable_items(0)->set_table("nope");
  EXPECT_EQ(Handle(unknown_table).code(), absl::StatusCode::kNotFound);
  InsertStreamRequest keep_unknown = Request(11, {MakeChunk(2, 1)});
  keep_unknown.add_keep_chunk_keys(99);
  absl::Status status = Handle(keep_unknown);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_EQ(table_->size(), 1);  // item 11 went in before the keep check
}

class BlockingServerInsertStreamTest : public ServerInsertStreamTest {
 protected:
  BlockingServerInsertStreamTest()
      : ServerInsertStreamTest(MakeTable(Uniform(), Uniform(), 100, 0, QueueLimiter(1))) {}
};

TEST_F(BlockingServerInsertStreamTest,
       ConfirmsEarlierItemsBeforeBlockingAndStopsWhenTheClientLeft) {
  InsertStreamRequest request = Request(10, {MakeChunk(1, 1)});
  InsertStreamRequest second = Request(11, {MakeChunk(2, 1)});
  *request.add_items() = second.items(0);
  *request.add_chunks() = second.chunks(0);
  flush_result_ = false;  // the client is gone when the second insert would block
  ASSERT_TRUE(Handle(request).ok());
  EXPECT_THAT(flushed_, ElementsAre(10));
  EXPECT_TRUE(confirmed_.empty());
  EXPECT_EQ(table_->size(), 1);
}

}  // namespace
}  // namespace tf_reverb
