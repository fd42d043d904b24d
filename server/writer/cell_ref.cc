#include "server/writer/cell_ref.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/random/random.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "server/chunk_codec.h"
#include "server/writer/chunker.h"
#include "tensor.pb.h"

namespace tf_reverb {

uint64_t NewRandomKey() {
  thread_local absl::BitGen gen;
  return absl::Uniform<uint64_t>(gen, 0, std::numeric_limits<uint64_t>::max());
}

std::string CellSpec::DebugString() const {
  return absl::StrCat(DataTypeName(dtype), ShapeString(shape));
}

CellRef::CellRef(std::weak_ptr<Chunker> chunker, uint64_t chunk_key, int32_t offset,
                 uint64_t episode_id, int32_t episode_step, CellSpec spec)
    : chunker_(std::move(chunker)),
      chunk_key_(chunk_key),
      offset_(offset),
      episode_id_(episode_id),
      episode_step_(episode_step),
      spec_(std::move(spec)) {}

bool CellRef::IsReady() const { return ready_.load(std::memory_order_acquire); }

std::shared_ptr<const deepmind::reverb::ChunkData> CellRef::GetChunk() const {
  if (!ready_.load(std::memory_order_acquire)) return nullptr;
  return chunk_;
}

void CellRef::SetChunk(std::shared_ptr<const deepmind::reverb::ChunkData> chunk) {
  // Only the encoding of the cell's chunk calls this (once), so there is one
  // writer.
  if (chunk == nullptr || ready_.load(std::memory_order_relaxed)) return;
  chunk_ = std::move(chunk);
  ready_.store(true, std::memory_order_release);
}

absl::StatusOr<Tensor> CellRef::GetData() const {
  // The chunk may be finalized between the two reads; the buffer lookup then
  // fails with NOT_FOUND and the chunk is read again.
  for (int attempt = 0; attempt < 2; ++attempt) {
    std::shared_ptr<const deepmind::reverb::ChunkData> chunk = GetChunk();
    if (chunk != nullptr) {
      absl::StatusOr<Tensor> whole = DecompressChunkTensor(*chunk, 0);
      if (!whole.ok()) return whole.status();
      Tensor row;
      row.dtype = whole->dtype;
      row.shape.assign(whole->shape.begin() + 1, whole->shape.end());
      const int64_t n = row.num_elements();
      if (row.dtype == ::tf_reverb::tf::DT_STRING) {
        row.strings.assign(whole->strings.begin() + offset_ * n,
                           whole->strings.begin() + (offset_ + 1) * n);
      } else {
        const int64_t bytes = whole->data.size() / std::max<int64_t>(1, whole->num_rows());
        row.data = whole->data.substr(offset_ * bytes, bytes);
      }
      return row;
    }
    std::shared_ptr<Chunker> chunker = chunker_.lock();
    if (chunker == nullptr) break;
    absl::StatusOr<Tensor> row = chunker->BufferedRow(chunk_key_, offset_);
    if (row.ok() || row.status().code() != absl::StatusCode::kNotFound) return row;
  }
  return absl::FailedPreconditionError(
      "The data of this reference was dropped before it was written to a chunk "
      "(end_episode with clear_buffers or writer closed).");
}

}  // namespace tf_reverb
