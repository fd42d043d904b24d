// SampleStreamParser: reads SampleStreamResponse bytes as protobuf writes
// them (also with unknown fields and an unfinished sample), however gRPC
// slices the message, and rejects cut-off messages as INTERNAL; likewise
// SampleBatch responses (rejecting malformed ones, and batches inside an
// unfinished entries sample, as INTERNAL), mixed with entries in a stream. The server
// side, and the round trip through both, are tested in
// server/service/sample_response_test.cc.
#include "server/client/sample_stream_parser.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "grpcpp/support/byte_buffer.h"
#include "gtest/gtest.h"
#include "reverb_service.pb.h"
#include "schema.pb.h"
#include "server/chunk_codec.h"
#include "server/client/sample.h"
#include "server/service/sample_batch.h"
#include "server/service/sample_response.h"
#include "server/table_item.h"
#include "server/tensor.h"
#include "server/testing/sample_testing.h"
#include "server/testing/tensor_testing.h"
#include "tensor.pb.h"

namespace tf_reverb {
namespace {

using ::deepmind::reverb::ChunkData;
using ::deepmind::reverb::SampleBatch;
using ::deepmind::reverb::SampleStreamResponse;
using ::tf_reverb::testing::BufferBytes;
using ::tf_reverb::testing::ByteTensor;
using ::tf_reverb::testing::ExpectDecodesAs;
using ::tf_reverb::testing::MakeSampledItem;
using ::tf_reverb::testing::Reslice;
using ::tf_reverb::testing::SampledItemFixture;

TEST(SampleStreamParserTest, ReadsWhatProtobufWrites) {
  // A response serialized by protobuf itself (as dm-reverb's server sends
  // it), with duplicate and unknown fields that must follow protobuf's rules.
  SampledItemFixture f =
      MakeSampledItem(7, {{ByteTensor({4, 100, 100}, true, 9)}}, CodecPolicy::kSnappy);
  SampleStreamResponse response;
  auto* entry = response.add_entries();
  entry->mutable_info()->mutable_item()->set_key(7);
  *entry->mutable_info()->mutable_item()->mutable_flat_trajectory() =
      f.sampled.data->item.ToProto().flat_trajectory();
  *entry->add_data() = f.chunks[0]->ToProto();
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
    EXPECT_EQ(out[0].meta().key, 7u);
    ExpectDecodesAs(out[0], f);
    EXPECT_TRUE(parser.InSample());
    parser.Reset();
    EXPECT_FALSE(parser.InSample());
  }
}

// `bytes` as field `field` of a message, length-delimited.
std::string LengthDelimited(int field, const std::string& bytes) {
  std::string out(1, static_cast<char>(field << 3 | 2));
  for (uint64_t n = bytes.size();; n >>= 7) {
    out += static_cast<char>((n & 0x7f) | (n > 0x7f ? 0x80 : 0));
    if (n <= 0x7f) break;
  }
  return out + bytes;
}

TEST(SampleStreamParserTest, PlainChunksAreViewedOthersParsedAlike) {
  // A chunk in the plain encoding is read into a view without protobuf (no
  // ChunkData kept), with protobuf's rules for repeated fields: here its
  // `data` comes in two occurrences (their tensors accumulate), and the
  // tensor's payload twice (the last wins). The same chunk with an unknown
  // field goes to protobuf. Both decode as the item.
  SampledItemFixture f = MakeSampledItem(
      7, {{ByteTensor({4, 100, 100}, true, 9), tensor_testing::Int32Row({1, 2, 3})}},
      CodecPolicy::kSnappy);
  const ChunkData proto = f.chunks[0]->ToProto();
  ChunkData head = proto;
  head.clear_data();
  ::tf_reverb::tf::TensorProto first = proto.data().tensors(0);
  first.set_tensor_content("a payload the next one replaces");
  const std::string first_bytes =
      first.SerializeAsString() + LengthDelimited(4, proto.data().tensors(0).tensor_content());
  const std::string chunk_bytes =
      head.SerializeAsString() + LengthDelimited(5, LengthDelimited(1, first_bytes)) +
      LengthDelimited(5, LengthDelimited(1, proto.data().tensors(1).SerializeAsString()));
  ChunkData parsed;
  ASSERT_TRUE(parsed.ParseFromString(chunk_bytes));
  ASSERT_EQ(parsed.data().tensors_size(), 2);
  ASSERT_EQ(parsed.data().tensors(0).tensor_content(), proto.data().tensors(0).tensor_content());

  for (bool unknown : {false, true}) {
    SampleStreamResponse response;
    auto* entry = response.add_entries();
    entry->mutable_info()->mutable_item()->set_key(7);
    *entry->mutable_info()->mutable_item()->mutable_flat_trajectory() =
        f.sampled.data->item.ToProto().flat_trajectory();
    entry->set_end_of_sequence(true);
    // The response's entry, its data field (2) holding the chunk's bytes.
    const std::string unknown_field = unknown ? std::string("\xc8\x06\x01", 3) : "";
    const std::string bytes = LengthDelimited(
        1, entry->SerializeAsString() + LengthDelimited(2, chunk_bytes + unknown_field));
    for (size_t slice_bytes : {size_t{100000000}, size_t{333}, size_t{7}}) {
      SCOPED_TRACE(slice_bytes);
      SampleStreamParser parser;
      std::vector<Sample> out;
      ASSERT_TRUE(parser.Parse(Reslice(bytes, slice_bytes), &out).ok());
      ASSERT_EQ(out.size(), 1u);
      ASSERT_EQ(out[0].chunks().size(), 1u);
      EXPECT_EQ(out[0].chunks()[0].data != nullptr, unknown);
      ExpectDecodesAs(out[0], f);
      if (!unknown) {
        // A viewed chunk's view went into its sample: another sample made
        // of chunks() has no chunk to read, an error rather than a crash.
        const Sample copy = Sample::FromChunks(out[0].info(), out[0].chunks());
        EXPECT_TRUE(absl::IsInvalidArgument(copy.ColumnSpecs().status()));
      }
    }
  }
}

TEST(SampleStreamParserTest, MalformedMessagesAreInternalErrors) {
  SampledItemFixture f =
      MakeSampledItem(7, {{ByteTensor({4, 100, 100}, true, 9)}}, CodecPolicy::kSnappy);
  absl::StatusOr<std::vector<grpc::ByteBuffer>> responses =
      EncodeSampleResponses({f.sampled}, true);
  ASSERT_TRUE(responses.ok());
  const std::string bytes = BufferBytes((*responses)[0]);
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
  // A tag of 36 bits, which protobuf rejects (cut to 32 bits it would read
  // as field 1, a varint).
  EXPECT_TRUE(absl::IsInternal(
      parser.Parse(Reslice(std::string("\x88\x80\x80\x80\x80\x01\x00", 7), 3), &out)));
  EXPECT_TRUE(out.empty());
}

// A valid SampleBatch of two samples: a float32 [2, 3] column (squeezed
// flag false) and an int32 scalar column (squeezed).
SampleBatch TwoSampleBatch() {
  SampleBatch batch;
  for (int i = 0; i < 2; ++i) {
    batch.add_keys(10 + i);
    batch.add_priorities(1.5 * i);
    batch.add_times_sampled(i + 1);
    batch.add_probabilities(0.5);
    batch.add_table_sizes(8);
    batch.add_rate_limited(i == 1);
  }
  auto* floats = batch.add_columns();
  floats->set_dtype(::tf_reverb::tf::DT_FLOAT);
  for (int64_t d : {2, 2, 3}) floats->mutable_tensor_shape()->add_dim()->set_size(d);
  floats->set_tensor_content(std::string(2 * 2 * 3 * 4, '\x01'));
  batch.add_squeeze(false);
  auto* ints = batch.add_columns();
  ints->set_dtype(::tf_reverb::tf::DT_INT32);
  ints->mutable_tensor_shape()->add_dim()->set_size(2);
  ints->set_tensor_content(std::string("\x07\0\0\0\x09\0\0\0", 8));
  batch.add_squeeze(true);
  return batch;
}

std::string BatchBytes(const SampleBatch& batch) {
  SampleStreamResponse response;
  *response.mutable_batch() = batch;
  return response.SerializeAsString();
}

TEST(SampleStreamParserTest, ReadsABatch) {
  const std::string bytes = BatchBytes(TwoSampleBatch());
  for (size_t slice_bytes : {size_t{1}, size_t{5}, size_t{100000}}) {
    SCOPED_TRACE(slice_bytes);
    SampleStreamParser parser;
    std::vector<Sample> out;
    ASSERT_TRUE(parser.Parse(Reslice(bytes, slice_bytes), &out).ok());
    EXPECT_FALSE(parser.InSample());
    ASSERT_EQ(out.size(), 2u);
    for (int i = 0; i < 2; ++i) {
      ASSERT_NE(out[i].block(), nullptr);
      EXPECT_EQ(out[i].row(), i);
      EXPECT_EQ(out[i].meta().key, 10u + i);
      EXPECT_EQ(out[i].meta().priority, 1.5 * i);
      EXPECT_EQ(out[i].meta().times_sampled, i + 1);
      EXPECT_EQ(out[i].meta().policy_version, 0);
      EXPECT_EQ(out[i].meta().probability, 0.5);
      EXPECT_EQ(out[i].meta().table_size, 8);
      EXPECT_EQ(out[i].meta().rate_limited, i == 1);
      ASSERT_EQ(out[i].num_columns(), 2);
      EXPECT_FALSE(out[i].squeezed(0));
      EXPECT_TRUE(out[i].squeezed(1));
      absl::StatusOr<Tensor> scalar = out[i].UnpackColumn(1);
      ASSERT_TRUE(scalar.ok()) << scalar.status();
      EXPECT_TRUE(scalar->shape.empty());
      EXPECT_EQ(scalar->data, std::string(i == 0 ? "\x07\0\0\0" : "\x09\0\0\0", 4));
      absl::StatusOr<Tensor> floats = out[i].UnpackColumn(0);
      ASSERT_TRUE(floats.ok()) << floats.status();
      EXPECT_EQ(floats->shape, (std::vector<int64_t>{2, 3}));
    }
  }
}

TEST(SampleStreamParserTest, MalformedBatchesAreInternalErrors) {
  std::vector<std::pair<std::string, SampleBatch>> cases;
  const auto add = [&cases](std::string name, void (*edit)(SampleBatch*)) {
    SampleBatch batch = TwoSampleBatch();
    edit(&batch);
    cases.emplace_back(std::move(name), std::move(batch));
  };
  add("a priority missing", [](SampleBatch* b) { b->mutable_priorities()->RemoveLast(); });
  add("a times_sampled too many", [](SampleBatch* b) { b->add_times_sampled(1); });
  add("a probability missing", [](SampleBatch* b) { b->mutable_probabilities()->RemoveLast(); });
  add("a table size missing", [](SampleBatch* b) { b->mutable_table_sizes()->RemoveLast(); });
  add("a rate_limited missing", [](SampleBatch* b) { b->mutable_rate_limited()->RemoveLast(); });
  add("one policy version of two", [](SampleBatch* b) { b->add_policy_versions(3); });
  add("a key too many", [](SampleBatch* b) { b->add_keys(99); });
  add("leading dim 3 for 2 keys", [](SampleBatch* b) {
    b->mutable_columns(0)->mutable_tensor_shape()->mutable_dim(0)->set_size(3);
    b->mutable_columns(0)->set_tensor_content(std::string(3 * 2 * 3 * 4, '\x01'));
  });
  add("leading dim 1 for 2 keys", [](SampleBatch* b) {
    b->mutable_columns(1)->mutable_tensor_shape()->mutable_dim(0)->set_size(1);
    b->mutable_columns(1)->set_tensor_content(std::string(4, '\x01'));
  });
  add("a column without dims",
      [](SampleBatch* b) { b->mutable_columns(1)->mutable_tensor_shape()->clear_dim(); });
  add("a DT_STRING column", [](SampleBatch* b) {
    b->mutable_columns(1)->set_dtype(::tf_reverb::tf::DT_STRING);
    b->mutable_columns(1)->set_tensor_content(
        std::string("\x01\x01"
                    "ab",
                    4));
  });
  add("a DT_INVALID column",
      [](SampleBatch* b) { b->mutable_columns(1)->set_dtype(::tf_reverb::tf::DT_INVALID); });
  add("a negative dim", [](SampleBatch* b) {
    b->mutable_columns(0)->mutable_tensor_shape()->mutable_dim(2)->set_size(-3);
  });
  add("a byte too few",
      [](SampleBatch* b) { b->mutable_columns(0)->mutable_tensor_content()->pop_back(); });
  add("a byte too many",
      [](SampleBatch* b) { b->mutable_columns(1)->mutable_tensor_content()->push_back('\0'); });
  add("no content", [](SampleBatch* b) { b->mutable_columns(1)->clear_tensor_content(); });
  add("a large column a byte short (left in pieces)", [](SampleBatch* b) {
    b->mutable_columns(0)->mutable_tensor_shape()->mutable_dim(2)->set_size(3000);
    b->mutable_columns(0)->set_tensor_content(std::string(2 * 2 * 3000 * 4 - 1, '\x02'));
  });
  add("a squeeze flag missing", [](SampleBatch* b) { b->mutable_squeeze()->RemoveLast(); });
  add("a squeeze flag too many", [](SampleBatch* b) { b->add_squeeze(true); });
  add("squeeze flags without columns", [](SampleBatch* b) { b->clear_columns(); });
  for (const auto& [name, batch] : cases) {
    SCOPED_TRACE(name);
    const std::string bytes = BatchBytes(batch);
    for (size_t slice_bytes : {size_t{1}, size_t{7}, size_t{100000}}) {
      SampleStreamParser parser;
      std::vector<Sample> out;
      absl::Status status = parser.Parse(Reslice(bytes, slice_bytes), &out);
      EXPECT_TRUE(absl::IsInternal(status)) << status;
      EXPECT_TRUE(absl::StrContains(status.message(), "Malformed SampleStreamResponse")) << status;
      EXPECT_TRUE(out.empty());
      EXPECT_FALSE(parser.InSample());
    }
  }
  // Cut-off batches.
  const std::string bytes = BatchBytes(TwoSampleBatch());
  for (size_t cut = 1; cut < bytes.size(); cut += 7) {
    SampleStreamParser parser;
    std::vector<Sample> out;
    absl::Status status = parser.Parse(Reslice(bytes.substr(0, cut), 3), &out);
    EXPECT_TRUE(absl::IsInternal(status)) << cut << ": " << status;
    EXPECT_TRUE(out.empty());
  }
}

TEST(SampleStreamParserTest, BatchInsideAnEntriesSampleIsAnInternalError) {
  SampledItemFixture f = MakeSampledItem(7, {{ByteTensor({4, 10}, true, 9)}}, CodecPolicy::kSnappy);
  SampleStreamResponse half;
  auto* entry = half.add_entries();
  *entry->mutable_info() = SampleInfoOf(f.sampled);
  *entry->add_data() = f.chunks[0]->ToProto();
  const std::string batch = BatchBytes(TwoSampleBatch());
  {
    SCOPED_TRACE("in the next message");
    SampleStreamParser parser;
    std::vector<Sample> out;
    ASSERT_TRUE(parser.Parse(Reslice(half.SerializeAsString(), 100), &out).ok());
    EXPECT_TRUE(parser.InSample());
    absl::Status status = parser.Parse(Reslice(batch, 100), &out);
    EXPECT_TRUE(absl::IsInternal(status)) << status;
    EXPECT_TRUE(out.empty());
  }
  {
    SCOPED_TRACE("in the same message");
    SampleStreamParser parser;
    std::vector<Sample> out;
    absl::Status status = parser.Parse(Reslice(half.SerializeAsString() + batch, 100), &out);
    EXPECT_TRUE(absl::IsInternal(status)) << status;
    EXPECT_TRUE(out.empty());
  }
  {
    SCOPED_TRACE("after Reset, the batch is read");
    SampleStreamParser parser;
    std::vector<Sample> out;
    ASSERT_TRUE(parser.Parse(Reslice(half.SerializeAsString(), 100), &out).ok());
    parser.Reset();
    ASSERT_TRUE(parser.Parse(Reslice(batch, 100), &out).ok());
    EXPECT_EQ(out.size(), 2u);
  }
}

TEST(SampleStreamParserTest, BatchThenEntriesInOneStream) {
  std::vector<SampledItemFixture> small;
  for (uint64_t key = 1; key <= 3; ++key) {
    small.push_back(MakeSampledItem(key, {{ByteTensor({2, 8}, true, static_cast<uint32_t>(key))}},
                                    CodecPolicy::kSnappy));
  }
  std::vector<SampledItem> batched;
  for (const auto& f : small) batched.push_back(f.sampled);
  absl::StatusOr<std::vector<grpc::ByteBuffer>> batches = EncodeSampleBatches(batched);
  ASSERT_TRUE(batches.ok()) << batches.status();
  ASSERT_EQ(batches->size(), 1u);
  SampledItemFixture strings = MakeSampledItem(
      9, {{ByteTensor({2, 30000}, true, 4), tensor_testing::StringTensor({1}, {"x"})}},
      CodecPolicy::kZstd);
  absl::StatusOr<std::vector<grpc::ByteBuffer>> entries =
      EncodeSampleResponses({strings.sampled}, true);
  ASSERT_TRUE(entries.ok()) << entries.status();
  ASSERT_EQ(entries->size(), 1u);

  const auto check = [&](const std::vector<Sample>& out) {
    ASSERT_EQ(out.size(), 4u);
    for (size_t i = 0; i < 3; ++i) {
      ASSERT_NE(out[i].block(), nullptr);
      EXPECT_EQ(out[i].meta().key, i + 1);
      ExpectDecodesAs(out[i], small[i]);
    }
    EXPECT_EQ(out[3].block(), nullptr);
    EXPECT_EQ(out[3].meta().key, 9u);
    ExpectDecodesAs(out[3], strings);
  };
  {
    SCOPED_TRACE("two messages");
    SampleStreamParser parser;
    std::vector<Sample> out;
    ASSERT_TRUE(parser.Parse(Reslice(BufferBytes((*batches)[0]), 11), &out).ok());
    ASSERT_TRUE(parser.Parse(Reslice(BufferBytes((*entries)[0]), 1000), &out).ok());
    EXPECT_FALSE(parser.InSample());
    check(out);
  }
  {
    SCOPED_TRACE("one message holding both");
    SampleStreamParser parser;
    std::vector<Sample> out;
    const std::string both = BufferBytes((*batches)[0]) + BufferBytes((*entries)[0]);
    ASSERT_TRUE(parser.Parse(Reslice(both, 997), &out).ok());
    EXPECT_FALSE(parser.InSample());
    check(out);
  }
  {
    SCOPED_TRACE("entries, then the batch");
    SampleStreamParser parser;
    std::vector<Sample> out;
    ASSERT_TRUE(parser.Parse((*entries)[0], &out).ok());
    ASSERT_TRUE(parser.Parse((*batches)[0], &out).ok());
    ASSERT_EQ(out.size(), 4u);
    EXPECT_EQ(out[0].meta().key, 9u);
    EXPECT_EQ(out[0].block(), nullptr);
    for (size_t i = 0; i < 3; ++i) ExpectDecodesAs(out[i + 1], small[i]);
  }
}

// A shape whose byte count overflows int64 (4 * 2^61 * 8 per row) is
// rejected, not wrapped around to the size of an empty column.
TEST(SampleStreamParserTest, OverflowingColumnShapeIsAnInternalError) {
  SampleBatch batch = TwoSampleBatch();
  // 4 * 2^61 * 8 bytes per row: 2^66.
  auto* dims = batch.mutable_columns(0)->mutable_tensor_shape();
  dims->mutable_dim(1)->set_size(int64_t{1} << 61);
  dims->mutable_dim(2)->set_size(8);
  batch.mutable_columns(0)->clear_tensor_content();
  SampleStreamParser parser;
  std::vector<Sample> out;
  absl::Status status = parser.Parse(Reslice(BatchBytes(batch), 1000), &out);
  EXPECT_TRUE(absl::IsInternal(status)) << status;
  EXPECT_TRUE(out.empty());
}

}  // namespace
}  // namespace tf_reverb
