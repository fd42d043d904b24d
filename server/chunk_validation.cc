#include "server/chunk_validation.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "server/chunk_codec.h"

namespace tf_reverb {

absl::Status ValidateChunk(const deepmind::reverb::ChunkData& chunk) {
  return ValidateChunkView(ChunkViewOf(chunk));
}

absl::Status ValidateChunkView(const ChunkView& chunk) {
  const std::string name = absl::StrCat("Chunk ", chunk.key);
  if (absl::Status s = CheckCompression(chunk.compression); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": ", s.message()));
  }
  const int tensors = static_cast<int>(chunk.tensors.size());
  if (tensors == 0) {
    return absl::InvalidArgumentError(absl::StrCat(name, " holds no tensors."));
  }
  for (int i = 0; i < tensors; ++i) {
    const TensorView& tensor = chunk.tensors[i];
    if (tensor.unknown_rank) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, " tensor ", i, ": tensor_shape.unknown_rank is set."));
    }
    const int rank = static_cast<int>(tensor.shape.size());
    if (rank == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, " tensor ", i, ": tensor_shape has no leading (time) dimension."));
    }
    if (rank > kMaxChunkTensorRank) {
      return absl::InvalidArgumentError(absl::StrCat(name, " tensor ", i, ": tensor_shape has ",
                                                     rank, " dimensions, more than ",
                                                     kMaxChunkTensorRank, "."));
    }
    if (absl::Status s = ValidateTensor(tensor, chunk.compression); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(name, " tensor ", i, ": ", s.message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace tf_reverb
