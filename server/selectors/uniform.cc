#include "server/selectors/uniform.h"

#include <cstdlib>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "schema.pb.h"

namespace tf_reverb {

UniformSelector::UniformSelector() = default;

absl::Status UniformSelector::Insert(Key key, double /*priority*/) {
  if (!index_.try_emplace(key, keys_.size()).second) {
    return absl::InvalidArgumentError(absl::StrCat("Key ", key, " already inserted."));
  }
  keys_.push_back(key);
  return absl::OkStatus();
}

absl::Status UniformSelector::Update(Key key, double /*priority*/) {
  if (!index_.contains(key)) {
    return absl::InvalidArgumentError(absl::StrCat("Key ", key, " not found."));
  }
  return absl::OkStatus();
}

absl::Status UniformSelector::Delete(Key key) {
  auto it = index_.find(key);
  if (it == index_.end()) {
    return absl::InvalidArgumentError(absl::StrCat("Key ", key, " not found."));
  }
  const size_t hole = it->second;
  index_.erase(it);
  if (hole != keys_.size() - 1) {
    keys_[hole] = keys_.back();
    index_[keys_[hole]] = hole;
  }
  keys_.pop_back();
  return absl::OkStatus();
}

absl::StatusOr<KeyWithProbability> UniformSelector::Sample() {
  if (keys_.empty()) {
    return absl::FailedPreconditionError("Sample called on an empty UniformSelector.");
  }
  std::uniform_int_distribution<size_t> pick(0, keys_.size() - 1);
  return KeyWithProbability{keys_[pick(rng_)], 1.0 / static_cast<double>(keys_.size())};
}

void UniformSelector::Clear() {
  keys_.clear();
  keys_.shrink_to_fit();
  index_.clear();
}

deepmind::reverb::KeyDistributionOptions UniformSelector::options() const {
  deepmind::reverb::KeyDistributionOptions options;
  options.set_uniform(true);
  options.set_is_deterministic(false);
  return options;
}

std::string UniformSelector::DebugString() const { return "UniformSelector"; }

}  // namespace tf_reverb
