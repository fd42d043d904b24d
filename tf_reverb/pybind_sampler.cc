// Sampling bindings of tf_reverb.pybind: the core Sampler (Client.sample) and
// BatchIterator, the engine of tf_reverb.NumpyIterator.
//
// BatchIterator: the core's BatchAssembler (server/client/batch_assembler.h:
// `num_threads` threads, up to `prefetch` batches ahead, handed out in claim
// order so a partial last batch comes last) whose threads pop samples from
// one Sampler and decode them straight into per-batch buffers, one
// contiguous buffer per column ([batch, *column_shape]). Python's next()
// releases the GIL while it waits, then wraps the buffers as numpy arrays
// without copying (a capsule owns each buffer). A rate-limiter timeout or
// max_samples ends iteration (after a last, partial batch); other errors are
// raised by next() once the batches finished before them are consumed.
//
// Thread-safety: BatchIterator's methods are thread-safe; close() cancels the
// sampler, wakes next() and joins the threads.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "pybind11/numpy.h"
#include "pybind11/pybind11.h"
#include "pybind11/stl.h"
#include "server/client/batch_assembler.h"
#include "server/client/client.h"
#include "server/client/sampler.h"
#include "tf_reverb/pybind_common.h"

namespace py = pybind11;

namespace tf_reverb {
namespace {

SamplerOptions MakeOptions(int64_t max_samples, int64_t max_in_flight_samples_per_worker,
                           int64_t num_workers, int64_t max_samples_per_stream,
                           int64_t rate_limiter_timeout_ms) {
  if (rate_limiter_timeout_ms < -1) {
    throw py::value_error(
        absl::StrCat("rate_limiter_timeout_ms (", rate_limiter_timeout_ms, ") must be >= -1"));
  }
  SamplerOptions options;
  options.max_samples = max_samples;
  options.max_in_flight_samples_per_worker = max_in_flight_samples_per_worker;
  options.num_workers = num_workers;
  options.max_samples_per_stream = max_samples_per_stream;
  options.rate_limiter_timeout = TimeoutFromMs(rate_limiter_timeout_ms);
  MaybeRaise(options.Validate());
  return options;
}

std::string SpecString(const ColumnSpec& spec) {
  return absl::StrCat("(", DataTypeName(spec.dtype), ", ", ShapeString(spec.shape), ")");
}

// A 64-byte aligned heap buffer.
struct AlignedBuffer {
  explicit AlignedBuffer(size_t bytes)
      : data(static_cast<char*>(
            std::aligned_alloc(64, std::max<size_t>(64, (bytes + 63) / 64 * 64)))) {}
  ~AlignedBuffer() { std::free(data); }
  char* data;
};

struct Batch {
  int64_t size = 0;
  std::vector<ColumnSpec> specs;
  std::vector<std::unique_ptr<AlignedBuffer>> buffers;  // numeric columns
  std::vector<std::vector<std::string>> strings;        // DT_STRING columns
  std::vector<uint64_t> keys;
  std::vector<double> probabilities;
  std::vector<int64_t> table_sizes;
  std::vector<double> priorities;
  std::vector<int32_t> times_sampled;
  std::vector<int64_t> policy_versions;
};

class BatchIterator {
 public:
  BatchIterator(std::unique_ptr<Sampler> sampler, int64_t batch_size, int64_t num_threads,
                int64_t prefetch)
      : sampler_(std::move(sampler)),
        assembler_(
            batch_size, sampler_->options().max_samples, num_threads, prefetch,
            [this](int64_t rows, Batch* batch, bool* ended) { return Fill(rows, batch, ended); },
            [](const Batch& batch) { return batch.size == 0; }) {}

  ~BatchIterator() { Close(); }

  // The next batch, or nullopt at the end. Call without the GIL.
  absl::StatusOr<std::optional<Batch>> Next() {
    Batch batch;
    if (assembler_.Next(&batch)) return std::optional<Batch>(std::move(batch));
    if (assembler_.stopped()) return absl::CancelledError("The iterator was closed.");
    if (absl::Status status = assembler_.status(); !status.ok()) return status;
    return std::optional<Batch>();
  }

  void Close() {
    assembler_.Stop([this] { sampler_->Close(); });
  }

 private:
  // Pops `n` samples into `batch`. max_samples reached or a rate-limiter
  // timeout is the normal end of the samples (`*ended`).
  absl::Status Fill(int64_t n, Batch* batch, bool* ended) {
    absl::Status status = FillRows(n, batch);
    if (absl::IsOutOfRange(status) || absl::IsDeadlineExceeded(status)) {
      *ended = true;
      return absl::OkStatus();
    }
    return status;
  }

  absl::Status FillRows(int64_t n, Batch* batch) {
    // The block of the last batched sample, whose specs were checked.
    std::shared_ptr<const SampleBlock> checked;
    std::vector<Sample> samples;
    for (int64_t i = 0; i < n;) {
      samples.clear();
      if (absl::Status s = sampler_->NextBatch(n - i, &samples); !s.ok()) return s;
      for (size_t j = 0; j < samples.size();) {
        const size_t run = BlockRun(samples, j, checked.get());
        if (run > 0) {
          CopyBlockRows(*checked, samples[j].row(), static_cast<int64_t>(run), i, batch);
          for (size_t k = j; k < j + run; ++k) AppendInfo(samples[k].meta(), batch);
          i += static_cast<int64_t>(run);
          j += run;
          continue;
        }
        if (absl::Status s = FillRow(samples[j++], i++, n, batch, &checked); !s.ok()) return s;
      }
    }
    return absl::OkStatus();
  }

  // How many samples from `samples[j]` on are consecutive rows of `block`
  // (0 when samples[j] is not a row of it): the rows copied at once.
  static size_t BlockRun(const std::vector<Sample>& samples, size_t j, const SampleBlock* block) {
    if (block == nullptr) return 0;
    size_t run = 0;
    while (j + run < samples.size() && samples[j + run].block() == block &&
           samples[j + run].row() == samples[j].row() + static_cast<int64_t>(run)) {
      ++run;
    }
    return run;
  }

  // Copies rows [first, first + rows) of `block`, whose specs are the
  // batch's (checked), into rows [i, i + rows) of `batch`.
  static void CopyBlockRows(const SampleBlock& block, int64_t first, int64_t rows, int64_t i,
                            Batch* batch) {
    for (size_t c = 0; c < batch->specs.size(); ++c) {
      const int64_t bytes = ColumnBytes(batch->specs[c]);
      if (bytes > 0) {
        block.CopyRows(static_cast<int>(c), first, rows, batch->buffers[c]->data + i * bytes);
      }
    }
  }

  // Decodes `sample` into row `i` of `batch` (of `n` rows).
  static absl::Status FillRow(const Sample& sample, int64_t i, int64_t n, Batch* batch,
                              std::shared_ptr<const SampleBlock>* checked) {
    absl::StatusOr<std::vector<ColumnSpec>> specs = sample.ColumnSpecs();
    if (!specs.ok()) return specs.status();
    if (i == 0) {
      ReserveInfo(n, batch);
      batch->specs = *specs;
      batch->buffers.resize(specs->size());
      batch->strings.resize(specs->size());
      for (size_t c = 0; c < specs->size(); ++c) {
        const ColumnSpec& spec = (*specs)[c];
        if (spec.dtype == tf::DT_STRING) continue;
        if (NumpyDtypeName(spec.dtype) == nullptr) {
          return absl::InvalidArgumentError(
              absl::StrCat("Column ", c, " has unsupported dtype ", DataTypeName(spec.dtype)));
        }
        batch->buffers[c] = std::make_unique<AlignedBuffer>(n * ColumnBytes(spec));
      }
    } else if (specs->size() != batch->specs.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("Cannot batch samples with different numbers of columns: ", specs->size(),
                       " vs ", batch->specs.size(), "."));
    }
    for (size_t c = 0; c < specs->size(); ++c) {
      const ColumnSpec& spec = (*specs)[c];
      if (spec.dtype != batch->specs[c].dtype || spec.shape != batch->specs[c].shape) {
        return absl::InvalidArgumentError(absl::StrCat(
            "Cannot batch column ", c, ": the batch's first sample has (dtype, shape) ",
            SpecString(batch->specs[c]), " but sample ", i, " has ", SpecString(spec), "."));
      }
      if (spec.dtype == tf::DT_STRING) {
        absl::StatusOr<Tensor> tensor = sample.UnpackColumn(static_cast<int>(c));
        if (!tensor.ok()) return tensor.status();
        for (std::string& s : tensor->strings) batch->strings[c].push_back(std::move(s));
        continue;
      }
      const int64_t bytes = ColumnBytes(spec);
      if (bytes == 0) continue;
      if (absl::Status s =
              sample.UnpackColumnInto(static_cast<int>(c), batch->buffers[c]->data + i * bytes);
          !s.ok()) {
        return s;
      }
    }
    AppendInfo(sample.meta(), batch);
    if (sample.block() != nullptr) *checked = sample.block_ptr();
    return absl::OkStatus();
  }

  static void ReserveInfo(int64_t n, Batch* batch) {
    const size_t rows = static_cast<size_t>(n);
    batch->keys.reserve(rows);
    batch->probabilities.reserve(rows);
    batch->table_sizes.reserve(rows);
    batch->priorities.reserve(rows);
    batch->times_sampled.reserve(rows);
    batch->policy_versions.reserve(rows);
  }

  static void AppendInfo(const SampleMeta& meta, Batch* batch) {
    batch->keys.push_back(meta.key);
    batch->probabilities.push_back(meta.probability);
    batch->table_sizes.push_back(meta.table_size);
    batch->priorities.push_back(meta.priority);
    batch->times_sampled.push_back(meta.times_sampled);
    batch->policy_versions.push_back(meta.policy_version);
    ++batch->size;
  }

  std::unique_ptr<Sampler> sampler_;
  BatchAssembler<Batch, absl::Status> assembler_;
};

template <typename T>
py::array VectorArray(const std::vector<T>& values) {
  py::array_t<T> out(static_cast<py::ssize_t>(values.size()));
  if (!values.empty()) std::memcpy(out.mutable_data(), values.data(), values.size() * sizeof(T));
  return out;
}

py::tuple BatchToPython(Batch batch) {
  py::tuple info =
      py::make_tuple(VectorArray(batch.keys), VectorArray(batch.probabilities),
                     VectorArray(batch.table_sizes), VectorArray(batch.priorities),
                     VectorArray(batch.times_sampled), VectorArray(batch.policy_versions));
  py::list columns;
  for (size_t c = 0; c < batch.specs.size(); ++c) {
    const ColumnSpec& spec = batch.specs[c];
    std::vector<int64_t> shape = spec.shape;
    shape.insert(shape.begin(), batch.size);
    if (spec.dtype == tf::DT_STRING) {
      py::array out(py::dtype("O"), shape);
      auto** cells = static_cast<PyObject**>(out.mutable_data());
      for (size_t i = 0; i < batch.strings[c].size(); ++i) {
        cells[i] = py::bytes(batch.strings[c][i]).release().ptr();
      }
      columns.append(out);
      continue;
    }
    AlignedBuffer* buffer = batch.buffers[c].release();
    py::capsule owner(buffer, [](void* p) { delete static_cast<AlignedBuffer*>(p); });
    columns.append(py::array(py::dtype(NumpyDtypeName(spec.dtype)), shape, buffer->data, owner));
  }
  return py::make_tuple(info, columns);
}

}  // namespace

void RegisterSamplerBindings(py::module_& m) {
  py::class_<Sampler>(m, "Sampler")
      .def(
          "next",
          [](Sampler& sampler, int64_t timeout_ms) {
            absl::StatusOr<Sample> sample;
            {
              py::gil_scoped_release release;
              sample = sampler.Next(TimeoutFromMs(timeout_ms));
            }
            MaybeRaise(sample.status());
            return py::make_tuple(InfoTuple(*sample), SampleColumns(*sample));
          },
          py::arg("timeout_ms") = -1)
      .def("close", &Sampler::Close, py::call_guard<py::gil_scoped_release>());

  m.def(
      "new_sampler",
      [](Client& client, const std::string& table, int64_t max_samples,
         int64_t max_in_flight_samples_per_worker, int64_t num_workers,
         int64_t max_samples_per_stream, int64_t rate_limiter_timeout_ms) {
        SamplerOptions options =
            MakeOptions(max_samples, max_in_flight_samples_per_worker, num_workers,
                        max_samples_per_stream, rate_limiter_timeout_ms);
        py::gil_scoped_release release;
        return client.NewSampler(table, options);
      },
      py::arg("client"), py::arg("table"), py::arg("max_samples") = -1,
      py::arg("max_in_flight_samples_per_worker") = kDefaultMaxInFlightSamplesPerWorker,
      py::arg("num_workers") = -1, py::arg("max_samples_per_stream") = -1,
      py::arg("rate_limiter_timeout_ms") = -1);

  py::class_<BatchIterator>(m, "BatchIterator")
      .def(py::init([](Client& client, const std::string& table, int64_t batch_size,
                       int64_t max_samples, int64_t max_in_flight_samples_per_worker,
                       int64_t num_workers, int64_t max_samples_per_stream,
                       int64_t rate_limiter_timeout_ms, int64_t num_threads, int64_t prefetch) {
             if (batch_size < 1) throw py::value_error("batch_size must be >= 1");
             if (num_threads < 1) throw py::value_error("num_threads must be >= 1");
             if (prefetch < 1) throw py::value_error("prefetch must be >= 1");
             SamplerOptions options =
                 MakeOptions(max_samples, max_in_flight_samples_per_worker, num_workers,
                             max_samples_per_stream, rate_limiter_timeout_ms);
             py::gil_scoped_release release;
             return std::make_unique<BatchIterator>(client.NewSampler(table, options), batch_size,
                                                    num_threads, prefetch);
           }),
           py::arg("client"), py::arg("table"), py::arg("batch_size"), py::arg("max_samples"),
           py::arg("max_in_flight_samples_per_worker"), py::arg("num_workers"),
           py::arg("max_samples_per_stream"), py::arg("rate_limiter_timeout_ms"),
           py::arg("num_threads"), py::arg("prefetch"))
      .def("next",
           [](BatchIterator& iterator) -> py::object {
             absl::StatusOr<std::optional<Batch>> batch;
             {
               py::gil_scoped_release release;
               batch = iterator.Next();
             }
             MaybeRaise(batch.status());
             if (!batch->has_value()) return py::none();
             return BatchToPython(std::move(**batch));
           })
      .def("close", &BatchIterator::Close, py::call_guard<py::gil_scoped_release>());
}

}  // namespace tf_reverb
