#include "server/selectors/insertion_order.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "schema.pb.h"

namespace tf_reverb {

absl::Status InsertionOrderSelector::Insert(Key key, double /*priority*/) {
  if (index_.contains(key)) {
    return absl::InvalidArgumentError(absl::StrCat("Key ", key, " already inserted."));
  }
  index_.emplace(key, keys_.insert(keys_.end(), key));
  return absl::OkStatus();
}

absl::Status InsertionOrderSelector::Update(Key key, double /*priority*/) {
  if (!index_.contains(key)) {
    return absl::InvalidArgumentError(absl::StrCat("Key ", key, " not found."));
  }
  return absl::OkStatus();
}

absl::Status InsertionOrderSelector::Delete(Key key) {
  auto it = index_.find(key);
  if (it == index_.end()) {
    return absl::InvalidArgumentError(absl::StrCat("Key ", key, " not found."));
  }
  keys_.erase(it->second);
  index_.erase(it);
  return absl::OkStatus();
}

absl::StatusOr<KeyWithProbability> InsertionOrderSelector::Sample() {
  if (keys_.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("Sample called on an empty ", DebugString(), "."));
  }
  return KeyWithProbability{pick_ == Pick::kOldest ? keys_.front() : keys_.back(), 1.0};
}

void InsertionOrderSelector::Clear() {
  keys_.clear();
  index_.clear();
}

deepmind::reverb::KeyDistributionOptions InsertionOrderSelector::options() const {
  deepmind::reverb::KeyDistributionOptions options;
  if (pick_ == Pick::kOldest) {
    options.set_fifo(true);
  } else {
    options.set_lifo(true);
  }
  options.set_is_deterministic(true);
  return options;
}

std::string InsertionOrderSelector::DebugString() const {
  return pick_ == Pick::kOldest ? "FifoSelector" : "LifoSelector";
}

}  // namespace tf_reverb
