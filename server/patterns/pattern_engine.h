// PatternEngine: the StructuredWriter's pattern language run over a stream of
// steps (docs/concepts/writers-and-patterns.md). Shared by the StructuredWriter (cells are
// TrajectoryWriter CellRefs) and PatternDataset (cells are plain values).
//
// Each step adds one entry, possibly missing, to the buffer of every column
// the configs read; a buffer keeps only as many of the newest entries as the
// oldest node over that column reaches. After every append, each config not
// yet applied at the newest step is evaluated: when all its conditions hold
// and every referenced cell is present, a PatternItem is produced and the
// config is marked applied for that step (a config never fires twice for the
// same step, so several partial appends behave like one full append).
//
// Contract:
//  * Thread-safety: none; the owner serialises calls.
//  * Ownership: owns copies of the configs and the buffered PatternCells
//    (shared values, weak cell references).
//  * Errors: INVALID_ARGUMENT for invalid configs (Create), a data length
//    differing from the first append's ("Flattened data has an unexpected
//    length, got X but wanted Y."), a column set twice in one step, a config
//    referencing a column beyond the data, and TD-error values that are not
//    scalar float32/float64/int32/int64. Input errors leave the engine
//    unchanged; a TD-error failure leaves the step's cells buffered.
#ifndef TF_REVERB_SERVER_PATTERNS_PATTERN_ENGINE_H_
#define TF_REVERB_SERVER_PATTERNS_PATTERN_ENGINE_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "patterns.pb.h"
#include "server/tensor.h"
#include "server/writer/cell_ref.h"

namespace tf_reverb {

// One cell (one column at one step). `value` is set when the owner keeps
// values (always for PatternDataset; for the columns NeedsValue() names in
// the StructuredWriter); `ref` is the writer's reference to the cell.
struct PatternCell {
  std::shared_ptr<const Tensor> value;
  std::weak_ptr<CellRef> ref;
};

// An output column: the rows selected by one PatternNode. `squeeze` is set
// for single-element nodes (stop only), whose output drops the leading axis.
struct PatternColumn {
  std::vector<PatternCell> rows;
  bool squeeze = false;
};

// An item produced by a config: one column per node of config.flat.
struct PatternItem {
  int config_index = 0;
  std::string table;
  double priority = 1.0;
  std::vector<PatternColumn> columns;
};

class PatternEngine {
 public:
  // Completes (buffer_length condition) and validates the configs.
  static absl::StatusOr<std::unique_ptr<PatternEngine>> Create(
      std::vector<deepmind::reverb::StructuredWriterConfig> configs);

  // Whether some node or data condition reads `column`; other columns can
  // be dropped before writing.
  bool UsesColumn(int column) const;
  // Whether the engine needs the cell values of `column` (data conditions,
  // TD-error priorities).
  bool NeedsValue(int column) const;
  // The largest age over all configs' nodes.
  int max_age() const { return max_age_; }
  bool step_is_open() const { return step_open_; }

  // The input checks of Append, without changing anything: `present[i]`
  // says whether column i is provided.
  absl::Status CheckAppend(const std::vector<bool>& present) const;

  // Adds the given cells (nullopt: not provided) to the open step, opening a
  // new one if none is open, and appends the items this produces to `items`.
  // A non-partial append closes the step.
  absl::Status Append(std::vector<std::optional<PatternCell>> cells, bool partial,
                      std::vector<PatternItem>* items);

  // Evaluates the configs not applied at the newest step with
  // is_end_episode = 1.
  absl::Status ApplyEndOfEpisode(std::vector<PatternItem>* items);

  // Starts a new episode: closes an open step, restarts step indices and,
  // with `clear_buffers`, drops the buffered cells and the
  // steps_since_applied counters.
  void StartNewEpisode(bool clear_buffers);

 private:
  explicit PatternEngine(std::vector<deepmind::reverb::StructuredWriterConfig> configs);

  absl::Status CheckNumColumns(int num_columns) const;
  void OpenStep();
  absl::Status ApplyConfigs(std::vector<PatternItem>* items);
  std::optional<int64_t> EvaluateLeft(const deepmind::reverb::Condition& condition,
                                      int config_index) const;
  bool ConditionHolds(const deepmind::reverb::Condition& condition, int config_index) const;
  // The node's rows, or nullopt when a row is missing or out of range.
  std::optional<PatternColumn> SelectRows(const deepmind::reverb::PatternNode& node) const;
  absl::StatusOr<double> Priority(const deepmind::reverb::StructuredWriterConfig& config,
                                  const std::vector<PatternColumn>& columns) const;

  const std::vector<deepmind::reverb::StructuredWriterConfig> configs_;
  int max_age_ = 0;
  // Per column the configs read: how many entries its buffer keeps, and
  // whether values are needed. Sparse, because a config may name any column
  // index: nothing per column is allocated before data that wide arrives.
  absl::flat_hash_map<int, int> capacity_;
  absl::flat_hash_set<int> needs_value_;
  // One more than the largest column index any config reads (0 for none).
  int64_t referenced_columns_ = 0;
  // capacity_ per column of the data (0: unused), from the first append.
  std::vector<int> buffer_capacity_;

  int num_columns_ = -1;  // fixed by the first append
  std::vector<std::deque<std::optional<PatternCell>>> buffers_;
  bool step_open_ = false;
  std::vector<bool> set_in_step_;
  int64_t steps_in_episode_ = 0;
  bool end_of_episode_ = false;
  std::vector<bool> applied_;
  std::vector<int64_t> steps_since_applied_;
};

}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_PATTERNS_PATTERN_ENGINE_H_
