#include "server/selectors/selector_random.h"

#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"

namespace tf_reverb {

std::string SelectorRandom::State() const {
  std::ostringstream out;
  out << engine_;
  return out.str();
}

absl::Status SelectorRandom::SetState(absl::string_view state) {
  std::istringstream in{std::string(state)};
  std::mt19937_64 engine;
  in >> engine;
  if (in.fail()) {
    return absl::InvalidArgumentError(
        absl::StrCat("Not a selector random state (", state.size(), " bytes)."));
  }
  engine_ = engine;
  return absl::OkStatus();
}

}  // namespace tf_reverb
