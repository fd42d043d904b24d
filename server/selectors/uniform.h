// UniformSelector: samples every key with equal probability 1/N
// (docs/concepts/selectors.md).
//
// Contract:
//  * Thread-safety: none. The owning Table serialises every call.
//  * Ownership: owned by one Table through std::unique_ptr<ItemSelector>;
//    holds only keys, never items.
//  * Complexity: Insert, Update, Delete and Sample are O(1) (dense key array
//    plus key->index map; Delete moves the last key into the hole).
//  * Errors: Insert of a present key and Update/Delete of an absent key are
//    INVALID_ARGUMENT ("Key K already inserted." / "Key K not found.");
//    Sample on an empty selector is FAILED_PRECONDITION. Priorities are
//    ignored, so every priority (even NaN) is accepted.
//  * Randomness: a SelectorRandom (std::mt19937_64 from std::random_device)
//    owned by the selector; a seeded table seeds it (Table(seed=...)) and
//    checkpoints its state.
#ifndef TF_REVERB_SERVER_SELECTORS_UNIFORM_H_
#define TF_REVERB_SERVER_SELECTORS_UNIFORM_H_

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

class UniformSelector : public ItemSelector {
 public:
  UniformSelector();

  absl::Status Insert(Key key, double priority) override;
  absl::Status Update(Key key, double priority) override;
  absl::Status Delete(Key key) override;
  absl::StatusOr<KeyWithProbability> Sample() override;
  void Clear() override;
  int64_t size() const override { return static_cast<int64_t>(keys_.size()); }
  deepmind::reverb::KeyDistributionOptions options() const override;
  std::string DebugString() const override;
  void Seed(uint64_t seed) override { rng_.Seed(seed); }
  std::string RandomState() const override { return rng_.State(); }
  absl::Status SetRandomState(absl::string_view state) override { return rng_.SetState(state); }

 private:
  std::vector<Key> keys_;
  absl::flat_hash_map<Key, size_t> index_;  // key -> position in keys_.
  SelectorRandom rng_;
};

}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_SELECTORS_UNIFORM_H_
