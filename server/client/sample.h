// Sample: one sampled item as a client receives it (SampleInfo plus the
// chunks its trajectory references), and the unpacking of its columns
// (docs/concepts/items-and-chunks.md): each output column is its chunk slices decoded and
// concatenated along axis 0, with axis 0 dropped for squeezed columns.
//
// A sample's chunks are the table's own (in-process) or chunks received over
// gRPC, whose large tensor payloads may still be in the gRPC slices they
// arrived in (SampleChunk::payloads, sample_stream_parser.h): they are
// decoded from there, never copied into the chunk first.
//
// Contract: value type, immutable once built; safe to read from any thread.
// Errors: INVALID_ARGUMENT for trajectories naming absent chunks/tensors or
// mixing specs within a column; DATA_LOSS for corrupt chunk payloads.
#ifndef TF_REVERB_SERVER_CLIENT_SAMPLE_H_
#define TF_REVERB_SERVER_CLIENT_SAMPLE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "schema.pb.h"
#include "server/table_item.h"
#include "server/tensor.h"

namespace tf_reverb {

struct ColumnSpec {
  DataType dtype;
  std::vector<int64_t> shape;
};

// One chunk of a sample.
struct SampleChunk {
  std::shared_ptr<const ChunkData> data;
  // Empty, or one entry per tensor of data->data(): empty when the tensor's
  // payload is its tensor_content, else the payload's pieces (in order; its
  // tensor_content is then empty), which `owner` keeps alive.
  std::vector<std::vector<absl::string_view>> payloads;
  std::shared_ptr<const void> owner;
};

class Sample {
 public:
  Sample(deepmind::reverb::SampleInfo info, std::vector<std::shared_ptr<const ChunkData>> chunks);
  // From chunks as received (sample_stream_parser.h).
  static Sample FromChunks(deepmind::reverb::SampleInfo info, std::vector<SampleChunk> chunks);
  // From an in-process table sample.
  static Sample FromSampledItem(const SampledItem& sampled);

  const deepmind::reverb::SampleInfo& info() const { return info_; }
  // A sharded sampler rewrites probability and table_size to the whole
  // table's (sharded_sampler_worker.h).
  deepmind::reverb::SampleInfo* mutable_info() { return &info_; }
  int num_columns() const { return info_.item().flat_trajectory().columns_size(); }
  const std::vector<SampleChunk>& chunks() const { return chunks_; }

  // dtype and shape of every output column, read from chunk metadata only.
  absl::StatusOr<std::vector<ColumnSpec>> ColumnSpecs() const;
  // Decodes numeric column `column` into `dst` (sized from ColumnSpecs()).
  absl::Status UnpackColumnInto(int column, char* dst) const;
  // Decodes column `column` into a Tensor (any dtype, strings included).
  absl::StatusOr<Tensor> UnpackColumn(int column) const;

 private:
  Sample() = default;
  absl::StatusOr<const SampleChunk*> Chunk(uint64_t key) const;

  deepmind::reverb::SampleInfo info_;
  std::vector<SampleChunk> chunks_;
};

}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_CLIENT_SAMPLE_H_
