#include "server/patterns/local_pattern_runner.h"

#include <cstddef>
#include <utility>

#include "absl/strings/str_cat.h"

namespace tf_reverb {

absl::StatusOr<std::unique_ptr<LocalPatternRunner>> LocalPatternRunner::Create(
    std::vector<deepmind::reverb::StructuredWriterConfig> configs) {
  absl::StatusOr<std::unique_ptr<PatternEngine>> engine = PatternEngine::Create(std::move(configs));
  if (!engine.ok()) return engine.status();
  return std::unique_ptr<LocalPatternRunner>(new LocalPatternRunner(*std::move(engine)));
}

LocalPatternRunner::LocalPatternRunner(std::unique_ptr<PatternEngine> engine)
    : engine_(std::move(engine)) {}

absl::Status LocalPatternRunner::Append(std::vector<Tensor> step, bool end_of_episode,
                                        bool clear_buffers) {
  std::vector<std::optional<PatternCell>> cells(step.size());
  for (size_t column = 0; column < step.size(); ++column) {
    if (!engine_->UsesColumn(static_cast<int>(column))) continue;
    cells[column] = PatternCell{std::make_shared<const Tensor>(std::move(step[column])), {}};
  }
  std::vector<PatternItem> items;
  absl::Status status = engine_->Append(std::move(cells), /*partial=*/false, &items);
  if (status.ok() && end_of_episode) status = engine_->ApplyEndOfEpisode(&items);
  if (status.ok()) status = Queue(items);
  if (end_of_episode) engine_->StartNewEpisode(clear_buffers);
  return status;
}

absl::Status LocalPatternRunner::Queue(const std::vector<PatternItem>& items) {
  for (const PatternItem& item : items) {
    std::vector<Tensor> trajectory;
    trajectory.reserve(item.columns.size());
    for (size_t i = 0; i < item.columns.size(); ++i) {
      const PatternColumn& column = item.columns[i];
      if (column.squeeze) {
        trajectory.push_back(*column.rows[0].value);
        continue;
      }
      std::vector<const Tensor*> rows;
      rows.reserve(column.rows.size());
      for (const PatternCell& cell : column.rows) rows.push_back(cell.value.get());
      absl::StatusOr<Tensor> stacked = StackTensors(rows);
      if (!stacked.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("Node ", i, " of config ", item.config_index,
                                                       ": ", stacked.status().message()));
      }
      trajectory.push_back(*std::move(stacked));
    }
    ready_.push_back(std::move(trajectory));
  }
  return absl::OkStatus();
}

std::optional<std::vector<Tensor>> LocalPatternRunner::Pop() {
  if (ready_.empty()) return std::nullopt;
  std::vector<Tensor> trajectory = std::move(ready_.front());
  ready_.pop_front();
  return trajectory;
}

}  // namespace tf_reverb
