// SampleStreamParser: reads SampleStreamResponse bytes as protobuf writes
// them (also with unknown fields and an unfinished sample), however gRPC
// slices the message, and rejects cut-off messages as INTERNAL. The server
// side, and the round trip through both, are tested in
// server/service/sample_response_test.cc.
#include "server/client/sample_stream_parser.h"

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "grpcpp/support/byte_buffer.h"
#include "gtest/gtest.h"
#include "reverb_service.pb.h"
#include "server/chunk_codec.h"
#include "server/client/sample.h"
#include "server/service/sample_response.h"
#include "server/testing/sample_testing.h"

namespace tf_reverb {
namespace {

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
}

}  // namespace
}  // namespace tf_reverb
