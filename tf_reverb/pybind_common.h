// Helpers shared by the files of the tf_reverb.pybind extension: status to
// exception mapping and conversions between numpy and the core's tensors.
//
// Errors map by status code (and error kind, server/error_kind.h), never by
// message text, as in Reverb: INVALID_ARGUMENT -> ValueError,
// RESOURCE_EXHAUSTED -> IndexError, UNIMPLEMENTED -> NotImplementedError,
// UNAUTHENTICATED -> tf_reverb.errors.UnauthenticatedError, a TLS mismatch's
// FAILED_PRECONDITION -> TransportSecurityError, the caller's own timeout ->
// DeadlineExceededError, any other DEADLINE_EXCEEDED ->
// DeadlineExceededRuntimeError, everything else -> RuntimeError; each with the
// status message. MaybeRaise is the one place where that mapping is made.
//
// Contract: call with the GIL held, except where a function says otherwise.
#ifndef TF_REVERB_PYBIND_COMMON_H_
#define TF_REVERB_PYBIND_COMMON_H_

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "pybind11/numpy.h"
#include "pybind11/pybind11.h"
#include "server/client/sample.h"
#include "server/tensor.h"

namespace tf_reverb {

// Raises the Python exception for a non-OK status.
void MaybeRaise(const absl::Status& status);

// Runs `fn` (returning absl::Status) with the GIL released, then raises as
// MaybeRaise does. For the writers' blocking calls.
template <typename Fn>
void CallWithoutGil(Fn&& fn) {
  absl::Status status;
  {
    pybind11::gil_scoped_release release;
    status = fn();
  }
  MaybeRaise(status);
}

template <typename T>
T ValueOrRaise(absl::StatusOr<T> value) {
  MaybeRaise(value.status());
  return *std::move(value);
}

// Negative milliseconds mean "no timeout".
inline absl::Duration TimeoutFromMs(int64_t timeout_ms) {
  return timeout_ms < 0 ? absl::InfiniteDuration() : absl::Milliseconds(timeout_ms);
}

// A tensor from Python's (dtype, shape, data): `data` is a C-contiguous numpy
// array for numeric dtypes and a list of bytes for DT_STRING.
Tensor TensorFromPython(int dtype, const std::vector<int64_t>& shape, const pybind11::object& data);

// One step of columns from Python: each entry is None (no value) or a
// (dtype, shape, data) tuple as TensorFromPython takes it.
std::vector<std::optional<Tensor>> StepFromPython(const pybind11::handle& columns);

// The numpy dtype name of a numeric dtype ("float32", ...); nullptr for
// strings and dtypes numpy cannot hold.
const char* NumpyDtypeName(DataType dtype);

// A new numpy array holding `tensor` (an object array of bytes for strings).
pybind11::array TensorToNumpy(const Tensor& tensor);

// (key, probability, table_size, priority, times_sampled, policy_version).
pybind11::tuple InfoTuple(const Sample& sample);

// Decodes every column of `sample` into new numpy arrays; decompression runs
// without the GIL.
pybind11::list SampleColumns(const Sample& sample);

// Adds the StructuredWriter bindings (pybind_structured.cc) to the module.
void RegisterStructuredBindings(pybind11::module_& m);

// Adds the sampling bindings (pybind_sampler.cc) to the module.
void RegisterSamplerBindings(pybind11::module_& m);

// Adds ItemSelector and its subclasses, RateLimiter and TableExtension
// (pybind_selectors.cc) to the module.
void RegisterSelectorBindings(pybind11::module_& m);

// Adds the writer bindings (pybind_writer.cc) to the module.
void RegisterWriterBindings(pybind11::module_& m);

// pybind_security.cc: ServerSecurity, the channel security registry.
void RegisterSecurityBindings(pybind11::module_& m);

}  // namespace tf_reverb

#endif  // TF_REVERB_PYBIND_COMMON_H_
