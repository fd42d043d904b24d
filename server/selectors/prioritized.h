// PrioritizedSelector: samples key i with probability w_i / sum_j w_j where
// w_i = p_i ^ priority_exponent (docs/concepts/selectors.md).
//
// Semantics:
//  * w = p^a, except p == 0 gives w = 0 even when a == 0. Priorities must be
//    >= 0 and not NaN; the exponent itself is not validated (negative is
//    allowed, as in Reverb >= 0.14).
//  * Sample draws t = U[0,1) * total and walks a sum tree; the reported
//    probability is w_i / total. When total == 0 every key is equally likely
//    and the reported probability is 1/N.
//  * Infinite weights (p = inf, or p^a overflowing) do not poison sampling:
//    if any weight is infinite, the keys with infinite weight are sampled
//    uniformly (probability 1/count); if every weight is finite but their sum
//    overflows, keys are sampled uniformly with probability 1/N.
//
// Data structure: a flat array where every node is an item (Reverb's layout):
// node i holds its own weight and the sum over its subtree; children are
// 2i+1 and 2i+2; keys occupy 0..N-1 and Delete moves the last key into the
// hole. Sums on a changed path are recomputed from the children, never
// adjusted by deltas, so they never drift. Memory follows the number of
// items: capacity starts at kMinCapacity, doubles when full and halves when
// the array is at most a quarter full.
//
// Contract:
//  * Thread-safety: none. The owning Table serialises every call.
//  * Ownership: owned by one Table through std::unique_ptr<ItemSelector>;
//    holds only keys and weights, never items.
//  * Complexity: Insert/Update/Delete/Sample O(log n) (amortised for the
//    array growth and shrink).
//  * Errors: a negative or NaN priority is INVALID_ARGUMENT ("Priority must
//    not be negative." / "Priority must not be NaN.") from ValidatePriority,
//    Insert and Update, and the selector is left unchanged. Insert of a
//    present key and Update/Delete of an absent key are INVALID_ARGUMENT
//    ("Key K already inserted." / "Key K not found."). Sample on an empty
//    selector is FAILED_PRECONDITION.
//  * Randomness: a SelectorRandom (std::mt19937_64 from std::random_device)
//    owned by the selector; a seeded table seeds it (Table(seed=...)) and
//    checkpoints its state.
#ifndef TF_REVERB_SERVER_SELECTORS_PRIORITIZED_H_
#define TF_REVERB_SERVER_SELECTORS_PRIORITIZED_H_

#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "schema.pb.h"
#include "server/selectors/selector.h"
#include "server/selectors/selector_random.h"

namespace tf_reverb {

class PrioritizedSelector : public ItemSelector {
 public:
  static constexpr size_t kMinCapacity = 16;

  explicit PrioritizedSelector(double priority_exponent);

  absl::Status ValidatePriority(double priority) const override;
  absl::Status Insert(Key key, double priority) override;
  absl::Status Update(Key key, double priority) override;
  absl::Status Delete(Key key) override;
  absl::StatusOr<KeyWithProbability> Sample() override;
  void Clear() override;
  int64_t size() const override { return static_cast<int64_t>(nodes_.size()); }
  double TotalWeight() const override { return total_weight(); }
  deepmind::reverb::KeyDistributionOptions options() const override;
  std::string DebugString() const override;
  void Seed(uint64_t seed) override { rng_.Seed(seed); }
  std::string RandomState() const override { return rng_.State(); }
  absl::Status SetRandomState(absl::string_view state) override { return rng_.SetState(state); }

  // Sum of all weights (0 when empty). For tests and diagnostics.
  double total_weight() const { return nodes_.empty() ? 0.0 : nodes_[0].sum; }
  // Number of nodes the array can hold without reallocating (tests).
  size_t capacity() const { return nodes_.capacity(); }

 private:
  struct Node {
    Key key;
    double weight;      // p^a of this key.
    double sum;         // weight + sums of both subtrees.
    int64_t inf_count;  // Nodes with infinite weight in this subtree.
  };

  double WeightOf(double priority) const;
  double SumAt(size_t i) const { return i < nodes_.size() ? nodes_[i].sum : 0; }
  int64_t InfCountAt(size_t i) const { return i < nodes_.size() ? nodes_[i].inf_count : 0; }
  // Recomputes sum and inf_count of `i` and of all its ancestors.
  void RecomputePath(size_t i);
  size_t WalkByWeight(double t) const;
  size_t WalkByInfCount(int64_t target) const;
  double Uniform01();
  void MaybeShrink();

  const double priority_exponent_;
  std::vector<Node> nodes_;
  absl::flat_hash_map<Key, size_t> index_;  // key -> node index.
  SelectorRandom rng_;
};

}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_SELECTORS_PRIORITIZED_H_
