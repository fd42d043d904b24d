#include "server/chunk_validation.h"

#include <snappy.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "schema.pb.h"
#include "server/chunk_codec.h"
#include "server/chunk_view.h"
#include "server/tensor.h"
#include "server/testing/tensor_testing.h"
#include "tensor.pb.h"

namespace tf_reverb {
namespace {

using ::deepmind::reverb::ChunkData;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::tf_reverb::tensor_testing::FromValues;
using ::tf_reverb::tensor_testing::StringTensor;
namespace tfp = ::tf_reverb::tf;

// A zstd frame built by hand: magic, a header with an 8-byte
// Frame_Content_Size of `declared` (not single-segment, 1 MiB window), then
// one RLE block of each of `block_sizes` (the byte 'x' repeated).
std::string ZstdFrame(uint64_t declared, const std::vector<uint32_t>& block_sizes) {
  std::string frame("\x28\xb5\x2f\xfd", 4);
  frame.push_back(static_cast<char>(0xC0));     // FCS field of 8 bytes
  frame.push_back(static_cast<char>(10 << 3));  // window 2^(10+10)
  for (int i = 0; i < 8; ++i) frame.push_back(static_cast<char>(declared >> (8 * i)));
  for (size_t b = 0; b < block_sizes.size(); ++b) {
    const uint32_t last = b + 1 == block_sizes.size() ? 1 : 0;
    const uint32_t header = last | (1u << 1) | (block_sizes[b] << 3);  // RLE block
    for (int i = 0; i < 3; ++i) frame.push_back(static_cast<char>(header >> (8 * i)));
    frame.push_back('x');
  }
  return frame;
}

ChunkData OneTensorChunk(uint64_t key, DataType dtype, std::vector<int64_t> shape,
                         std::string content, ChunkCompression compression) {
  ChunkData chunk;
  chunk.set_chunk_key(key);
  chunk.set_compression(compression);
  auto* tensor = chunk.mutable_data()->add_tensors();
  tensor->set_dtype(dtype);
  for (int64_t d : shape) tensor->mutable_tensor_shape()->add_dim()->set_size(d);
  tensor->set_tensor_content(std::move(content));
  return chunk;
}

// Whatever ValidateChunk accepts, the decoder decodes.
void ExpectDecodable(const ChunkData& chunk) {
  for (int i = 0; i < chunk.data().tensors_size(); ++i) {
    EXPECT_TRUE(DecompressChunkTensor(chunk, i).ok()) << "tensor " << i;
  }
}

void ExpectRejected(const ChunkData& chunk, const std::string& what) {
  absl::Status status = ValidateChunk(chunk);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(std::string(status.message()),
              AllOf(HasSubstr(absl::StrCat("Chunk ", chunk.chunk_key())), HasSubstr(what)));
}

TEST(ChunkValidationTest, AcceptsWhatTheWritersBuild) {
  const Tensor ints =
      FromValues<int64_t>(tfp::DT_INT64, {4, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  const Tensor floats = FromValues<float>(tfp::DT_FLOAT, {4}, {0.5f, 1.5f, 2.5f, 3.5f});
  const Tensor strings = StringTensor({4}, {"a", "", "ccc", std::string(300, 'd')});
  const Tensor empty = FromValues<int32_t>(tfp::DT_INT32, {0, 3}, {});
  for (CodecPolicy policy : {CodecPolicy::kSnappy, CodecPolicy::kZstd}) {
    for (bool delta : {false, true}) {
      absl::StatusOr<ChunkData> chunk =
          BuildChunk(7, {ints, floats, strings}, 1, 0, 3, delta, policy);
      ASSERT_TRUE(chunk.ok()) << chunk.status();
      EXPECT_TRUE(ValidateChunk(*chunk).ok()) << ValidateChunk(*chunk);
      ExpectDecodable(*chunk);
      absl::StatusOr<ChunkData> no_rows = BuildChunk(8, {empty}, 1, 0, 0, delta, policy);
      ASSERT_TRUE(no_rows.ok()) << no_rows.status();
      EXPECT_TRUE(ValidateChunk(*no_rows).ok()) << ValidateChunk(*no_rows);
      ExpectDecodable(*no_rows);
    }
  }
}

TEST(ChunkValidationTest, ZstdFrameDeclaringTwoToTheFortyBytesIsRejected) {
  // Shape and frame header agree on 2^40 bytes: accepted once, this made
  // every later sample allocate a terabyte.
  ExpectRejected(OneTensorChunk(11, tfp::DT_UINT8, {int64_t{1} << 40},
                                ZstdFrame(uint64_t{1} << 40, {1000}), kZstd),
                 "more than the limit");
  ExpectRejected(OneTensorChunk(12, tfp::DT_DOUBLE, {int64_t{1} << 59},
                                ZstdFrame(uint64_t{1} << 62, {1000}), kZstd),
                 "more than the limit");
}

TEST(ChunkValidationTest, ZstdFrameWhoseContentDisagreesWithItsHeaderIsRejected) {
  const ChunkData good =
      OneTensorChunk(13, tfp::DT_UINT8, {1000}, ZstdFrame(1000, {600, 400}), kZstd);
  EXPECT_TRUE(ValidateChunk(good).ok()) << ValidateChunk(good);
  ExpectDecodable(good);
  // zstd itself checks the content size at the end of the frame.
  ExpectRejected(OneTensorChunk(14, tfp::DT_UINT8, {1000}, ZstdFrame(1000, {500}), kZstd),
                 "zstd decompression failed");
  ExpectRejected(OneTensorChunk(15, tfp::DT_UINT8, {1000}, ZstdFrame(1000, {1000, 500}), kZstd),
                 "zstd decompression failed");
  ExpectRejected(OneTensorChunk(16, tfp::DT_UINT8, {1000}, ZstdFrame(1000, {1000}) + "junk", kZstd),
                 "4 bytes follow the zstd frame");
  std::string truncated = ZstdFrame(1000, {600, 400});
  truncated.resize(truncated.size() - 5);
  ExpectRejected(OneTensorChunk(17, tfp::DT_UINT8, {1000}, truncated, kZstd), "zstd");
  // The header and the shape disagree.
  ExpectRejected(OneTensorChunk(18, tfp::DT_UINT8, {999}, ZstdFrame(1000, {1000}), kZstd),
                 "expected 999 bytes");
}

TEST(ChunkValidationTest, CorruptSnappyBlocksAreRejected) {
  std::string block;
  const std::string raw(4000, 'y');
  snappy::Compress(raw.data(), raw.size(), &block);
  EXPECT_TRUE(ValidateChunk(OneTensorChunk(20, tfp::DT_UINT8, {4000}, block, kSnappy)).ok());
  ExpectRejected(OneTensorChunk(21, tfp::DT_UINT8, {4001}, block, kSnappy), "expected 4001 bytes");
  std::string cut = block.substr(0, block.size() - 2);
  ExpectRejected(OneTensorChunk(22, tfp::DT_UINT8, {4000}, cut, kSnappy), "Snappy");
  ExpectRejected(OneTensorChunk(23, tfp::DT_UINT8, {4000}, "", kSnappy), "expected 4000");
}

TEST(ChunkValidationTest, ShapesDtypesAndCodecsAreChecked) {
  std::string block;
  snappy::Compress("abcdefgh", 8, &block);
  ExpectRejected(OneTensorChunk(30, tfp::DT_UINT8, {-8}, block, kSnappy), "implausible shape");
  ExpectRejected(OneTensorChunk(31, tfp::DT_UINT8, {}, block, kSnappy),
                 "no leading (time) dimension");
  ExpectRejected(OneTensorChunk(32, tfp::DT_VARIANT, {1}, block, kSnappy), "tensor 0");
  ExpectRejected(OneTensorChunk(33, static_cast<DataType>(999), {8}, block, kSnappy), "tensor 0");
  ExpectRejected(OneTensorChunk(34, tfp::DT_UINT8, {8}, block, static_cast<ChunkCompression>(7)),
                 "Unsupported chunk compression 7");
  std::vector<int64_t> deep(kMaxChunkTensorRank + 1, 1);
  ExpectRejected(OneTensorChunk(35, tfp::DT_UINT8, deep, block, kSnappy), "dimensions");
  ChunkData unknown_rank = OneTensorChunk(37, tfp::DT_UINT8, {8}, block, kSnappy);
  unknown_rank.mutable_data()->mutable_tensors(0)->mutable_tensor_shape()->set_unknown_rank(true);
  ExpectRejected(unknown_rank, "unknown_rank");
  ChunkData none;
  none.set_chunk_key(36);
  ExpectRejected(none, "holds no tensors");
}

TEST(ChunkValidationTest, StringTensorsMustParse) {
  // Lengths 1 and 2, then "a" and "bc".
  const std::string good(
      "\x01\x02"
      "abc",
      5);
  EXPECT_TRUE(ValidateChunk(OneTensorChunk(40, tfp::DT_STRING, {2}, good, kSnappy)).ok());
  ExpectRejected(OneTensorChunk(41, tfp::DT_STRING, {2},
                                std::string("\x01\x05"
                                            "abc",
                                            5),
                                kSnappy),
                 "more than the tensor holds");
  ExpectRejected(OneTensorChunk(42, tfp::DT_STRING, {2}, good + "z", kSnappy), "but 4 follow them");
  ExpectRejected(OneTensorChunk(43, tfp::DT_STRING, {2}, std::string("\x81\x82", 2), kSnappy),
                 "bad length prefix");
  ExpectRejected(OneTensorChunk(44, tfp::DT_STRING, {1000}, good, kSnappy), "cannot fit");
  ExpectRejected(OneTensorChunk(45, tfp::DT_STRING, {int64_t{1} << 40}, good, kSnappy),
                 "more than the limit");
}

}  // namespace
}  // namespace tf_reverb
