#include "server/selectors/prioritized.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "schema.pb.h"

namespace tf_reverb {

PrioritizedSelector::PrioritizedSelector(double priority_exponent)
    : priority_exponent_(priority_exponent) {
  nodes_.reserve(kMinCapacity);
}

absl::Status PrioritizedSelector::ValidatePriority(double priority) const {
  if (std::isnan(priority)) {
    return absl::InvalidArgumentError("Priority must not be NaN.");
  }
  if (priority < 0) {
    return absl::InvalidArgumentError("Priority must not be negative.");
  }
  return absl::OkStatus();
}

double PrioritizedSelector::WeightOf(double priority) const {
  // pow(0, 0) is 1, but a zero priority must never be sampled.
  return priority == 0 ? 0.0 : std::pow(priority, priority_exponent_);
}

void PrioritizedSelector::RecomputePath(size_t i) {
  while (true) {
    Node& node = nodes_[i];
    const size_t left = 2 * i + 1;
    const size_t right = left + 1;
    node.sum = node.weight + SumAt(left) + SumAt(right);
    node.inf_count = (std::isinf(node.weight) ? 1 : 0) + InfCountAt(left) + InfCountAt(right);
    if (i == 0) return;
    i = (i - 1) / 2;
  }
}

absl::Status PrioritizedSelector::Insert(Key key, double priority) {
  if (absl::Status status = ValidatePriority(priority); !status.ok()) {
    return status;
  }
  if (index_.contains(key)) {
    return absl::InvalidArgumentError(absl::StrCat("Key ", key, " already inserted."));
  }
  if (nodes_.size() == nodes_.capacity()) {
    nodes_.reserve(std::max(kMinCapacity, 2 * nodes_.capacity()));
  }
  const double weight = WeightOf(priority);
  nodes_.push_back(Node{key, weight, weight, 0});
  index_.emplace(key, nodes_.size() - 1);
  RecomputePath(nodes_.size() - 1);
  return absl::OkStatus();
}

absl::Status PrioritizedSelector::Update(Key key, double priority) {
  if (absl::Status status = ValidatePriority(priority); !status.ok()) {
    return status;
  }
  auto it = index_.find(key);
  if (it == index_.end()) {
    return absl::InvalidArgumentError(absl::StrCat("Key ", key, " not found."));
  }
  nodes_[it->second].weight = WeightOf(priority);
  RecomputePath(it->second);
  return absl::OkStatus();
}

absl::Status PrioritizedSelector::Delete(Key key) {
  auto it = index_.find(key);
  if (it == index_.end()) {
    return absl::InvalidArgumentError(absl::StrCat("Key ", key, " not found."));
  }
  const size_t hole = it->second;
  const size_t last = nodes_.size() - 1;
  index_.erase(it);
  if (hole != last) {
    nodes_[hole] = nodes_[last];
    index_[nodes_[hole].key] = hole;
  }
  nodes_.pop_back();
  // Two paths are stale: the hole's (new occupant) and the old last node's
  // parent's (lost a child). Recomputing the second after the first is
  // enough: a node on both paths is recomputed last from fresh children.
  if (hole < nodes_.size()) RecomputePath(hole);
  if (last > 0) RecomputePath((last - 1) / 2);
  MaybeShrink();
  return absl::OkStatus();
}

void PrioritizedSelector::MaybeShrink() {
  const size_t capacity = nodes_.capacity();
  if (capacity <= kMinCapacity || nodes_.size() * 4 > capacity) return;
  // Halving at a quarter full keeps growth and shrink amortised O(1).
  std::vector<Node> smaller;
  smaller.reserve(std::max(kMinCapacity, capacity / 2));
  smaller.assign(nodes_.begin(), nodes_.end());
  nodes_.swap(smaller);
  index_.rehash(0);  // Shrinks the map to fit its current size.
}

double PrioritizedSelector::Uniform01() {
  // 53 random bits -> a double in [0, 1); never 1.0 (unlike some
  // std::generate_canonical implementations).
  return static_cast<double>(rng_() >> 11) * 0x1.0p-53;
}

size_t PrioritizedSelector::WalkByWeight(double t) const {
  // Order within a subtree: left subtree, right subtree, the node itself.
  size_t i = 0;
  while (true) {
    const size_t left = 2 * i + 1;
    const size_t right = left + 1;
    const double left_sum = SumAt(left);
    const double right_sum = SumAt(right);
    if (t < left_sum) {
      i = left;
      continue;
    }
    t -= left_sum;
    if (t < right_sum) {
      i = right;
      continue;
    }
    t -= right_sum;
    if (nodes_[i].weight > 0) return i;
    // Rounding carried t past the end of this subtree (whose sum is > 0) and
    // the node itself has no weight: take the last positive weight in walk
    // order, inside the right subtree if it has any weight, else the left.
    if (right_sum > 0) {
      i = right;
      t = right_sum;
    } else {
      i = left;
      t = left_sum;
    }
  }
}

size_t PrioritizedSelector::WalkByInfCount(int64_t target) const {
  size_t i = 0;
  while (true) {
    const size_t left = 2 * i + 1;
    const size_t right = left + 1;
    const int64_t left_count = InfCountAt(left);
    const int64_t right_count = InfCountAt(right);
    if (target < left_count) {
      i = left;
      continue;
    }
    target -= left_count;
    if (target < right_count) {
      i = right;
      continue;
    }
    return i;  // target == 0 and this node's weight is infinite.
  }
}

absl::StatusOr<KeyWithProbability> PrioritizedSelector::Sample() {
  if (nodes_.empty()) {
    return absl::FailedPreconditionError("Sample called on an empty PrioritizedSelector.");
  }
  const double total = nodes_[0].sum;
  const double n = static_cast<double>(nodes_.size());
  if (total > 0 && std::isfinite(total)) {
    const size_t i = WalkByWeight(Uniform01() * total);
    return KeyWithProbability{nodes_[i].key, nodes_[i].weight / total};
  }
  const int64_t inf_count = nodes_[0].inf_count;
  if (inf_count > 0) {
    std::uniform_int_distribution<int64_t> pick(0, inf_count - 1);
    const size_t i = WalkByInfCount(pick(rng_));
    return KeyWithProbability{nodes_[i].key, 1.0 / static_cast<double>(inf_count)};
  }
  // total == 0, or finite weights whose sum overflowed.
  std::uniform_int_distribution<size_t> pick(0, nodes_.size() - 1);
  return KeyWithProbability{nodes_[pick(rng_)].key, 1.0 / n};
}

void PrioritizedSelector::Clear() {
  std::vector<Node>().swap(nodes_);
  nodes_.reserve(kMinCapacity);
  absl::flat_hash_map<Key, size_t>().swap(index_);
}

deepmind::reverb::KeyDistributionOptions PrioritizedSelector::options() const {
  deepmind::reverb::KeyDistributionOptions options;
  options.mutable_prioritized()->set_priority_exponent(priority_exponent_);
  options.set_is_deterministic(false);
  return options;
}

std::string PrioritizedSelector::DebugString() const {
  return absl::StrFormat("PrioritizedSelector(priority_exponent=%g)", priority_exponent_);
}

}  // namespace tf_reverb
