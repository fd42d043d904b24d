#include "server/table_chunk.h"

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "schema.pb.h"
#include "server/chunk_codec.h"
#include "server/chunk_validation.h"
#include "server/chunk_view.h"
#include "server/tensor.h"
#include "server/testing/tensor_testing.h"
#include "tensor.pb.h"

namespace tf_reverb {
namespace {

using ::tf_reverb::tensor_testing::FromValues;
namespace tfp = ::tf_reverb::tf;

ChunkData FloatChunk(CodecPolicy codec) {
  std::vector<float> values;
  for (int i = 0; i < 4 * 64; ++i) values.push_back(static_cast<float>(i % 7));
  absl::StatusOr<ChunkData> chunk = BuildChunk(
      12345, {FromValues<float>(tfp::DT_FLOAT, {4, 64}, values)}, 99, 3, 6, false, codec);
  EXPECT_TRUE(chunk.ok()) << chunk.status();
  return *chunk;
}

TEST(TableChunkTest, KeepsTheWireEncodingAndTheFieldsTablesRead) {
  for (CodecPolicy codec : {CodecPolicy::kSnappy, CodecPolicy::kZstd}) {
    const ChunkData proto = FloatChunk(codec);
    std::shared_ptr<const TableChunk> chunk = TableChunk::FromProto(proto);
    EXPECT_EQ(chunk->key(), 12345u);
    EXPECT_EQ(chunk->episode_id(), 99u);
    EXPECT_EQ(chunk->compression(), proto.compression());
    EXPECT_EQ(chunk->stored_bytes(),
              static_cast<int64_t>(proto.data().tensors(0).tensor_content().size()));
    EXPECT_EQ(chunk->uncompressed_bytes(), 4 * 64 * 4);
    EXPECT_EQ(chunk->wire(), proto.SerializeAsString());
    EXPECT_EQ(chunk->ToProto().SerializeAsString(), proto.SerializeAsString());
    absl::StatusOr<ChunkView> view = chunk->View();
    ASSERT_TRUE(view.ok()) << view.status();
    absl::StatusOr<Tensor> decoded = DecompressChunkTensor(*view, 0);
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    EXPECT_EQ(decoded->data, DecompressChunkTensor(proto, 0)->data);
  }
}

TEST(TableChunkTest, FromWireValidates) {
  const ChunkData proto = FloatChunk(CodecPolicy::kSnappy);
  absl::StatusOr<std::shared_ptr<const TableChunk>> chunk =
      TableChunk::FromWire(proto.SerializeAsString());
  ASSERT_TRUE(chunk.ok()) << chunk.status();
  EXPECT_EQ((*chunk)->key(), 12345u);
  EXPECT_EQ((*chunk)->wire(), proto.SerializeAsString());

  EXPECT_EQ(TableChunk::FromWire(std::string("\x0a\xff", 2)).status().code(),
            absl::StatusCode::kDataLoss);
  ChunkData empty;
  empty.set_chunk_key(1);
  EXPECT_EQ(TableChunk::FromWire(empty.SerializeAsString()).status().code(),
            absl::StatusCode::kInvalidArgument);
  ChunkData corrupt = proto;
  corrupt.mutable_data()->mutable_tensors(0)->set_tensor_content("not snappy");
  EXPECT_FALSE(TableChunk::FromWire(corrupt.SerializeAsString()).ok());
}

TEST(TableChunkTest, FromWireReadsPlainAndOtherEncodingsAlike) {
  for (CodecPolicy codec : {CodecPolicy::kSnappy, CodecPolicy::kZstd}) {
    const ChunkData proto = FloatChunk(codec);
    // Not plain (a dimension name): parsed by protobuf, kept as given.
    ChunkData named = proto;
    named.mutable_data()->mutable_tensors(0)->mutable_tensor_shape()->mutable_dim(0)->set_name("t");
    bool plain = true;
    ASSERT_TRUE(ChunkViewOfWire(named.SerializeAsString(), &plain).ok());
    ASSERT_FALSE(plain);
    for (const ChunkData& stored : {proto, named}) {
      const std::string wire = stored.SerializeAsString();
      absl::StatusOr<std::shared_ptr<const TableChunk>> chunk = TableChunk::FromWire(wire);
      ASSERT_TRUE(chunk.ok()) << chunk.status();
      EXPECT_EQ((*chunk)->wire(), wire);
      EXPECT_EQ((*chunk)->key(), proto.chunk_key());
      EXPECT_EQ((*chunk)->episode_id(), proto.sequence_range().episode_id());
      EXPECT_EQ((*chunk)->compression(), proto.compression());
      EXPECT_EQ((*chunk)->stored_bytes(), TableChunk::FromProto(proto)->stored_bytes());
      EXPECT_EQ((*chunk)->uncompressed_bytes(), proto.data_uncompressed_size());
    }
    // Invalid either way: the status ValidateChunk gives.
    for (ChunkData corrupt : {proto, named}) {
      corrupt.mutable_data()->mutable_tensors(0)->set_tensor_content("not a codec's output");
      EXPECT_EQ(TableChunk::FromWire(corrupt.SerializeAsString()).status(), ValidateChunk(corrupt));
    }
  }
}

TEST(TableChunkTest, FromPlainWireKeepsTheBytesItWasGiven) {
  for (CodecPolicy codec : {CodecPolicy::kSnappy, CodecPolicy::kZstd}) {
    const ChunkData proto = FloatChunk(codec);
    // A plain encoding protobuf would not write itself (data split in two).
    ChunkData second_half;
    *second_half.mutable_data()->add_tensors() = proto.data().tensors(0);
    ChunkData first_half = proto;
    first_half.mutable_data()->clear_tensors();
    const std::string wire = first_half.SerializeAsString() + second_half.SerializeAsString();
    std::string given = wire;
    const char* const bytes = given.data();
    absl::StatusOr<std::shared_ptr<const TableChunk>> chunk =
        TableChunk::FromPlainWire(std::move(given));
    ASSERT_TRUE(chunk.ok()) << chunk.status();
    const std::shared_ptr<const TableChunk> from_proto = TableChunk::FromProto(proto);
    EXPECT_EQ((*chunk)->wire(), wire);
    EXPECT_EQ((*chunk)->wire().data(), bytes);  // kept, not copied
    EXPECT_EQ((*chunk)->key(), from_proto->key());
    EXPECT_EQ((*chunk)->episode_id(), from_proto->episode_id());
    EXPECT_EQ((*chunk)->compression(), from_proto->compression());
    EXPECT_EQ((*chunk)->stored_bytes(), from_proto->stored_bytes());
    EXPECT_EQ((*chunk)->uncompressed_bytes(), from_proto->uncompressed_bytes());
    EXPECT_EQ((*chunk)->ToProto().SerializeAsString(), proto.SerializeAsString());
  }
}

TEST(TableChunkTest, FromPlainWireValidatesAsValidateChunk) {
  ChunkData empty;
  empty.set_chunk_key(1);
  absl::StatusOr<std::shared_ptr<const TableChunk>> chunk =
      TableChunk::FromPlainWire(empty.SerializeAsString());
  EXPECT_EQ(chunk.status(), ValidateChunk(empty));
  EXPECT_EQ(chunk.status().code(), absl::StatusCode::kInvalidArgument);
  ChunkData corrupt = FloatChunk(CodecPolicy::kSnappy);
  corrupt.mutable_data()->mutable_tensors(0)->set_tensor_content("not snappy");
  EXPECT_EQ(TableChunk::FromPlainWire(corrupt.SerializeAsString()).status(),
            ValidateChunk(corrupt));
  EXPECT_FALSE(ValidateChunk(corrupt).ok());
  // Not plain: left to protobuf.
  ChunkData named = FloatChunk(CodecPolicy::kSnappy);
  named.mutable_data()->mutable_tensors(0)->mutable_tensor_shape()->mutable_dim(0)->set_name("t");
  EXPECT_EQ(TableChunk::FromPlainWire(named.SerializeAsString()).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(TableChunk::FromPlainWire(std::string("\x0a\xff", 2)).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace tf_reverb
