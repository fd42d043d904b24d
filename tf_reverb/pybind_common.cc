#include "tf_reverb/pybind_common.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "pybind11/stl.h"
#include "server/error_kind.h"

namespace py = pybind11;

namespace tf_reverb {
namespace {

py::array StringArray(const std::vector<std::string>& strings, const std::vector<int64_t>& shape) {
  py::array out(py::dtype("O"), shape);
  auto** cells = static_cast<PyObject**>(out.mutable_data());
  for (size_t i = 0; i < strings.size(); ++i) {
    cells[i] = py::bytes(strings[i]).release().ptr();
  }
  return out;
}

py::array EmptyNumericArray(DataType dtype, const std::vector<int64_t>& shape, int column) {
  const char* name = NumpyDtypeName(dtype);
  if (name == nullptr) {
    throw py::value_error(
        absl::StrCat("Column ", column, " has unsupported dtype ", DataTypeName(dtype)));
  }
  return py::array(py::dtype(name), shape);
}

}  // namespace

const char* NumpyDtypeName(DataType dtype) {
  switch (dtype) {
    case tf::DT_FLOAT:
      return "float32";
    case tf::DT_DOUBLE:
      return "float64";
    case tf::DT_INT32:
      return "int32";
    case tf::DT_UINT8:
      return "uint8";
    case tf::DT_INT16:
      return "int16";
    case tf::DT_INT8:
      return "int8";
    case tf::DT_COMPLEX64:
      return "complex64";
    case tf::DT_INT64:
      return "int64";
    case tf::DT_BOOL:
      return "bool";
    case tf::DT_UINT16:
      return "uint16";
    case tf::DT_COMPLEX128:
      return "complex128";
    case tf::DT_HALF:
      return "float16";
    case tf::DT_UINT32:
      return "uint32";
    case tf::DT_UINT64:
      return "uint64";
    default:
      return nullptr;
  }
}

namespace {

// Sets the Python error to tf_reverb.errors.<name>(message) and throws.
[[noreturn]] void RaiseReverbError(const char* name, const std::string& message) {
  py::object error = py::module_::import("tf_reverb.errors").attr(name);
  PyErr_SetString(error.ptr(), message.c_str());
  throw py::error_already_set();
}

}  // namespace

void MaybeRaise(const absl::Status& status) {
  if (status.ok()) return;
  const std::string message(status.message());
  const ErrorKind kind = ErrorKindOf(status);
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
      throw py::value_error(message);
    case absl::StatusCode::kResourceExhausted:
      throw py::index_error(message);
    case absl::StatusCode::kUnimplemented:
      PyErr_SetString(PyExc_NotImplementedError, message.c_str());
      throw py::error_already_set();
    case absl::StatusCode::kUnauthenticated:
      RaiseReverbError("UnauthenticatedError", message);
    case absl::StatusCode::kFailedPrecondition:
      if (kind == ErrorKind::kTransportSecurityMismatch) {
        RaiseReverbError("TransportSecurityError", message);
      }
      throw std::runtime_error(message);
    case absl::StatusCode::kDeadlineExceeded:
      // Only the caller's own timeout (a writer's flush or end_episode) is a
      // DeadlineExceededError. Any other deadline (the server ended the
      // insert stream with it, a rate-limiter or RPC deadline) is a
      // RuntimeError as in Reverb, of the subclass the Python layer turns
      // into DeadlineExceededError where its caller gave a timeout.
      RaiseReverbError(kind == ErrorKind::kCallerTimeout ? "DeadlineExceededError"
                                                         : "DeadlineExceededRuntimeError",
                       message);
    default:
      throw std::runtime_error(message);
  }
}

Tensor TensorFromPython(int dtype, const std::vector<int64_t>& shape, const py::object& data) {
  Tensor tensor;
  tensor.dtype = static_cast<DataType>(dtype);
  tensor.shape = shape;
  if (tensor.dtype == tf::DT_STRING) {
    for (const py::handle& item : data) tensor.strings.push_back(item.cast<std::string>());
  } else {
    py::buffer_info info = data.cast<py::buffer>().request();
    tensor.data.assign(static_cast<const char*>(info.ptr), info.size * info.itemsize);
  }
  MaybeRaise(ValidateTensor(tensor));
  return tensor;
}

std::vector<std::optional<Tensor>> StepFromPython(const py::handle& columns) {
  std::vector<std::optional<Tensor>> step;
  step.reserve(py::len(columns));
  for (const py::handle& column : columns) {
    if (column.is_none()) {
      step.emplace_back(std::nullopt);
      continue;
    }
    py::tuple parts = column.cast<py::tuple>();
    step.emplace_back(TensorFromPython(parts[0].cast<int>(), parts[1].cast<std::vector<int64_t>>(),
                                       py::reinterpret_borrow<py::object>(parts[2])));
  }
  return step;
}

py::array TensorToNumpy(const Tensor& tensor) {
  if (tensor.dtype == tf::DT_STRING) return StringArray(tensor.strings, tensor.shape);
  py::array out = EmptyNumericArray(tensor.dtype, tensor.shape, 0);
  std::memcpy(out.mutable_data(), tensor.data.data(), tensor.data.size());
  return out;
}

py::tuple InfoTuple(const Sample& sample) {
  const SampleMeta& meta = sample.meta();
  return py::make_tuple(meta.key, meta.probability, meta.table_size, meta.priority,
                        meta.times_sampled, meta.policy_version);
}

py::list SampleColumns(const Sample& sample) {
  std::vector<ColumnSpec> specs = ValueOrRaise(sample.ColumnSpecs());
  py::list columns;
  std::vector<std::pair<int, char*>> numeric;
  for (int c = 0; c < static_cast<int>(specs.size()); ++c) {
    const ColumnSpec& spec = specs[c];
    if (spec.dtype == tf::DT_STRING) {
      Tensor tensor = ValueOrRaise(sample.UnpackColumn(c));
      columns.append(StringArray(tensor.strings, spec.shape));
      continue;
    }
    py::array out = EmptyNumericArray(spec.dtype, spec.shape, c);
    numeric.emplace_back(c, static_cast<char*>(out.mutable_data()));
    columns.append(out);
  }
  absl::Status status;
  {
    py::gil_scoped_release release;
    for (const auto& [c, buffer] : numeric) {
      status = sample.UnpackColumnInto(c, buffer);
      if (!status.ok()) break;
    }
  }
  MaybeRaise(status);
  return columns;
}

}  // namespace tf_reverb
