#include "server/chunk_codec.h"

#include <snappy.h>
#include <zstd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "schema.pb.h"
#include "server/chunk_view.h"
#include "server/tensor.h"
#include "server/testing/tensor_testing.h"
#include "tensor.pb.h"

namespace tf_reverb {
namespace {

using ::tf_reverb::tensor_testing::FromValues;
using ::tf_reverb::tensor_testing::StringTensor;
using ::tf_reverb::tensor_testing::Values;

namespace tfp = ::tf_reverb::tf;
using ::testing::HasSubstr;

std::string RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::string out(n, '\0');
  for (char& c : out) c = static_cast<char>(gen() & 0xff);
  return out;
}

Tensor NumericTensor(DataType dtype, std::vector<int64_t> shape, uint32_t seed) {
  Tensor t;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.data = RandomBytes(t.num_elements() * DataTypeSize(dtype).value(), seed);
  return t;
}

// Every numeric dtype the core stores.
const std::vector<DataType>& NumericDtypes() {
  static const auto* dtypes = new std::vector<DataType>{
      tfp::DT_FLOAT,  tfp::DT_DOUBLE,     tfp::DT_INT32,    tfp::DT_UINT8,  tfp::DT_INT16,
      tfp::DT_INT8,   tfp::DT_COMPLEX64,  tfp::DT_INT64,    tfp::DT_BOOL,   tfp::DT_QINT8,
      tfp::DT_QUINT8, tfp::DT_QINT32,     tfp::DT_BFLOAT16, tfp::DT_QINT16, tfp::DT_QUINT16,
      tfp::DT_UINT16, tfp::DT_COMPLEX128, tfp::DT_HALF,     tfp::DT_UINT32, tfp::DT_UINT64};
  return *dtypes;
}

const std::vector<DataType>& IntegerDtypes() {
  static const auto* dtypes =
      new std::vector<DataType>{tfp::DT_INT8,  tfp::DT_UINT8,  tfp::DT_INT16, tfp::DT_UINT16,
                                tfp::DT_INT32, tfp::DT_UINT32, tfp::DT_INT64, tfp::DT_UINT64};
  return *dtypes;
}

void ExpectSameTensor(const Tensor& got, const Tensor& want) {
  EXPECT_EQ(got.dtype, want.dtype);
  EXPECT_EQ(got.shape, want.shape);
  EXPECT_EQ(got.data, want.data);
  EXPECT_EQ(got.strings, want.strings);
}

TEST(ChunkCodecTest, RoundTripsEveryNumericDtype) {
  for (DataType dtype : NumericDtypes()) {
    for (bool delta : {false, true}) {
      SCOPED_TRACE(DataTypeName(dtype) + (delta ? " delta" : " plain"));
      Tensor tensor = NumericTensor(dtype, {4, 3, 2}, static_cast<uint32_t>(dtype));
      absl::StatusOr<tfp::TensorProto> proto = CompressTensor(tensor, delta);
      ASSERT_TRUE(proto.ok()) << proto.status();
      EXPECT_EQ(proto->dtype(), dtype);
      EXPECT_EQ(ProtoShape(*proto), tensor.shape);
      absl::StatusOr<Tensor> back = DecompressTensor(*proto, delta, kSnappy);
      ASSERT_TRUE(back.ok()) << back.status();
      ExpectSameTensor(*back, tensor);
    }
  }
}

TEST(ChunkCodecTest, RoundTripsScalarsAndEmptyTensors) {
  for (std::vector<int64_t> shape :
       {std::vector<int64_t>{}, std::vector<int64_t>{0}, std::vector<int64_t>{0, 5},
        std::vector<int64_t>{3, 0}, std::vector<int64_t>{1}}) {
    SCOPED_TRACE(ShapeString(shape));
    Tensor tensor = NumericTensor(tfp::DT_INT64, shape, 7);
    for (bool delta : {false, true}) {
      absl::StatusOr<tfp::TensorProto> proto = CompressTensor(tensor, delta);
      ASSERT_TRUE(proto.ok()) << proto.status();
      absl::StatusOr<Tensor> back = DecompressTensor(*proto, delta, kSnappy);
      ASSERT_TRUE(back.ok()) << back.status();
      ExpectSameTensor(*back, tensor);
    }
  }
}

TEST(ChunkCodecTest, TensorContentIsRawSnappyBlock) {
  Tensor tensor = NumericTensor(tfp::DT_FLOAT, {16, 8}, 3);
  absl::StatusOr<tfp::TensorProto> proto = CompressTensor(tensor, false);
  ASSERT_TRUE(proto.ok()) << proto.status();
  const std::string& content = proto->tensor_content();
  // Not the framing format, whose stream starts with 0xff 0x06 0 0 "sNaPpY".
  EXPECT_FALSE(content.size() >= 10 && content.substr(4, 6) == "sNaPpY");
  std::string raw;
  ASSERT_TRUE(snappy::Uncompress(content.data(), content.size(), &raw));
  EXPECT_EQ(raw, tensor.data);
  // The other direction: a raw block made by plain snappy decodes.
  tfp::TensorProto foreign = *proto;
  std::string compressed;
  snappy::Compress(tensor.data.data(), tensor.data.size(), &compressed);
  foreign.set_tensor_content(compressed);
  absl::StatusOr<Tensor> back = DecompressTensor(foreign, false, kSnappy);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->data, tensor.data);
}

TEST(ChunkCodecTest, CompressibleDataShrinks) {
  Tensor tensor;
  tensor.dtype = tfp::DT_INT32;
  tensor.shape = {1000, 10};
  tensor.data.assign(1000 * 10 * 4, '\0');
  absl::StatusOr<tfp::TensorProto> proto = CompressTensor(tensor, false);
  ASSERT_TRUE(proto.ok()) << proto.status();
  EXPECT_LT(proto->tensor_content().size(), tensor.data.size() / 10);
}

TEST(ChunkCodecTest, StringsUseTensorFlowEncoding) {
  Tensor tensor = StringTensor({3}, {"ab", "", std::string("\x00\xff", 2)});
  absl::StatusOr<tfp::TensorProto> proto = CompressTensor(tensor, false);
  ASSERT_TRUE(proto.ok()) << proto.status();
  EXPECT_EQ(proto->dtype(), tfp::DT_STRING);
  // Varint lengths first, then the bytes; uncompressed.
  EXPECT_EQ(proto->tensor_content(), std::string("\x02\x00\x02"
                                                 "ab\x00\xff",
                                                 7));
  absl::StatusOr<Tensor> back = DecompressTensor(*proto, false, kSnappy);
  ASSERT_TRUE(back.ok()) << back.status();
  ExpectSameTensor(*back, tensor);
}

TEST(ChunkCodecTest, StringRoundTrips) {
  std::string binary;
  for (int i = 0; i < 256; ++i) binary.push_back(static_cast<char>(i));
  const std::string long_string = RandomBytes(70000, 11);  // 3-byte varint
  for (bool delta : {false, true}) {
    Tensor tensor =
        StringTensor({3, 2}, {"", "hello", binary, long_string, std::string(200, 'x'), ""});
    absl::StatusOr<tfp::TensorProto> proto = CompressTensor(tensor, delta);
    ASSERT_TRUE(proto.ok()) << proto.status();
    absl::StatusOr<Tensor> back = DecompressTensor(*proto, delta, kSnappy);
    ASSERT_TRUE(back.ok()) << back.status();
    ExpectSameTensor(*back, tensor);
  }
  // All-empty and zero-element string tensors.
  for (Tensor tensor :
       {StringTensor({2}, {"", ""}), StringTensor({0}, {}), StringTensor({}, {"scalar"})}) {
    absl::StatusOr<tfp::TensorProto> proto = CompressTensor(tensor, false);
    ASSERT_TRUE(proto.ok()) << proto.status();
    absl::StatusOr<Tensor> back = DecompressTensor(*proto, false, kSnappy);
    ASSERT_TRUE(back.ok()) << back.status();
    ExpectSameTensor(*back, tensor);
  }
}

TEST(ChunkCodecTest, DecodesStringValLayout) {
  tfp::TensorProto proto;
  proto.set_dtype(tfp::DT_STRING);
  proto.mutable_tensor_shape()->add_dim()->set_size(2);
  proto.add_string_val("a");
  proto.add_string_val(std::string("\0b", 2));
  absl::StatusOr<Tensor> back = DecompressTensor(proto, false, kSnappy);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_THAT(back->strings, ::testing::ElementsAre("a", std::string("\0b", 2)));

  proto.add_string_val("extra");
  EXPECT_EQ(DecompressTensor(proto, false, kSnappy).status().code(), absl::StatusCode::kDataLoss);
}

TEST(ChunkCodecTest, DeltaEncodingSpecExample) {
  Tensor tensor = FromValues<int32_t>(tfp::DT_INT32, {2, 3}, {10, 13, 16, 20, 21, 22});
  absl::StatusOr<tfp::TensorProto> proto = CompressTensor(tensor, true);
  ASSERT_TRUE(proto.ok()) << proto.status();
  absl::StatusOr<Tensor> stored = DecompressTensor(*proto, /*delta_encoded=*/false, kSnappy);
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_THAT(Values<int32_t>(*stored), ::testing::ElementsAre(10, 13, 16, 10, 8, 6));
  absl::StatusOr<Tensor> decoded = DecompressTensor(*proto, /*delta_encoded=*/true, kSnappy);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_THAT(Values<int32_t>(*decoded), ::testing::ElementsAre(10, 13, 16, 20, 21, 22));
}

TEST(ChunkCodecTest, DeltaEncodingWrapsAroundInUnsignedArithmetic) {
  Tensor tensor = FromValues<int8_t>(tfp::DT_INT8, {3, 2}, {127, -128, -128, 127, 0, 0});
  absl::StatusOr<tfp::TensorProto> proto = CompressTensor(tensor, true);
  ASSERT_TRUE(proto.ok()) << proto.status();
  absl::StatusOr<Tensor> stored = DecompressTensor(*proto, false, kSnappy);
  ASSERT_TRUE(stored.ok()) << stored.status();
  // -128 - 127 = 1 (mod 256), 127 - (-128) = -1 (mod 256), ...
  EXPECT_THAT(Values<int8_t>(*stored), ::testing::ElementsAre(127, -128, 1, -1, -128, -127));
  absl::StatusOr<Tensor> decoded = DecompressTensor(*proto, true, kSnappy);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  ExpectSameTensor(*decoded, tensor);

  Tensor big = FromValues<uint64_t>(tfp::DT_UINT64, {2, 1}, {~0ull, 1});
  proto = CompressTensor(big, true);
  ASSERT_TRUE(proto.ok()) << proto.status();
  stored = DecompressTensor(*proto, false, kSnappy);
  ASSERT_TRUE(stored.ok());
  EXPECT_THAT(Values<uint64_t>(*stored), ::testing::ElementsAre(~0ull, 2ull));
  decoded = DecompressTensor(*proto, true, kSnappy);
  ASSERT_TRUE(decoded.ok());
  ExpectSameTensor(*decoded, big);
}

TEST(ChunkCodecTest, DeltaEncodingRoundTripsEveryIntegerDtype) {
  for (DataType dtype : IntegerDtypes()) {
    SCOPED_TRACE(DataTypeName(dtype));
    Tensor tensor = NumericTensor(dtype, {7, 2, 3}, 100 + dtype);
    absl::StatusOr<tfp::TensorProto> delta = CompressTensor(tensor, true);
    absl::StatusOr<tfp::TensorProto> plain = CompressTensor(tensor, false);
    ASSERT_TRUE(delta.ok() && plain.ok());
    // Encoding really changed the stored bytes...
    EXPECT_NE(delta->tensor_content(), plain->tensor_content());
    // ...and is undone exactly.
    absl::StatusOr<Tensor> back = DecompressTensor(*delta, true, kSnappy);
    ASSERT_TRUE(back.ok()) << back.status();
    ExpectSameTensor(*back, tensor);
  }
}

TEST(ChunkCodecTest, DeltaEncodingLeavesOtherTensorsUntouched) {
  // Floats of rank 2, and integers of rank 1 (per-step scalars).
  for (Tensor tensor :
       {NumericTensor(tfp::DT_FLOAT, {4, 3}, 1), NumericTensor(tfp::DT_DOUBLE, {4, 3}, 2),
        NumericTensor(tfp::DT_INT32, {6}, 3), NumericTensor(tfp::DT_BOOL, {2, 2}, 4)}) {
    SCOPED_TRACE(DataTypeName(tensor.dtype) + ShapeString(tensor.shape));
    absl::StatusOr<tfp::TensorProto> delta = CompressTensor(tensor, true);
    absl::StatusOr<tfp::TensorProto> plain = CompressTensor(tensor, false);
    ASSERT_TRUE(delta.ok() && plain.ok());
    EXPECT_EQ(delta->tensor_content(), plain->tensor_content());
    for (bool flag : {false, true}) {
      absl::StatusOr<Tensor> back = DecompressTensor(*delta, flag, kSnappy);
      ASSERT_TRUE(back.ok()) << back.status();
      ExpectSameTensor(*back, tensor);
    }
  }
}

TEST(ChunkCodecTest, DecompressRowsIntoMiddleSlice) {
  std::vector<int32_t> values(5 * 3);
  for (int i = 0; i < 15; ++i) values[i] = i * i - 7;
  Tensor tensor = FromValues<int32_t>(tfp::DT_INT32, {5, 3}, values);
  for (bool delta : {false, true}) {
    SCOPED_TRACE(delta ? "delta" : "plain");
    absl::StatusOr<tfp::TensorProto> proto = CompressTensor(tensor, delta);
    ASSERT_TRUE(proto.ok());
    std::vector<int32_t> dst(3 * 3, -1);
    ASSERT_TRUE(
        DecompressRowsInto(*proto, delta, kSnappy, 1, 3, reinterpret_cast<char*>(dst.data())).ok());
    EXPECT_EQ(dst, std::vector<int32_t>(values.begin() + 3, values.begin() + 12));
    // Last row only; the guard word after it is untouched.
    std::vector<int32_t> last(4, 12345);
    ASSERT_TRUE(
        DecompressRowsInto(*proto, delta, kSnappy, 4, 1, reinterpret_cast<char*>(last.data()))
            .ok());
    EXPECT_EQ(last, std::vector<int32_t>({values[12], values[13], values[14], 12345}));
    // The whole tensor.
    std::vector<int32_t> all(15);
    ASSERT_TRUE(
        DecompressRowsInto(*proto, delta, kSnappy, 0, 5, reinterpret_cast<char*>(all.data())).ok());
    EXPECT_EQ(all, values);
    // Empty slice writes nothing.
    int32_t guard = 99;
    ASSERT_TRUE(
        DecompressRowsInto(*proto, delta, kSnappy, 5, 0, reinterpret_cast<char*>(&guard)).ok());
    EXPECT_EQ(guard, 99);
  }
}

TEST(ChunkCodecTest, OutOfRangeSliceIsAnError) {
  Tensor tensor = NumericTensor(tfp::DT_FLOAT, {4, 2}, 5);
  absl::StatusOr<tfp::TensorProto> proto = CompressTensor(tensor, false);
  ASSERT_TRUE(proto.ok());
  std::vector<char> dst(1 << 10);
  for (auto [offset, length] : std::vector<std::pair<int64_t, int64_t>>{
           {3, 2}, {4, 1}, {-1, 2}, {0, -1}, {0, 5}, {100, 1}}) {
    SCOPED_TRACE(absl::StrCat(offset, "+", length));
    absl::Status s = DecompressRowsInto(*proto, false, kSnappy, offset, length, dst.data());
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr("out of range"));
  }
}

TEST(ChunkCodecTest, CorruptPayloadIsDataLoss) {
  Tensor tensor = NumericTensor(tfp::DT_FLOAT, {8, 4}, 9);
  absl::StatusOr<tfp::TensorProto> good = CompressTensor(tensor, false);
  ASSERT_TRUE(good.ok());
  std::vector<char> dst(8 * 4 * 4);

  std::vector<tfp::TensorProto> corrupt;
  tfp::TensorProto garbage = *good;
  garbage.set_tensor_content(RandomBytes(64, 1));
  corrupt.push_back(garbage);
  tfp::TensorProto truncated = *good;
  truncated.set_tensor_content(good->tensor_content().substr(0, good->tensor_content().size() / 2));
  corrupt.push_back(truncated);
  tfp::TensorProto empty = *good;
  empty.clear_tensor_content();
  corrupt.push_back(empty);
  // A valid Snappy block of the wrong size for the declared shape.
  tfp::TensorProto wrong_shape = *good;
  wrong_shape.mutable_tensor_shape()->mutable_dim(0)->set_size(9);
  corrupt.push_back(wrong_shape);
  tfp::TensorProto smaller_shape = *good;
  smaller_shape.mutable_tensor_shape()->mutable_dim(0)->set_size(7);
  corrupt.push_back(smaller_shape);
  // Valid length header but corrupted body.
  tfp::TensorProto flipped = *good;
  std::string body = good->tensor_content();
  for (size_t i = 2; i < body.size(); ++i) body[i] = static_cast<char>(~body[i]);
  flipped.set_tensor_content(body);
  corrupt.push_back(flipped);

  for (size_t i = 0; i < corrupt.size(); ++i) {
    SCOPED_TRACE(i);
    absl::StatusOr<Tensor> whole = DecompressTensor(corrupt[i], false, kSnappy);
    EXPECT_EQ(whole.status().code(), absl::StatusCode::kDataLoss) << whole.status();
    absl::Status rows = DecompressRowsInto(corrupt[i], false, kSnappy, 0, 1, dst.data());
    EXPECT_EQ(rows.code(), absl::StatusCode::kDataLoss) << rows;
  }
}

TEST(ChunkCodecTest, ImplausibleShapesAreErrorsNotCrashes) {
  // A corrupt or hostile proto claiming an enormous (or negative) shape must
  // not make the decoder allocate it.
  Tensor tensor = NumericTensor(tfp::DT_FLOAT, {2, 2}, 9);
  absl::StatusOr<tfp::TensorProto> good = CompressTensor(tensor, false);
  ASSERT_TRUE(good.ok());
  for (std::vector<int64_t> dims :
       {std::vector<int64_t>{int64_t{1} << 40, 2}, std::vector<int64_t>{-2, 2},
        std::vector<int64_t>{int64_t{1} << 62, int64_t{1} << 62}}) {
    SCOPED_TRACE(ShapeString(dims));
    tfp::TensorProto proto = *good;
    proto.mutable_tensor_shape()->clear_dim();
    for (int64_t d : dims) proto.mutable_tensor_shape()->add_dim()->set_size(d);
    absl::StatusOr<Tensor> whole = DecompressTensor(proto, false, kSnappy);
    EXPECT_FALSE(whole.ok());
    EXPECT_THAT(whole.status().code(),
                ::testing::AnyOf(absl::StatusCode::kDataLoss, absl::StatusCode::kInvalidArgument));

    tfp::TensorProto strings;
    strings.set_dtype(tfp::DT_STRING);
    *strings.mutable_tensor_shape() = proto.tensor_shape();
    strings.set_tensor_content(std::string("\x01\x01xy", 4));
    absl::StatusOr<Tensor> s = DecompressTensor(strings, false, kSnappy);
    EXPECT_FALSE(s.ok());
    EXPECT_THAT(s.status().code(),
                ::testing::AnyOf(absl::StatusCode::kDataLoss, absl::StatusCode::kInvalidArgument));
  }
}

// Found by //server/fuzz:chunk_codec_fuzzer: a header may declare up to
// 2 GiB whatever the payload's size, and the shape can agree with it, so a
// ~20-byte tensor made DecompressTensor (and DecompressRowsInto's scratch)
// allocate and zero 2 GiB before the decoder noticed. A size the payload
// cannot decode to is refused before any allocation.
TEST(ChunkCodecTest, SizesThePayloadCannotHoldAreRefusedBeforeAllocating) {
  const int64_t claimed = (int64_t{1} << 31) - 1;
  auto varint = [](uint64_t v) {
    std::string out;
    for (; v >= 0x80; v >>= 7) out.push_back(static_cast<char>(v | 0x80));
    out.push_back(static_cast<char>(v));
    return out;
  };
  tfp::TensorProto snappy_bomb;
  snappy_bomb.set_dtype(tfp::DT_UINT8);
  snappy_bomb.mutable_tensor_shape()->add_dim()->set_size(claimed);
  snappy_bomb.set_tensor_content(varint(claimed) + std::string("\x00\x01\x02", 3));

  // A zstd frame header declaring `claimed` bytes (single segment, 8-byte
  // content size), then one last RLE block of 16 bytes.
  std::string frame("\x28\xb5\x2f\xfd\xe0", 5);
  for (int i = 0; i < 8; ++i) frame.push_back(static_cast<char>(claimed >> (8 * i)));
  const uint32_t block = 1 | (1 << 1) | (16 << 3);
  for (int i = 0; i < 3; ++i) frame.push_back(static_cast<char>(block >> (8 * i)));
  frame.push_back('\x07');
  tfp::TensorProto zstd_bomb = snappy_bomb;
  zstd_bomb.set_tensor_content(frame);

  for (const auto& [proto, codec] :
       {std::pair{snappy_bomb, kSnappy}, std::pair{zstd_bomb, kZstd}}) {
    SCOPED_TRACE(codec == kSnappy ? "snappy" : "zstd");
    absl::StatusOr<Tensor> whole = DecompressTensor(proto, false, codec);
    EXPECT_EQ(whole.status().code(), absl::StatusCode::kDataLoss);
    EXPECT_THAT(whole.status().message(), HasSubstr("cannot decode to"));
    char row = 0;
    absl::Status slice = DecompressRowsInto(proto, false, codec, 0, 1, &row);
    EXPECT_EQ(slice.code(), absl::StatusCode::kDataLoss);
    EXPECT_THAT(slice.message(), HasSubstr("cannot decode to"));
    EXPECT_FALSE(ValidateTensor(TensorViewOf(proto), codec).ok());
  }
}

TEST(ChunkCodecTest, HighlyCompressibleTensorsStillDecode) {
  // Zeros are the densest real data: the size bound must leave them alone.
  Tensor zeros;
  zeros.dtype = tfp::DT_UINT8;
  zeros.shape = {1 << 20};
  zeros.data.assign(1 << 20, '\0');
  for (ChunkCompression codec : {kSnappy, kZstd}) {
    for (int level : {1, 3, 19}) {
      absl::StatusOr<tfp::TensorProto> proto = CompressTensor(zeros, false, codec, level);
      ASSERT_TRUE(proto.ok()) << proto.status();
      absl::StatusOr<Tensor> back = DecompressTensor(*proto, false, codec);
      ASSERT_TRUE(back.ok()) << back.status() << " level " << level;
      EXPECT_EQ(back->data, zeros.data);
    }
  }
}

TEST(ChunkCodecTest, CorruptStringsAreDataLoss) {
  tfp::TensorProto proto;
  proto.set_dtype(tfp::DT_STRING);
  proto.mutable_tensor_shape()->add_dim()->set_size(2);
  // Length prefix claims 10 bytes but only 3 follow.
  proto.set_tensor_content(
      std::string("\x0a\x00"
                  "abc",
                  5));
  EXPECT_EQ(DecompressTensor(proto, false, kSnappy).status().code(), absl::StatusCode::kDataLoss);
  // Unterminated varint.
  proto.set_tensor_content(std::string("\x80\x80", 2));
  EXPECT_EQ(DecompressTensor(proto, false, kSnappy).status().code(), absl::StatusCode::kDataLoss);
  // A length near 2^64 must not overflow the bounds check.
  proto.set_tensor_content(std::string("\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01\x00", 11));
  EXPECT_EQ(DecompressTensor(proto, false, kSnappy).status().code(), absl::StatusCode::kDataLoss);
  // Missing everything.
  proto.clear_tensor_content();
  EXPECT_EQ(DecompressTensor(proto, false, kSnappy).status().code(), absl::StatusCode::kDataLoss);
}

TEST(ChunkCodecTest, UnsupportedDtypesAreInvalidArgument) {
  for (DataType dtype : {tfp::DT_RESOURCE, tfp::DT_VARIANT, tfp::DT_INVALID}) {
    SCOPED_TRACE(DataTypeName(dtype));
    Tensor tensor;
    tensor.dtype = dtype;
    tensor.shape = {2};
    tensor.data = std::string(16, 'x');
    EXPECT_EQ(CompressTensor(tensor, false).status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(BuildChunk(1, {tensor}, 2, 0, 1, false).status().code(),
              absl::StatusCode::kInvalidArgument);

    tfp::TensorProto proto;
    proto.set_dtype(dtype);
    proto.mutable_tensor_shape()->add_dim()->set_size(2);
    std::string compressed;
    snappy::Compress(tensor.data.data(), tensor.data.size(), &compressed);
    proto.set_tensor_content(compressed);
    EXPECT_EQ(DecompressTensor(proto, false, kSnappy).status().code(),
              absl::StatusCode::kInvalidArgument);
    char dst[16];
    EXPECT_EQ(DecompressRowsInto(proto, false, kSnappy, 0, 1, dst).code(),
              absl::StatusCode::kInvalidArgument);
  }
}

TEST(ChunkCodecTest, DecompressRowsIntoRejectsStrings) {
  absl::StatusOr<tfp::TensorProto> proto = CompressTensor(StringTensor({2}, {"a", "b"}), false);
  ASSERT_TRUE(proto.ok());
  char dst[16];
  EXPECT_EQ(DecompressRowsInto(*proto, false, kSnappy, 0, 1, dst).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ChunkCodecTest, MismatchedPayloadIsInvalidArgument) {
  Tensor tensor;
  tensor.dtype = tfp::DT_INT32;
  tensor.shape = {2, 2};
  tensor.data = std::string(15, '\0');
  EXPECT_EQ(CompressTensor(tensor, false).status().code(), absl::StatusCode::kInvalidArgument);
  Tensor strings = StringTensor({3}, {"a"});
  EXPECT_EQ(CompressTensor(strings, false).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ChunkCodecTest, BuildChunkFillsMetadata) {
  Tensor ints = FromValues<int64_t>(tfp::DT_INT64, {3, 2}, {1, 2, 3, 4, 5, 6});
  Tensor floats = NumericTensor(tfp::DT_FLOAT, {3}, 8);
  Tensor strings = StringTensor({3}, {"x", "yy", ""});
  absl::StatusOr<deepmind::reverb::ChunkData> chunk =
      BuildChunk(42, {ints, floats, strings}, 77, 5, 7, true);
  ASSERT_TRUE(chunk.ok()) << chunk.status();
  EXPECT_EQ(chunk->chunk_key(), 42u);
  EXPECT_EQ(chunk->sequence_range().episode_id(), 77u);
  EXPECT_EQ(chunk->sequence_range().start(), 5);
  EXPECT_EQ(chunk->sequence_range().end(), 7);
  EXPECT_FALSE(chunk->sequence_range().sparse());
  EXPECT_TRUE(chunk->delta_encoded());
  EXPECT_EQ(chunk->data_tensors_len(), 3);
  ASSERT_EQ(chunk->data().tensors_size(), 3);
  EXPECT_EQ(chunk->data_uncompressed_size(), 6 * 8 + 3 * 4 + 3);
  // Tensor i is column i, delta-encoded when requested.
  absl::StatusOr<Tensor> stored = DecompressTensor(chunk->data().tensors(0), false, kSnappy);
  ASSERT_TRUE(stored.ok());
  EXPECT_THAT(Values<int64_t>(*stored), ::testing::ElementsAre(1, 2, 2, 2, 2, 2));
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<Tensor> back =
        DecompressTensor(chunk->data().tensors(i), chunk->delta_encoded(), kSnappy);
    ASSERT_TRUE(back.ok()) << back.status();
    ExpectSameTensor(*back, i == 0 ? ints : i == 1 ? floats : strings);
  }
  // Survives serialisation (the `data` field is lazy).
  deepmind::reverb::ChunkData parsed;
  ASSERT_TRUE(parsed.ParseFromString(chunk->SerializeAsString()));
  absl::StatusOr<Tensor> back = DecompressTensor(parsed.data().tensors(0), true, kSnappy);
  ASSERT_TRUE(back.ok());
  ExpectSameTensor(*back, ints);
}

// --- zstd (our extension) ---------------------------------------------------

// Compressible content: a smooth ramp with repeated rows.
Tensor FrameLikeTensor(std::vector<int64_t> shape) {
  Tensor t;
  t.dtype = tfp::DT_UINT8;
  t.shape = std::move(shape);
  t.data.resize(t.num_elements());
  const int64_t row = t.num_rows() == 0 ? 0 : t.num_elements() / t.num_rows();
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    t.data[i] = static_cast<char>((i % row) / 97 + (i / row) / 3);
  }
  return t;
}

TEST(ChunkCodecZstdTest, RoundTripsEveryNumericDtype) {
  for (DataType dtype : NumericDtypes()) {
    for (bool delta : {false, true}) {
      SCOPED_TRACE(DataTypeName(dtype) + (delta ? " delta" : " plain"));
      Tensor tensor = NumericTensor(dtype, {4, 3, 2}, static_cast<uint32_t>(dtype));
      absl::StatusOr<tfp::TensorProto> proto = CompressTensor(tensor, delta, kZstd);
      ASSERT_TRUE(proto.ok()) << proto.status();
      absl::StatusOr<Tensor> back = DecompressTensor(*proto, delta, kZstd);
      ASSERT_TRUE(back.ok()) << back.status();
      ExpectSameTensor(*back, tensor);
      // The codec is not guessed: Snappy cannot read a zstd payload.
      EXPECT_EQ(DecompressTensor(*proto, delta, kSnappy).status().code(),
                absl::StatusCode::kDataLoss);
    }
  }
}

TEST(ChunkCodecZstdTest, RoundTripsScalarsAndEmptyTensors) {
  for (std::vector<int64_t> shape :
       {std::vector<int64_t>{}, std::vector<int64_t>{0}, std::vector<int64_t>{0, 5},
        std::vector<int64_t>{3, 0}, std::vector<int64_t>{1}}) {
    SCOPED_TRACE(ShapeString(shape));
    Tensor tensor = NumericTensor(tfp::DT_INT64, shape, 7);
    absl::StatusOr<tfp::TensorProto> proto = CompressTensor(tensor, false, kZstd);
    ASSERT_TRUE(proto.ok()) << proto.status();
    absl::StatusOr<Tensor> back = DecompressTensor(*proto, false, kZstd);
    ASSERT_TRUE(back.ok()) << back.status();
    ExpectSameTensor(*back, tensor);
  }
}

TEST(ChunkCodecZstdTest, TensorContentIsOneFrameWithContentSize) {
  Tensor tensor = FrameLikeTensor({8, 1000});
  for (int level : {1, 3, 9}) {
    absl::StatusOr<tfp::TensorProto> proto = CompressTensor(tensor, false, kZstd, level);
    ASSERT_TRUE(proto.ok());
    const std::string& content = proto->tensor_content();
    EXPECT_EQ(ZSTD_getFrameContentSize(content.data(), content.size()), tensor.data.size());
    std::string raw(tensor.data.size(), '\0');
    EXPECT_EQ(ZSTD_decompress(raw.data(), raw.size(), content.data(), content.size()), raw.size());
    EXPECT_EQ(raw, tensor.data);
    EXPECT_LT(content.size(), tensor.data.size() / 4);
  }
}

TEST(ChunkCodecZstdTest, StringsAreStoredAsWithSnappy) {
  Tensor tensor = StringTensor({2}, {"ab", "c"});
  absl::StatusOr<tfp::TensorProto> zstd = CompressTensor(tensor, false, kZstd);
  absl::StatusOr<tfp::TensorProto> snappy = CompressTensor(tensor, false, kSnappy);
  ASSERT_TRUE(zstd.ok() && snappy.ok());
  EXPECT_EQ(zstd->tensor_content(), snappy->tensor_content());
  absl::StatusOr<Tensor> back = DecompressTensor(*zstd, false, kZstd);
  ASSERT_TRUE(back.ok());
  ExpectSameTensor(*back, tensor);
}

// Every slice of tensors spanning several zstd blocks and the 64 KiB discard
// buffer decodes to the same bytes as the whole tensor, for both codecs.
TEST(ChunkCodecZstdTest, EverySliceMatchesTheWholeTensor) {
  for (DataType dtype : {tfp::DT_UINT8, tfp::DT_INT32}) {
    Tensor tensor = FrameLikeTensor({12, 84, 84, 4});
    if (dtype == tfp::DT_INT32) tensor = NumericTensor(tfp::DT_INT32, {12, 7000}, 3);
    const int64_t rows = tensor.num_rows();
    const int64_t row_bytes = tensor.data.size() / rows;
    for (ChunkCompression codec : {kSnappy, kZstd}) {
      for (bool delta : {false, true}) {
        SCOPED_TRACE(absl::StrCat(DataTypeName(dtype), " codec ", codec, " delta ", delta));
        absl::StatusOr<tfp::TensorProto> proto = CompressTensor(tensor, delta, codec);
        ASSERT_TRUE(proto.ok());
        for (int64_t offset = 0; offset <= rows; ++offset) {
          for (int64_t length : {int64_t{0}, int64_t{1}, int64_t{3}, rows - offset}) {
            if (offset + length > rows) continue;
            std::string dst(length * row_bytes + 1, '\x5a');
            ASSERT_TRUE(DecompressRowsInto(*proto, delta, codec, offset, length, dst.data()).ok());
            EXPECT_EQ(dst.substr(0, length * row_bytes),
                      tensor.data.substr(offset * row_bytes, length * row_bytes))
                << offset << "+" << length;
            EXPECT_EQ(dst.back(), '\x5a');  // nothing written past the slice
          }
        }
      }
    }
  }
}

TEST(ChunkCodecZstdTest, CorruptPayloadIsDataLoss) {
  Tensor tensor = FrameLikeTensor({8, 20000});
  absl::StatusOr<tfp::TensorProto> good = CompressTensor(tensor, false, kZstd);
  ASSERT_TRUE(good.ok());
  const std::string& content = good->tensor_content();
  std::vector<std::string> bad = {
      RandomBytes(64, 1),                     // not a frame
      content.substr(0, content.size() / 2),  // truncated
      content.substr(0, 8),                   // header only
      "",                                     // empty
  };
  // A frame declaring another size.
  Tensor other = FrameLikeTensor({8, 20001});
  bad.push_back(CompressTensor(other, false, kZstd)->tensor_content());
  // Flipped bytes in the middle of the compressed data.
  std::string flipped = content;
  for (size_t i = 20; i < flipped.size(); i += 7) flipped[i] = static_cast<char>(~flipped[i]);
  bad.push_back(flipped);
  std::string dst(tensor.data.size(), '\0');
  for (size_t i = 0; i < bad.size(); ++i) {
    SCOPED_TRACE(i);
    tfp::TensorProto proto = *good;
    proto.set_tensor_content(bad[i]);
    absl::StatusOr<Tensor> whole = DecompressTensor(proto, false, kZstd);
    absl::Status rows = DecompressRowsInto(proto, false, kZstd, 2, 3, dst.data());
    // Frames carry no checksum (as Snappy blocks): flipped entropy-coded
    // bytes may decode to wrong data; the point is that nothing crashes.
    if (i != bad.size() - 1) {
      EXPECT_EQ(whole.status().code(), absl::StatusCode::kDataLoss) << whole.status();
      EXPECT_EQ(rows.code(), absl::StatusCode::kDataLoss) << rows;
    }
  }
}

TEST(ChunkCodecZstdTest, UnknownCompressionIsInvalidArgument) {
  Tensor tensor = NumericTensor(tfp::DT_FLOAT, {2, 2}, 1);
  const auto unknown = static_cast<ChunkCompression>(7);
  EXPECT_EQ(CompressTensor(tensor, false, unknown).status().code(),
            absl::StatusCode::kInvalidArgument);
  absl::StatusOr<tfp::TensorProto> proto = CompressTensor(tensor, false);
  ASSERT_TRUE(proto.ok());
  EXPECT_EQ(DecompressTensor(*proto, false, unknown).status().code(),
            absl::StatusCode::kInvalidArgument);
  char dst[16];
  EXPECT_EQ(DecompressRowsInto(*proto, false, unknown, 0, 1, dst).code(),
            absl::StatusCode::kInvalidArgument);
  deepmind::reverb::ChunkData chunk = BuildChunk(1, {tensor}, 1, 0, 1, false).value();
  chunk.set_compression(unknown);
  EXPECT_EQ(DecompressChunkTensor(chunk, 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(TranscodeChunk(&chunk, kSnappy).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckCompression(7).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(CheckCompression(kZstd).ok());
}

TEST(ChunkCodecZstdTest, BuildChunkPolicies) {
  Tensor frames = FrameLikeTensor({10, 84, 84});
  Tensor noise = NumericTensor(tfp::DT_FLOAT, {10, 4096}, 5);
  Tensor small = FrameLikeTensor({10, 100});
  Tensor strings = StringTensor({10}, std::vector<std::string>(10, "s"));
  struct Case {
    std::vector<Tensor> columns;
    CodecPolicy policy;
    ChunkCompression want;
  };
  const std::vector<Case> cases = {
      {{frames}, CodecPolicy::kSnappy, kSnappy},
      {{small}, CodecPolicy::kZstd, kZstd},
      {{noise}, CodecPolicy::kZstd, kZstd},
      {{frames}, CodecPolicy::kAuto, kZstd},           // compressible and big
      {{frames, strings}, CodecPolicy::kAuto, kZstd},  // strings do not count
      {{noise}, CodecPolicy::kAuto, kSnappy},          // incompressible
      {{small}, CodecPolicy::kAuto, kSnappy},          // too small to pay
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(i);
    for (bool delta : {false, true}) {
      absl::StatusOr<deepmind::reverb::ChunkData> chunk =
          BuildChunk(9, cases[i].columns, 3, 0, 9, delta, cases[i].policy);
      ASSERT_TRUE(chunk.ok()) << chunk.status();
      EXPECT_EQ(chunk->compression(), cases[i].want);
      EXPECT_EQ(chunk->delta_encoded(), delta);
      for (size_t c = 0; c < cases[i].columns.size(); ++c) {
        absl::StatusOr<Tensor> back = DecompressChunkTensor(*chunk, static_cast<int>(c));
        ASSERT_TRUE(back.ok()) << back.status();
        ExpectSameTensor(*back, cases[i].columns[c]);
      }
      // The marker survives serialisation.
      deepmind::reverb::ChunkData parsed;
      ASSERT_TRUE(parsed.ParseFromString(chunk->SerializeAsString()));
      EXPECT_EQ(parsed.compression(), cases[i].want);
    }
  }
  EXPECT_EQ(
      DecompressChunkTensor(BuildChunk(1, {small}, 1, 0, 9, false).value(), 1).status().code(),
      absl::StatusCode::kInvalidArgument);
}

TEST(ChunkCodecZstdTest, SnappyChunksSerializeAsReverbDoes) {
  // compression = SNAPPY is the proto3 default: not on the wire at all.
  Tensor tensor = FrameLikeTensor({4, 100});
  deepmind::reverb::ChunkData chunk = BuildChunk(1, {tensor}, 1, 0, 3, false).value();
  const std::string bytes = chunk.SerializeAsString();
  chunk.clear_compression();
  EXPECT_EQ(chunk.SerializeAsString(), bytes);
}

TEST(ChunkCodecZstdTest, TranscodeKeepsDeltaAndStrings) {
  Tensor ints = NumericTensor(tfp::DT_INT32, {6, 5000}, 2);
  Tensor strings = StringTensor({6}, {"a", "bb", "", "ccc", "d", "e"});
  for (bool delta : {false, true}) {
    deepmind::reverb::ChunkData chunk =
        BuildChunk(5, {ints, strings}, 1, 0, 5, delta, CodecPolicy::kZstd).value();
    const deepmind::reverb::ChunkData original = chunk;
    ASSERT_TRUE(TranscodeChunk(&chunk, kZstd).ok());  // no-op
    EXPECT_EQ(chunk.SerializeAsString(), original.SerializeAsString());
    ASSERT_TRUE(TranscodeChunk(&chunk, kSnappy).ok());
    EXPECT_EQ(chunk.compression(), kSnappy);
    EXPECT_EQ(chunk.delta_encoded(), delta);
    EXPECT_EQ(chunk.data().tensors(1).tensor_content(),
              original.data().tensors(1).tensor_content());
    // Exactly what a Snappy writer would have produced.
    EXPECT_EQ(chunk.SerializeAsString(),
              BuildChunk(5, {ints, strings}, 1, 0, 5, delta).value().SerializeAsString());
    ASSERT_TRUE(TranscodeChunk(&chunk, kZstd).ok());
    for (int c = 0; c < 2; ++c) {
      absl::StatusOr<Tensor> back = DecompressChunkTensor(chunk, c);
      ASSERT_TRUE(back.ok());
      ExpectSameTensor(*back, c == 0 ? ints : strings);
    }
  }
}

TEST(ChunkCodecZstdTest, TranscodeOfCorruptChunkIsDataLoss) {
  deepmind::reverb::ChunkData chunk =
      BuildChunk(5, {FrameLikeTensor({4, 1000})}, 1, 0, 3, false, CodecPolicy::kZstd).value();
  chunk.mutable_data()->mutable_tensors(0)->set_tensor_content("garbage");
  EXPECT_EQ(TranscodeChunk(&chunk, kSnappy).code(), absl::StatusCode::kDataLoss);
}

TEST(ChunkCodecZstdTest, CodecAnnouncementParsing) {
  EXPECT_TRUE(CodecsListZstd("zstd"));
  EXPECT_TRUE(CodecsListZstd("lz4, ZSTD"));
  EXPECT_FALSE(CodecsListZstd(""));
  EXPECT_FALSE(CodecsListZstd("zstd2,snappy"));
}

TEST(ChunkCodecZstdTest, EnvironmentSwitch) {
  unsetenv("TF_REVERB_ZSTD");
  EXPECT_TRUE(ZstdEnabledByEnvironment());
  EXPECT_EQ(CodecPolicyFromEnvironment(), CodecPolicy::kAuto);
  for (const char* off : {"0", "false", "OFF", " no "}) {
    setenv("TF_REVERB_ZSTD", off, 1);
    EXPECT_FALSE(ZstdEnabledByEnvironment()) << off;
    EXPECT_EQ(CodecPolicyFromEnvironment(), CodecPolicy::kSnappy) << off;
  }
  setenv("TF_REVERB_ZSTD", "always", 1);
  EXPECT_TRUE(ZstdEnabledByEnvironment());
  EXPECT_EQ(CodecPolicyFromEnvironment(), CodecPolicy::kZstd);
  setenv("TF_REVERB_ZSTD", "1", 1);
  EXPECT_EQ(CodecPolicyFromEnvironment(), CodecPolicy::kAuto);
  unsetenv("TF_REVERB_ZSTD");
}

}  // namespace
}  // namespace tf_reverb
