#include "server/patterns/pattern_engine.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/patterns/pattern_config.h"
#include "tensor.pb.h"

namespace tf_reverb {
namespace {

using deepmind::reverb::Condition;
using deepmind::reverb::PatternNode;
using deepmind::reverb::StructuredWriterConfig;

template <typename T>
T Scalar(const Tensor& tensor) {
  T value;
  std::memcpy(&value, tensor.data.data(), sizeof(T));
  return value;
}

// The value of a scalar integer or bool cell as int32 (as Reverb casts
// data-condition values); nullopt with an error log for anything else.
std::optional<int64_t> ConditionValue(const Tensor& tensor, int column) {
  if (!tensor.shape.empty() || tensor.num_elements() != 1) {
    std::fprintf(stderr,
                 "StructuredWriter: condition on column %d needs a scalar but got shape %s\n",
                 column, ShapeString(tensor.shape).c_str());
    return std::nullopt;
  }
  switch (tensor.dtype) {
    case tf::DT_BOOL:
      return Scalar<uint8_t>(tensor) != 0 ? 1 : 0;
    case tf::DT_INT8:
      return static_cast<int32_t>(Scalar<int8_t>(tensor));
    case tf::DT_INT16:
      return static_cast<int32_t>(Scalar<int16_t>(tensor));
    case tf::DT_INT32:
      return Scalar<int32_t>(tensor);
    case tf::DT_INT64:
      return static_cast<int32_t>(Scalar<int64_t>(tensor));
    case tf::DT_UINT8:
      return static_cast<int32_t>(Scalar<uint8_t>(tensor));
    case tf::DT_UINT16:
      return static_cast<int32_t>(Scalar<uint16_t>(tensor));
    case tf::DT_UINT32:
      return static_cast<int32_t>(Scalar<uint32_t>(tensor));
    case tf::DT_UINT64:
      return static_cast<int32_t>(Scalar<uint64_t>(tensor));
    default:
      std::fprintf(stderr,
                   "StructuredWriter: condition on column %d needs an integer or bool "
                   "value but got %s\n",
                   column, DataTypeName(tensor.dtype).c_str());
      return std::nullopt;
  }
}

absl::StatusOr<double> TdValue(const Tensor& tensor, int column) {
  if (tensor.shape.empty()) {
    switch (tensor.dtype) {
      case tf::DT_FLOAT:
        return Scalar<float>(tensor);
      case tf::DT_DOUBLE:
        return Scalar<double>(tensor);
      case tf::DT_INT32:
        return Scalar<int32_t>(tensor);
      case tf::DT_INT64:
        return static_cast<double>(Scalar<int64_t>(tensor));
      default:
        break;
    }
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "TD-error priority needs scalar float32, float64, int32 or int64 values in column ", column,
      " but got ", DataTypeName(tensor.dtype), ShapeString(tensor.shape), "."));
}

}  // namespace

absl::StatusOr<std::unique_ptr<PatternEngine>> PatternEngine::Create(
    std::vector<StructuredWriterConfig> configs) {
  if (absl::Status status = CompleteAndValidateConfigs(&configs); !status.ok()) return status;
  return std::unique_ptr<PatternEngine>(new PatternEngine(std::move(configs)));
}

PatternEngine::PatternEngine(std::vector<StructuredWriterConfig> configs)
    : configs_(std::move(configs)),
      applied_(configs_.size(), false),
      steps_since_applied_(configs_.size(), 0) {
  auto reference = [this](int column) {
    referenced_columns_ = std::max(referenced_columns_, int64_t{column} + 1);
  };
  for (const StructuredWriterConfig& config : configs_) {
    max_age_ = std::max(max_age_, MaxAge(config));
    for (const PatternNode& node : config.flat()) {
      reference(node.flat_source_index());
      int& capacity = capacity_[node.flat_source_index()];
      capacity = std::max(capacity, NodeAge(node));
    }
    for (const Condition& condition : config.conditions()) {
      if (condition.left_case() != Condition::kFlatSourceIndex) continue;
      reference(condition.flat_source_index());
      int& capacity = capacity_[condition.flat_source_index()];
      capacity = std::max(capacity, 1);
      needs_value_.insert(condition.flat_source_index());
    }
    if (config.priority().has_td_error()) {
      needs_value_.insert(config.priority().td_error().flat_source_index());
    }
  }
}

bool PatternEngine::UsesColumn(int column) const {
  auto it = capacity_.find(column);
  return it != capacity_.end() && it->second > 0;
}

bool PatternEngine::NeedsValue(int column) const { return needs_value_.contains(column); }

absl::Status PatternEngine::CheckNumColumns(int num_columns) const {
  if (num_columns_ >= 0) {
    if (num_columns != num_columns_) {
      return absl::InvalidArgumentError(
          absl::StrCat("Flattened data has an unexpected length, got ", num_columns, " but wanted ",
                       num_columns_, "."));
    }
    return absl::OkStatus();
  }
  if (referenced_columns_ > num_columns) {
    for (size_t i = 0; i < configs_.size(); ++i) {
      for (const PatternNode& node : configs_[i].flat()) {
        if (node.flat_source_index() >= num_columns) {
          return absl::InvalidArgumentError(absl::StrCat(
              "Config at position ", i, " references flat_source_index ", node.flat_source_index(),
              " but the data has only ", num_columns, " columns."));
        }
      }
    }
    return absl::InvalidArgumentError(
        absl::StrCat("A condition references flat_source_index ", referenced_columns_ - 1,
                     " but the data has only ", num_columns, " columns."));
  }
  return absl::OkStatus();
}

absl::Status PatternEngine::CheckAppend(const std::vector<bool>& present) const {
  const int num_columns = static_cast<int>(present.size());
  if (absl::Status status = CheckNumColumns(num_columns); !status.ok()) return status;
  if (!step_open_) return absl::OkStatus();
  for (int column = 0; column < num_columns; ++column) {
    if (present[column] && set_in_step_[column]) {
      return absl::InvalidArgumentError(
          absl::StrCat("Column ", column, " was already set in the open (partial) step."));
    }
  }
  return absl::OkStatus();
}

void PatternEngine::OpenStep() {
  for (int column = 0; column < num_columns_; ++column) {
    if (buffer_capacity_[column] == 0) continue;
    auto& buffer = buffers_[column];
    buffer.emplace_back(std::nullopt);
    while (static_cast<int>(buffer.size()) > buffer_capacity_[column]) buffer.pop_front();
  }
  std::fill(set_in_step_.begin(), set_in_step_.end(), false);
  std::fill(applied_.begin(), applied_.end(), false);
  for (int64_t& steps : steps_since_applied_) ++steps;
  ++steps_in_episode_;
  step_open_ = true;
}

absl::Status PatternEngine::Append(std::vector<std::optional<PatternCell>> cells, bool partial,
                                   std::vector<PatternItem>* items) {
  std::vector<bool> present(cells.size());
  for (size_t i = 0; i < cells.size(); ++i) present[i] = cells[i].has_value();
  if (absl::Status status = CheckAppend(present); !status.ok()) return status;
  if (num_columns_ < 0) {
    num_columns_ = static_cast<int>(cells.size());
    // CheckAppend made sure every referenced column is below num_columns_.
    buffer_capacity_.assign(num_columns_, 0);
    for (const auto& [column, capacity] : capacity_) buffer_capacity_[column] = capacity;
    buffers_.resize(num_columns_);
    set_in_step_.assign(num_columns_, false);
  }
  if (!step_open_) OpenStep();
  for (int column = 0; column < num_columns_; ++column) {
    if (!cells[column].has_value()) continue;
    set_in_step_[column] = true;
    if (buffer_capacity_[column] > 0) buffers_[column].back() = std::move(cells[column]);
  }
  absl::Status status = ApplyConfigs(items);
  if (!partial) step_open_ = false;
  return status;
}

absl::Status PatternEngine::ApplyEndOfEpisode(std::vector<PatternItem>* items) {
  end_of_episode_ = true;
  absl::Status status = ApplyConfigs(items);
  end_of_episode_ = false;
  return status;
}

void PatternEngine::StartNewEpisode(bool clear_buffers) {
  step_open_ = false;
  steps_in_episode_ = 0;
  // The newest buffered step belongs to the old episode: never fire on it
  // again.
  std::fill(applied_.begin(), applied_.end(), true);
  if (clear_buffers) {
    for (auto& buffer : buffers_) buffer.clear();
    std::fill(steps_since_applied_.begin(), steps_since_applied_.end(), 0);
  }
}

absl::Status PatternEngine::ApplyConfigs(std::vector<PatternItem>* items) {
  for (size_t i = 0; i < configs_.size(); ++i) {
    if (applied_[i]) continue;
    const StructuredWriterConfig& config = configs_[i];
    const bool holds =
        std::all_of(config.conditions().begin(), config.conditions().end(),
                    [&](const Condition& condition) { return ConditionHolds(condition, i); });
    if (!holds) continue;
    PatternItem item;
    item.config_index = static_cast<int>(i);
    item.table = config.table();
    item.columns.reserve(config.flat_size());
    bool complete = true;
    for (const PatternNode& node : config.flat()) {
      std::optional<PatternColumn> column = SelectRows(node);
      if (!column.has_value()) {
        complete = false;
        break;
      }
      item.columns.push_back(*std::move(column));
    }
    if (!complete) continue;
    absl::StatusOr<double> priority = Priority(config, item.columns);
    if (!priority.ok()) return priority.status();
    item.priority = *priority;
    items->push_back(std::move(item));
    applied_[i] = true;
    steps_since_applied_[i] = 0;
  }
  return absl::OkStatus();
}

std::optional<int64_t> PatternEngine::EvaluateLeft(const Condition& condition,
                                                   int config_index) const {
  switch (condition.left_case()) {
    case Condition::kStepIndex:
      if (steps_in_episode_ == 0) return std::nullopt;
      return steps_in_episode_ - 1;
    case Condition::kStepsSinceApplied:
      return steps_since_applied_[config_index];
    case Condition::kBufferLength: {
      size_t longest = 0;
      for (const auto& buffer : buffers_) longest = std::max(longest, buffer.size());
      return static_cast<int64_t>(longest);
    }
    case Condition::kIsEndEpisode:
      return end_of_episode_ ? 1 : 0;
    case Condition::kFlatSourceIndex: {
      const int column = condition.flat_source_index();
      if (column >= num_columns_ || buffers_[column].empty()) return std::nullopt;
      const std::optional<PatternCell>& cell = buffers_[column].back();
      if (!cell.has_value() || cell->value == nullptr) return std::nullopt;
      return ConditionValue(*cell->value, column);
    }
    case Condition::LEFT_NOT_SET:
      break;
  }
  return std::nullopt;
}

bool PatternEngine::ConditionHolds(const Condition& condition, int config_index) const {
  const std::optional<int64_t> left = EvaluateLeft(condition, config_index);
  if (!left.has_value()) return false;
  bool result = false;
  switch (condition.cmp_case()) {
    case Condition::kEq:
      result = *left == condition.eq();
      break;
    case Condition::kGe:
      result = *left >= condition.ge();
      break;
    case Condition::kModEq:
      result = *left % condition.mod_eq().mod() == condition.mod_eq().eq();
      break;
    case Condition::CMP_NOT_SET:
      return false;
  }
  return result != condition.inverse();
}

std::optional<PatternColumn> PatternEngine::SelectRows(const PatternNode& node) const {
  const auto& buffer = buffers_[node.flat_source_index()];
  const int64_t size = static_cast<int64_t>(buffer.size());
  PatternColumn column;
  auto take = [&](int64_t row) {
    if (row < 0 || row >= size || !buffer[row].has_value()) return false;
    column.rows.push_back(*buffer[row]);
    return true;
  };
  if (!node.has_start()) {
    column.squeeze = true;
    if (!take(size + node.stop())) return std::nullopt;
    return column;
  }
  const int64_t stop = size + (node.has_stop() ? node.stop() : 0);
  const int64_t step = node.has_step() ? node.step() : 1;
  for (int64_t row = size + node.start(); row < stop; row += step) {
    if (!take(row)) return std::nullopt;
  }
  return column;
}

absl::StatusOr<double> PatternEngine::Priority(const StructuredWriterConfig& config,
                                               const std::vector<PatternColumn>& columns) const {
  if (!config.priority().has_td_error()) {
    return config.priority().has_constant_fn() ? config.priority().constant_fn().value() : 1.0;
  }
  const auto& td = config.priority().td_error();
  for (int i = 0; i < config.flat_size(); ++i) {
    if (config.flat(i).flat_source_index() != td.flat_source_index()) continue;
    double max_abs = 0, sum_abs = 0;
    for (const PatternCell& cell : columns[i].rows) {
      if (cell.value == nullptr) {
        return absl::InternalError("TD-error column values were not kept.");
      }
      absl::StatusOr<double> value = TdValue(*cell.value, td.flat_source_index());
      if (!value.ok()) return value.status();
      max_abs = std::max(max_abs, std::abs(*value));
      sum_abs += std::abs(*value);
    }
    const double mean_abs = columns[i].rows.empty() ? 0 : sum_abs / columns[i].rows.size();
    return td.max_priority_weight() * max_abs + (1 - td.max_priority_weight()) * mean_abs;
  }
  return absl::InternalError("TD-error column is not part of the pattern.");
}

}  // namespace tf_reverb
