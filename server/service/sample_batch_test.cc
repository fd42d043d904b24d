// EncodeSampleBatches (server side of SampleStream for clients that set
// accept_batches): a SampleBatch holds every sample's info in order and each
// column stacked as the reference decoding (Sample::FromSampledItem) gives
// it, whatever the chunks' codec, delta encoding, slice offsets and squeeze;
// what SampleStreamParser makes of it decodes the same however gRPC slices
// the message; samples that cannot be stacked give no response at all; the
// responses are split at kMaxSampleResponseBytes of column data, whose large
// payloads the byte buffers reference instead of copying. The parser's own
// tests of malformed batches are in server/client/sample_stream_parser_test.cc.
#include "server/service/sample_batch.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"
#include "gtest/gtest.h"
#include "reverb_service.pb.h"
#include "schema.pb.h"
#include "server/chunk_codec.h"
#include "server/client/sample.h"
#include "server/client/sample_stream_parser.h"
#include "server/item_record.h"
#include "server/service/sample_response.h"
#include "server/table_chunk.h"
#include "server/table_item.h"
#include "server/tensor.h"
#include "server/testing/sample_testing.h"
#include "server/testing/tensor_testing.h"
#include "server/trajectory_columns.h"
#include "tensor.pb.h"

namespace tf_reverb {
namespace {

using ::deepmind::reverb::SampleBatch;
using ::deepmind::reverb::SampleStreamResponse;
using ::tf_reverb::testing::BufferBytes;
using ::tf_reverb::testing::ByteTensor;
using ::tf_reverb::testing::Reslice;

// One slice of a column: tensor `index` of the item's chunk `chunk`, rows
// [offset, offset + length).
struct SliceDef {
  int chunk;
  int index;
  int offset;
  int length;
};
struct ColumnDef {
  std::vector<SliceDef> slices;
  bool squeeze = false;
};

// A sampled item over chunks of `chunk_tensors` (chunk c has key
// key * 100 + c) with `columns`; its sample fields derive from `key`.
SampledItem MakeItem(uint64_t key, const std::vector<std::vector<Tensor>>& chunk_tensors,
                     const std::vector<ColumnDef>& columns, CodecPolicy codec, bool delta,
                     std::optional<int64_t> policy_version) {
  PrioritizedItem item;
  item.set_key(key);
  item.set_table("t");
  if (policy_version.has_value()) item.set_policy_version(*policy_version);
  SampledItem sampled;
  TableItem data;
  for (size_t c = 0; c < chunk_tensors.size(); ++c) {
    absl::StatusOr<ChunkData> chunk =
        BuildChunk(key * 100 + c, chunk_tensors[c], 1, 0, 0, delta, codec);
    EXPECT_TRUE(chunk.ok()) << chunk.status();
    data.chunks.push_back(TableChunk::FromProto(*chunk));
  }
  for (const ColumnDef& def : columns) {
    auto* column = item.mutable_flat_trajectory()->add_columns();
    column->set_squeeze(def.squeeze);
    for (const SliceDef& s : def.slices) {
      auto* slice = column->add_chunk_slices();
      slice->set_chunk_key(key * 100 + s.chunk);
      slice->set_index(s.index);
      slice->set_offset(s.offset);
      slice->set_length(s.length);
    }
  }
  data.item = ItemRecord::FromProto(item);
  sampled.data = std::make_shared<const TableItem>(std::move(data));
  sampled.priority = 0.5 * static_cast<double>(key);
  sampled.times_sampled = static_cast<int32_t>(key) + 1;
  sampled.probability = 1.0 / static_cast<double>(key + 2);
  sampled.table_size = 100 + static_cast<int64_t>(key);
  sampled.rate_limited = key % 2 == 1;
  return sampled;
}

template <typename T>
Tensor RandomTensor(DataType dtype, std::vector<int64_t> shape, uint32_t seed) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::mt19937 gen(seed);
  std::vector<T> values(static_cast<size_t>(n));
  for (T& v : values) v = static_cast<T>(gen() % 1000) - static_cast<T>(gen() % 500);
  return tensor_testing::FromValues<T>(dtype, std::move(shape), values);
}

// An item of four columns: float32 [5, 3] from two chunks and a slice with an
// offset, a squeezed int64 scalar, int64 [4, 2] at an offset (delta encoded
// when `delta`), and an unsqueezed int64 [6].
SampledItem MixedItem(uint64_t key, CodecPolicy codec, bool delta,
                      std::optional<int64_t> policy_version = std::nullopt) {
  const uint32_t seed = static_cast<uint32_t>(key) * 17;
  std::vector<std::vector<Tensor>> chunks = {
      {RandomTensor<float>(tf::DT_FLOAT, {6, 3}, seed),
       RandomTensor<int64_t>(tf::DT_INT64, {6}, seed + 1),
       RandomTensor<int64_t>(tf::DT_INT64, {6, 2}, seed + 2)},
      {RandomTensor<float>(tf::DT_FLOAT, {4, 3}, seed + 3)},
  };
  std::vector<ColumnDef> columns = {
      {{{0, 0, 1, 3}, {1, 0, 0, 2}}, false},
      {{{0, 1, 4, 1}}, true},
      {{{0, 2, 2, 4}}, false},
      {{{0, 1, 0, 6}}, false},
  };
  return MakeItem(key, chunks, columns, codec, delta, policy_version);
}

std::vector<SampledItem> MixedItems(bool versions) {
  std::vector<SampledItem> items;
  for (uint64_t key = 1; key <= 5; ++key) {
    const CodecPolicy codec = key % 2 == 1 ? CodecPolicy::kSnappy : CodecPolicy::kZstd;
    std::optional<int64_t> version;
    if (versions) version = static_cast<int64_t>(key) * 10;
    items.push_back(MixedItem(key, codec, /*delta=*/key >= 3, version));
  }
  return items;
}

absl::StatusOr<std::vector<SampleStreamResponse>> ParseAll(
    const std::vector<grpc::ByteBuffer>& buffers) {
  std::vector<SampleStreamResponse> out;
  for (const auto& buffer : buffers) {
    out.emplace_back();
    if (!out.back().ParseFromString(BufferBytes(buffer))) {
      return absl::InternalError("does not parse");
    }
  }
  return out;
}

// `bytes` in slices of 1, 3, 17, 256, 2, ... bytes (and empty ones).
grpc::ByteBuffer UnevenReslice(const std::string& bytes) {
  static constexpr size_t kSizes[] = {1, 3, 17, 256, 2, 4093, 5};
  std::vector<grpc::Slice> slices;
  size_t pos = 0;
  for (size_t i = 0; pos < bytes.size(); ++i) {
    const size_t n = std::min(kSizes[i % 7], bytes.size() - pos);
    slices.emplace_back(bytes.data() + pos, n);
    if (i % 3 == 0) slices.emplace_back();
    pos += n;
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

// Checks that `batch`'s row `row` is `sampled` as the reference decodes it.
void ExpectBatchRow(const SampleBatch& batch, int row, const SampledItem& sampled) {
  SCOPED_TRACE(row);
  EXPECT_EQ(batch.keys(row), sampled.data->item.key());
  EXPECT_EQ(batch.priorities(row), sampled.priority);
  EXPECT_EQ(batch.times_sampled(row), sampled.times_sampled);
  EXPECT_EQ(batch.probabilities(row), sampled.probability);
  EXPECT_EQ(batch.table_sizes(row), sampled.table_size);
  EXPECT_EQ(batch.rate_limited(row), sampled.rate_limited);
  const Sample reference = Sample::FromSampledItem(sampled);
  ASSERT_EQ(batch.columns_size(), reference.num_columns());
  ASSERT_EQ(batch.squeeze_size(), reference.num_columns());
  for (int c = 0; c < reference.num_columns(); ++c) {
    SCOPED_TRACE(c);
    absl::StatusOr<Tensor> expected = reference.UnpackColumn(c);
    ASSERT_TRUE(expected.ok()) << expected.status();
    const tf::TensorProto& column = batch.columns(c);
    EXPECT_EQ(batch.squeeze(c), reference.squeezed(c));
    EXPECT_EQ(column.dtype(), expected->dtype);
    ASSERT_EQ(column.tensor_shape().dim_size(), static_cast<int>(expected->shape.size()) + 1);
    EXPECT_EQ(column.tensor_shape().dim(0).size(), batch.keys_size());
    for (size_t d = 0; d < expected->shape.size(); ++d) {
      EXPECT_EQ(column.tensor_shape().dim(static_cast<int>(d) + 1).size(), expected->shape[d]);
    }
    const size_t row_bytes = expected->data.size();
    ASSERT_EQ(column.tensor_content().size(), row_bytes * batch.keys_size());
    EXPECT_TRUE(column.tensor_content().substr(row * row_bytes, row_bytes) == expected->data)
        << "row bytes differ from the reference decoding";
  }
}

// Checks that a parsed `sample` is `sampled` as the reference decodes it.
void ExpectParsedSample(const Sample& sample, const SampledItem& sampled, bool version) {
  SCOPED_TRACE(sampled.data->item.key());
  ASSERT_NE(sample.block(), nullptr);
  EXPECT_TRUE(sample.chunks().empty());
  EXPECT_EQ(sample.meta().key, sampled.data->item.key());
  EXPECT_EQ(sample.meta().priority, sampled.priority);
  EXPECT_EQ(sample.meta().times_sampled, sampled.times_sampled);
  EXPECT_EQ(sample.meta().probability, sampled.probability);
  EXPECT_EQ(sample.meta().table_size, sampled.table_size);
  EXPECT_EQ(sample.meta().rate_limited, sampled.rate_limited);
  EXPECT_EQ(sample.meta().policy_version, version ? sampled.data->item.policy_version() : 0);
  const Sample reference = Sample::FromSampledItem(sampled);
  ASSERT_EQ(sample.num_columns(), reference.num_columns());
  absl::StatusOr<std::vector<ColumnSpec>> specs = sample.ColumnSpecs();
  absl::StatusOr<std::vector<ColumnSpec>> expected_specs = reference.ColumnSpecs();
  ASSERT_TRUE(specs.ok()) << specs.status();
  ASSERT_TRUE(expected_specs.ok()) << expected_specs.status();
  ASSERT_TRUE(*specs == *expected_specs);
  for (int c = 0; c < reference.num_columns(); ++c) {
    SCOPED_TRACE(c);
    EXPECT_EQ(sample.squeezed(c), reference.squeezed(c));
    const size_t bytes = static_cast<size_t>(ColumnBytes((*specs)[c]));
    std::string got(bytes, '\xee'), want(bytes, '\x11');
    ASSERT_TRUE(sample.UnpackColumnInto(c, got.data()).ok());
    ASSERT_TRUE(reference.UnpackColumnInto(c, want.data()).ok());
    EXPECT_TRUE(got == want) << "column bytes differ from the reference decoding";
    absl::StatusOr<Tensor> tensor = sample.UnpackColumn(c);
    absl::StatusOr<Tensor> expected = reference.UnpackColumn(c);
    ASSERT_TRUE(tensor.ok()) << tensor.status();
    ASSERT_TRUE(expected.ok()) << expected.status();
    EXPECT_EQ(tensor->dtype, expected->dtype);
    EXPECT_EQ(tensor->shape, expected->shape);
    EXPECT_TRUE(tensor->data == expected->data);
  }
}

TEST(SampleBatchTest, NoSamplesNoResponses) {
  absl::StatusOr<std::vector<grpc::ByteBuffer>> responses = EncodeSampleBatches({});
  ASSERT_TRUE(responses.ok()) << responses.status();
  EXPECT_TRUE(responses->empty());
}

TEST(SampleBatchTest, SmallItemsStackIntoOneBatch) {
  const std::vector<SampledItem> items = MixedItems(/*versions=*/false);
  // Snappy and zstd chunks, with and without delta encoding.
  EXPECT_EQ(items[0].data->chunks[0]->compression(), kSnappy);
  EXPECT_EQ(items[1].data->chunks[0]->compression(), kZstd);
  EXPECT_FALSE(items[1].data->chunks[0]->View()->delta_encoded);
  EXPECT_TRUE(items[2].data->chunks[0]->View()->delta_encoded);
  EXPECT_EQ(items[3].data->chunks[0]->compression(), kZstd);
  EXPECT_TRUE(items[3].data->chunks[0]->View()->delta_encoded);
  // The items do differ, so that rows cannot be mixed up unnoticed.
  ASSERT_NE(Sample::FromSampledItem(items[0]).UnpackColumn(0)->data,
            Sample::FromSampledItem(items[1]).UnpackColumn(0)->data);
  absl::StatusOr<std::vector<grpc::ByteBuffer>> responses = EncodeSampleBatches(items);
  ASSERT_TRUE(responses.ok()) << responses.status();
  ASSERT_EQ(responses->size(), 1u);
  absl::StatusOr<std::vector<SampleStreamResponse>> parsed = ParseAll(*responses);
  ASSERT_TRUE(parsed.ok());
  const SampleStreamResponse& response = (*parsed)[0];
  EXPECT_EQ(response.entries_size(), 0);
  ASSERT_TRUE(response.has_batch());
  const SampleBatch& batch = response.batch();
  const int n = static_cast<int>(items.size());
  ASSERT_EQ(batch.keys_size(), n);
  ASSERT_EQ(batch.priorities_size(), n);
  ASSERT_EQ(batch.times_sampled_size(), n);
  ASSERT_EQ(batch.probabilities_size(), n);
  ASSERT_EQ(batch.table_sizes_size(), n);
  ASSERT_EQ(batch.rate_limited_size(), n);
  EXPECT_EQ(batch.policy_versions_size(), 0);
  ASSERT_EQ(batch.squeeze_size(), 4);
  EXPECT_FALSE(batch.squeeze(0));
  EXPECT_TRUE(batch.squeeze(1));
  EXPECT_FALSE(batch.squeeze(2));
  EXPECT_FALSE(batch.squeeze(3));
  // Shapes [n, ...]: float [5, 3], int64 scalar, int64 [4, 2], int64 [6].
  ASSERT_EQ(batch.columns_size(), 4);
  const std::vector<std::vector<int64_t>> shapes = {{n, 5, 3}, {n}, {n, 4, 2}, {n, 6}};
  const std::vector<int> dtypes = {tf::DT_FLOAT, tf::DT_INT64, tf::DT_INT64, tf::DT_INT64};
  for (int c = 0; c < 4; ++c) {
    std::vector<int64_t> shape;
    for (const auto& dim : batch.columns(c).tensor_shape().dim()) shape.push_back(dim.size());
    EXPECT_EQ(shape, shapes[c]) << c;
    EXPECT_EQ(batch.columns(c).dtype(), dtypes[c]) << c;
  }
  for (int i = 0; i < n; ++i) ExpectBatchRow(batch, i, items[i]);
}

TEST(SampleBatchTest, RoundTripThroughParser) {
  for (bool versions : {false, true}) {
    SCOPED_TRACE(versions);
    const std::vector<SampledItem> items = MixedItems(versions);
    absl::StatusOr<std::vector<grpc::ByteBuffer>> responses = EncodeSampleBatches(items);
    ASSERT_TRUE(responses.ok()) << responses.status();
    ASSERT_EQ(responses->size(), 1u);
    absl::StatusOr<std::vector<SampleStreamResponse>> parsed = ParseAll(*responses);
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ((*parsed)[0].batch().policy_versions_size(), versions ? 5 : 0);
    const std::string bytes = BufferBytes((*responses)[0]);
    // 0: as sent; 1000 + 1: uneven slices.
    for (size_t slice_bytes : {size_t{0}, size_t{1}, size_t{7}, size_t{1000}, size_t{1001}}) {
      SCOPED_TRACE(slice_bytes);
      const grpc::ByteBuffer message = slice_bytes == 0      ? (*responses)[0]
                                       : slice_bytes == 1001 ? UnevenReslice(bytes)
                                                             : Reslice(bytes, slice_bytes);
      SampleStreamParser parser;
      std::vector<Sample> out;
      absl::Status status = parser.Parse(message, &out);
      ASSERT_TRUE(status.ok()) << status;
      EXPECT_FALSE(parser.InSample());
      ASSERT_EQ(out.size(), items.size());
      for (size_t i = 0; i < items.size(); ++i) {
        ExpectParsedSample(out[i], items[i], versions);
        EXPECT_EQ(out[i].row(), static_cast<int64_t>(i));
        EXPECT_EQ(out[i].block(), out[0].block()) << "one block per batch";
      }
    }
  }
}

TEST(SampleBatchTest, EncodesEveryDtypeOfAnItem) {
  // Numeric dtypes of 1, 2, 4 and 8 bytes, and bool, each as a column.
  std::vector<Tensor> tensors = {
      ByteTensor({3, 5}, true, 1),
      RandomTensor<int16_t>(tf::DT_INT16, {3, 2}, 2),
      RandomTensor<double>(tf::DT_DOUBLE, {3}, 3),
      RandomTensor<uint32_t>(tf::DT_UINT32, {3, 1}, 4),
      tensor_testing::FromValues<uint8_t>(tf::DT_BOOL, {3}, {1, 0, 1}),
  };
  std::vector<ColumnDef> columns;
  for (int t = 0; t < static_cast<int>(tensors.size()); ++t) {
    columns.push_back({{{0, t, 1, 2}}, false});
  }
  std::vector<SampledItem> items = {
      MakeItem(1, {tensors}, columns, CodecPolicy::kSnappy, false, 5),
      MakeItem(2, {tensors}, columns, CodecPolicy::kZstd, false, 6),
  };
  absl::StatusOr<std::vector<grpc::ByteBuffer>> responses = EncodeSampleBatches(items);
  ASSERT_TRUE(responses.ok()) << responses.status();
  ASSERT_EQ(responses->size(), 1u);
  absl::StatusOr<std::vector<SampleStreamResponse>> parsed = ParseAll(*responses);
  ASSERT_TRUE(parsed.ok());
  for (int i = 0; i < 2; ++i) ExpectBatchRow((*parsed)[0].batch(), i, items[i]);
  SampleStreamParser parser;
  std::vector<Sample> out;
  ASSERT_TRUE(parser.Parse((*responses)[0], &out).ok());
  ASSERT_EQ(out.size(), 2u);
  for (int i = 0; i < 2; ++i) ExpectParsedSample(out[i], items[i], true);
}

// Two items that differ in one respect: no batch, and no error.
// Twice: the first time decodes the small items into their caches, the
// second reads those.
void ExpectNotBatched(const std::vector<SampledItem>& items) {
  for (int pass = 0; pass < 2; ++pass) {
    absl::StatusOr<std::vector<grpc::ByteBuffer>> responses = EncodeSampleBatches(items);
    ASSERT_TRUE(responses.ok()) << responses.status();
    EXPECT_TRUE(responses->empty()) << "pass " << pass;
  }
}

TEST(SampleBatchTest, FallsBackWhenSamplesCannotBeStacked) {
  const std::vector<ColumnDef> one_column = {{{{0, 0, 0, 2}}, false}};
  const Tensor f32 = RandomTensor<float>(tf::DT_FLOAT, {2, 3}, 1);
  const SampledItem base = MakeItem(1, {{f32}}, one_column, CodecPolicy::kSnappy, false, {});
  {
    SCOPED_TRACE("control: equal specs are batched");
    const SampledItem same = MakeItem(2, {{f32}}, one_column, CodecPolicy::kZstd, false, {});
    absl::StatusOr<std::vector<grpc::ByteBuffer>> responses = EncodeSampleBatches({base, same});
    ASSERT_TRUE(responses.ok()) << responses.status();
    EXPECT_EQ(responses->size(), 1u);
  }
  {
    SCOPED_TRACE("a DT_STRING column");
    const SampledItem strings = MakeItem(3, {{f32, tensor_testing::StringTensor({2}, {"a", "bc"})}},
                                         {{{{0, 0, 0, 2}}, false}, {{{0, 1, 0, 2}}, false}},
                                         CodecPolicy::kSnappy, false, {});
    ExpectNotBatched({strings});
    ExpectNotBatched({strings, strings});
  }
  {
    SCOPED_TRACE("inner shapes differ");
    const SampledItem wider = MakeItem(4, {{RandomTensor<float>(tf::DT_FLOAT, {2, 4}, 2)}},
                                       one_column, CodecPolicy::kSnappy, false, {});
    ExpectNotBatched({base, wider});
    ExpectNotBatched({wider, base});
  }
  {
    SCOPED_TRACE("numbers of rows differ");
    const SampledItem shorter =
        MakeItem(5, {{f32}}, {{{{0, 0, 0, 1}}, false}}, CodecPolicy::kSnappy, false, {});
    ExpectNotBatched({base, shorter});
    ExpectNotBatched({shorter, base});
  }
  {
    SCOPED_TRACE("dtypes differ, byte sizes equal");
    const SampledItem i32 = MakeItem(6, {{RandomTensor<int32_t>(tf::DT_INT32, {2, 3}, 3)}},
                                     one_column, CodecPolicy::kSnappy, false, {});
    ExpectNotBatched({base, i32});
    ExpectNotBatched({i32, base});
  }
  {
    SCOPED_TRACE("squeeze differs");
    const Tensor one_row = RandomTensor<float>(tf::DT_FLOAT, {1, 3}, 4);
    const SampledItem squeezed =
        MakeItem(7, {{one_row}}, {{{{0, 0, 0, 1}}, true}}, CodecPolicy::kSnappy, false, {});
    const SampledItem unsqueezed =
        MakeItem(8, {{one_row}}, {{{{0, 0, 0, 1}}, false}}, CodecPolicy::kSnappy, false, {});
    ExpectNotBatched({squeezed, unsqueezed});
    ExpectNotBatched({unsqueezed, squeezed});
  }
  {
    SCOPED_TRACE("numbers of columns differ");
    const SampledItem two =
        MakeItem(9, {{f32, f32}}, {{{{0, 0, 0, 2}}, false}, {{{0, 1, 0, 2}}, false}},
                 CodecPolicy::kSnappy, false, {});
    ExpectNotBatched({base, two});
    ExpectNotBatched({two, base});
  }
  {
    SCOPED_TRACE("policy version on one item only");
    const SampledItem versioned = MakeItem(10, {{f32}}, one_column, CodecPolicy::kSnappy, false, 3);
    ExpectNotBatched({base, versioned});
    ExpectNotBatched({versioned, base});
  }
  {
    SCOPED_TRACE("a sample decoding to more than kMaxBatchedSampleBytes");
    const std::vector<ColumnDef> bytes_column = {{{{0, 0, 0, 1}}, false}};
    const SampledItem at_limit = MakeItem(11, {{ByteTensor({1, kMaxBatchedSampleBytes}, true, 5)}},
                                          bytes_column, CodecPolicy::kSnappy, false, {});
    absl::StatusOr<std::vector<grpc::ByteBuffer>> responses = EncodeSampleBatches({at_limit});
    ASSERT_TRUE(responses.ok()) << responses.status();
    EXPECT_EQ(responses->size(), 1u) << "exactly kMaxBatchedSampleBytes is batched";
    const SampledItem over = MakeItem(12, {{ByteTensor({1, kMaxBatchedSampleBytes + 1}, true, 6)}},
                                      bytes_column, CodecPolicy::kSnappy, false, {});
    ExpectNotBatched({over});
    ExpectNotBatched({over, over});
    // Over the limit in total only through several columns.
    const SampledItem columns = MakeItem(
        13,
        {{ByteTensor({1, kMaxBatchedSampleBytes / 2}, true, 7), ByteTensor({1, 1}, true, 8),
          ByteTensor({1, kMaxBatchedSampleBytes / 2}, true, 9)}},
        {{{{0, 0, 0, 1}}, false}, {{{0, 1, 0, 1}}, false}, {{{0, 2, 0, 1}}, false}},
        CodecPolicy::kSnappy, false, {});
    ExpectNotBatched({columns});
  }
}

// A small item is decoded once into its ItemRowsCache; later batches copy
// its rows from there and are the same bytes, also mixed with items not yet
// cached. Items over kMaxCachedRowBytes, or with a string column, are not
// cached (and are batched, or not, as before).
TEST(SampleBatchTest, SmallItemsAreDecodedOnceAndServedFromTheirCache) {
  for (bool versions : {false, true}) {
    SCOPED_TRACE(versions);
    std::vector<SampledItem> items = MixedItems(versions);
    for (const SampledItem& item : items) EXPECT_TRUE(item.data->rows.Peek().empty());
    absl::StatusOr<std::vector<grpc::ByteBuffer>> first = EncodeSampleBatches(items);
    ASSERT_TRUE(first.ok()) << first.status();
    ASSERT_EQ(first->size(), 1u);
    for (const SampledItem& item : items) EXPECT_FALSE(item.data->rows.Peek().empty());
    // Cached items again, in another order, with a fresh one between them.
    std::vector<SampledItem> again = {items[3], items[0], MixedItem(9, CodecPolicy::kSnappy, true),
                                      items[4], items[1], items[2]};
    if (versions) {
      again[2] = MixedItem(9, CodecPolicy::kSnappy, true, 90);
    }
    absl::StatusOr<std::vector<grpc::ByteBuffer>> second = EncodeSampleBatches(again);
    ASSERT_TRUE(second.ok()) << second.status();
    ASSERT_EQ(second->size(), 1u);
    SampleStreamResponse response;
    ASSERT_TRUE(response.ParseFromString(BufferBytes((*second)[0])));
    ASSERT_TRUE(response.has_batch());
    ASSERT_EQ(response.batch().keys_size(), static_cast<int>(again.size()));
    for (size_t i = 0; i < again.size(); ++i) {
      ExpectBatchRow(response.batch(), static_cast<int>(i), again[i]);
    }
    // The first batch, encoded again from the caches alone, is the same.
    absl::StatusOr<std::vector<grpc::ByteBuffer>> repeat = EncodeSampleBatches(items);
    ASSERT_TRUE(repeat.ok()) << repeat.status();
    ASSERT_EQ(repeat->size(), 1u);
    EXPECT_EQ(BufferBytes((*repeat)[0]), BufferBytes((*first)[0]));
  }
  const std::vector<ColumnDef> one_column = {{{{0, 0, 0, 1}}, false}};
  const SampledItem over =
      MakeItem(20, {{RandomTensor<float>(tf::DT_FLOAT, {1, kMaxCachedRowBytes / 4 + 1}, 20)}},
               one_column, CodecPolicy::kSnappy, false, {});
  const SampledItem at =
      MakeItem(21, {{RandomTensor<float>(tf::DT_FLOAT, {1, kMaxCachedRowBytes / 4}, 21)}},
               one_column, CodecPolicy::kSnappy, false, {});
  for (const SampledItem& item : {over, at}) {
    absl::StatusOr<std::vector<grpc::ByteBuffer>> responses = EncodeSampleBatches({item, item});
    ASSERT_TRUE(responses.ok()) << responses.status();
    ASSERT_EQ(responses->size(), 1u);
    SampleStreamResponse response;
    ASSERT_TRUE(response.ParseFromString(BufferBytes((*responses)[0])));
    ExpectBatchRow(response.batch(), 1, item);
  }
  EXPECT_TRUE(over.data->rows.Peek().empty()) << "over kMaxCachedRowBytes: not cached";
  EXPECT_FALSE(at.data->rows.Peek().empty());
  const SampledItem strings = MakeItem(
      22,
      {{RandomTensor<float>(tf::DT_FLOAT, {1, 3}, 22), tensor_testing::StringTensor({1}, {"a"})}},
      {{{{0, 0, 0, 1}}, false}, {{{0, 1, 0, 1}}, false}}, CodecPolicy::kSnappy, false, {});
  ExpectNotBatched({strings});
  EXPECT_TRUE(strings.data->rows.Peek().empty());
}

// Threads batching the same fresh items at once (one of them fills each
// cache) all send the reference rows.
TEST(SampleBatchTest, ConcurrentBatchesOfTheSameItemsAgree) {
  const std::vector<SampledItem> items = MixedItems(/*versions=*/false);
  absl::StatusOr<std::vector<grpc::ByteBuffer>> reference =
      EncodeSampleBatches(MixedItems(/*versions=*/false));
  ASSERT_TRUE(reference.ok()) << reference.status();
  ASSERT_EQ(reference->size(), 1u);
  const std::string want = BufferBytes((*reference)[0]);
  std::vector<std::string> got(4);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < got.size(); ++t) {
    threads.emplace_back([&items, &got, t] {
      for (int round = 0; round < 20; ++round) {
        absl::StatusOr<std::vector<grpc::ByteBuffer>> responses = EncodeSampleBatches(items);
        if (!responses.ok() || responses->size() != 1) return;
        got[t] = BufferBytes((*responses)[0]);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (const std::string& bytes : got) EXPECT_EQ(bytes, want);
}

// Large samples over rows of chunks that hold more than the sample (items
// over steps sharing chunks) are batched: only their rows travel.
TEST(SampleBatchTest, LargeSamplesOverPartsOfChunksAreBatched) {
  // Random (incompressible) rows of 16 KiB; each chunk holds 8 rows.
  const int64_t row = 16 << 10;
  const std::vector<Tensor> chunk0 = {ByteTensor({8, row}, true, 1)};
  const std::vector<Tensor> chunk1 = {ByteTensor({8, row}, true, 2)};
  // Rows 4..7 of chunk 0 and 0..5 of chunk 1: 10 rows (160 KiB) of 256 KiB.
  const std::vector<ColumnDef> part = {{{{0, 0, 4, 4}, {1, 0, 0, 6}}, false}};
  std::vector<SampledItem> samples;
  for (uint64_t key = 1; key <= 3; ++key) {
    samples.push_back(MakeItem(key, {chunk0, chunk1}, part, CodecPolicy::kSnappy, false, {}));
  }
  absl::StatusOr<std::vector<grpc::ByteBuffer>> responses = EncodeSampleBatches(samples);
  ASSERT_TRUE(responses.ok()) << responses.status();
  ASSERT_EQ(responses->size(), 1u);
  SampleStreamResponse response;
  ASSERT_TRUE(response.ParseFromString(BufferBytes((*responses)[0])));
  ASSERT_TRUE(response.has_batch());
  ASSERT_EQ(response.batch().columns_size(), 1);
  EXPECT_EQ(response.batch().columns(0).tensor_content().size(), 3u * 10 * row);
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<Tensor> expected = Sample::FromSampledItem(samples[i]).UnpackColumn(0);
    ASSERT_TRUE(expected.ok()) << expected.status();
    EXPECT_EQ(response.batch().columns(0).tensor_content().substr(i * 10 * row, 10 * row),
              expected->data);
  }
  // The same sample over all the rows of its chunks travels as its chunks.
  const std::vector<ColumnDef> whole = {{{{0, 0, 0, 8}, {1, 0, 0, 8}}, false}};
  ExpectNotBatched({MakeItem(4, {chunk0, chunk1}, whole, CodecPolicy::kSnappy, false, {})});
}

TEST(SampleBatchTest, ErrorsOfBrokenItems) {
  const Tensor f32 = RandomTensor<float>(tf::DT_FLOAT, {2, 3}, 1);
  SampledItem missing =
      MakeItem(1, {{f32}}, {{{{0, 0, 0, 2}}, false}}, CodecPolicy::kSnappy, false, {});
  missing.data = std::make_shared<const TableItem>(TableItem{missing.data->item, {}});
  absl::StatusOr<std::vector<grpc::ByteBuffer>> responses = EncodeSampleBatches({missing});
  EXPECT_TRUE(absl::IsInvalidArgument(responses.status())) << responses.status();

  // A later item that lacks its chunk.
  SampledItem fine =
      MakeItem(2, {{f32}}, {{{{0, 0, 0, 2}}, false}}, CodecPolicy::kSnappy, false, {});
  responses = EncodeSampleBatches({fine, missing});
  EXPECT_FALSE(responses.ok());

  // A corrupt payload.
  SampledItem corrupt =
      MakeItem(3, {{f32}}, {{{{0, 0, 0, 2}}, false}}, CodecPolicy::kSnappy, false, {});
  ChunkData corrupted = corrupt.data->chunks[0]->ToProto();
  std::string* content = corrupted.mutable_data()->mutable_tensors(0)->mutable_tensor_content();
  std::fill(content->begin(), content->end(), '\xff');
  std::shared_ptr<const TableChunk> chunk = TableChunk::FromProto(corrupted);
  corrupt.data = std::make_shared<const TableItem>(TableItem{corrupt.data->item, {chunk}});
  responses = EncodeSampleBatches({fine, corrupt});
  EXPECT_FALSE(responses.ok()) << "a corrupt chunk must not be sent as a batch";
}

// Rows of the large items: three of them and an int32 fill a sample up to
// kMaxBatchedSampleBytes.
constexpr int64_t kLargeRow = (kMaxBatchedSampleBytes - 4) / 3;

std::vector<SampledItem> LargeItems(size_t count) {
  std::vector<SampledItem> items;
  for (uint64_t key = 1; key <= count; ++key) {
    items.push_back(
        MakeItem(key,
                 {{ByteTensor({3, kLargeRow}, true, static_cast<uint32_t>(key)),
                   RandomTensor<int32_t>(tf::DT_INT32, {3}, static_cast<uint32_t>(key))}},
                 {{{{0, 0, 0, 3}}, false}, {{{0, 1, 2, 1}}, true}},
                 key % 2 == 0 ? CodecPolicy::kZstd : CodecPolicy::kSnappy, false, {}));
  }
  return items;
}

// 160 samples of up to kMaxBatchedSampleBytes: more than one response holds.
TEST(SampleBatchTest, SplitsAtMaxSampleResponseBytes) {
  const std::vector<SampledItem> items = LargeItems(160);
  const int64_t sample_bytes = 3 * kLargeRow + 4;
  ASSERT_LE(sample_bytes, kMaxBatchedSampleBytes);
  ASSERT_GT(sample_bytes * 160, kMaxSampleResponseBytes);
  absl::StatusOr<std::vector<grpc::ByteBuffer>> responses = EncodeSampleBatches(items);
  ASSERT_TRUE(responses.ok()) << responses.status();
  ASSERT_GE(responses->size(), 2u);
  absl::StatusOr<std::vector<SampleStreamResponse>> parsed = ParseAll(*responses);
  ASSERT_TRUE(parsed.ok());
  size_t next = 0;
  for (size_t r = 0; r < parsed->size(); ++r) {
    SCOPED_TRACE(r);
    const SampleBatch& batch = (*parsed)[r].batch();
    ASSERT_GE(batch.keys_size(), 1);
    int64_t column_bytes = 0;
    for (const auto& column : batch.columns()) column_bytes += column.tensor_content().size();
    EXPECT_LE(column_bytes, kMaxSampleResponseBytes);
    if (r + 1 < parsed->size()) {
      // Not split more than needed: one more sample would not have fit.
      EXPECT_GT(column_bytes + sample_bytes, kMaxSampleResponseBytes);
    }
    for (int i = 0; i < batch.keys_size(); ++i) {
      ASSERT_LT(next, items.size());
      ExpectBatchRow(batch, i, items[next++]);
    }
  }
  EXPECT_EQ(next, items.size());

  // Through the parser, also in 1000-byte slices.
  for (size_t slice_bytes : {size_t{0}, size_t{1000}}) {
    SCOPED_TRACE(slice_bytes);
    SampleStreamParser parser;
    std::vector<Sample> out;
    for (const auto& buffer : *responses) {
      const grpc::ByteBuffer message =
          slice_bytes == 0 ? buffer : Reslice(BufferBytes(buffer), slice_bytes);
      ASSERT_TRUE(parser.Parse(message, &out).ok());
    }
    ASSERT_EQ(out.size(), items.size());
    for (size_t i = 0; i < items.size(); ++i) ExpectParsedSample(out[i], items[i], false);
    EXPECT_NE(out.front().block(), out.back().block());
  }
}

TEST(SampleBatchTest, OneMismatchAnywhereMeansNoResponseAtAll) {
  // The mismatch is in the last response's group: no partial batches.
  std::vector<SampledItem> items = LargeItems(160);
  items.back() =
      MakeItem(160,
               {{RandomTensor<int8_t>(tf::DT_INT8, {3, kLargeRow}, 1),
                 RandomTensor<int32_t>(tf::DT_INT32, {3}, 2)}},
               {{{{0, 0, 0, 3}}, false}, {{{0, 1, 2, 1}}, true}}, CodecPolicy::kSnappy, false, {});
  ExpectNotBatched(items);
}

TEST(SampleBatchTest, LargeColumnsAreReferencedNotCopied) {
  const std::vector<SampledItem> items = LargeItems(4);
  absl::StatusOr<std::vector<grpc::ByteBuffer>> responses = EncodeSampleBatches(items);
  ASSERT_TRUE(responses.ok()) << responses.status();
  ASSERT_EQ(responses->size(), 1u);
  const size_t column_bytes = 4 * 3 * kLargeRow;
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE((*responses)[0].Dump(&slices).ok());
  const grpc::Slice* column_slice = nullptr;
  for (const auto& slice : slices) {
    if (slice.size() == column_bytes) column_slice = &slice;
  }
  ASSERT_NE(column_slice, nullptr) << "the large column is not a slice of its own";
  // The parser leaves it there: the block's column is that very slice.
  SampleStreamParser parser;
  std::vector<Sample> out;
  ASSERT_TRUE(parser.Parse((*responses)[0], &out).ok());
  ASSERT_EQ(out.size(), 4u);
  const SampleBlock* block = out[0].block();
  ASSERT_NE(block, nullptr);
  ASSERT_EQ(block->columns[0].size(), 1u);
  EXPECT_EQ(block->columns[0][0].data(), reinterpret_cast<const char*>(column_slice->begin()));
  EXPECT_EQ(block->columns[0][0].size(), column_bytes);
  EXPECT_TRUE(block->copies[0].empty());
  EXPECT_FALSE(block->copies[1].empty()) << "small columns are copied";
  // The samples keep the message alive: drop every other reference.
  slices.clear();
  responses = absl::InternalError("gone");
  for (size_t i = 0; i < items.size(); ++i) ExpectParsedSample(out[i], items[i], false);
}

}  // namespace
}  // namespace tf_reverb
