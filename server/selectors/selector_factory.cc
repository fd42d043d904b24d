// CreateSelector (declared in selector.h): KeyDistributionOptions -> selector.
#include <cmath>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "schema.pb.h"
#include "server/selectors/fifo.h"
#include "server/selectors/heap.h"
#include "server/selectors/lifo.h"
#include "server/selectors/prioritized.h"
#include "server/selectors/selector.h"
#include "server/selectors/uniform.h"

namespace tf_reverb {
namespace {

using ::deepmind::reverb::KeyDistributionOptions;

absl::Status FalseDistribution(absl::string_view name) {
  return absl::InvalidArgumentError(absl::StrCat(
      "KeyDistributionOptions has ", name, " set to false; set it to true to select ", name, "."));
}

}  // namespace

absl::StatusOr<std::unique_ptr<ItemSelector>> CreateSelector(
    const KeyDistributionOptions& options) {
  switch (options.distribution_case()) {
    case KeyDistributionOptions::kFifo:
      if (!options.fifo()) return FalseDistribution("fifo");
      return std::unique_ptr<ItemSelector>(new FifoSelector());
    case KeyDistributionOptions::kLifo:
      if (!options.lifo()) return FalseDistribution("lifo");
      return std::unique_ptr<ItemSelector>(new LifoSelector());
    case KeyDistributionOptions::kUniform:
      if (!options.uniform()) return FalseDistribution("uniform");
      return std::unique_ptr<ItemSelector>(new UniformSelector());
    case KeyDistributionOptions::kPrioritized:
      if (!(options.prioritized().priority_exponent() >= 0) ||
          std::isinf(options.prioritized().priority_exponent())) {
        return absl::InvalidArgumentError(
            absl::StrCat("priority_exponent must be a finite number >= 0, got ",
                         options.prioritized().priority_exponent(), "."));
      }
      return std::unique_ptr<ItemSelector>(
          new PrioritizedSelector(options.prioritized().priority_exponent()));
    case KeyDistributionOptions::kHeap:
      return std::unique_ptr<ItemSelector>(new HeapSelector(options.heap().min_heap()));
    case KeyDistributionOptions::DISTRIBUTION_NOT_SET:
      break;
  }
  return absl::InvalidArgumentError("KeyDistributionOptions has no distribution set");
}

}  // namespace tf_reverb
