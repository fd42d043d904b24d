// Encoding of sampled items as SampleBatch responses
// (docs/architecture/wire-protocol.md), for clients that set
// SampleStreamRequest.accept_batches: the items' columns are decoded here and
// stacked per column, so the client receives one tensor per column for many
// samples instead of every sample's chunks (no per-sample chunk messages to
// build, send and parse; what makes small transitions cheap to sample).
//
// Samples are batched only when they can be stacked: numeric columns whose
// dtype, shape and squeeze agree across the samples, and policy versions on
// all of them or none. Samples decoding to more than kMaxBatchedSampleBytes
// are batched only when (judged by the first) they are at most
// kMaxSampleResponseBytes and their chunks hold at least
// kMinChunkToSamplePercent percent of the sample's bytes, as stored: items over
// steps whose chunks they share with their neighbours, of which only the
// sample's rows need to travel. Other large samples travel as their chunks,
// which the server sends without a copy and the client decodes (compressed,
// where the codec shrank them). When the samples are not batched,
// EncodeSampleBatches returns no response and the caller sends entries
// (sample_response.h). A response holds up to kMaxSampleResponseBytes of
// column data (at least one sample); its columns are referenced, not
// copied, by the byte buffer. An item of at most kMaxCachedRowBytes is
// decoded the first time it is batched into its ItemRowsCache
// (server/item_rows_cache.h), with the layout of its columns; later batches
// compare layouts and copy its rows from there.
//
// Contract: thread-safe over the table's immutable chunks; the only state it
// changes is the items' row caches, which are thread-safe themselves.
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

// Samples that decode to more than this are sent as their chunks, unless
// their chunks hold this percentage of their bytes (or more). Over 16 KiB,
// the client's decoding on its own threads beats the server's stacking:
// 84x84x4-frame transitions (56 KB) sample 27,000/s as chunks and 20,000/s
// batched, 40 KB items 20,700/s against 18,000/s from 10 clients.
inline constexpr int64_t kMaxBatchedSampleBytes = 16 << 10;
// Samples of at most this many bytes are decoded once per item and kept
// beside it (server/item_rows_cache.h): later samples of the item copy its
// rows instead of finding and decoding its chunks again.
inline constexpr int64_t kMaxCachedRowBytes = 512;
inline constexpr int64_t kMinChunkToSamplePercent = 125;

// The responses carrying `samples` in order, or none when they cannot be
// batched (see above).
absl::StatusOr<std::vector<grpc::ByteBuffer>> EncodeSampleBatches(
    const std::vector<SampledItem>& samples);

}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_SERVICE_SAMPLE_BATCH_H_
