// LocalPatternRunner: the PatternEngine over in-memory steps, with no server
// (PatternDataset, docs/concepts/datasets.md). Each produced item becomes a
// trajectory of plain tensors: a node's rows stacked along a new axis 0, or
// the single row itself for squeezed nodes.
//
// Contract:
//  * Thread-safety: none; the owner (one tf.data iterator) serialises calls.
//  * Ownership: owns the engine, the buffered step values (shared, never
//    copied) and the queue of produced trajectories.
//  * Errors: INVALID_ARGUMENT for invalid configs, steps whose length
//    changes, rows of one node that differ in dtype or shape, and TD-error
//    values the engine cannot read.
#ifndef TF_REVERB_SERVER_PATTERNS_LOCAL_PATTERN_RUNNER_H_
#define TF_REVERB_SERVER_PATTERNS_LOCAL_PATTERN_RUNNER_H_

#include <deque>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "patterns.pb.h"
#include "server/patterns/pattern_engine.h"
#include "server/tensor.h"

namespace tf_reverb {

class LocalPatternRunner {
 public:
  static absl::StatusOr<std::unique_ptr<LocalPatternRunner>> Create(
      std::vector<deepmind::reverb::StructuredWriterConfig> configs);

  // Appends one full step and queues the trajectories it produces. With
  // `end_of_episode`, the end-of-episode configs are applied next and a new
  // episode starts (dropping the buffered steps if `clear_buffers`).
  absl::Status Append(std::vector<Tensor> step, bool end_of_episode, bool clear_buffers);

  // The oldest queued trajectory (one tensor per node), or nullopt.
  std::optional<std::vector<Tensor>> Pop();

 private:
  explicit LocalPatternRunner(std::unique_ptr<PatternEngine> engine);
  absl::Status Queue(const std::vector<PatternItem>& items);

  const std::unique_ptr<PatternEngine> engine_;
  std::deque<std::vector<Tensor>> ready_;
};

}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_PATTERNS_LOCAL_PATTERN_RUNNER_H_
