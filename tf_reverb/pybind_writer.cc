// The writer part of tf_reverb.pybind: WeakCellRef and TrajectoryWriter over
// server/writer/ (used by tf_reverb/trajectory_writer.py, the legacy Writer
// and the StructuredWriter).
//
// Errors map as pybind_common.h says, except DEADLINE_EXCEEDED from flush and
// end_episode, which raises tf_reverb.errors.DeadlineExceededError. The GIL
// is released while appending (copying the data out of numpy, compression),
// creating items (may block for room), flushing, ending episodes and closing.
//
// `append` takes one entry per column: None (no value), a core tensor tuple
// (dtype, shape, payload) as tf_reverb._dtypes.to_core_tensor makes, or a raw
// leaf. numpy arrays/scalars and Python numbers of the supported numeric
// dtypes are converted here; anything else goes through
// tf_reverb._dtypes.to_core_tensor(value, str(column)).
//
// StepHistory is the legacy Writer's ring of the last steps' references, kept
// in C++ so that neither appends nor items create Python objects per cell.
#include <algorithm>
#include <cstring>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "pybind11/numpy.h"
#include "pybind11/pybind11.h"
#include "pybind11/stl.h"
#include "server/client/client.h"
#include "server/writer/cell_ref.h"
#include "server/writer/trajectory_writer.h"
#include "tf_reverb/pybind_common.h"

namespace py = pybind11;

namespace tf_reverb {
namespace {

// A Python-side handle of one cell; expires with the cell.
struct WeakCellRef {
  std::weak_ptr<CellRef> ref;

  std::shared_ptr<CellRef> Lock() const {
    std::shared_ptr<CellRef> locked = ref.lock();
    if (locked == nullptr) throw std::runtime_error("Cannot access an expired WeakCellRef.");
    return locked;
  }
};

py::dtype NumpyDtype(DataType dtype) {
  if (dtype == tf::DT_STRING) return py::dtype("O");
  Tensor empty;
  empty.dtype = dtype;
  empty.shape = {0};
  return TensorToNumpy(empty).dtype();
}

std::optional<TableSignatures> ParseSignatures(const py::object& signatures) {
  if (signatures.is_none()) return std::nullopt;
  TableSignatures out;
  for (const auto& [name, columns] : signatures.cast<py::dict>()) {
    std::optional<std::vector<SignatureSpec>>& parsed = out[name.cast<std::string>()];
    if (columns.is_none()) continue;
    parsed.emplace();
    for (const py::handle& column : columns) {
      py::tuple parts = column.cast<py::tuple>();
      SignatureSpec spec;
      spec.dtype = static_cast<DataType>(parts[0].cast<int>());
      if (!parts[1].is_none()) spec.shape = parts[1].cast<std::vector<int64_t>>();
      parsed->push_back(std::move(spec));
    }
  }
  return out;
}

// TF DataType of a native-endian numeric numpy dtype; DT_INVALID otherwise.
DataType NumericDataType(const py::dtype& dtype) {
  const char order = py::detail::array_descriptor_proxy(dtype.ptr())->byteorder;
  if (order == '>') return tf::DT_INVALID;
  const py::ssize_t size = dtype.itemsize();
  switch (dtype.kind()) {
    case 'f':
      return size == 4   ? tf::DT_FLOAT
             : size == 8 ? tf::DT_DOUBLE
             : size == 2 ? tf::DT_HALF
                         : tf::DT_INVALID;
    case 'i':
      return size == 4   ? tf::DT_INT32
             : size == 8 ? tf::DT_INT64
             : size == 1 ? tf::DT_INT8
             : size == 2 ? tf::DT_INT16
                         : tf::DT_INVALID;
    case 'u':
      return size == 1   ? tf::DT_UINT8
             : size == 2 ? tf::DT_UINT16
             : size == 4 ? tf::DT_UINT32
             : size == 8 ? tf::DT_UINT64
                         : tf::DT_INVALID;
    case 'b':
      return size == 1 ? tf::DT_BOOL : tf::DT_INVALID;
    case 'c':
      return size == 8 ? tf::DT_COMPLEX64 : size == 16 ? tf::DT_COMPLEX128 : tf::DT_INVALID;
    default:
      return tf::DT_INVALID;
  }
}

// One column of a step being converted: either a finished tensor (strings,
// fallback conversions) or a numeric numpy array whose bytes are copied into
// `tensor.data` once the GIL is released.
struct PendingValue {
  std::optional<Tensor> tensor;
  // The source array (kept alive; released with the GIL held) and its bytes,
  // or null.
  py::object array;
  const char* bytes = nullptr;
  size_t num_bytes = 0;
};

// numpy arrays and scalars and Python numbers (np.asarray applies as is).
bool IsNumpyOrNumber(const py::handle& value) {
  static PyObject* const generic =
      py::object(py::module_::import("numpy").attr("generic")).release().ptr();
  PyObject* object = value.ptr();
  return py::isinstance<py::array>(value) || PyFloat_Check(object) || PyLong_Check(object) ||
         PyObject_TypeCheck(object, reinterpret_cast<PyTypeObject*>(generic));
}

// Converts `value` (a raw leaf or a core tensor tuple) for column `column`.
void ConvertValue(const py::handle& value, int column, PendingValue* out) {
  py::object core;
  if (py::isinstance<py::tuple>(value)) {
    core = py::reinterpret_borrow<py::object>(value);
  } else if (IsNumpyOrNumber(value)) {
    // numpy arrays and scalars, Python numbers: np.asarray semantics.
    py::array array = py::array::ensure(value);
    if (array && array.dtype().kind() != 'O') {
      const DataType dtype = NumericDataType(array.dtype());
      if (dtype != tf::DT_INVALID) {
        if (!(array.flags() & py::array::c_style)) {
          array = py::array::ensure(array, py::array::c_style);
          if (!array) throw py::error_already_set();
        }
        Tensor tensor;
        tensor.dtype = dtype;
        tensor.shape.assign(array.shape(), array.shape() + array.ndim());
        out->tensor = std::move(tensor);
        out->bytes = static_cast<const char*>(array.data());
        out->num_bytes = static_cast<size_t>(array.nbytes());
        out->array = std::move(array);
        return;
      }
    }
    PyErr_Clear();
  }
  if (!core) {
    static py::handle to_core_tensor =
        py::object(py::module_::import("tf_reverb._dtypes").attr("to_core_tensor")).release();
    core = to_core_tensor(value, std::to_string(column));
  }
  py::tuple parts = core.cast<py::tuple>();
  out->tensor = TensorFromPython(parts[0].cast<int>(), parts[1].cast<std::vector<int64_t>>(),
                                 py::reinterpret_borrow<py::object>(parts[2]));
}

// Converts a step (None entries allowed), then appends it without the GIL.
absl::Status AppendStep(TrajectoryWriter& writer, const py::sequence& data, bool partial,
                        TrajectoryWriter::StepRefs* refs) {
  const size_t n = data.size();
  std::vector<PendingValue> pending(n);
  for (size_t i = 0; i < n; ++i) {
    py::handle value = data[i];
    if (!value.is_none()) ConvertValue(value, static_cast<int>(i), &pending[i]);
  }
  absl::Status status;
  {
    py::gil_scoped_release release;
    std::vector<std::optional<Tensor>> step(n);
    for (size_t i = 0; i < n; ++i) {
      PendingValue& value = pending[i];
      if (!value.tensor.has_value()) continue;
      if (value.bytes != nullptr) value.tensor->data.assign(value.bytes, value.num_bytes);
      step[i] = std::move(value.tensor);
    }
    status = partial ? writer.AppendPartial(std::move(step), refs)
                     : writer.Append(std::move(step), refs);
  }
  return status;
}

std::unique_ptr<TrajectoryWriter> MakeWriter(Client& client, int num_keep_alive_refs,
                                             int max_chunk_length, bool delta_encoded,
                                             int max_queued_items, const py::object& signatures,
                                             bool accept_step_shape_signatures) {
  TrajectoryWriterOptions options;
  options.chunker_options = {num_keep_alive_refs, max_chunk_length, delta_encoded};
  options.signatures = ParseSignatures(signatures);
  options.accept_step_shape_signatures = accept_step_shape_signatures;
  options.max_queued_items = max_queued_items;
  std::shared_ptr<grpc::Channel> channel;
  {
    py::gil_scoped_release release;  // a sharded client's first stream waits
    channel = client.StreamChannel();
  }
  return ValueOrRaise(TrajectoryWriter::Create(std::move(channel), std::move(options)));
}

py::list Append(TrajectoryWriter& writer, const py::sequence& data, bool partial) {
  TrajectoryWriter::StepRefs refs;
  MaybeRaise(AppendStep(writer, data, partial, &refs));
  py::list out(refs.size());
  for (size_t i = 0; i < refs.size(); ++i) {
    if (refs[i].has_value()) {
      out[i] = py::cast(WeakCellRef{*std::move(refs[i])});
    } else {
      out[i] = py::none();
    }
  }
  return out;
}

// The legacy Writer's last `capacity` steps of references.
class StepHistory {
 public:
  explicit StepHistory(int capacity) : capacity_(std::max(1, capacity)) {}

  void Append(TrajectoryWriter& writer, const py::list& data) {
    TrajectoryWriter::StepRefs refs;
    MaybeRaise(AppendStep(writer, data, /*partial=*/false, &refs));
    steps_.push_back(std::move(refs));
    while (static_cast<int>(steps_.size()) > capacity_) steps_.pop_front();
  }

  // An item over every column of the last `num_steps` steps (unsqueezed).
  void CreateItem(TrajectoryWriter& writer, const std::string& table, double priority,
                  int num_steps, std::optional<int64_t> policy_version) {
    if (num_steps < 1 || num_steps > static_cast<int>(steps_.size())) {
      throw py::value_error(
          "Argument `num_timesteps` is larger than number of buffered "
          "timesteps.");
    }
    size_t num_columns = 0;
    for (const auto& step : steps_) num_columns = std::max(num_columns, step.size());
    std::vector<TrajectoryColumn> trajectory(num_columns);
    for (size_t c = 0; c < num_columns; ++c) {
      trajectory[c].refs.reserve(num_steps);
      for (size_t t = steps_.size() - num_steps; t < steps_.size(); ++t) {
        const auto& step = steps_[t];
        if (c >= step.size() || !step[c].has_value()) {
          throw py::value_error(absl::StrCat("Column ", c, " has no data at a step of the item."));
        }
        trajectory[c].refs.push_back(*step[c]);
      }
    }
    absl::Status status;
    {
      py::gil_scoped_release release;
      status = writer.CreateItem(table, priority, trajectory, policy_version);
    }
    MaybeRaise(status);
  }

  int size() const { return static_cast<int>(steps_.size()); }

 private:
  const int capacity_;
  std::deque<TrajectoryWriter::StepRefs> steps_;
};

void CreateItem(TrajectoryWriter& writer, const std::string& table, double priority,
                const py::list& columns, std::optional<int64_t> policy_version) {
  std::vector<TrajectoryColumn> trajectory;
  trajectory.reserve(columns.size());
  for (const py::handle& column : columns) {
    py::tuple parts = column.cast<py::tuple>();
    TrajectoryColumn out;
    out.refs.reserve(py::len(parts[0]));
    for (const py::handle& ref : parts[0]) out.refs.push_back(ref.cast<const WeakCellRef&>().ref);
    out.squeeze = parts[1].cast<bool>();
    trajectory.push_back(std::move(out));
  }
  absl::Status status;
  {
    py::gil_scoped_release release;
    status = writer.CreateItem(table, priority, trajectory, policy_version);
  }
  MaybeRaise(status);
}

}  // namespace

void RegisterWriterBindings(py::module_& m) {
  py::class_<WeakCellRef>(m, "WeakCellRef")
      .def_property_readonly("expired", [](const WeakCellRef& r) { return r.ref.expired(); })
      .def("numpy",
           [](const WeakCellRef& r) {
             std::shared_ptr<CellRef> ref = r.Lock();
             absl::StatusOr<Tensor> data;
             {
               py::gil_scoped_release release;
               data = ref->GetData();
             }
             return TensorToNumpy(ValueOrRaise(std::move(data)));
           })
      .def_property_readonly("shape",
                             [](const WeakCellRef& r) {
                               py::list shape;
                               for (int64_t d : r.Lock()->spec().shape) shape.append(d);
                               return shape;
                             })
      .def_property_readonly(
          "dtype", [](const WeakCellRef& r) { return NumpyDtype(r.Lock()->spec().dtype); })
      .def_property_readonly("episode_step",
                             [](const WeakCellRef& r) { return r.Lock()->episode_step(); });

  py::class_<StepHistory>(m, "StepHistory")
      .def(py::init<int>(), py::arg("capacity"))
      .def("append", &StepHistory::Append, py::arg("writer"), py::arg("data"))
      .def("create_item", &StepHistory::CreateItem, py::arg("writer"), py::arg("table"),
           py::arg("priority"), py::arg("num_steps"), py::arg("policy_version") = std::nullopt)
      .def("__len__", &StepHistory::size);

  py::class_<TrajectoryWriter>(m, "TrajectoryWriter")
      .def(py::init(&MakeWriter), py::arg("client"), py::arg("num_keep_alive_refs"),
           py::arg("max_chunk_length"), py::arg("delta_encoded"), py::arg("max_queued_items"),
           py::arg("signatures"), py::arg("accept_step_shape_signatures"), py::keep_alive<1, 2>())
      .def("append", &Append, py::arg("data"), py::arg("partial"))
      .def("create_item", &CreateItem, py::arg("table"), py::arg("priority"), py::arg("columns"),
           py::arg("policy_version") = std::nullopt)
      .def(
          "flush",
          [](TrajectoryWriter& writer, int block_until_num_items, int64_t timeout_ms) {
            CallWithoutGil(
                [&] { return writer.Flush(block_until_num_items, TimeoutFromMs(timeout_ms)); });
          },
          py::arg("block_until_num_items"), py::arg("timeout_ms"))
      .def(
          "end_episode",
          [](TrajectoryWriter& writer, bool clear_buffers, int64_t timeout_ms) {
            CallWithoutGil(
                [&] { return writer.EndEpisode(clear_buffers, TimeoutFromMs(timeout_ms)); });
          },
          py::arg("clear_buffers"), py::arg("timeout_ms"))
      .def(
          "configure",
          [](TrajectoryWriter& writer, int column, int num_keep_alive_refs, int max_chunk_length) {
            MaybeRaise(writer.ConfigureChunker(column, {num_keep_alive_refs, max_chunk_length}));
          },
          py::arg("column"), py::arg("num_keep_alive_refs"), py::arg("max_chunk_length"))
      .def("close", &TrajectoryWriter::Close, py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("episode_steps", &TrajectoryWriter::episode_steps)
      .def_property_readonly("max_num_keep_alive_refs", &TrajectoryWriter::max_num_keep_alive_refs)
      .def_property_readonly("num_pending_items", &TrajectoryWriter::num_pending_items);
}

}  // namespace tf_reverb
