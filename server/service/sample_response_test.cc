// EncodeSampleResponses (server) and SampleStreamParser (client): the wire
// bytes are protobuf's, large chunk payloads are neither copied when sent nor
// when received, and samples decode as the stored chunks do however gRPC
// slices the messages.
#include "server/service/sample_response.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "gmock/gmock.h"
#include "grpcpp/support/slice.h"
#include "gtest/gtest.h"
#include "reverb_service.pb.h"
#include "server/chunk_codec.h"
#include "server/client/sample.h"
#include "server/client/sample_stream_parser.h"
#include "server/table_item.h"
#include "server/tensor.h"
#include "server/testing/tensor_testing.h"
#include "tensor.pb.h"

namespace tf_reverb {
namespace {

namespace tfp = ::tf_reverb::tf;
using ::deepmind::reverb::SampleStreamResponse;

Tensor Bytes(std::vector<int64_t> shape, bool random, uint32_t seed) {
  Tensor t;
  t.dtype = tfp::DT_UINT8;
  t.shape = std::move(shape);
  t.data.resize(t.num_elements());
  std::mt19937 gen(seed);
  for (size_t i = 0; i < t.data.size(); ++i) {
    t.data[i] = static_cast<char>(random ? gen() : (i / 97) % 7);
  }
  return t;
}

std::string ToString(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(buffer.Dump(&slices).ok());
  std::string out;
  for (const auto& slice : slices)
    out.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  return out;
}

// The same bytes as slices of at most `size` bytes, with empty slices between.
grpc::ByteBuffer Reslice(const std::string& bytes, size_t size) {
  std::vector<grpc::Slice> slices;
  for (size_t pos = 0; pos < bytes.size(); pos += size) {
    slices.emplace_back(bytes.data() + pos, std::min(size, bytes.size() - pos));
    slices.emplace_back();
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

// An item of one column per tensor, each over all rows of one chunk's tensor.
struct Fixture {
  std::vector<std::vector<Tensor>> chunk_columns;  // per chunk
  std::vector<std::shared_ptr<const ChunkData>> chunks;
  SampledItem sampled;
};

Fixture MakeItem(uint64_t key, std::vector<std::vector<Tensor>> chunk_columns, CodecPolicy codec) {
  Fixture f;
  f.chunk_columns = std::move(chunk_columns);
  auto item = std::make_shared<PrioritizedItem>();
  item->set_key(key);
  item->set_table("t");
  for (size_t c = 0; c < f.chunk_columns.size(); ++c) {
    const uint64_t chunk_key = key * 100 + c;
    absl::StatusOr<ChunkData> chunk =
        BuildChunk(chunk_key, f.chunk_columns[c], 1, 0, 0, false, codec);
    EXPECT_TRUE(chunk.ok()) << chunk.status();
    f.chunks.push_back(std::make_shared<const ChunkData>(*std::move(chunk)));
    for (size_t t = 0; t < f.chunk_columns[c].size(); ++t) {
      auto* slice = item->mutable_flat_trajectory()->add_columns()->add_chunk_slices();
      slice->set_chunk_key(chunk_key);
      slice->set_offset(0);
      slice->set_length(f.chunk_columns[c][t].shape[0]);
      slice->set_index(static_cast<int32_t>(t));
    }
  }
  f.sampled.data.item = item;
  f.sampled.data.chunks = f.chunks;
  f.sampled.priority = 2.5;
  f.sampled.times_sampled = 3;
  f.sampled.probability = 0.25;
  f.sampled.table_size = 4;
  return f;
}

void ExpectDecodesAs(const Sample& sample, const Fixture& f) {
  int column = 0;
  for (const auto& columns : f.chunk_columns) {
    for (const Tensor& expected : columns) {
      absl::StatusOr<Tensor> got = sample.UnpackColumn(column++);
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_EQ(got->dtype, expected.dtype);
      EXPECT_EQ(got->shape, expected.shape);
      EXPECT_TRUE(got->data == expected.data) << "column " << column - 1;
      EXPECT_EQ(got->strings, expected.strings);
    }
  }
}

TEST(SerializeAliasingLargeFieldsTest, ProtobufBytesWithLargeFieldsReferenced) {
  Fixture f = MakeItem(1, {{Bytes({10, 84, 84, 4}, true, 1), tensor_testing::Int32Row({1, 2})}},
                       CodecPolicy::kSnappy);
  std::weak_ptr<const ChunkData> weak = f.chunks[0];
  const std::string& stored = f.chunks[0]->data().tensors(0).tensor_content();
  ASSERT_GT(stored.size(), 200000u);
  absl::StatusOr<grpc::ByteBuffer> buffer =
      SerializeAliasingLargeFields(*f.chunks[0], std::shared_ptr<const void>(f.chunks[0]));
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  EXPECT_EQ(ToString(*buffer), f.chunks[0]->SerializeAsString());
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(buffer->Dump(&slices).ok());
  bool aliased = false;
  for (const auto& slice : slices) {
    aliased = aliased || (reinterpret_cast<const char*>(slice.begin()) == stored.data() &&
                          slice.size() == stored.size());
  }
  EXPECT_TRUE(aliased) << "the payload was copied";
  // The buffer keeps the chunk alive.
  f.chunks.clear();
  f.sampled.data.chunks.clear();
  slices.clear();
  EXPECT_FALSE(weak.expired());
  buffer = absl::InternalError("gone");
  EXPECT_TRUE(weak.expired());
}

TEST(SampleResponsesTest, RoundTripWithoutCopyingPayloads) {
  std::vector<Fixture> items;
  items.push_back(MakeItem(1,
                           {{Bytes({10, 84, 84, 4}, true, 1), tensor_testing::Int32Row({1, 2, 3})}},
                           CodecPolicy::kSnappy));
  items.push_back(MakeItem(2, {{Bytes({10, 84, 84, 4}, false, 2)}}, CodecPolicy::kZstd));
  // Three 1 MB chunks: the item spans two responses.
  items.push_back(MakeItem(3,
                           {{Bytes({1 << 20}, true, 3)},
                            {Bytes({1 << 20}, true, 4)},
                            {Bytes({1 << 20}, true, 5),
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
    ASSERT_TRUE(parsed.ParseFromString(ToString(buffer)));
  }
  for (size_t slice_bytes : {size_t{0}, size_t{16384}, size_t{1000}, size_t{7}}) {
    SCOPED_TRACE(slice_bytes);
    SampleStreamParser parser;
    std::vector<Sample> out;
    for (const auto& buffer : *responses) {
      const grpc::ByteBuffer message =
          slice_bytes == 0 ? buffer : Reslice(ToString(buffer), slice_bytes);
      ASSERT_TRUE(parser.Parse(message, &out).ok());
    }
    EXPECT_FALSE(parser.InSample());
    ASSERT_EQ(out.size(), items.size());
    for (size_t i = 0; i < items.size(); ++i) {
      EXPECT_EQ(out[i].info().item().key(), items[i].sampled.data.item->key());
      EXPECT_EQ(out[i].info().item().priority(), 2.5);
      EXPECT_EQ(out[i].info().item().times_sampled(), 3);
      EXPECT_EQ(out[i].info().probability(), 0.25);
      EXPECT_EQ(out[i].info().table_size(), 4);
      ExpectDecodesAs(out[i], items[i]);
    }
    // The large numeric payloads stayed in the message's slices.
    const SampleChunk& random = out[0].chunks()[0];
    ASSERT_EQ(random.payloads.size(), 2u);
    EXPECT_FALSE(random.payloads[0].empty());
    EXPECT_TRUE(random.data->data().tensors(0).tensor_content().empty());
    EXPECT_TRUE(random.payloads[1].empty()) << "small payloads are copied";
    const SampleChunk& strings = out[2].chunks()[2];
    ASSERT_EQ(strings.payloads.size(), 2u);
    EXPECT_TRUE(strings.payloads[1].empty()) << "string payloads are copied";
    if (slice_bytes == 0) {
      // Straight from server to client, without a transport in between: the
      // piece is the stored chunk's own payload (no copy on either side).
      ASSERT_EQ(random.payloads[0].size(), 1u);
      EXPECT_EQ(random.payloads[0][0].data(),
                items[0].chunks[0]->data().tensors(0).tensor_content().data());
    }
  }
}

TEST(SampleResponsesTest, TranscodesZstdForSnappyOnlyClients) {
  Fixture f = MakeItem(1, {{Bytes({10, 84, 84, 4}, false, 2)}}, CodecPolicy::kZstd);
  ASSERT_EQ(f.chunks[0]->compression(), kZstd);
  absl::StatusOr<std::vector<grpc::ByteBuffer>> responses =
      EncodeSampleResponses({f.sampled}, /*client_accepts_zstd=*/false);
  ASSERT_TRUE(responses.ok()) << responses.status();
  ASSERT_EQ(responses->size(), 1u);
  SampleStreamResponse parsed;
  ASSERT_TRUE(parsed.ParseFromString(ToString((*responses)[0])));
  EXPECT_EQ(parsed.entries(0).data(0).compression(), kSnappy);
  SampleStreamParser parser;
  std::vector<Sample> out;
  ASSERT_TRUE(parser.Parse((*responses)[0], &out).ok());
  ASSERT_EQ(out.size(), 1u);
  ExpectDecodesAs(out[0], f);
}

TEST(SampleStreamParserTest, ReadsWhatProtobufWrites) {
  // A response serialized by protobuf itself (as dm-reverb's server sends
  // it), with duplicate and unknown fields that must follow protobuf's rules.
  Fixture f = MakeItem(7, {{Bytes({4, 100, 100}, true, 9)}}, CodecPolicy::kSnappy);
  SampleStreamResponse response;
  auto* entry = response.add_entries();
  entry->mutable_info()->mutable_item()->set_key(7);
  *entry->mutable_info()->mutable_item()->mutable_flat_trajectory() =
      f.sampled.data.item->flat_trajectory();
  *entry->add_data() = *f.chunks[0];
  entry->set_end_of_sequence(true);
  std::string bytes = response.SerializeAsString();
  // An unknown field of the response, and a second entry that is only an
  // unfinished sample.
  bytes += std::string("\x10\x05", 2);
  SampleStreamResponse second;
  second.add_entries()->mutable_info()->set_table_size(9);
  bytes += second.SerializeAsString();
  for (size_t slice_bytes : {size_t{100000000}, size_t{333}}) {
    SampleStreamParser parser;
    std::vector<Sample> out;
    ASSERT_TRUE(parser.Parse(Reslice(bytes, slice_bytes), &out).ok());
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].info().item().key(), 7u);
    ExpectDecodesAs(out[0], f);
    EXPECT_TRUE(parser.InSample());
    parser.Reset();
    EXPECT_FALSE(parser.InSample());
  }
}

TEST(SampleStreamParserTest, MalformedMessagesAreInternalErrors) {
  Fixture f = MakeItem(7, {{Bytes({4, 100, 100}, true, 9)}}, CodecPolicy::kSnappy);
  absl::StatusOr<std::vector<grpc::ByteBuffer>> responses =
      EncodeSampleResponses({f.sampled}, true);
  ASSERT_TRUE(responses.ok());
  const std::string bytes = ToString((*responses)[0]);
  for (size_t cut : {size_t{1}, size_t{5}, bytes.size() / 2, bytes.size() - 1}) {
    SampleStreamParser parser;
    std::vector<Sample> out;
    absl::Status status = parser.Parse(Reslice(bytes.substr(0, cut), 1000), &out);
    EXPECT_TRUE(absl::IsInternal(status)) << cut << ": " << status;
    EXPECT_TRUE(out.empty());
  }
  SampleStreamParser parser;
  std::vector<Sample> out;
  EXPECT_TRUE(absl::IsInternal(parser.Parse(Reslice(std::string("\x0b\x01", 2), 10), &out)));
}

TEST(DecompressRowsIntoPiecesTest, MatchesContiguousDecoding) {
  for (CodecPolicy codec : {CodecPolicy::kSnappy, CodecPolicy::kZstd}) {
    for (bool delta : {false, true}) {
      Tensor t = Bytes({6, 50, 40}, /*random=*/false, 3);
      absl::StatusOr<ChunkData> chunk = BuildChunk(1, {t}, 1, 0, 0, delta, codec);
      ASSERT_TRUE(chunk.ok());
      const auto& proto = chunk->data().tensors(0);
      const std::string& content = proto.tensor_content();
      std::vector<absl::string_view> pieces;
      for (size_t pos = 0; pos < content.size(); pos += 11) {
        pieces.emplace_back(content.data() + pos, std::min<size_t>(11, content.size() - pos));
      }
      for (auto [offset, length] : {std::pair<int, int>{0, 6}, {2, 3}, {5, 1}}) {
        std::string want(length * 2000, '\0'), got(length * 2000, '\1');
        ASSERT_TRUE(DecompressRowsInto(proto, chunk->delta_encoded(), chunk->compression(), offset,
                                       length, want.data())
                        .ok());
        ASSERT_TRUE(DecompressRowsInto(proto, pieces, chunk->delta_encoded(), chunk->compression(),
                                       offset, length, got.data())
                        .ok());
        EXPECT_TRUE(got == want);
        EXPECT_EQ(got, t.data.substr(offset * 2000, length * 2000));
      }
      // A corrupt payload is DATA_LOSS, never a crash.
      std::vector<absl::string_view> short_pieces(pieces.begin(), pieces.end() - 1);
      std::string dst(12000, '\0');
      EXPECT_TRUE(absl::IsDataLoss(
          DecompressRowsInto(proto, short_pieces, false, chunk->compression(), 0, 6, dst.data())));
    }
  }
}

}  // namespace
}  // namespace tf_reverb
