#include "server/writer/cell_ref.h"

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "server/tensor.h"
#include "server/testing/tensor_testing.h"
#include "server/writer/chunker.h"
#include "tensor.pb.h"

namespace tf_reverb {
namespace {

using ::tf_reverb::tensor_testing::Int32Row;
using ::tf_reverb::tensor_testing::Values;

TEST(CellRefTest, DataComesFromBufferThenFromChunk) {
  auto chunker = Chunker::Create(0, {/*num_keep_alive_refs=*/2, /*max_chunk_length=*/2}).value();
  std::shared_ptr<CellRef> first = chunker->Append(Int32Row({1, 2}), 7, 0).value().lock();
  ASSERT_NE(first, nullptr);
  EXPECT_FALSE(first->IsReady());
  EXPECT_EQ(first->GetChunk(), nullptr);
  EXPECT_EQ(Values<int32_t>(first->GetData().value()), (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(first->episode_id(), 7u);
  EXPECT_EQ(first->offset(), 0);

  std::shared_ptr<CellRef> second = chunker->Append(Int32Row({3, 4}), 7, 1).value().lock();
  ASSERT_TRUE(first->IsReady());
  EXPECT_EQ(first->GetChunk(), second->GetChunk());
  EXPECT_EQ(first->chunk_key(), first->GetChunk()->chunk_key());
  EXPECT_EQ(second->offset(), 1);
  EXPECT_EQ(Values<int32_t>(second->GetData().value()), (std::vector<int32_t>{3, 4}));
  EXPECT_EQ(second->spec().DebugString(), "int32[2]");
}

TEST(CellRefTest, StringCells) {
  auto chunker = Chunker::Create(0, {1, 1}).value();
  Tensor s;
  s.dtype = ::tf_reverb::tf::DT_STRING;
  s.shape = {2};
  s.strings = {"ab", "c"};
  std::weak_ptr<CellRef> weak = chunker->Append(s, 1, 0).value();
  std::shared_ptr<CellRef> ref = weak.lock();
  ASSERT_TRUE(ref->IsReady());
  EXPECT_EQ(ref->GetData().value().strings, (std::vector<std::string>{"ab", "c"}));
}

TEST(CellRefTest, DroppedBufferIsFailedPrecondition) {
  auto chunker = Chunker::Create(0, {2, 2}).value();
  std::shared_ptr<CellRef> ref = chunker->Append(Int32Row({1}), 1, 0).value().lock();
  chunker->Reset();
  EXPECT_EQ(ref->GetData().status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(CellRefTest, RandomKeysDiffer) { EXPECT_NE(NewRandomKey(), NewRandomKey()); }

}  // namespace
}  // namespace tf_reverb
