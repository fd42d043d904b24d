#include "server/chunk_view.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "absl/strings/string_view.h"
#include "gtest/gtest.h"
#include "schema.pb.h"
#include "server/chunk_codec.h"
#include "server/tensor.h"
#include "server/testing/tensor_testing.h"
#include "tensor.pb.h"

namespace tf_reverb {
namespace {

using ::deepmind::reverb::ChunkData;
using ::tf_reverb::tensor_testing::FromValues;
using ::tf_reverb::tensor_testing::StringTensor;
namespace tfp = ::tf_reverb::tf;

std::string Joined(const TensorView& tensor) {
  std::string out;
  for (absl::string_view piece : tensor.content) out.append(piece.data(), piece.size());
  return out;
}

void ExpectSameView(const ChunkView& a, const ChunkView& b) {
  EXPECT_EQ(a.key, b.key);
  EXPECT_EQ(a.episode_id, b.episode_id);
  EXPECT_EQ(a.uncompressed_size, b.uncompressed_size);
  EXPECT_EQ(a.delta_encoded, b.delta_encoded);
  EXPECT_EQ(a.compression, b.compression);
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    EXPECT_EQ(a.tensors[i].dtype, b.tensors[i].dtype) << i;
    EXPECT_EQ(a.tensors[i].shape, b.tensors[i].shape) << i;
    EXPECT_EQ(Joined(a.tensors[i]), Joined(b.tensors[i])) << i;
    EXPECT_EQ(a.tensors[i].string_val, b.tensors[i].string_val) << i;
    EXPECT_EQ(a.tensors[i].unknown_rank, b.tensors[i].unknown_rank) << i;
  }
}

// Chunks of several tensors, with every codec and delta encoding.
std::vector<ChunkData> SampleChunks() {
  std::vector<int64_t> steps;
  for (int i = 0; i < 3 * 4 * 5; ++i) steps.push_back(i * 7 - 20);
  const std::vector<Tensor> columns = {
      FromValues<int64_t>(tfp::DT_INT64, {3, 4, 5}, steps),
      FromValues<float>(tfp::DT_FLOAT, {3}, {1.5f, -2.0f, 3.25f}),
      StringTensor({3, 2}, {"a", "", "ccc", std::string(300, 'd'), "e", "ff"}),
  };
  std::vector<ChunkData> chunks;
  for (CodecPolicy codec : {CodecPolicy::kSnappy, CodecPolicy::kZstd}) {
    for (bool delta : {false, true}) {
      absl::StatusOr<ChunkData> chunk =
          BuildChunk(uint64_t{1} << 60 | chunks.size(), columns, 77, 10, 12, delta, codec);
      EXPECT_TRUE(chunk.ok()) << chunk.status();
      chunks.push_back(*chunk);
    }
  }
  return chunks;
}

TEST(ChunkViewTest, WireViewMatchesProtoView) {
  for (const ChunkData& chunk : SampleChunks()) {
    const std::string wire = chunk.SerializeAsString();
    absl::StatusOr<ChunkView> from_wire = ChunkViewOfWire(wire);
    ASSERT_TRUE(from_wire.ok()) << from_wire.status();
    ExpectSameView(*from_wire, ChunkViewOf(chunk));
    ASSERT_EQ(from_wire->tensors.size(), 3u);
    // Payloads point into the wire bytes: nothing was copied.
    const absl::string_view payload = from_wire->tensors[0].content.at(0);
    EXPECT_GE(payload.data(), wire.data());
    EXPECT_LE(payload.data() + payload.size(), wire.data() + wire.size());
    for (int i = 0; i < 3; ++i) {
      absl::StatusOr<Tensor> a = DecompressChunkTensor(*from_wire, i);
      absl::StatusOr<Tensor> b = DecompressChunkTensor(chunk, i);
      ASSERT_TRUE(a.ok()) << a.status();
      ASSERT_TRUE(b.ok()) << b.status();
      EXPECT_EQ(a->shape, b->shape);
      EXPECT_EQ(a->data, b->data);
      EXPECT_EQ(a->strings, b->strings);
    }
  }
}

TEST(ChunkViewTest, StringValLayoutAndUnknownRank) {
  ChunkData chunk;
  chunk.set_chunk_key(5);
  tfp::TensorProto* tensor = chunk.mutable_data()->add_tensors();
  tensor->set_dtype(tfp::DT_STRING);
  tensor->mutable_tensor_shape()->add_dim()->set_size(2);
  tensor->add_string_val("first");
  tensor->add_string_val("");
  chunk.mutable_data()->add_tensors()->mutable_tensor_shape()->set_unknown_rank(true);
  const std::string wire = chunk.SerializeAsString();
  absl::StatusOr<ChunkView> view = ChunkViewOfWire(wire);
  ASSERT_TRUE(view.ok()) << view.status();
  ExpectSameView(*view, ChunkViewOf(chunk));
  EXPECT_EQ(view->tensors[0].string_val, (std::vector<absl::string_view>{"first", ""}));
  EXPECT_TRUE(view->tensors[1].unknown_rank);
}

TEST(ChunkViewTest, PayloadsReplaceTensorContent) {
  ChunkData chunk = SampleChunks()[0];
  const std::string content = chunk.data().tensors(0).tensor_content();
  chunk.mutable_data()->mutable_tensors(0)->clear_tensor_content();
  const std::vector<std::vector<absl::string_view>> payloads = {
      {absl::string_view(content).substr(0, 3), absl::string_view(content).substr(3)}, {}};
  const ChunkView view = ChunkViewOf(chunk, &payloads);
  ASSERT_EQ(view.tensors[0].content.size(), 2u);
  EXPECT_EQ(Joined(view.tensors[0]), content);
  EXPECT_EQ(view.tensors[0].content_size(), content.size());
  // Tensors without pieces keep their own tensor_content.
  EXPECT_EQ(Joined(view.tensors[1]), chunk.data().tensors(1).tensor_content());
}

TEST(ChunkViewTest, SkipsFieldsItDoesNotRead) {
  ChunkData chunk = SampleChunks()[1];
  chunk.mutable_sequence_range()->set_sparse(true);
  chunk.mutable_data()->mutable_tensors(0)->set_version_number(3);
  chunk.mutable_data()->mutable_tensors(0)->add_int64_val(9);
  chunk.mutable_data()->mutable_tensors(0)->add_float_val(1.0f);
  chunk.mutable_data()->mutable_tensors(0)->add_double_val(2.0);
  std::string wire = chunk.SerializeAsString();
  // Unknown fields of every wire type: varint, fixed64, bytes, fixed32.
  wire += std::string("\xa8\x1f\x05", 3);                    // field 501, varint
  wire += std::string("\xb1\x1f", 2) + std::string(8, 'x');  // field 502, fixed64
  wire += std::string("\xba\x1f\x02yz", 5);                  // field 503, bytes
  wire += std::string("\xc5\x1f", 2) + std::string(4, 'w');  // field 504, fixed32
  // A group (field 505) holding a varint and a nested group (field 1).
  wire += std::string("\xcb\x1f\x08\x01\x0b\x10\x02\x0c\xcc\x1f", 10);
  absl::StatusOr<ChunkView> view = ChunkViewOfWire(wire);
  ASSERT_TRUE(view.ok()) << view.status();
  ExpectSameView(*view, ChunkViewOf(chunk));
}

TEST(ChunkViewTest, WritersChunksArePlain) {
  for (const ChunkData& chunk : SampleChunks()) {
    bool plain = false;
    const std::string wire = chunk.SerializeAsString();
    absl::StatusOr<ChunkView> view = ChunkViewOfWire(wire, &plain);
    ASSERT_TRUE(view.ok()) << view.status();
    EXPECT_TRUE(plain);
    EXPECT_EQ(view->episode_id, 77u);
    EXPECT_EQ(view->uncompressed_size, chunk.data_uncompressed_size());
    EXPECT_GT(view->uncompressed_size, 0);
  }
}

// Fields repeated where protobuf merges them: the view reads what protobuf
// parses, and the encoding is still plain.
TEST(ChunkViewTest, PlainViewMergesAsProtobufDoes) {
  const ChunkData first = SampleChunks()[0];
  ChunkData second;
  second.set_chunk_key(9);
  second.mutable_sequence_range()->set_start(4);  // episode_id not repeated: the first stays
  *second.mutable_data()->add_tensors() = first.data().tensors(1);
  second.mutable_data()->mutable_tensors(0)->mutable_tensor_shape()->add_dim()->set_size(1);
  const std::string wire = first.SerializeAsString() + second.SerializeAsString();
  ChunkData parsed;
  ASSERT_TRUE(parsed.ParseFromString(wire));
  bool plain = false;
  absl::StatusOr<ChunkView> view = ChunkViewOfWire(wire, &plain);
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_TRUE(plain);
  ExpectSameView(*view, ChunkViewOf(parsed));
  EXPECT_EQ(view->key, 9u);
  EXPECT_EQ(view->episode_id, 77u);
  EXPECT_EQ(view->tensors.size(), 4u);
}

// Whatever the view would read differently from protobuf, or protobuf
// would refuse, is not plain.
TEST(ChunkViewTest, OtherEncodingsAreNotPlain) {
  const ChunkData base = SampleChunks()[0];
  std::vector<std::string> wires;
  ChunkData chunk = base;
  chunk.mutable_data()->mutable_tensors(0)->add_int64_val(1);
  wires.push_back(chunk.SerializeAsString());
  chunk = base;
  chunk.mutable_data()->mutable_tensors(0)->mutable_tensor_shape()->mutable_dim(0)->set_name("t");
  wires.push_back(chunk.SerializeAsString());
  // deprecated_data (field 3) holding an empty TensorProto.
  wires.push_back(base.SerializeAsString() + std::string("\x1a\x00", 2));
  wires.push_back(base.SerializeAsString() + std::string("\xa8\x1f\x05", 3));  // field 501
  // chunk_key's tag zero-padded to 6 bytes (protobuf reads at most 5).
  wires.push_back(std::string("\x88\x80\x80\x80\x80\x00\x05", 7) + base.SerializeAsString());
  // A 6-byte length prefix for the sequence range.
  wires.push_back(base.SerializeAsString() + std::string("\x12\x80\x80\x80\x80\x80\x00", 7));
  // compression beyond int32 (protobuf truncates it).
  wires.push_back(base.SerializeAsString() + std::string("\xc0\x3e\x81\x80\x80\x80\x10", 7));
  for (const std::string& wire : wires) {
    bool plain = true;
    absl::StatusOr<ChunkView> view = ChunkViewOfWire(wire, &plain);
    ASSERT_TRUE(view.ok()) << view.status() << " " << absl::CEscape(wire.substr(0, 16));
    EXPECT_FALSE(plain) << absl::CEscape(wire.substr(0, 16));
  }
}

TEST(ChunkViewTest, MalformedBytesAreDataLoss) {
  const std::string wire = SampleChunks()[2].SerializeAsString();
  // Every truncation either still parses (a message may end between fields)
  // or is DATA_LOSS; none reads past the end.
  int rejected = 0;
  for (size_t n = 0; n < wire.size(); ++n) {
    const std::string cut = wire.substr(0, n);
    absl::StatusOr<ChunkView> view = ChunkViewOfWire(cut);
    if (!view.ok()) {
      EXPECT_EQ(view.status().code(), absl::StatusCode::kDataLoss) << n;
      ++rejected;
    }
  }
  EXPECT_GT(rejected, 0);
  for (const std::string& bad :
       {std::string("\x0a\xff", 2), std::string("\x08", 1), std::string("\x2a\x05\x0a\x10", 4),
        std::string("\x0b", 1), std::string("\x00", 1),
        std::string("\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff", 11)}) {
    EXPECT_EQ(ChunkViewOfWire(bad).status().code(), absl::StatusCode::kDataLoss)
        << absl::CEscape(bad);
  }
}

}  // namespace
}  // namespace tf_reverb
