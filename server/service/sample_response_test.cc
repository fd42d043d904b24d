// EncodeSampleResponses and SerializeAliasingLargeFields (server side of
// SampleStream): the wire bytes are protobuf's, large chunk payloads are not
// copied when sent, and what the client's SampleStreamParser makes of them
// decodes as the stored chunks do however gRPC slices the messages (the
// parser's own tests are server/client/sample_stream_parser_test.cc). Also
// DecompressRowsInto over payload pieces, as the parser leaves them.
#include "server/service/sample_response.h"

#include <algorithm>
#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"
#include "gtest/gtest.h"
#include "reverb_service.pb.h"
#include "server/chunk_codec.h"
#include "server/chunk_view.h"
#include "server/client/sample.h"
#include "server/client/sample_stream_parser.h"
#include "server/table_chunk.h"
#include "server/table_item.h"
#include "server/tensor.h"
#include "server/testing/sample_testing.h"
#include "server/testing/tensor_testing.h"

namespace tf_reverb {
namespace {

using ::deepmind::reverb::SampleStreamResponse;
using ::tf_reverb::testing::BufferBytes;
using ::tf_reverb::testing::ByteTensor;
using ::tf_reverb::testing::ExpectDecodesAs;
using ::tf_reverb::testing::MakeSampledItem;
using ::tf_reverb::testing::Reslice;
using ::tf_reverb::testing::SampledItemFixture;

TEST(SerializeAliasingLargeFieldsTest, ProtobufBytesWithLargeFieldsReferenced) {
  SampledItemFixture f =
      MakeSampledItem(1, {{ByteTensor({10, 84, 84, 4}, true, 1), tensor_testing::Int32Row({1, 2})}},
                      CodecPolicy::kSnappy);
  // The stored chunk as a message, owned by the buffer's owner.
  auto chunk = std::make_shared<const ChunkData>(f.chunks[0]->ToProto());
  std::weak_ptr<const ChunkData> weak = chunk;
  const std::string& stored = chunk->data().tensors(0).tensor_content();
  ASSERT_GT(stored.size(), 200000u);
  absl::StatusOr<grpc::ByteBuffer> buffer =
      SerializeAliasingLargeFields(*chunk, std::shared_ptr<const void>(chunk));
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  EXPECT_EQ(BufferBytes(*buffer), chunk->SerializeAsString());
  EXPECT_EQ(BufferBytes(*buffer), f.chunks[0]->wire());
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(buffer->Dump(&slices).ok());
  bool aliased = false;
  for (const auto& slice : slices) {
    aliased = aliased || (reinterpret_cast<const char*>(slice.begin()) == stored.data() &&
                          slice.size() == stored.size());
  }
  EXPECT_TRUE(aliased) << "the payload was copied";
  // The buffer keeps the chunk alive.
  chunk.reset();
  slices.clear();
  EXPECT_FALSE(weak.expired());
  buffer = absl::InternalError("gone");
  EXPECT_TRUE(weak.expired());
}

TEST(SampleResponsesTest, RoundTripWithoutCopyingPayloads) {
  std::vector<SampledItemFixture> items;
  items.push_back(MakeSampledItem(
      1, {{ByteTensor({10, 84, 84, 4}, true, 1), tensor_testing::Int32Row({1, 2, 3})}},
      CodecPolicy::kSnappy));
  items.push_back(
      MakeSampledItem(2, {{ByteTensor({10, 84, 84, 4}, false, 2)}}, CodecPolicy::kZstd));
  // Three 1 MB chunks: the item spans two responses.
  items.push_back(
      MakeSampledItem(3,
                      {{ByteTensor({1 << 20}, true, 3)},
                       {ByteTensor({1 << 20}, true, 4)},
                       {ByteTensor({1 << 20}, true, 5),
                        tensor_testing::StringTensor({2}, {"a", std::string(20000, 'b')})}},
                      CodecPolicy::kSnappy));
  std::vector<SampledItem> samples;
  for (const auto& item : items) samples.push_back(item.sampled);
  absl::StatusOr<std::vector<grpc::ByteBuffer>> responses =
      EncodeSampleResponses(samples, /*client_accepts_zstd=*/true);
  ASSERT_TRUE(responses.ok()) << responses.status();
  EXPECT_GE(responses->size(), 2u);

  // What protobuf makes of the same bytes.
  for (const auto& buffer : *responses) {
    SampleStreamResponse parsed;
    ASSERT_TRUE(parsed.ParseFromString(BufferBytes(buffer)));
  }
  for (size_t slice_bytes : {size_t{0}, size_t{16384}, size_t{1000}, size_t{7}}) {
    SCOPED_TRACE(slice_bytes);
    SampleStreamParser parser;
    std::vector<Sample> out;
    for (const auto& buffer : *responses) {
      const grpc::ByteBuffer message =
          slice_bytes == 0 ? buffer : Reslice(BufferBytes(buffer), slice_bytes);
      ASSERT_TRUE(parser.Parse(message, &out).ok());
    }
    EXPECT_FALSE(parser.InSample());
    ASSERT_EQ(out.size(), items.size());
    for (size_t i = 0; i < items.size(); ++i) {
      EXPECT_EQ(out[i].info().item().key(), items[i].sampled.data->item.key());
      EXPECT_EQ(out[i].info().item().priority(), 2.5);
      EXPECT_EQ(out[i].info().item().times_sampled(), 3);
      EXPECT_EQ(out[i].info().probability(), 0.25);
      EXPECT_EQ(out[i].info().table_size(), 4);
      ExpectDecodesAs(out[i], items[i]);
    }
    // A plain chunk is read into a view without protobuf; its large numeric
    // payload stayed in the message's slices, its small one was copied.
    EXPECT_EQ(out[0].chunks()[0].data, nullptr);
    absl::StatusOr<const ChunkView*> random = out[0].Chunk(items[0].chunks[0]->key());
    ASSERT_TRUE(random.ok()) << random.status();
    ASSERT_EQ((*random)->tensors.size(), 2u);
    EXPECT_EQ((*random)->tensors[1].content.size(), 1u);
    // A chunk with strings is parsed by protobuf; its string payload copied.
    const SampleChunk& strings = out[2].chunks()[2];
    ASSERT_NE(strings.data, nullptr);
    ASSERT_EQ(strings.payloads.size(), 2u);
    EXPECT_FALSE(strings.payloads[0].empty());
    EXPECT_TRUE(strings.payloads[1].empty()) << "string payloads are copied";
    if (slice_bytes == 0) {
      // Straight from server to client, without a transport in between: the
      // piece is the stored chunk's own payload, inside its wire bytes (no
      // copy on either side); the small payload is a copy, outside them.
      const absl::string_view wire = items[0].chunks[0]->wire();
      absl::StatusOr<ChunkView> stored = items[0].chunks[0]->View();
      ASSERT_TRUE(stored.ok()) << stored.status();
      ASSERT_EQ(stored->tensors[0].content.size(), 1u);
      const absl::string_view payload = stored->tensors[0].content[0];
      ASSERT_GE(payload.data(), wire.data());
      ASSERT_LE(payload.data() + payload.size(), wire.data() + wire.size());
      ASSERT_EQ((*random)->tensors[0].content.size(), 1u);
      EXPECT_EQ((*random)->tensors[0].content[0].data(), payload.data());
      EXPECT_EQ((*random)->tensors[0].content[0].size(), payload.size());
      const char* small = (*random)->tensors[1].content[0].data();
      EXPECT_TRUE(small < wire.data() || small >= wire.data() + wire.size());
    }
  }
}

TEST(SampleResponsesTest, TranscodesZstdForSnappyOnlyClients) {
  SampledItemFixture f =
      MakeSampledItem(1, {{ByteTensor({10, 84, 84, 4}, false, 2)}}, CodecPolicy::kZstd);
  ASSERT_EQ(f.chunks[0]->compression(), kZstd);
  absl::StatusOr<std::vector<grpc::ByteBuffer>> responses =
      EncodeSampleResponses({f.sampled}, /*client_accepts_zstd=*/false);
  ASSERT_TRUE(responses.ok()) << responses.status();
  ASSERT_EQ(responses->size(), 1u);
  SampleStreamResponse parsed;
  ASSERT_TRUE(parsed.ParseFromString(BufferBytes((*responses)[0])));
  EXPECT_EQ(parsed.entries(0).data(0).compression(), kSnappy);
  SampleStreamParser parser;
  std::vector<Sample> out;
  ASSERT_TRUE(parser.Parse((*responses)[0], &out).ok());
  ASSERT_EQ(out.size(), 1u);
  ExpectDecodesAs(out[0], f);
}

TEST(DecompressRowsIntoPiecesTest, MatchesContiguousDecoding) {
  for (CodecPolicy codec : {CodecPolicy::kSnappy, CodecPolicy::kZstd}) {
    for (bool delta : {false, true}) {
      Tensor t = ByteTensor({6, 50, 40}, /*random=*/false, 3);
      absl::StatusOr<ChunkData> chunk = BuildChunk(1, {t}, 1, 0, 0, delta, codec);
      ASSERT_TRUE(chunk.ok());
      const auto& proto = chunk->data().tensors(0);
      const std::string& content = proto.tensor_content();
      std::vector<absl::string_view> pieces;
      for (size_t pos = 0; pos < content.size(); pos += 11) {
        pieces.emplace_back(content.data() + pos, std::min<size_t>(11, content.size() - pos));
      }
      // The payload as the parser leaves it: in pieces, tensor_content unused.
      TensorView in_pieces = TensorViewOf(proto);
      in_pieces.content.assign(pieces.begin(), pieces.end());
      for (auto [offset, length] : {std::pair<int, int>{0, 6}, {2, 3}, {5, 1}}) {
        std::string want(length * 2000, '\0'), got(length * 2000, '\1');
        ASSERT_TRUE(DecompressRowsInto(proto, chunk->delta_encoded(), chunk->compression(), offset,
                                       length, want.data())
                        .ok());
        ASSERT_TRUE(DecompressRowsInto(in_pieces, chunk->delta_encoded(), chunk->compression(),
                                       offset, length, got.data())
                        .ok());
        EXPECT_TRUE(got == want);
        EXPECT_EQ(got, t.data.substr(offset * 2000, length * 2000));
      }
      // A corrupt payload is DATA_LOSS, never a crash.
      TensorView short_pieces = TensorViewOf(proto);
      short_pieces.content.assign(pieces.begin(), pieces.end() - 1);
      std::string dst(12000, '\0');
      EXPECT_TRUE(absl::IsDataLoss(
          DecompressRowsInto(short_pieces, false, chunk->compression(), 0, 6, dst.data())));
    }
  }
}

TEST(SampleResponsesTest, EachResponseKeepsItsChunksAlive) {
  SampledItemFixture f = MakeSampledItem(3,
                                         {{ByteTensor({1 << 20}, true, 3)},
                                          {ByteTensor({1 << 20}, true, 4)},
                                          {ByteTensor({1 << 20}, true, 5)}},
                                         CodecPolicy::kSnappy);
  absl::StatusOr<std::vector<grpc::ByteBuffer>> responses =
      EncodeSampleResponses({f.sampled}, /*client_accepts_zstd=*/true);
  ASSERT_TRUE(responses.ok()) << responses.status();
  ASSERT_EQ(responses->size(), 2u);
  std::vector<std::weak_ptr<const TableChunk>> weak(f.chunks.begin(), f.chunks.end());
  const std::string second = BufferBytes((*responses)[1]);
  f.chunks.clear();
  f.sampled.data.reset();
  responses->erase(responses->begin());  // the first response was sent
  // Whatever the second response references must still be alive.
  ASSERT_FALSE(weak[2].expired()) << "chunk 2 is sent in response 2 but only response 1 owned it";
  EXPECT_EQ(BufferBytes((*responses)[0]), second);
}

}  // namespace
}  // namespace tf_reverb
