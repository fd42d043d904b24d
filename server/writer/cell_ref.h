// CellRef: a reference to one cell (one column at one step) of a writer's
// history, and its CellSpec (docs/concepts/writers-and-patterns.md, "Chunking").
//
// A cell is first a row of its Chunker's open buffer; once the chunker
// finalizes that buffer the CellRef is handed the compressed chunk. The
// chunk key and the row offset are known from the start, so items referencing
// a cell can be described (FlatTrajectory) before its chunk exists.
//
// Contract:
//  * Thread-safety: thread-safe and lock-free. The chunk is set at most once
//    when its Chunker's buffer is encoded (SetChunk, possibly on another
//    thread than the appends; published with a release store) and read from
//    any thread; IsReady() is a single atomic load, so the writer can poll
//    readiness cheaply.
//  * Ownership: owned by std::shared_ptr. The Chunker's keep-alive ring and
//    queued/unconfirmed items hold strong references; users hold
//    std::weak_ptr, which expires once the cell is neither kept alive nor
//    needed by an item. A CellRef holds only a weak reference to its Chunker.
//  * Errors: GetData() returns FAILED_PRECONDITION when the cell's chunk was
//    never finalized and its chunker dropped the buffer (end_episode with
//    clear_buffers, writer closed), DATA_LOSS for a corrupt chunk.
#ifndef TF_REVERB_SERVER_WRITER_CELL_REF_H_
#define TF_REVERB_SERVER_WRITER_CELL_REF_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "schema.pb.h"
#include "server/tensor.h"
#include "tensor.pb.h"

namespace tf_reverb {

class Chunker;

// A uniformly random key in [0, 2^64 - 1) (chunk keys, item keys, episode
// ids; docs/concepts/items-and-chunks.md).
uint64_t NewRandomKey();

// dtype and per-step shape of a column.
struct CellSpec {
  DataType dtype = ::tf_reverb::tf::DT_INVALID;
  std::vector<int64_t> shape;

  bool operator==(const CellSpec& other) const {
    return dtype == other.dtype && shape == other.shape;
  }
  // "float32[2, 3]".
  std::string DebugString() const;
};

class CellRef {
 public:
  CellRef(std::weak_ptr<Chunker> chunker, uint64_t chunk_key, int32_t offset, uint64_t episode_id,
          int32_t episode_step, CellSpec spec);

  uint64_t chunk_key() const { return chunk_key_; }
  // Row of the cell in its chunk.
  int32_t offset() const { return offset_; }
  uint64_t episode_id() const { return episode_id_; }
  int32_t episode_step() const { return episode_step_; }
  const CellSpec& spec() const { return spec_; }
  std::weak_ptr<Chunker> chunker() const { return chunker_; }

  // Whether the cell's chunk has been finalized.
  bool IsReady() const;
  // The finalized chunk, or nullptr.
  std::shared_ptr<const deepmind::reverb::ChunkData> GetChunk() const;
  // The cell's value (per-step shape), from the chunk or the open buffer.
  absl::StatusOr<Tensor> GetData() const;

  // Called by the Chunker when it finalizes the cell's chunk; later calls
  // (and a null chunk) are ignored.
  void SetChunk(std::shared_ptr<const deepmind::reverb::ChunkData> chunk);

 private:
  const std::weak_ptr<Chunker> chunker_;
  const uint64_t chunk_key_;
  const int32_t offset_;
  const uint64_t episode_id_;
  const int32_t episode_step_;
  const CellSpec spec_;

  // Written once by SetChunk before `ready_` is set (release); read only
  // after `ready_` was seen set (acquire), so it needs no lock.
  std::shared_ptr<const deepmind::reverb::ChunkData> chunk_;
  std::atomic<bool> ready_{false};
};

}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_WRITER_CELL_REF_H_
