#include "server/service/insert_request.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"
#include "gtest/gtest.h"
#include "reverb_service.pb.h"
#include "schema.pb.h"
#include "server/chunk_codec.h"
#include "server/service/raw_request.h"
#include "server/service/server_insert_stream.h"
#include "server/testing/tensor_testing.h"
#include "tensor.pb.h"

namespace tf_reverb {
namespace {

using ::deepmind::reverb::ChunkData;
using ::deepmind::reverb::InsertStreamRequest;
using ::tf_reverb::tensor_testing::FromValues;
using WireChunk = ServerInsertStream::WireChunk;

// `bytes` as gRPC would hand them over: in slices of `slice_size` bytes.
grpc::ByteBuffer InSlices(absl::string_view bytes, size_t slice_size) {
  std::vector<grpc::Slice> slices;
  for (size_t at = 0; at < bytes.size(); at += slice_size) {
    const absl::string_view piece = bytes.substr(at, slice_size);
    slices.emplace_back(piece.data(), piece.size());
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

ChunkData Chunk(uint64_t key, int floats) {
  std::vector<float> values;
  for (int i = 0; i < floats; ++i) values.push_back(static_cast<float>(i % 13) * 0.5f);
  absl::StatusOr<ChunkData> chunk = BuildChunk(
      key, {FromValues<float>(::tf_reverb::tf::DT_FLOAT, {1, floats}, values)}, 7, 0, 1, false);
  EXPECT_TRUE(chunk.ok()) << chunk.status();
  return *chunk;
}

InsertStreamRequest Request() {
  InsertStreamRequest request;
  *request.add_chunks() = Chunk(11, 10);
  *request.add_chunks() = Chunk(12, 10000);  // 40 KB: spans many slices
  auto* item = request.add_items();
  item->set_key(5);
  item->set_table("t");
  item->set_priority(1.5);
  request.add_keep_chunk_keys(12);
  return request;
}

// The request protobuf parses from `bytes`.
InsertStreamRequest Parsed(const grpc::ByteBuffer& bytes) {
  InsertStreamRequest parsed;
  EXPECT_TRUE(ParseRequest(bytes, &parsed).ok());
  return parsed;
}

TEST(ReadInsertRequestTest, ChunksComeAsTheirBytesTheRestParsed) {
  const InsertStreamRequest request = Request();
  const std::string wire = request.SerializeAsString();
  for (size_t slice_size : {size_t{1}, size_t{7}, size_t{4096}, wire.size()}) {
    SCOPED_TRACE(slice_size);
    const grpc::ByteBuffer bytes = InSlices(wire, slice_size);
    InsertStreamRequest rest;
    std::vector<WireChunk> chunks;
    ASSERT_TRUE(ReadInsertRequest(bytes, &rest, &chunks).ok());
    ASSERT_EQ(chunks.size(), 2u);
    EXPECT_EQ(chunks[0].key, 11u);
    EXPECT_EQ(chunks[0].wire, request.chunks(0).SerializeAsString());
    EXPECT_EQ(chunks[1].key, 12u);
    EXPECT_EQ(chunks[1].wire, request.chunks(1).SerializeAsString());
    EXPECT_EQ(rest.chunks_size(), 0);
    InsertStreamRequest expected = request;
    expected.clear_chunks();
    EXPECT_EQ(rest.SerializeAsString(), expected.SerializeAsString());
  }
}

TEST(ReadInsertRequestTest, KeepsWhatProtobufKeepsOutsideTheChunks) {
  // Fields in any order, repeated, and unknown ones of each wire type
  // (field 1 as a varint is an unknown field to protobuf too).
  const InsertStreamRequest request = Request();
  std::string wire = request.items(0).SerializeAsString();
  wire = std::string("\x12", 1) + static_cast<char>(wire.size()) + wire;  // items, first
  wire += request.SerializeAsString();
  wire += std::string("\xa8\x1f\x05", 3);                    // field 501, varint
  wire += std::string("\xb1\x1f", 2) + std::string(8, 'x');  // field 502, fixed64
  wire += std::string("\xc5\x1f", 2) + std::string(4, 'w');  // field 504, fixed32
  wire += std::string("\x08\x2a", 2);                        // field 1 as a varint
  const grpc::ByteBuffer bytes = InSlices(wire, 100);
  InsertStreamRequest rest;
  std::vector<WireChunk> chunks;
  ASSERT_TRUE(ReadInsertRequest(bytes, &rest, &chunks).ok());
  ASSERT_EQ(chunks.size(), 2u);
  InsertStreamRequest expected = Parsed(bytes);
  expected.clear_chunks();
  EXPECT_EQ(rest.items_size(), 2);
  EXPECT_EQ(rest.SerializeAsString(), expected.SerializeAsString());
}

TEST(ReadInsertRequestTest, WhatIsNotPlainIsParsedWhole) {
  InsertStreamRequest request = Request();
  request.mutable_chunks(1)->mutable_data()->mutable_tensors(0)->add_int64_val(3);
  std::vector<std::string> wires = {request.SerializeAsString()};
  // A group at the top level, which protobuf keeps as an unknown field.
  wires.push_back(Request().SerializeAsString() + std::string("\xcb\x1f\x08\x01\xcc\x1f", 6));
  for (const std::string& wire : wires) {
    const grpc::ByteBuffer bytes = InSlices(wire, 512);
    InsertStreamRequest read;
    std::vector<WireChunk> chunks = {WireChunk{1, "left over"}};
    ASSERT_TRUE(ReadInsertRequest(bytes, &read, &chunks).ok());
    EXPECT_TRUE(chunks.empty());
    EXPECT_EQ(read.chunks_size(), 2);
    EXPECT_EQ(read.SerializeAsString(), Parsed(bytes).SerializeAsString());
  }
}

TEST(ReadInsertRequestTest, BadBytesFailAsParseRequest) {
  const std::string wire = Request().SerializeAsString();
  const std::vector<std::string> bad = {
      wire.substr(0, wire.size() - 1),  // cut short
      std::string("\x0a\xff\xff\xff\xff\x0f", 6),
      std::string("\x00", 1),
      // A table name that is not UTF-8.
      std::string("\x12\x04\x12\x02\xff\xfe", 6),
  };
  for (const std::string& bytes : bad) {
    const grpc::ByteBuffer buffer = InSlices(bytes, 3);
    InsertStreamRequest read;
    std::vector<WireChunk> chunks;
    const absl::Status status = ReadInsertRequest(buffer, &read, &chunks);
    InsertStreamRequest parsed;
    EXPECT_EQ(status, ParseRequest(buffer, &parsed));
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(chunks.empty());
  }
}

}  // namespace
}  // namespace tf_reverb
