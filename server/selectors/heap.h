// HeapSelector: selects the key with the smallest (min-heap) or largest
// (max-heap) priority, with probability 1.0 (docs/concepts/selectors.md).
//
// Order: keys are ordered by (sign * priority, update_number), sign = +1 for
// a min-heap and -1 for a max-heap. update_number is a per-selector counter
// assigned on Insert and again on every Update, so ties go to the least
// recently inserted-or-updated key. Sample does not change the order. NaN
// priorities are accepted (as in Reverb) and, to keep the order total, rank
// after every non-NaN priority in both heap kinds.
//
// Contract:
//  * Thread-safety: none. The owning Table serialises every call.
//  * Ownership: owned by one Table through std::unique_ptr<ItemSelector>;
//    holds only keys and priorities, never items.
//  * Complexity: indexed binary heap; Insert/Update/Delete O(log n),
//    Sample O(1).
//  * Errors: Insert of a present key and Update/Delete of an absent key are
//    INVALID_ARGUMENT ("Key K already inserted." / "Key K not found.");
//    Sample on an empty selector is FAILED_PRECONDITION.
#ifndef TF_REVERB_SERVER_SELECTORS_HEAP_H_
#define TF_REVERB_SERVER_SELECTORS_HEAP_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "schema.pb.h"
#include "server/selectors/selector.h"

namespace tf_reverb {

class HeapSelector : public ItemSelector {
 public:
  // min_heap=true samples the smallest priority, false the largest.
  explicit HeapSelector(bool min_heap = true);

  absl::Status Insert(Key key, double priority) override;
  absl::Status Update(Key key, double priority) override;
  absl::Status Delete(Key key) override;
  absl::StatusOr<KeyWithProbability> Sample() override;
  void Clear() override;
  int64_t size() const override { return static_cast<int64_t>(heap_.size()); }
  deepmind::reverb::KeyDistributionOptions options() const override;
  std::string DebugString() const override;

 private:
  struct Node {
    Key key;
    double value;  // sign * priority.
    uint64_t update_number;
  };

  // True when `a` must be sampled before `b`.
  static bool Before(const Node& a, const Node& b);
  // Restores the heap property for the node at `i`; keeps index_ in sync.
  void SiftUp(size_t i);
  void SiftDown(size_t i);
  void Fix(size_t i);
  void Place(size_t i, const Node& node);

  const bool min_heap_;
  const double sign_;
  uint64_t next_update_number_ = 0;
  std::vector<Node> heap_;                  // heap_[0] is the next sample.
  absl::flat_hash_map<Key, size_t> index_;  // key -> position in heap_.
};

}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_SELECTORS_HEAP_H_
