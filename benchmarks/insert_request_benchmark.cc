// CPU a server spends turning one insert request (one chunk of random
// float32, one item over it) into what its table keeps, both ways
// server/service/insert_request.h describes:
//
//  * parsed:  protobuf parses the whole request (ParseRequest), the chunk is
//             validated (ValidateChunk) and encoded again (TableChunk::FromProto);
//  * as bytes: ReadInsertRequest copies the chunk's bytes once and parses the
//             rest; TableChunk::FromPlainWire validates and keeps them.
//
// The request arrives as gRPC hands it over: in slices of 8 KiB. Each way
// runs --iterations requests per payload, alternately in blocks of 100, on
// one thread; CPU time is the thread's (CLOCK_THREAD_CPUTIME_ID), so other
// load on the machine changes it little. Prints one line per payload.
//
//   bazel run -c opt //benchmarks:insert_request_benchmark -- --iterations 4000

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "benchmarks/benchmark_support.h"
#include "google/protobuf/arena.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"
#include "reverb_service.pb.h"
#include "schema.pb.h"
#include "server/chunk_codec.h"
#include "server/chunk_validation.h"
#include "server/service/insert_request.h"
#include "server/service/raw_request.h"
#include "server/service/server_insert_stream.h"
#include "server/table_chunk.h"
#include "server/tensor.h"
#include "tensor.pb.h"

namespace tf_reverb {
namespace {

using ::deepmind::reverb::InsertStreamRequest;

using benchmarks::CheckOrExit;
using benchmarks::ThreadCpuSeconds;

// The serialized request, in slices of 8 KiB.
grpc::ByteBuffer Request(int64_t payload_bytes) {
  const int64_t floats = payload_bytes / 4;
  std::mt19937 random(7);
  std::uniform_real_distribution<float> value(-1, 1);
  Tensor column;
  column.dtype = ::tf_reverb::tf::DT_FLOAT;
  column.shape = {1, floats};
  column.data.resize(floats * 4);
  for (int64_t i = 0; i < floats; ++i) {
    const float v = value(random);
    std::memcpy(column.data.data() + i * 4, &v, 4);
  }
  absl::StatusOr<deepmind::reverb::ChunkData> chunk = BuildChunk(1, {column}, 1, 0, 1, false);
  CheckOrExit(chunk.status());
  InsertStreamRequest request;
  *request.add_chunks() = *chunk;
  auto* item = request.add_items();
  item->set_key(2);
  item->set_table("t");
  item->set_priority(1);
  auto* slice = item->mutable_flat_trajectory()->add_columns()->add_chunk_slices();
  slice->set_chunk_key(1);
  slice->set_length(1);
  const std::string wire = request.SerializeAsString();
  std::vector<grpc::Slice> slices;
  for (size_t at = 0; at < wire.size(); at += 8192) {
    const std::string piece = wire.substr(at, 8192);
    slices.emplace_back(piece.data(), piece.size());
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

// What the server did per request before insert_request.h.
void Parsed(const grpc::ByteBuffer& bytes, google::protobuf::Arena* arena) {
  auto* request = google::protobuf::Arena::CreateMessage<InsertStreamRequest>(arena);
  CheckOrExit(ParseRequest(bytes, request));
  CheckOrExit(ValidateChunk(request->chunks(0)));
  std::shared_ptr<const TableChunk> kept = TableChunk::FromProto(request->chunks(0));
  arena->Reset();
}

// What it does now.
void AsBytes(const grpc::ByteBuffer& bytes, google::protobuf::Arena* arena) {
  auto* request = google::protobuf::Arena::CreateMessage<InsertStreamRequest>(arena);
  std::vector<ServerInsertStream::WireChunk> chunks;
  CheckOrExit(ReadInsertRequest(bytes, request, &chunks));
  if (chunks.size() != 1) CheckOrExit(absl::InternalError("the chunk was not read as bytes"));
  absl::StatusOr<std::shared_ptr<const TableChunk>> kept =
      TableChunk::FromPlainWire(std::move(chunks[0].wire));
  CheckOrExit(kept.status());
  arena->Reset();
}

}  // namespace
}  // namespace tf_reverb

int main(int argc, char** argv) {
  int64_t iterations = 2000;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--iterations") == 0) iterations = std::atoll(argv[i + 1]);
  }
  constexpr int64_t kBlock = 100;
  for (int64_t payload : {400, 4000, 40000, 400000}) {
    const grpc::ByteBuffer bytes = tf_reverb::Request(payload);
    google::protobuf::Arena arena;
    double parsed = 0, as_bytes = 0;
    for (int64_t done = 0; done < iterations; done += kBlock) {
      double start = tf_reverb::ThreadCpuSeconds();
      for (int64_t i = 0; i < kBlock; ++i) tf_reverb::Parsed(bytes, &arena);
      parsed += tf_reverb::ThreadCpuSeconds() - start;
      start = tf_reverb::ThreadCpuSeconds();
      for (int64_t i = 0; i < kBlock; ++i) tf_reverb::AsBytes(bytes, &arena);
      as_bytes += tf_reverb::ThreadCpuSeconds() - start;
    }
    const double n = static_cast<double>((iterations + kBlock - 1) / kBlock * kBlock);
    std::printf("%7lld B payload: parsed %8.2f us CPU/request, as bytes %8.2f us (%.2fx)\n",
                static_cast<long long>(payload), parsed / n * 1e6, as_bytes / n * 1e6,
                as_bytes / parsed);
  }
  return 0;
}
