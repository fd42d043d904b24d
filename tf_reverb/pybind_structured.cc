// The StructuredWriter part of tf_reverb.pybind, over
// server/patterns/structured_writer.h (used by tf_reverb/structured_writer.py).
//
// Configs arrive as serialized StructuredWriterConfig protos. Errors map as
// pybind_common.h says (flush and end_episode timeouts raise
// tf_reverb.errors.DeadlineExceededError). The GIL is released around every
// call into the writer.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "pybind11/pybind11.h"
#include "pybind11/stl.h"
#include "server/client/client.h"
#include "server/patterns/structured_writer.h"
#include "tf_reverb/pybind_common.h"

namespace py = pybind11;

namespace tf_reverb {
namespace {

std::unique_ptr<StructuredWriter> MakeStructuredWriter(Client& client,
                                                       const std::vector<py::bytes>& configs) {
  std::vector<deepmind::reverb::StructuredWriterConfig> parsed(configs.size());
  for (size_t i = 0; i < configs.size(); ++i) {
    if (!parsed[i].ParseFromString(std::string(configs[i]))) {
      throw py::value_error("Config at position " + std::to_string(i) +
                            " is not a serialized StructuredWriterConfig.");
    }
  }
  absl::StatusOr<std::unique_ptr<StructuredWriter>> writer;
  {
    py::gil_scoped_release release;
    writer = StructuredWriter::Create(client.StreamChannel(), std::move(parsed));
  }
  return ValueOrRaise(std::move(writer));
}

}  // namespace

void RegisterStructuredBindings(py::module_& m) {
  py::class_<StructuredWriter>(m, "StructuredWriter")
      .def(py::init(&MakeStructuredWriter), py::arg("client"), py::arg("configs"),
           py::keep_alive<1, 2>())
      .def(
          "append",
          [](StructuredWriter& writer, const py::list& data, bool partial) {
            std::vector<std::optional<Tensor>> step = StepFromPython(data);
            CallWithoutGil([&] { return writer.Append(std::move(step), partial); });
          },
          py::arg("data"), py::arg("partial"))
      .def(
          "flush",
          [](StructuredWriter& writer, int block_until_num_items, int64_t timeout_ms) {
            CallWithoutGil(
                [&] { return writer.Flush(block_until_num_items, TimeoutFromMs(timeout_ms)); });
          },
          py::arg("block_until_num_items"), py::arg("timeout_ms"))
      .def(
          "end_episode",
          [](StructuredWriter& writer, bool clear_buffers, int64_t timeout_ms) {
            CallWithoutGil(
                [&] { return writer.EndEpisode(clear_buffers, TimeoutFromMs(timeout_ms)); });
          },
          py::arg("clear_buffers"), py::arg("timeout_ms"))
      .def_property_readonly("step_is_open", &StructuredWriter::step_is_open)
      .def_property_readonly("num_items_created", &StructuredWriter::num_items_created);
}

}  // namespace tf_reverb
