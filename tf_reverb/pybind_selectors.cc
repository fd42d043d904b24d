// The table-configuration types of tf_reverb.pybind under Reverb's names:
// ItemSelector (UniformSelector, PrioritizedSelector, FifoSelector,
// LifoSelector, HeapSelector), RateLimiter and TableExtension. Code written
// for Reverb checks `isinstance(x, reverb.pybind.UniformSelector)`; the
// Python classes of tf_reverb.selectors / rate_limiters derive from these.
//
// A selector object is a description (KeyDistributionOptions, validated at
// construction): every table builds its own C++ selector from it. It may
// serve one role of one table only: claim() records that role and raises
// ValueError on reuse, where Reverb silently shared the selector between
// tables and corrupted them.
//
// Contract: call with the GIL held (these objects are Python objects).
// Errors: ValueError for invalid parameters or a reused selector.
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "pybind11/pybind11.h"
#include "server/rate_limiter.h"
#include "server/selectors/selector.h"
#include "tf_reverb/pybind_common.h"

namespace py = pybind11;

namespace tf_reverb {
namespace {

using ::deepmind::reverb::KeyDistributionOptions;

// Base of every selector: its options and the role it was claimed for.
class SelectorDescription {
 public:
  explicit SelectorDescription(KeyDistributionOptions options)
      : options_(std::move(options)),
        debug_string_(ValueOrRaise(CreateSelector(options_))->DebugString()) {}
  virtual ~SelectorDescription() = default;

  py::bytes SerializedOptions() const { return py::bytes(options_.SerializeAsString()); }
  const std::string& DebugString() const { return debug_string_; }

  void Claim(const std::string& owner) {
    if (owner_.has_value()) {
      throw py::value_error(absl::StrCat(
          debug_string_, " is already used as the ", *owner_,
          "; every table needs fresh selector objects for its sampler and its remover."));
    }
    owner_ = owner;
  }

 private:
  KeyDistributionOptions options_;
  std::string debug_string_;
  std::optional<std::string> owner_;
};

KeyDistributionOptions Deterministic(bool deterministic) {
  KeyDistributionOptions options;
  options.set_is_deterministic(deterministic);
  return options;
}

struct UniformDescription : SelectorDescription {
  UniformDescription()
      : SelectorDescription([] {
          KeyDistributionOptions options = Deterministic(false);
          options.set_uniform(true);
          return options;
        }()) {}
};

struct PrioritizedDescription : SelectorDescription {
  explicit PrioritizedDescription(double priority_exponent)
      : SelectorDescription([priority_exponent] {
          KeyDistributionOptions options = Deterministic(false);
          options.mutable_prioritized()->set_priority_exponent(priority_exponent);
          return options;
        }()) {}
};

struct FifoDescription : SelectorDescription {
  FifoDescription()
      : SelectorDescription([] {
          KeyDistributionOptions options = Deterministic(true);
          options.set_fifo(true);
          return options;
        }()) {}
};

struct LifoDescription : SelectorDescription {
  LifoDescription()
      : SelectorDescription([] {
          KeyDistributionOptions options = Deterministic(true);
          options.set_lifo(true);
          return options;
        }()) {}
};

struct HeapDescription : SelectorDescription {
  explicit HeapDescription(bool min_heap)
      : SelectorDescription([min_heap] {
          KeyDistributionOptions options = Deterministic(true);
          options.mutable_heap()->set_min_heap(min_heap);
          return options;
        }()) {}
};

// The parameters of a rate limiter, validated as the table will.
class RateLimiterDescription {
 public:
  RateLimiterDescription(double samples_per_insert, int64_t min_size_to_sample, double min_diff,
                         double max_diff)
      : debug_string_(ValueOrRaise(RateLimiter::Create(samples_per_insert, min_size_to_sample,
                                                       min_diff, max_diff))
                          .DebugString()) {}
  virtual ~RateLimiterDescription() = default;
  const std::string& DebugString() const { return debug_string_; }

 private:
  std::string debug_string_;
};

// Base of table extensions (reverb.server.TableExtensionBase builds them).
struct TableExtensionDescription {
  virtual ~TableExtensionDescription() = default;
};

}  // namespace

void RegisterSelectorBindings(py::module_& m) {
  py::class_<SelectorDescription>(m, "ItemSelector")
      .def("serialized_options", &SelectorDescription::SerializedOptions,
           "The KeyDistributionOptions proto describing the selector, serialized.")
      .def("claim", &SelectorDescription::Claim, py::arg("owner"),
           "Marks the selector as used by `owner`; ValueError if already used.")
      .def("__repr__", &SelectorDescription::DebugString);
  py::class_<UniformDescription, SelectorDescription>(m, "UniformSelector").def(py::init<>());
  py::class_<PrioritizedDescription, SelectorDescription>(m, "PrioritizedSelector")
      .def(py::init<double>(), py::arg("priority_exponent"));
  py::class_<FifoDescription, SelectorDescription>(m, "FifoSelector").def(py::init<>());
  py::class_<LifoDescription, SelectorDescription>(m, "LifoSelector").def(py::init<>());
  py::class_<HeapDescription, SelectorDescription>(m, "HeapSelector")
      .def(py::init<bool>(), py::arg("min_heap"));

  py::class_<RateLimiterDescription>(m, "RateLimiter")
      .def(py::init<double, int64_t, double, double>(), py::arg("samples_per_insert"),
           py::arg("min_size_to_sample"), py::arg("min_diff"), py::arg("max_diff"))
      .def("__repr__", &RateLimiterDescription::DebugString);

  py::class_<TableExtensionDescription>(m, "TableExtension");
}

}  // namespace tf_reverb
