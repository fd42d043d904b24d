#include "server/selectors/lifo.h"

#include "absl/strings/str_cat.h"

namespace tf_reverb {

absl::Status LifoSelector::Insert(Key key, double /*priority*/) {
  if (index_.contains(key)) {
    return absl::InvalidArgumentError(
        absl::StrCat("Key ", key, " already inserted."));
  }
  index_.emplace(key, keys_.insert(keys_.end(), key));
  return absl::OkStatus();
}

absl::Status LifoSelector::Update(Key key, double /*priority*/) {
  if (!index_.contains(key)) {
    return absl::InvalidArgumentError(absl::StrCat("Key ", key, " not found."));
  }
  return absl::OkStatus();
}

absl::Status LifoSelector::Delete(Key key) {
  auto it = index_.find(key);
  if (it == index_.end()) {
    return absl::InvalidArgumentError(absl::StrCat("Key ", key, " not found."));
  }
  keys_.erase(it->second);
  index_.erase(it);
  return absl::OkStatus();
}

absl::StatusOr<KeyWithProbability> LifoSelector::Sample() {
  if (keys_.empty()) {
    return absl::FailedPreconditionError(
        "Sample called on an empty LifoSelector.");
  }
  return KeyWithProbability{keys_.back(), 1.0};
}

void LifoSelector::Clear() {
  keys_.clear();
  index_.clear();
}

deepmind::reverb::KeyDistributionOptions LifoSelector::options() const {
  deepmind::reverb::KeyDistributionOptions options;
  options.set_lifo(true);
  options.set_is_deterministic(true);
  return options;
}

std::string LifoSelector::DebugString() const { return "LifoSelector"; }

}  // namespace tf_reverb
