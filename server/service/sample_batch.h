// Encoding of sampled items as SampleBatch responses
// (docs/architecture/wire-protocol.md), for clients that set
// SampleStreamRequest.accept_batches: the items' columns are decoded here and
// stacked per column, so the client receives one tensor per column for many
// samples instead of every sample's chunks (no per-sample chunk messages to
// build, send and parse; what makes small transitions cheap to sample).
//
// Samples are batched only when they can be stacked: numeric columns whose
// dtype, shape and squeeze agree across the samples, policy versions on all
// of them or none, and no sample decoding to more than kMaxBatchedSampleBytes
// (larger ones travel as their chunks, which the server sends without a copy
// and the client decodes). Otherwise EncodeSampleBatches returns no response
// and the caller sends entries (sample_response.h). A response holds up to
// kMaxSampleResponseBytes of column data (at least one sample); its columns
// are referenced, not copied, by the byte buffer.
//
// Contract: a pure function; thread-safe over the table's immutable chunks.
// DATA_LOSS for a corrupt chunk, INVALID_ARGUMENT for a trajectory that does
// not match its chunks, INTERNAL when serialization fails.
#ifndef TF_REVERB_SERVER_SERVICE_SAMPLE_BATCH_H_
#define TF_REVERB_SERVER_SERVICE_SAMPLE_BATCH_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "grpcpp/support/byte_buffer.h"
#include "server/table_item.h"

namespace tf_reverb {

// Samples that decode to more than this are sent as their chunks.
inline constexpr int64_t kMaxBatchedSampleBytes = 64 << 10;

// The responses carrying `samples` in order, or none when they cannot be
// batched (see above).
absl::StatusOr<std::vector<grpc::ByteBuffer>> EncodeSampleBatches(
    const std::vector<SampledItem>& samples);

}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_SERVICE_SAMPLE_BATCH_H_
