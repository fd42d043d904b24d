// The columns of a trajectory (docs/concepts/items-and-chunks.md), read out
// of the chunks it references: each column is its chunk slices decoded and
// concatenated along axis 0, with axis 0 dropped for squeezed columns. The
// one implementation behind a client's Sample (server/client/sample.h) and
// the server's batched sample responses (server/service/sample_batch.h).
//
// Chunks are found through the caller's FindChunk as ChunkViews
// (chunk_view.h), so that a caller can read them where they are: the table's
// own chunks, or chunks received over gRPC whose large payloads are still in
// the slices they arrived in.
//
// Contract: pure functions, thread-safe over immutable chunks. Errors:
// INVALID_ARGUMENT for trajectories naming absent chunks or tensors, or
// mixing specs within a column (FindChunk's own errors are returned as they
// are); DATA_LOSS for corrupt chunk payloads.
#ifndef TF_REVERB_SERVER_TRAJECTORY_COLUMNS_H_
#define TF_REVERB_SERVER_TRAJECTORY_COLUMNS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "schema.pb.h"
#include "server/chunk_view.h"
#include "server/tensor.h"

namespace tf_reverb {

// dtype and shape of one output column of one trajectory.
struct ColumnSpec {
  DataType dtype;
  std::vector<int64_t> shape;

  bool operator==(const ColumnSpec& other) const {
    return dtype == other.dtype && shape == other.shape;
  }
  bool operator!=(const ColumnSpec& other) const { return !(*this == other); }
};

// The view of the chunk of `chunk_key`, which must stay valid during the
// call it is passed to.
using FindChunk = absl::FunctionRef<absl::StatusOr<const ChunkView*>(uint64_t chunk_key)>;

// dtype and shape of every column, read from chunk metadata only.
absl::StatusOr<std::vector<ColumnSpec>> TrajectoryColumnSpecs(
    const deepmind::reverb::FlatTrajectory& trajectory, FindChunk find);

// Decodes numeric column `column` into `dst`, which holds its spec's bytes.
absl::Status UnpackTrajectoryColumnInto(const deepmind::reverb::FlatTrajectory& trajectory,
                                        int column, FindChunk find, char* dst);

// The same, when the column has spec `expect` (dst holds its bytes); false,
// with `dst` partly written, when it has another.
absl::StatusOr<bool> UnpackTrajectoryColumnIfSpec(
    const deepmind::reverb::FlatTrajectory& trajectory, int column, FindChunk find,
    const ColumnSpec& expect, char* dst);

// Decodes the strings of DT_STRING column `column`, appending them to `out`.
absl::Status UnpackTrajectoryStrings(const deepmind::reverb::FlatTrajectory& trajectory, int column,
                                     FindChunk find, std::vector<std::string>* out);

// Bytes of one element of `spec` times its number of elements (0 for
// DT_STRING and unknown dtypes).
int64_t ColumnBytes(const ColumnSpec& spec);

}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_TRAJECTORY_COLUMNS_H_
