// SampleStreamParser: SampleStreamResponse messages (docs/architecture/wire-protocol.md),
// read from gRPC as raw byte buffers, turned into Samples without copying
// the chunks' large tensor payloads.
//
// A numeric tensor_content of at least kMinPiecesBytes stays in the gRPC
// slices it arrived in, which the sample then holds (so a sample keeps its
// whole response message alive); smaller payloads are copied. A chunk in the
// plain encoding writers and servers send (chunk_view.h) is read straight
// into the sample's ChunkView, without protobuf, from a copy of its few
// metadata bytes; any other chunk (unknown fields, strings) is parsed by
// protobuf from such a copy, its large payloads listed in
// SampleChunk::payloads, and so is every SampleInfo. Protobuf's merge rules
// hold either way: repeated fields accumulate, the last of a singular field
// wins, unknown fields are kept (small ones) or skipped (inside the walked
// messages).
//
// An entry with `info` starts a sample, chunks accumulate, and the entry with
// end_of_sequence completes it (an item's chunks may span responses). A
// `batch` (SampleBatch) completes all its samples at once: they become rows
// of one SampleBlock, whose large columns stay in the message's slices.
//
// Contract: not thread-safe (one per stream). INTERNAL for a message that is
// not a well-formed SampleStreamResponse (the sampler treats it as fatal).
#ifndef TF_REVERB_SERVER_CLIENT_SAMPLE_STREAM_PARSER_H_
#define TF_REVERB_SERVER_CLIENT_SAMPLE_STREAM_PARSER_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "grpcpp/support/byte_buffer.h"
#include "schema.pb.h"
#include "server/client/sample.h"

namespace tf_reverb {

class SampleStreamParser {
 public:
  // Payloads smaller than this are copied (into the chunk's own bytes, or
  // into its TensorProto when protobuf parses the chunk).
  static constexpr int64_t kMinPiecesBytes = 16 << 10;

  // Parses one response; appends the samples it completes to `out`.
  absl::Status Parse(const grpc::ByteBuffer& message, std::vector<Sample>* out);

  // Whether a sample was started and not yet completed.
  bool InSample() const { return in_sample_; }
  // Forgets a partial sample (a stream that broke half-way).
  void Reset();

 private:
  bool in_sample_ = false;
  deepmind::reverb::SampleInfo info_;
  std::vector<SampleChunk> chunks_;
};

}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_CLIENT_SAMPLE_STREAM_PARSER_H_
