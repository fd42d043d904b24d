// InsertionOrderSelector: selects the oldest (FIFO) or the newest (LIFO) key
// still present, with probability 1.0 (docs/concepts/selectors.md). FifoSelector
// and LifoSelector (fifo.h, lifo.h) are its two configurations.
//
// Contract:
//  * Thread-safety: none. The owning Table serialises every call.
//  * Ownership: owned by one Table through std::unique_ptr<ItemSelector>;
//    holds only keys, never items.
//  * Order: insertion order only. Priorities are ignored and Update never
//    reorders (it only checks that the key is present).
//  * Complexity: Insert, Update, Delete and Sample are O(1) (linked list plus
//    key->node map).
//  * Errors: Insert of a present key and Update/Delete of an absent key are
//    INVALID_ARGUMENT ("Key K already inserted." / "Key K not found.");
//    Sample on an empty selector is FAILED_PRECONDITION.
#ifndef TF_REVERB_SERVER_SELECTORS_INSERTION_ORDER_H_
#define TF_REVERB_SERVER_SELECTORS_INSERTION_ORDER_H_

#include <cstdint>
#include <list>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "schema.pb.h"
#include "server/selectors/selector.h"

namespace tf_reverb {

class InsertionOrderSelector : public ItemSelector {
 public:
  enum class Pick { kOldest, kNewest };
  explicit InsertionOrderSelector(Pick pick) : pick_(pick) {}

  absl::Status Insert(Key key, double priority) override;
  absl::Status Update(Key key, double priority) override;
  absl::Status Delete(Key key) override;
  absl::StatusOr<KeyWithProbability> Sample() override;
  void Clear() override;
  int64_t size() const override { return static_cast<int64_t>(index_.size()); }
  deepmind::reverb::KeyDistributionOptions options() const override;
  std::string DebugString() const override;

 private:
  const Pick pick_;
  std::list<Key> keys_;  // Oldest at the front, newest at the back.
  absl::flat_hash_map<Key, std::list<Key>::iterator> index_;
};

}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_SELECTORS_INSERTION_ORDER_H_
