// Sample: one sampled item as a client receives it, and the unpacking of its
// columns (server/trajectory_columns.h). A sample is either
//  * its SampleInfo plus the chunks its trajectory references: the table's
//    own (in-process) or chunks received over gRPC, whose large tensor
//    payloads may still be in the gRPC slices they arrived in (the chunk's
//    view, or SampleChunk::payloads for a chunk parsed by protobuf;
//    sample_stream_parser.h), decoded from there and never copied into the
//    chunk first; or
//  * one row of a SampleBlock: the columns of several samples already
//    decoded and stacked by the server (a SampleBatch response,
//    docs/architecture/wire-protocol.md), with no trajectory and no
//    SampleInfo message: only its SampleMeta (a row costs no allocation).
// Every sample has its SampleMeta: the scalars of its SampleInfo, which the
// consumers read (a sharded sampler rewrites probability and table size
// there; info() keeps them as received).
//
// Contract: value type, immutable once built; safe to read from any thread.
// Errors: INVALID_ARGUMENT for trajectories naming absent chunks/tensors or
// mixing specs within a column; DATA_LOSS for corrupt chunk payloads.
#ifndef TF_REVERB_SERVER_CLIENT_SAMPLE_H_
#define TF_REVERB_SERVER_CLIENT_SAMPLE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "schema.pb.h"
#include "server/chunk_view.h"
#include "server/table_chunk.h"
#include "server/table_item.h"
#include "server/tensor.h"
#include "server/trajectory_columns.h"

namespace tf_reverb {

// One chunk of a sample: a received proto (`data`), a view read straight
// from the received bytes (`view`, whose bytes `owner` keeps) or,
// in-process, the table's own chunk (`stored`): one of the three is set.
// Building the Sample moves `view` into the sample's views, so in
// Sample::chunks() a viewed chunk has only its `owner`.
struct SampleChunk {
  std::shared_ptr<const ChunkData> data;
  std::shared_ptr<const TableChunk> stored;
  // Empty, or one entry per tensor of data->data(): empty when the tensor's
  // payload is its tensor_content, else the payload's pieces (in order; its
  // tensor_content is then empty), which `owner` keeps alive.
  std::vector<std::vector<absl::string_view>> payloads;
  std::optional<ChunkView> view;
  std::shared_ptr<const void> owner;
};

// The stacked columns of several samples. Column c holds every row's
// ColumnBytes(specs[c]) bytes back to back, as pieces that `owner` keeps
// alive (or that `copies` holds). Numeric columns only.
struct SampleBlock {
  std::vector<ColumnSpec> specs;  // of one row
  std::vector<bool> squeeze;
  std::vector<std::vector<absl::string_view>> columns;
  std::vector<std::string> copies;
  std::shared_ptr<const void> owner;

  // Copies rows [first, first + rows) of numeric column `column` to `dst`.
  void CopyRows(int column, int64_t first, int64_t rows, char* dst) const;
};

// The scalars of a sampled item's SampleInfo (schema.proto).
struct SampleMeta {
  uint64_t key = 0;
  double priority = 0;
  int32_t times_sampled = 0;
  int64_t policy_version = 0;  // 0 when the server reports none
  double probability = 0;
  int64_t table_size = 0;
  bool rate_limited = false;

  static SampleMeta Of(const deepmind::reverb::SampleInfo& info);
};

class Sample {
 public:
  Sample(deepmind::reverb::SampleInfo info, std::vector<std::shared_ptr<const ChunkData>> chunks);
  // From chunks as received (sample_stream_parser.h).
  static Sample FromChunks(deepmind::reverb::SampleInfo info, std::vector<SampleChunk> chunks);
  // From an in-process table sample.
  static Sample FromSampledItem(const SampledItem& sampled);
  // Row `row` of `block`, whose item is described by `meta`.
  static Sample FromBlock(const SampleMeta& meta, std::shared_ptr<const SampleBlock> block,
                          int64_t row);

  const SampleMeta& meta() const { return meta_; }
  // A sharded sampler rewrites probability and table_size to the whole
  // table's (sharded_sampler_worker.h).
  SampleMeta* mutable_meta() { return &meta_; }
  // The whole SampleInfo as received (the item's table, insertion time and
  // trajectory besides meta()'s fields); empty for a block row, which has
  // only meta().
  const deepmind::reverb::SampleInfo& info() const;
  // The sampled item's trajectory; empty for a block row.
  const deepmind::reverb::FlatTrajectory& trajectory() const {
    return info().item().flat_trajectory();
  }
  int num_columns() const;
  // Whether column `column` is squeezed (has no time axis).
  bool squeezed(int column) const;
  // Empty for a block row.
  const std::vector<SampleChunk>& chunks() const;
  // The block of a block row, else null; `row()` is the row in it.
  const SampleBlock* block() const { return block_.get(); }
  const std::shared_ptr<const SampleBlock>& block_ptr() const { return block_; }
  int64_t row() const { return row_; }

  // dtype and shape of every output column, read from chunk metadata only.
  absl::StatusOr<std::vector<ColumnSpec>> ColumnSpecs() const;
  // Decodes numeric column `column` into `dst` (sized from ColumnSpecs()).
  absl::Status UnpackColumnInto(int column, char* dst) const;
  // Decodes column `column` into a Tensor (any dtype, strings included).
  absl::StatusOr<Tensor> UnpackColumn(int column) const;
  // The view of the sample's chunk `key`: INVALID_ARGUMENT when it holds
  // none, the chunk's error when a stored chunk could not be viewed.
  absl::StatusOr<const ChunkView*> Chunk(uint64_t key) const;

 private:
  // What a sample of chunks has besides its meta: built once, then shared
  // by the sample's copies and never changed.
  struct Chunked {
    deepmind::reverb::SampleInfo info;
    std::vector<SampleChunk> chunks;
    // Views of `chunks` (they point into the chunks, which `chunks` keeps),
    // or why a stored chunk could not be viewed.
    ChunkViews views;
    absl::Status views_status;
  };

  Sample() = default;
  // The sample of `info` and `chunks` (views made).
  static Sample OfChunks(deepmind::reverb::SampleInfo info, std::vector<SampleChunk> chunks);

  // A Sample is moved several times between the stream and a batch, so it
  // stays small: a block row is its meta and its block; a sample of chunks
  // keeps the rest behind one pointer.
  SampleMeta meta_;
  std::shared_ptr<const Chunked> chunked_;  // null for a block row
  std::shared_ptr<const SampleBlock> block_;
  int64_t row_ = 0;
};

}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_CLIENT_SAMPLE_H_
