#include "server/selectors/heap.h"

#include <cmath>
#include <cstddef>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "schema.pb.h"

namespace tf_reverb {

HeapSelector::HeapSelector(bool min_heap) : min_heap_(min_heap), sign_(min_heap ? 1.0 : -1.0) {}

bool HeapSelector::Before(const Node& a, const Node& b) {
  const bool a_nan = std::isnan(a.value);
  const bool b_nan = std::isnan(b.value);
  if (a_nan != b_nan) return b_nan;
  if (!a_nan && a.value != b.value) return a.value < b.value;
  return a.update_number < b.update_number;
}

void HeapSelector::Place(size_t i, const Node& node) {
  heap_[i] = node;
  index_[node.key] = i;
}

void HeapSelector::SiftUp(size_t i) {
  const Node node = heap_[i];
  while (i > 0) {
    const size_t parent = (i - 1) / 2;
    if (!Before(node, heap_[parent])) break;
    Place(i, heap_[parent]);
    i = parent;
  }
  Place(i, node);
}

void HeapSelector::SiftDown(size_t i) {
  const Node node = heap_[i];
  const size_t n = heap_.size();
  while (true) {
    size_t best = 2 * i + 1;
    if (best >= n) break;
    if (best + 1 < n && Before(heap_[best + 1], heap_[best])) ++best;
    if (!Before(heap_[best], node)) break;
    Place(i, heap_[best]);
    i = best;
  }
  Place(i, node);
}

void HeapSelector::Fix(size_t i) {
  if (i > 0 && Before(heap_[i], heap_[(i - 1) / 2])) {
    SiftUp(i);
  } else {
    SiftDown(i);
  }
}

absl::Status HeapSelector::Insert(Key key, double priority) {
  if (index_.contains(key)) {
    return absl::InvalidArgumentError(absl::StrCat("Key ", key, " already inserted."));
  }
  heap_.push_back(Node{key, sign_ * priority, next_update_number_++});
  index_[key] = heap_.size() - 1;
  SiftUp(heap_.size() - 1);
  return absl::OkStatus();
}

absl::Status HeapSelector::Update(Key key, double priority) {
  auto it = index_.find(key);
  if (it == index_.end()) {
    return absl::InvalidArgumentError(absl::StrCat("Key ", key, " not found."));
  }
  const size_t i = it->second;
  heap_[i].value = sign_ * priority;
  heap_[i].update_number = next_update_number_++;
  Fix(i);
  return absl::OkStatus();
}

absl::Status HeapSelector::Delete(Key key) {
  auto it = index_.find(key);
  if (it == index_.end()) {
    return absl::InvalidArgumentError(absl::StrCat("Key ", key, " not found."));
  }
  const size_t hole = it->second;
  index_.erase(it);
  const size_t last = heap_.size() - 1;
  if (hole != last) {
    Place(hole, heap_[last]);
    heap_.pop_back();
    Fix(hole);
  } else {
    heap_.pop_back();
  }
  return absl::OkStatus();
}

absl::StatusOr<KeyWithProbability> HeapSelector::Sample() {
  if (heap_.empty()) {
    return absl::FailedPreconditionError("Sample called on an empty HeapSelector.");
  }
  return KeyWithProbability{heap_.front().key, 1.0};
}

void HeapSelector::Clear() {
  heap_.clear();
  heap_.shrink_to_fit();
  index_.clear();
}

deepmind::reverb::KeyDistributionOptions HeapSelector::options() const {
  deepmind::reverb::KeyDistributionOptions options;
  options.mutable_heap()->set_min_heap(min_heap_);
  options.set_is_deterministic(true);
  return options;
}

std::string HeapSelector::DebugString() const {
  return min_heap_ ? "HeapSelector(sign=1)" : "HeapSelector(sign=-1)";
}

}  // namespace tf_reverb
