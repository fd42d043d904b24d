// SelectorRandom: the random generator of the selectors that draw (Uniform,
// Prioritized): std::mt19937_64, seeded from std::random_device unless the
// table gives a seed, and its whole state as text for checkpoints, so a
// seeded table draws the same after a restore (docs/concepts/tables.md).
//
// Contract:
//  * Thread-safety: none; it belongs to one selector, whose table serialises
//    every call.
//  * Errors: SetState is INVALID_ARGUMENT for text State() did not write.
#ifndef TF_REVERB_SERVER_SELECTORS_SELECTOR_RANDOM_H_
#define TF_REVERB_SERVER_SELECTORS_SELECTOR_RANDOM_H_

#include <cstdint>
#include <random>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace tf_reverb {

class SelectorRandom {
 public:
  using result_type = std::mt19937_64::result_type;

  SelectorRandom() : engine_(std::random_device()()) {}

  void Seed(uint64_t seed) { engine_.seed(seed); }
  // The generator's state as text (std::mt19937_64's stream form).
  std::string State() const;
  absl::Status SetState(absl::string_view state);

  // A UniformRandomBitGenerator, for std:: distributions.
  static constexpr result_type min() { return std::mt19937_64::min(); }
  static constexpr result_type max() { return std::mt19937_64::max(); }
  result_type operator()() { return engine_(); }

 private:
  std::mt19937_64 engine_;
};

}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_SELECTORS_SELECTOR_RANDOM_H_
