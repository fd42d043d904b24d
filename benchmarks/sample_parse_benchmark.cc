// CPU a sampling client spends per sample between gRPC and the batch, for
// the large transitions of benchmarks/torch_jax_replay.py (obs and next_obs
// uint8[84, 84, 4] of random bytes, an int64 action, float32 reward and
// discount, each column its own one-row chunk, as the TrajectoryWriter
// writes one-step items):
//
//  * parse:  SampleStreamParser::Parse of the server's responses
//            (EncodeSampleResponses), cut into 8 KiB slices as gRPC hands
//            them over, into Samples, released afterwards;
//  * unpack: every column of every sample decoded into a batch row
//            (Sample::UnpackColumnInto), the copy a batch needs.
//
// CPU time is the thread's (CLOCK_THREAD_CPUTIME_ID), so other load on the
// machine changes it little; the same samples are parsed --rounds times.
// Prints one JSON line of microseconds per sample (medians over rounds).
//
//   bazel run -c opt //benchmarks:sample_parse_benchmark -- --rounds 200

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "benchmarks/benchmark_support.h"
#include "grpcpp/support/byte_buffer.h"
#include "server/chunk_codec.h"
#include "server/client/sample.h"
#include "server/client/sample_stream_parser.h"
#include "server/service/sample_response.h"
#include "server/table_item.h"
#include "server/tensor.h"
#include "server/testing/sample_testing.h"
#include "server/testing/tensor_testing.h"
#include "server/trajectory_columns.h"
#include "tensor.pb.h"

namespace tf_reverb {
namespace {

using benchmarks::CheckOrExit;
using benchmarks::ThreadCpuSeconds;

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

}  // namespace
}  // namespace tf_reverb

int main(int argc, char** argv) {
  using namespace tf_reverb;  // NOLINT(build/namespaces): a benchmark's main
  int rounds = 200;
  int samples = 64;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--rounds") rounds = std::atoi(argv[i + 1]);
    if (flag == "--samples") samples = std::atoi(argv[i + 1]);
  }
  if (rounds < 1 || samples < 1) {
    std::fprintf(stderr, "usage: %s [--rounds N>0] [--samples N>0]\n", argv[0]);
    return 2;
  }
  std::vector<testing::SampledItemFixture> fixtures;
  std::vector<SampledItem> sampled;
  for (int i = 0; i < samples; ++i) {
    const uint32_t seed = static_cast<uint32_t>(2 * i);
    fixtures.push_back(
        testing::MakeSampledItem(static_cast<uint64_t>(i + 1),
                                 {{testing::ByteTensor({1, 84, 84, 4}, /*random=*/true, seed)},
                                  {tensor_testing::FromValues<int64_t>(tf::DT_INT64, {1}, {i})},
                                  {tensor_testing::FromValues<float>(tf::DT_FLOAT, {1}, {1.0f})},
                                  {tensor_testing::FromValues<float>(tf::DT_FLOAT, {1}, {0.99f})},
                                  {testing::ByteTensor({1, 84, 84, 4}, /*random=*/true, seed + 1)}},
                                 CodecPolicy::kSnappy));
    sampled.push_back(fixtures.back().sampled);
  }
  absl::StatusOr<std::vector<grpc::ByteBuffer>> encoded = EncodeSampleResponses(sampled, true);
  CheckOrExit(encoded.status());
  std::vector<grpc::ByteBuffer> responses;
  for (const grpc::ByteBuffer& buffer : *encoded) {
    responses.push_back(testing::Reslice(testing::BufferBytes(buffer), 8 << 10));
  }
  std::vector<char> row(2 * 84 * 84 * 4 + 16);
  std::vector<double> parse_us, unpack_us;
  for (int round = 0; round < rounds; ++round) {
    SampleStreamParser parser;
    std::vector<Sample> out;
    out.reserve(static_cast<size_t>(samples));
    const double start = ThreadCpuSeconds();
    for (const grpc::ByteBuffer& response : responses) CheckOrExit(parser.Parse(response, &out));
    const double parsed = ThreadCpuSeconds();
    for (const Sample& sample : out) {
      absl::StatusOr<std::vector<ColumnSpec>> specs = sample.ColumnSpecs();
      CheckOrExit(specs.status());
      char* dst = row.data();
      for (int c = 0; c < sample.num_columns(); ++c) {
        CheckOrExit(sample.UnpackColumnInto(c, dst));
        dst += ColumnBytes((*specs)[c]);
      }
    }
    const double unpacked = ThreadCpuSeconds();
    out.clear();  // the samples' release counts as parsing
    const double released = ThreadCpuSeconds();
    parse_us.push_back(1e6 * ((parsed - start) + (released - unpacked)) / samples);
    unpack_us.push_back(1e6 * (unpacked - parsed) / samples);
  }
  std::printf(
      "{\"parse_us_per_sample\": %.2f, \"unpack_us_per_sample\": %.2f, \"samples\": %d, "
      "\"responses\": %zu, \"rounds\": %d}\n",
      Median(parse_us), Median(unpack_us), samples, responses.size(), rounds);
  return 0;
}
