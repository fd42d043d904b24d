#include "server/selectors/fifo.h"

#include "absl/strings/str_cat.h"

namespace tf_reverb {

absl::Status FifoSelector::Insert(Key key, double /*priority*/) {
  if (index_.contains(key)) {
    return absl::InvalidArgumentError(
        absl::StrCat("Key ", key, " already inserted."));
  }
  index_.emplace(key, keys_.insert(keys_.end(), key));
  return absl::OkStatus();
}

absl::Status FifoSelector::Update(Key key, double /*priority*/) {
  if (!index_.contains(key)) {
    return absl::InvalidArgumentError(absl::StrCat("Key ", key, " not found."));
  }
  return absl::OkStatus();
}

absl::Status FifoSelector::Delete(Key key) {
  auto it = index_.find(key);
  if (it == index_.end()) {
    return absl::InvalidArgumentError(absl::StrCat("Key ", key, " not found."));
  }
  keys_.erase(it->second);
  index_.erase(it);
  return absl::OkStatus();
}

absl::StatusOr<KeyWithProbability> FifoSelector::Sample() {
  if (keys_.empty()) {
    return absl::FailedPreconditionError(
        "Sample called on an empty FifoSelector.");
  }
  return KeyWithProbability{keys_.front(), 1.0};
}

void FifoSelector::Clear() {
  keys_.clear();
  index_.clear();
}

deepmind::reverb::KeyDistributionOptions FifoSelector::options() const {
  deepmind::reverb::KeyDistributionOptions options;
  options.set_fifo(true);
  options.set_is_deterministic(true);
  return options;
}

std::string FifoSelector::DebugString() const { return "FifoSelector"; }

}  // namespace tf_reverb
