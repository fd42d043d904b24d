#include "server/testing/sample_testing.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"
#include "gtest/gtest.h"
#include "server/chunk_codec.h"
#include "server/client/sample.h"
#include "server/item_record.h"
#include "server/table_chunk.h"
#include "server/table_item.h"
#include "server/tensor.h"
#include "tensor.pb.h"

namespace tf_reverb {
namespace testing {

Tensor ByteTensor(std::vector<int64_t> shape, bool random, uint32_t seed) {
  Tensor t;
  t.dtype = ::tf_reverb::tf::DT_UINT8;
  t.shape = std::move(shape);
  t.data.resize(t.num_elements());
  std::mt19937 gen(seed);
  for (size_t i = 0; i < t.data.size(); ++i) {
    t.data[i] = static_cast<char>(random ? gen() : (i / 97) % 7);
  }
  return t;
}

std::string BufferBytes(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(buffer.Dump(&slices).ok());
  std::string out;
  for (const auto& slice : slices)
    out.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  return out;
}

grpc::ByteBuffer Reslice(const std::string& bytes, size_t size) {
  std::vector<grpc::Slice> slices;
  for (size_t pos = 0; pos < bytes.size(); pos += size) {
    slices.emplace_back(bytes.data() + pos, std::min(size, bytes.size() - pos));
    slices.emplace_back();
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

SampledItemFixture MakeSampledItem(uint64_t key, std::vector<std::vector<Tensor>> chunk_columns,
                                   CodecPolicy codec) {
  SampledItemFixture f;
  f.chunk_columns = std::move(chunk_columns);
  auto item = std::make_shared<PrioritizedItem>();
  item->set_key(key);
  item->set_table("t");
  for (size_t c = 0; c < f.chunk_columns.size(); ++c) {
    const uint64_t chunk_key = key * 100 + c;
    absl::StatusOr<ChunkData> chunk =
        BuildChunk(chunk_key, f.chunk_columns[c], 1, 0, 0, false, codec);
    EXPECT_TRUE(chunk.ok()) << chunk.status();
    f.chunks.push_back(TableChunk::FromProto(*chunk));
    for (size_t t = 0; t < f.chunk_columns[c].size(); ++t) {
      auto* slice = item->mutable_flat_trajectory()->add_columns()->add_chunk_slices();
      slice->set_chunk_key(chunk_key);
      slice->set_offset(0);
      slice->set_length(f.chunk_columns[c][t].shape[0]);
      slice->set_index(static_cast<int32_t>(t));
    }
  }
  f.sampled.data =
      std::make_shared<const TableItem>(TableItem{ItemRecord::FromProto(*item), f.chunks});
  f.sampled.priority = 2.5;
  f.sampled.times_sampled = 3;
  f.sampled.probability = 0.25;
  f.sampled.table_size = 4;
  return f;
}

void ExpectDecodesAs(const Sample& sample, const SampledItemFixture& fixture) {
  int column = 0;
  for (const auto& columns : fixture.chunk_columns) {
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

}  // namespace testing
}  // namespace tf_reverb
