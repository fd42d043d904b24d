// ItemSelector: the strategy a table uses to pick a key for sampling or for
// eviction (docs/concepts/selectors.md).
//
// Contract:
//  * Thread-safety: none. A selector belongs to exactly one table and one role
//    (sampler or remover); the owning Table serialises every call under its
//    mutex.
//  * Ownership: the Table owns its selectors (std::unique_ptr).
//  * Errors: Insert of a key already present and Update/Delete of an absent key
//    are INVALID_ARGUMENT ("Key K already inserted." / "Key K not found.").
//    A priority the selector cannot accept (negative or NaN for Prioritized)
//    is INVALID_ARGUMENT and leaves the selector unchanged. Sample on an empty
//    selector is FAILED_PRECONDITION (never an abort).
#ifndef TF_REVERB_SERVER_SELECTORS_SELECTOR_H_
#define TF_REVERB_SERVER_SELECTORS_SELECTOR_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "schema.pb.h"

namespace tf_reverb {

using Key = uint64_t;

struct KeyWithProbability {
  Key key = 0;
  double probability = 0;
};

class ItemSelector {
 public:
  virtual ~ItemSelector() = default;

  // Checks that `priority` is acceptable without changing any state.
  virtual absl::Status ValidatePriority(double priority) const { return absl::OkStatus(); }
  virtual absl::Status Insert(Key key, double priority) = 0;
  virtual absl::Status Update(Key key, double priority) = 0;
  virtual absl::Status Delete(Key key) = 0;
  // Picks a key; the probability is the one reported in SampleInfo.
  virtual absl::StatusOr<KeyWithProbability> Sample() = 0;
  // Removes every key (Table::Reset).
  virtual void Clear() = 0;
  virtual int64_t size() const = 0;
  // The sum of the keys' weights that Sample's probabilities are relative
  // to: the count of keys, but for Prioritized (sum of priority^exponent).
  // Sharded clients split samples over shards by it (TableInfo).
  virtual double TotalWeight() const { return static_cast<double>(size()); }
  // The options this selector was built from (TableInfo, checkpoints).
  virtual deepmind::reverb::KeyDistributionOptions options() const = 0;
  // E.g. "UniformSelector", "PrioritizedSelector(priority_exponent=0.8)".
  virtual std::string DebugString() const = 0;

  // Randomness, for the selectors that draw (Uniform, Prioritized; the
  // others are deterministic and ignore these). Seed makes the picks a
  // function of the seed and the calls; RandomState is the generator's whole
  // state (empty: none), which SetRandomState restores (INVALID_ARGUMENT for
  // text RandomState did not write).
  virtual void Seed(uint64_t seed) {}
  virtual std::string RandomState() const { return ""; }
  virtual absl::Status SetRandomState(absl::string_view state) { return absl::OkStatus(); }
};

// Builds a fresh selector from its options; INVALID_ARGUMENT when no
// distribution is set or a boolean distribution is set to false.
absl::StatusOr<std::unique_ptr<ItemSelector>> CreateSelector(
    const deepmind::reverb::KeyDistributionOptions& options);

}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_SELECTORS_SELECTOR_H_
