// The writer part of tf_reverb.pybind: WeakCellRef and TrajectoryWriter over
// server/writer/ (used by tf_reverb/trajectory_writer.py, the legacy Writer
// and the StructuredWriter).
//
// Errors map as pybind_common.h says, except DEADLINE_EXCEEDED from flush and
// end_episode, which raises tf_reverb.errors.DeadlineExceededError. The GIL
// is released while appending (compression), creating items (may block for
// room), flushing, ending episodes and closing.
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "pybind11/pybind11.h"
#include "pybind11/stl.h"
#include "server/client.h"
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

void RaiseWriterStatus(const absl::Status& status) {
  if (status.code() == absl::StatusCode::kDeadlineExceeded) {
    py::object error = py::module_::import("tf_reverb.errors").attr("DeadlineExceededError");
    PyErr_SetString(error.ptr(), std::string(status.message()).c_str());
    throw py::error_already_set();
  }
  MaybeRaise(status);
}

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
    std::optional<std::vector<SignatureColumn>>& parsed = out[name.cast<std::string>()];
    if (columns.is_none()) continue;
    parsed.emplace();
    for (const py::handle& column : columns) {
      py::tuple parts = column.cast<py::tuple>();
      SignatureColumn spec;
      spec.dtype = static_cast<DataType>(parts[0].cast<int>());
      if (!parts[1].is_none()) spec.shape = parts[1].cast<std::vector<int64_t>>();
      parsed->push_back(std::move(spec));
    }
  }
  return out;
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
  return ValueOrRaise(TrajectoryWriter::Create(client.channel(), std::move(options)));
}

py::list Append(TrajectoryWriter& writer, const py::list& data, bool partial) {
  std::vector<std::optional<Tensor>> step;
  step.reserve(data.size());
  for (const py::handle& column : data) {
    if (column.is_none()) {
      step.emplace_back(std::nullopt);
      continue;
    }
    py::tuple parts = column.cast<py::tuple>();
    step.emplace_back(TensorFromPython(parts[0].cast<int>(),
                                       parts[1].cast<std::vector<int64_t>>(),
                                       py::reinterpret_borrow<py::object>(parts[2])));
  }
  TrajectoryWriter::StepRefs refs;
  absl::Status status;
  {
    py::gil_scoped_release release;
    status = partial ? writer.AppendPartial(std::move(step), &refs)
                     : writer.Append(std::move(step), &refs);
  }
  MaybeRaise(status);
  py::list out;
  for (auto& ref : refs) {
    if (ref.has_value()) {
      out.append(py::cast(WeakCellRef{*std::move(ref)}));
    } else {
      out.append(py::none());
    }
  }
  return out;
}

void CreateItem(TrajectoryWriter& writer, const std::string& table, double priority,
                const py::list& columns) {
  std::vector<TrajectoryColumn> trajectory;
  trajectory.reserve(columns.size());
  for (const py::handle& column : columns) {
    py::tuple parts = column.cast<py::tuple>();
    TrajectoryColumn out;
    for (const py::handle& ref : parts[0]) out.refs.push_back(ref.cast<const WeakCellRef&>().ref);
    out.squeeze = parts[1].cast<bool>();
    trajectory.push_back(std::move(out));
  }
  absl::Status status;
  {
    py::gil_scoped_release release;
    status = writer.CreateItem(table, priority, trajectory);
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
      .def_property_readonly("dtype",
                             [](const WeakCellRef& r) { return NumpyDtype(r.Lock()->spec().dtype); })
      .def_property_readonly("episode_step",
                             [](const WeakCellRef& r) { return r.Lock()->episode_step(); });

  py::class_<TrajectoryWriter>(m, "TrajectoryWriter")
      .def(py::init(&MakeWriter), py::arg("client"), py::arg("num_keep_alive_refs"),
           py::arg("max_chunk_length"), py::arg("delta_encoded"), py::arg("max_queued_items"),
           py::arg("signatures"), py::arg("accept_step_shape_signatures"),
           py::keep_alive<1, 2>())
      .def("append", &Append, py::arg("data"), py::arg("partial"))
      .def("create_item", &CreateItem, py::arg("table"), py::arg("priority"),
           py::arg("columns"))
      .def("flush",
           [](TrajectoryWriter& writer, int block_until_num_items, int64_t timeout_ms) {
             absl::Status status;
             {
               py::gil_scoped_release release;
               status = writer.Flush(block_until_num_items, TimeoutFromMs(timeout_ms));
             }
             RaiseWriterStatus(status);
           },
           py::arg("block_until_num_items"), py::arg("timeout_ms"))
      .def("end_episode",
           [](TrajectoryWriter& writer, bool clear_buffers, int64_t timeout_ms) {
             absl::Status status;
             {
               py::gil_scoped_release release;
               status = writer.EndEpisode(clear_buffers, TimeoutFromMs(timeout_ms));
             }
             RaiseWriterStatus(status);
           },
           py::arg("clear_buffers"), py::arg("timeout_ms"))
      .def("configure",
           [](TrajectoryWriter& writer, int column, int num_keep_alive_refs,
              int max_chunk_length) {
             MaybeRaise(writer.ConfigureChunker(column, {num_keep_alive_refs, max_chunk_length}));
           },
           py::arg("column"), py::arg("num_keep_alive_refs"), py::arg("max_chunk_length"))
      .def("close", &TrajectoryWriter::Close, py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("episode_steps", &TrajectoryWriter::episode_steps)
      .def_property_readonly("max_num_keep_alive_refs",
                             &TrajectoryWriter::max_num_keep_alive_refs)
      .def_property_readonly("num_pending_items", &TrajectoryWriter::num_pending_items);
}

}  // namespace tf_reverb
