// Sample: one sampled item as a client receives it (SampleInfo plus the
// chunks its trajectory references), and the unpacking of its columns
// (reverb-spec.md §1.1): each output column is its chunk slices decoded and
// concatenated along axis 0, with axis 0 dropped for squeezed columns.
//
// Contract: value type, immutable once built; safe to read from any thread.
// Errors: INVALID_ARGUMENT for trajectories naming absent chunks/tensors or
// mixing specs within a column; DATA_LOSS for corrupt chunk payloads.
#ifndef TF_REVERB_SERVER_SAMPLE_H_
#define TF_REVERB_SERVER_SAMPLE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "schema.pb.h"
#include "table_item.h"
#include "tensor.h"

namespace tf_reverb {

struct ColumnSpec {
  DataType dtype;
  std::vector<int64_t> shape;
};

class Sample {
 public:
  Sample(deepmind::reverb::SampleInfo info,
         std::vector<std::shared_ptr<const ChunkData>> chunks);
  // From an in-process table sample.
  static Sample FromSampledItem(const SampledItem& sampled);

  const deepmind::reverb::SampleInfo& info() const { return info_; }
  int num_columns() const { return info_.item().flat_trajectory().columns_size(); }

  // dtype and shape of every output column, read from chunk metadata only.
  absl::StatusOr<std::vector<ColumnSpec>> ColumnSpecs() const;
  // Decodes numeric column `column` into `dst` (sized from ColumnSpecs()).
  absl::Status UnpackColumnInto(int column, char* dst) const;
  // Decodes column `column` into a Tensor (any dtype, strings included).
  absl::StatusOr<Tensor> UnpackColumn(int column) const;

 private:
  absl::StatusOr<const ChunkData*> Chunk(uint64_t key) const;

  deepmind::reverb::SampleInfo info_;
  std::vector<std::shared_ptr<const ChunkData>> chunks_;
};

}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_SAMPLE_H_
