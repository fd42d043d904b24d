#include "server/writer/chunker.h"

#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/chunk_codec.h"
#include "server/tensor.h"
#include "server/testing/tensor_testing.h"
#include "server/writer/cell_ref.h"
#include "tensor.pb.h"

namespace tf_reverb {
namespace {

using ::tf_reverb::tensor_testing::FloatScalar;
using ::tf_reverb::tensor_testing::Int32Row;

using ::testing::HasSubstr;

TEST(ChunkerOptionsTest, Validation) {
  EXPECT_TRUE(ChunkerOptions({1, 1}).Validate().ok());
  EXPECT_TRUE(ChunkerOptions({3, 0}).Validate().ok());  // auto-tuned
  EXPECT_EQ(ChunkerOptions({0, 0}).Validate().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ChunkerOptions({2, 3}).Validate().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ChunkerOptions({2, -1}).Validate().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(Chunker::Create(0, {0, 0}).ok());
}

TEST(ChunkerTest, FinalizesAtMaxChunkLength) {
  auto chunker = Chunker::Create(0, {3, 3}).value();
  std::vector<std::shared_ptr<CellRef>> refs;
  for (int i = 0; i < 4; ++i) {
    refs.push_back(chunker->Append(Int32Row({i, i}), 5, i).value().lock());
  }
  ASSERT_TRUE(refs[0]->IsReady());
  EXPECT_FALSE(refs[3]->IsReady());
  EXPECT_EQ(chunker->num_buffered(), 1);
  auto chunk = refs[0]->GetChunk();
  EXPECT_EQ(chunk->data_tensors_len(), 1);
  EXPECT_EQ(chunk->sequence_range().episode_id(), 5u);
  EXPECT_EQ(chunk->sequence_range().start(), 0);
  EXPECT_EQ(chunk->sequence_range().end(), 2);
  EXPECT_FALSE(chunk->sequence_range().sparse());
  EXPECT_EQ(ProtoShape(chunk->data().tensors(0)), (std::vector<int64_t>{3, 2}));
  Tensor decoded = DecompressTensor(chunk->data().tensors(0), false, kSnappy).value();
  std::vector<int32_t> values(6);
  std::memcpy(values.data(), decoded.data.data(), 24);
  EXPECT_EQ(values, (std::vector<int32_t>{0, 0, 1, 1, 2, 2}));
  EXPECT_NE(refs[3]->chunk_key(), refs[0]->chunk_key());
  ASSERT_TRUE(chunker->Flush().ok());
  EXPECT_TRUE(refs[3]->IsReady());
  EXPECT_EQ(chunker->num_buffered(), 0);
  EXPECT_TRUE(chunker->Flush().ok());  // nothing buffered: no-op
}

TEST(ChunkerTest, KeepAliveRingExpiresOldRefs) {
  auto chunker = Chunker::Create(0, {2, 1}).value();
  std::weak_ptr<CellRef> a = chunker->Append(FloatScalar(1), 1, 0).value();
  std::weak_ptr<CellRef> b = chunker->Append(FloatScalar(2), 1, 1).value();
  EXPECT_FALSE(a.expired());
  std::weak_ptr<CellRef> c = chunker->Append(FloatScalar(3), 1, 2).value();
  EXPECT_TRUE(a.expired());
  EXPECT_FALSE(b.expired());
  EXPECT_EQ(chunker->KeepAliveChunkKeys(),
            (std::vector<uint64_t>{b.lock()->chunk_key(), c.lock()->chunk_key()}));
  // A strong reference elsewhere (e.g. a queued item) keeps a cell alive.
  std::shared_ptr<CellRef> held = b.lock();
  chunker->Append(FloatScalar(4), 1, 3).value();
  chunker->Append(FloatScalar(5), 1, 4).value();
  EXPECT_FALSE(b.expired());
  held.reset();
  EXPECT_TRUE(b.expired());
}

TEST(ChunkerTest, NeverMixesEpisodes) {
  auto chunker = Chunker::Create(0, {4, 4}).value();
  auto first = chunker->Append(FloatScalar(1), 1, 0).value().lock();
  auto second = chunker->Append(FloatScalar(2), 2, 0).value().lock();
  ASSERT_TRUE(first->IsReady());
  EXPECT_EQ(first->GetChunk()->sequence_range().episode_id(), 1u);
  EXPECT_NE(first->chunk_key(), second->chunk_key());
  EXPECT_FALSE(second->IsReady());
}

TEST(ChunkerTest, StepsMustIncreaseAndGapsAreSparse) {
  auto chunker = Chunker::Create(0, {4, 4}).value();
  auto a = chunker->Append(FloatScalar(1), 1, 0).value().lock();
  EXPECT_EQ(chunker->Append(FloatScalar(2), 1, 0).status().code(),
            absl::StatusCode::kFailedPrecondition);
  chunker->Append(FloatScalar(3), 1, 2).value();
  ASSERT_TRUE(chunker->Flush().ok());
  EXPECT_TRUE(a->GetChunk()->sequence_range().sparse());
  EXPECT_EQ(a->GetChunk()->sequence_range().end(), 2);
}

TEST(ChunkerTest, SpecMismatchNamesColumn) {
  auto chunker = Chunker::Create(3, {2, 2}).value();
  chunker->Append(Int32Row({1, 2}), 1, 0).value();
  absl::Status dtype = chunker->Append(FloatScalar(1), 1, 1).status();
  EXPECT_EQ(dtype.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(dtype.message(), HasSubstr("wrong dtype provided for column 3"));
  EXPECT_THAT(dtype.message(), HasSubstr("Got float but expected int32"));
  absl::Status shape = chunker->Append(Int32Row({1, 2, 3}), 1, 1).status();
  EXPECT_THAT(shape.message(), HasSubstr("incompatible shape provided for column 3"));
  EXPECT_TRUE(chunker->CheckSpec(Int32Row({5, 6})).ok());
  EXPECT_EQ(chunker->num_buffered(), 1);
}

TEST(ChunkerTest, ApplyConfigNeedsEmptyBuffer) {
  auto chunker = Chunker::Create(0, {2, 2}).value();
  chunker->Append(FloatScalar(1), 1, 0).value();
  absl::Status s = chunker->ApplyConfig({5, 5});
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), "Flush must be called before ApplyConfig.");
  ASSERT_TRUE(chunker->Flush().ok());
  ASSERT_TRUE(chunker->ApplyConfig({5, 5}).ok());
  EXPECT_EQ(chunker->chunk_length(), 5);
}

TEST(ChunkerTest, AutoTunedLengthBoundedByKeepAliveAndBytes) {
  auto small = Chunker::Create(0, {8, 0}).value();
  small->Append(FloatScalar(1), 1, 0).value();
  EXPECT_EQ(small->chunk_length(), 8);
  auto large = Chunker::Create(0, {100, 0}).value();
  Tensor frame;
  frame.dtype = ::tf_reverb::tf::DT_UINT8;
  frame.shape = {84, 84, 4};
  frame.data.assign(84 * 84 * 4, 'x');
  large->Append(frame, 1, 0).value();
  EXPECT_EQ(large->chunk_length(), kAutoChunkTargetBytes / (84 * 84 * 4));
}

TEST(ChunkerTest, DeltaEncodingIsApplied) {
  auto chunker = Chunker::Create(0, {2, 2, /*delta_encode=*/true}).value();
  auto a = chunker->Append(Int32Row({10, 13, 16}), 1, 0).value().lock();
  chunker->Append(Int32Row({20, 21, 22}), 1, 1).value();
  auto chunk = a->GetChunk();
  ASSERT_NE(chunk, nullptr);
  EXPECT_TRUE(chunk->delta_encoded());
  Tensor raw = DecompressTensor(chunk->data().tensors(0), /*delta_encoded=*/false, kSnappy).value();
  std::vector<int32_t> values(6);
  std::memcpy(values.data(), raw.data.data(), 24);
  EXPECT_EQ(values, (std::vector<int32_t>{10, 13, 16, 10, 8, 6}));
}

TEST(ChunkerTest, ResetDropsBufferAndRing) {
  auto chunker = Chunker::Create(0, {3, 3}).value();
  std::weak_ptr<CellRef> a = chunker->Append(FloatScalar(1), 1, 0).value();
  chunker->Reset();
  EXPECT_TRUE(a.expired());
  EXPECT_EQ(chunker->num_buffered(), 0);
  EXPECT_TRUE(chunker->KeepAliveChunkKeys().empty());
  // Step 0 again is fine after a reset.
  EXPECT_TRUE(chunker->Append(FloatScalar(1), 1, 0).ok());
}

}  // namespace
}  // namespace tf_reverb
