// Helpers of the tests of the SampleStream bytes, the server's
// (EncodeSampleResponses, server/service/sample_response.h) and the
// client's (SampleStreamParser, server/client/sample_stream_parser.h):
// sampled items over chunks of given tensors, the samples they must decode
// as, and gRPC byte buffers cut into slices.
//
// Contract: test-only; failures are reported with gtest EXPECTs. Plain
// functions on values; thread-safe.
#ifndef TF_REVERB_SERVER_TESTING_SAMPLE_TESTING_H_
#define TF_REVERB_SERVER_TESTING_SAMPLE_TESTING_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "grpcpp/support/byte_buffer.h"
#include "server/chunk_codec.h"
#include "server/client/sample.h"
#include "server/table_chunk.h"
#include "server/table_item.h"
#include "server/tensor.h"

namespace tf_reverb {
namespace testing {

// A uint8 tensor of `shape`: random bytes (from `seed`), or a compressible
// pattern.
Tensor ByteTensor(std::vector<int64_t> shape, bool random, uint32_t seed);

// The bytes of `buffer`, in one string.
std::string BufferBytes(const grpc::ByteBuffer& buffer);

// The same bytes as slices of at most `size` bytes, with empty slices between.
grpc::ByteBuffer Reslice(const std::string& bytes, size_t size);

// A sampled item of table "t" with one column per tensor, each over all rows
// of one chunk's tensor; priority 2.5, sampled 3 times, probability 0.25 in
// a table of 4.
struct SampledItemFixture {
  std::vector<std::vector<Tensor>> chunk_columns;  // per chunk
  std::vector<std::shared_ptr<const TableChunk>> chunks;
  SampledItem sampled;
};
// Chunk c of the item has key key * 100 + c and the tensors
// chunk_columns[c], encoded with `codec`.
SampledItemFixture MakeSampledItem(uint64_t key, std::vector<std::vector<Tensor>> chunk_columns,
                                   CodecPolicy codec);

// Checks that `sample`'s columns are the fixture's tensors.
void ExpectDecodesAs(const Sample& sample, const SampledItemFixture& fixture);

}  // namespace testing
}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_TESTING_SAMPLE_TESTING_H_
