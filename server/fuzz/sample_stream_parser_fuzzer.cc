// Fuzz target: how a sampling client reads SampleStream responses off the
// wire (server/client/sample_stream_parser.h), against protobuf's reading
// of them. The bytes come from the server, which a client need not trust.
//
// Input: one byte giving the size of the gRPC slices the rest arrives in
// (1-256 bytes), two bytes (little-endian) giving the length of the first
// of two messages, then the bytes of the two SampleStreamResponses, parsed
// one after the other by one parser (a sample's entries may span
// responses). Each message's buffer is gone once Parse returns, so a
// sample decodes only from what it holds itself.
//
// Properties: Parse fails only with INTERNAL; when it succeeds on both and
// protobuf parses both, the samples completed from the responses' entries
// are, in order, those protobuf's messages give (an entry with info starts
// a sample, chunks accumulate, end_of_sequence completes it), with the
// same key, the same column specs (or the same error) and every column
// decoding to the same tensor (or the same error). This holds whether a
// chunk was read into a view straight from the bytes or parsed by
// protobuf.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"
#include "reverb_service.pb.h"
#include "schema.pb.h"
#include "server/client/sample.h"
#include "server/client/sample_stream_parser.h"
#include "server/fuzz/fuzz_check.h"
#include "server/table_chunk.h"
#include "server/tensor.h"
#include "server/trajectory_columns.h"

namespace tf_reverb {
namespace {

using ::deepmind::reverb::SampleStreamResponse;

// Decoding a column may legitimately take this much (zstd compresses runs
// ~30000-fold); beyond it the target compares the specs only.
constexpr int64_t kMaxColumnBytes = int64_t{64} << 20;

// The samples protobuf's reading of `responses` completes, by the parser's
// rules for entries.
std::vector<Sample> ExpectedSamples(const std::vector<SampleStreamResponse>& responses) {
  std::vector<Sample> samples;
  deepmind::reverb::SampleInfo info;
  std::vector<std::shared_ptr<const ChunkData>> chunks;
  for (const SampleStreamResponse& response : responses) {
    for (const auto& entry : response.entries()) {
      if (entry.has_info()) info = entry.info();
      for (const ChunkData& chunk : entry.data()) {
        chunks.push_back(std::make_shared<ChunkData>(chunk));
      }
      if (entry.end_of_sequence()) {
        samples.emplace_back(info, chunks);
        info.Clear();
        chunks.clear();
      }
    }
  }
  return samples;
}

// Parses `bytes` as one message in slices of `slice_size`; the message and
// its slices are released on return.
absl::Status ParseMessage(const std::string& bytes, size_t slice_size, SampleStreamParser* parser,
                          std::vector<Sample>* out) {
  std::vector<grpc::Slice> slices;
  for (size_t pos = 0; pos < bytes.size(); pos += slice_size) {
    slices.emplace_back(bytes.data() + pos, std::min(slice_size, bytes.size() - pos));
  }
  const grpc::ByteBuffer message(slices.data(), slices.size());
  return parser->Parse(message, out);
}

void CheckSameStatus(const absl::Status& got, const absl::Status& want, const std::string& what) {
  FUZZ_CHECK(got.code() == want.code() && got.message() == want.message(),
             absl::StrCat(what, ": ", got.ToString(), " against protobuf's ", want.ToString()));
}

void CheckSameSample(const Sample& got, const Sample& want, size_t index) {
  const std::string at = absl::StrCat("sample ", index);
  FUZZ_CHECK(got.meta().key == want.meta().key, at);
  FUZZ_CHECK(got.num_columns() == want.num_columns(), at);
  absl::StatusOr<std::vector<ColumnSpec>> got_specs = got.ColumnSpecs();
  absl::StatusOr<std::vector<ColumnSpec>> want_specs = want.ColumnSpecs();
  CheckSameStatus(got_specs.status(), want_specs.status(), at + " column specs");
  if (!got_specs.ok()) return;
  FUZZ_CHECK(*got_specs == *want_specs, at + " column specs");
  for (int c = 0; c < got.num_columns(); ++c) {
    const ColumnSpec& spec = (*got_specs)[static_cast<size_t>(c)];
    int64_t elements = 1;
    bool small = true;
    for (int64_t d : spec.shape) {
      if (d < 0 || __builtin_mul_overflow(elements, d, &elements)) small = false;
    }
    if (!small || elements > kMaxColumnBytes / 8) continue;
    absl::StatusOr<Tensor> got_column = got.UnpackColumn(c);
    absl::StatusOr<Tensor> want_column = want.UnpackColumn(c);
    const std::string column = absl::StrCat(at, " column ", c);
    CheckSameStatus(got_column.status(), want_column.status(), column);
    if (!got_column.ok()) continue;
    FUZZ_CHECK(got_column->dtype == want_column->dtype && got_column->shape == want_column->shape &&
                   got_column->data == want_column->data &&
                   got_column->strings == want_column->strings,
               column + " decodes differently");
  }
}

}  // namespace
}  // namespace tf_reverb

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tf_reverb;  // NOLINT(build/namespaces): the fuzz entry point
  if (size < 3) return 0;
  const size_t slice_size = static_cast<size_t>(data[0]) + 1;
  const std::string bytes(reinterpret_cast<const char*>(data + 3), size - 3);
  const size_t first = std::min(bytes.size(), static_cast<size_t>(data[1] | data[2] << 8));
  const std::vector<std::string> messages = {bytes.substr(0, first), bytes.substr(first)};

  SampleStreamParser parser;
  std::vector<Sample> parsed;
  for (const std::string& message : messages) {
    const absl::Status status = ParseMessage(message, slice_size, &parser, &parsed);
    if (!status.ok()) {
      FUZZ_CHECK(absl::IsInternal(status), status.ToString());
      return 0;
    }
  }
  std::vector<SampleStreamResponse> responses(messages.size());
  for (size_t i = 0; i < messages.size(); ++i) {
    if (!responses[i].ParseFromString(messages[i])) return 0;
  }
  std::vector<Sample> from_entries;
  for (Sample& sample : parsed) {
    if (sample.block() == nullptr) from_entries.push_back(std::move(sample));
  }
  const std::vector<Sample> expected = ExpectedSamples(responses);
  FUZZ_CHECK(from_entries.size() == expected.size(),
             absl::StrCat(from_entries.size(), " samples against protobuf's ", expected.size()));
  for (size_t i = 0; i < expected.size(); ++i) CheckSameSample(from_entries[i], expected[i], i);
  return 0;
}
