#include "server/patterns/pattern_config.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"

namespace tf_reverb {

int NodeAge(const PatternNode& node) {
  const int64_t offset = node.has_start() ? node.start() : node.stop();
  // |INT32_MIN| does not fit an int (std::abs of it is undefined): saturate.
  return static_cast<int>(std::min<int64_t>(std::abs(offset), std::numeric_limits<int>::max()));
}

int MaxAge(const StructuredWriterConfig& config) {
  int age = 0;
  for (const PatternNode& node : config.flat()) age = std::max(age, NodeAge(node));
  return age;
}

absl::Status ValidatePatternNode(const PatternNode& node) {
  const std::string where = absl::StrCat("PatternNode {", node.ShortDebugString(), "}: ");
  if (node.flat_source_index() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, "flat_source_index must be >= 0 but got ", node.flat_source_index()));
  }
  if (!node.has_start() && !node.has_stop()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, "at least one of start and stop must be set"));
  }
  if (node.has_start() && node.start() >= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, "start must be < 0 but got ", node.start()));
  }
  if (node.has_stop() && node.stop() > 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, "stop must be <= 0 but got ", node.stop()));
  }
  if (node.has_start() && node.has_stop() && node.start() >= node.stop()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, "start (", node.start(), ") must be < stop (", node.stop(), ")"));
  }
  if (!node.has_start() && node.stop() >= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, "stop must be < 0 when start is unset but got ", node.stop()));
  }
  if (node.has_step() && !node.has_start()) {
    return absl::InvalidArgumentError(absl::StrCat(where, "step requires start to be set"));
  }
  if (node.has_step() && node.step() <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, "step must be > 0 but got ", node.step()));
  }
  return absl::OkStatus();
}

absl::Status ValidateCondition(const Condition& condition) {
  const std::string where = absl::StrCat("Condition {", condition.ShortDebugString(), "}: ");
  if (condition.left_case() == Condition::LEFT_NOT_SET) {
    return absl::InvalidArgumentError(absl::StrCat(where, "left must be set"));
  }
  if (condition.cmp_case() == Condition::CMP_NOT_SET) {
    return absl::InvalidArgumentError(absl::StrCat(where, "cmp must be set"));
  }
  if (condition.left_case() == Condition::kFlatSourceIndex && condition.flat_source_index() < 0) {
    return absl::InvalidArgumentError(absl::StrCat(where, "flat_source_index must be >= 0"));
  }
  if (condition.cmp_case() == Condition::kModEq) {
    if (condition.mod_eq().mod() <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(where, "mod_eq.mod must be > 0"));
    }
    if (condition.mod_eq().eq() < 0) {
      return absl::InvalidArgumentError(absl::StrCat(where, "mod_eq.eq must be >= 0"));
    }
  }
  if (condition.left_case() == Condition::kIsEndEpisode &&
      (condition.cmp_case() != Condition::kEq || condition.eq() != 1 || condition.inverse())) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, "is_end_episode can only be used with eq=1 and no inverse"));
  }
  return absl::OkStatus();
}

namespace {

bool HasBufferLengthCondition(const StructuredWriterConfig& config, int max_age) {
  for (const Condition& condition : config.conditions()) {
    if (condition.buffer_length() && condition.cmp_case() == Condition::kGe &&
        !condition.inverse() && condition.ge() >= max_age) {
      return true;
    }
  }
  return false;
}

}  // namespace

absl::Status ValidateConfig(const StructuredWriterConfig& config) {
  if (config.flat().empty()) return absl::InvalidArgumentError("`flat` must not be empty.");
  if (config.table().empty()) return absl::InvalidArgumentError("`table` must not be empty.");
  for (const PatternNode& node : config.flat()) {
    if (absl::Status status = ValidatePatternNode(node); !status.ok()) return status;
  }
  for (const Condition& condition : config.conditions()) {
    if (absl::Status status = ValidateCondition(condition); !status.ok()) return status;
  }
  if (config.priority().has_td_error()) {
    const int index = config.priority().td_error().flat_source_index();
    const bool referenced =
        std::any_of(config.flat().begin(), config.flat().end(),
                    [index](const PatternNode& node) { return node.flat_source_index() == index; });
    if (!referenced) {
      return absl::InvalidArgumentError(
          absl::StrCat("The TD-error priority reads flat_source_index ", index,
                       " but no node of the pattern references that column."));
    }
  }
  const int max_age = MaxAge(config);
  if (!HasBufferLengthCondition(config, max_age)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Config does not contain the required buffer length condition; expected a condition "
        "buffer_length >= ",
        max_age, " (the largest age of its nodes)."));
  }
  return absl::OkStatus();
}

void AddBufferLengthCondition(StructuredWriterConfig* config) {
  const int max_age = MaxAge(*config);
  if (HasBufferLengthCondition(*config, max_age)) return;
  Condition* condition = config->add_conditions();
  condition->set_buffer_length(true);
  condition->set_ge(max_age);
}

absl::Status CompleteAndValidateConfigs(std::vector<StructuredWriterConfig>* configs) {
  if (configs->empty()) return absl::InvalidArgumentError("At least one config is required.");
  for (size_t i = 0; i < configs->size(); ++i) {
    AddBufferLengthCondition(&(*configs)[i]);
    if (absl::Status status = ValidateConfig((*configs)[i]); !status.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("Invalid configuration at position ", i, ": ", status.message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace tf_reverb
