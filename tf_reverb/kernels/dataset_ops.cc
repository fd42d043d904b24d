// ReverbTrajectoryDataset and ReverbTimestepDataset (docs/concepts/datasets.md):
// tf.data sources over a core Sampler, reached only through the C ABI
// (tf_reverb_sampler_*; see core_api.h).
//
// Each iterator owns one sampler (worker threads + prefetch queue in the
// core). GetNext pops a sample and the core decompresses its columns straight
// into freshly allocated output tensors (the allocate callback below); the
// timestep dataset then hands out rows of those tensors as aliasing slices.
//
// Outputs: the five SampleInfo scalars (key uint64, probability double,
// table_size int64, priority double, times_sampled int32), then the data
// columns; `dtypes`/`shapes` list all of them, info first.
//
// On iterator initialisation the table's signature is fetched (30 s timeout;
// unreachable server: a warning, no check): with a signature, the requested
// dtypes/shapes must match it (a TimestepDataset's describe one timestep, as
// the signature then must); without one, every sample is checked instead.
//
// End of sequence: after max_samples samples, or on a rate-limiter timeout
// when a finite rate_limiter_timeout_ms was set. Cancelling the iterator
// closes its sampler. Iterator save/restore is UNIMPLEMENTED and
// CheckExternalState fails (the data lives on a server).
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/log/log.h"
#include "absl/strings/string_view.h"
#include "server/c_api/c_api.h"
#include "server/client/batch_assembler.h"
#include "tensorflow/core/framework/cancellation.h"
#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/dataset.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/partial_tensor_shape.h"
#include "tensorflow/core/framework/shape_inference.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/framework/tensor_util.h"
#include "tensorflow/core/platform/logging.h"
#include "tensorflow/core/platform/mutex.h"
#include "tf_reverb/kernels/core_api.h"

namespace tf_reverb {
namespace {

using ::tensorflow::DataType;
using ::tensorflow::DataTypeVector;
using ::tensorflow::OpKernelConstruction;
using ::tensorflow::OpKernelContext;
using ::tensorflow::PartialTensorShape;
using ::tensorflow::Status;
using ::tensorflow::Tensor;
using ::tensorflow::TensorShape;
using ::tensorflow::data::DatasetBase;
using ::tensorflow::data::IteratorContext;

constexpr int kNumInfoColumns = 5;
constexpr int kCodeCancelled = 1;
constexpr int kCodeDeadlineExceeded = 4;
constexpr int kCodeOutOfRange = 11;
constexpr int kCodeUnimplemented = 12;

#define REGISTER_REVERB_DATASET_OP(name, doc)               \
  REGISTER_OP(name)                                         \
      .Input("server_address: string")                      \
      .Input("table: string")                               \
      .Attr("max_in_flight_samples_per_worker: int = 100")  \
      .Attr("num_workers_per_iterator: int = -1")           \
      .Attr("max_samples_per_stream: int = -1")             \
      .Attr("rate_limiter_timeout_ms: int = -1")            \
      .Attr("max_samples: int = -1")                        \
      .Attr("dtypes: list(type) >= 5")                      \
      .Attr("shapes: list(shape) >= 5")                     \
      .Output("dataset: variant")                           \
      .SetIsStateful()                                      \
      .SetShapeFn(tensorflow::shape_inference::ScalarShape) \
      .Doc(doc)

REGISTER_REVERB_DATASET_OP("ReverbTrajectoryDataset",
                           "One element per sampled item: its whole trajectory; with "
                           "batch_size > 0, batches of that many items decoded straight "
                           "into the batch tensors (TrajectoryDataset.batch).")
    .Attr("batch_size: int = 0")
    .Attr("drop_remainder: bool = false");
REGISTER_REVERB_DATASET_OP("ReverbTimestepDataset",
                           "One element per timestep of each sampled item.");

std::string SpecString(DataType dtype, const PartialTensorShape& shape) {
  return "(" + tensorflow::DataTypeString(dtype) + ", " + shape.DebugString() + ")";
}

constexpr int64_t kSignatureTimeoutMs = 30000;

struct DatasetParams {
  std::string server_address;
  std::string table;
  TfReverbSamplerOptions options;
  DataTypeVector dtypes;
  // Of one item (or timestep); output shapes add the batch dimension.
  std::vector<PartialTensorShape> shapes;
  bool timesteps;
  int64_t batch_size;  // 0: not batched
  bool drop_remainder;
  std::vector<PartialTensorShape> output_shapes;
};

class ReverbDataset : public DatasetBase {
 public:
  ReverbDataset(OpKernelContext* ctx, const CoreApi* api, DatasetParams params)
      : DatasetBase(tensorflow::data::DatasetContext(ctx)),
        api_(api),
        params_(std::move(params)),
        client_(api->client_new(params_.server_address.c_str())) {}

  ~ReverbDataset() override { api_->client_free(client_); }

  std::unique_ptr<tensorflow::data::IteratorBase> MakeIteratorInternal(
      const std::string& prefix) const override;

  const DataTypeVector& output_dtypes() const override { return params_.dtypes; }
  const std::vector<PartialTensorShape>& output_shapes() const override {
    return params_.output_shapes;
  }
  std::string DebugString() const override {
    return std::string(params_.timesteps ? "ReverbTimestepDataset" : "ReverbTrajectoryDataset") +
           "(" + params_.server_address + ", " + params_.table + ")";
  }
  int64_t CardinalityInternal(tensorflow::data::CardinalityOptions) const override {
    return tensorflow::data::kUnknownCardinality;
  }
  Status InputDatasets(std::vector<const DatasetBase*>*) const override { return Status(); }
  Status CheckExternalState() const override {
    return tensorflow::errors::FailedPrecondition(
        DebugString(), " depends on a Reverb server and cannot be serialized.");
  }

  const CoreApi* api() const { return api_; }
  const DatasetParams& params() const { return params_; }
  TfReverbClient* client() const { return client_; }

 protected:
  Status AsGraphDefInternal(tensorflow::data::SerializationContext* ctx, DatasetGraphDefBuilder* b,
                            tensorflow::Node** output) const override {
    tensorflow::Node* address = nullptr;
    tensorflow::Node* table = nullptr;
    TF_RETURN_IF_ERROR(b->AddScalar(tensorflow::tstring(params_.server_address), &address));
    TF_RETURN_IF_ERROR(b->AddScalar(tensorflow::tstring(params_.table), &table));
    tensorflow::AttrValue in_flight, workers, per_stream, timeout, max_samples, dtypes, shapes;
    b->BuildAttrValue(params_.options.max_in_flight_samples_per_worker, &in_flight);
    b->BuildAttrValue(params_.options.num_workers, &workers);
    b->BuildAttrValue(params_.options.max_samples_per_stream, &per_stream);
    b->BuildAttrValue(params_.options.rate_limiter_timeout_ms, &timeout);
    b->BuildAttrValue(params_.options.max_samples, &max_samples);
    b->BuildAttrValue(params_.dtypes, &dtypes);
    b->BuildAttrValue(params_.shapes, &shapes);
    std::vector<std::pair<absl::string_view, tensorflow::AttrValue>> attrs = {
        {"max_in_flight_samples_per_worker", in_flight},
        {"num_workers_per_iterator", workers},
        {"max_samples_per_stream", per_stream},
        {"rate_limiter_timeout_ms", timeout},
        {"max_samples", max_samples},
        {"dtypes", dtypes},
        {"shapes", shapes}};
    if (!params_.timesteps) {
      tensorflow::AttrValue batch_size, drop_remainder;
      b->BuildAttrValue(params_.batch_size, &batch_size);
      b->BuildAttrValue(params_.drop_remainder, &drop_remainder);
      attrs.emplace_back("batch_size", batch_size);
      attrs.emplace_back("drop_remainder", drop_remainder);
    }
    return b->AddDataset(this, {address, table}, attrs, output);
  }

 private:
  const CoreApi* const api_;
  const DatasetParams params_;
  TfReverbClient* const client_;
};

// What the core's allocate callback writes into: the column tensors of one
// sample, validated against the requested specs.
struct Allocation {
  const ReverbDataset* dataset;
  tensorflow::Allocator* allocator;
  std::vector<Tensor> columns;
  Status status;
  // Batched trajectories: the row of the batch being decoded, and the item
  // shapes of row 0 (every row must match them).
  int64_t row = 0;
  std::vector<TensorShape> item_shapes;
};

void* AllocateColumn(void* opaque, int32_t column, int32_t dtype, int32_t rank,
                     const int64_t* dims) {
  auto* allocation = static_cast<Allocation*>(opaque);
  const DatasetParams& params = allocation->dataset->params();
  const int num_data = static_cast<int>(params.dtypes.size()) - kNumInfoColumns;
  TensorShape shape;
  for (int i = 0; i < rank; ++i) shape.AddDim(dims[i]);
  if (column >= num_data) {
    allocation->status = tensorflow::errors::InvalidArgument("Received a sample from table '",
                                                             params.table, "' with more than the ",
                                                             num_data, " tensors requested.");
    return nullptr;
  }
  const DataType requested_dtype = params.dtypes[kNumInfoColumns + column];
  const PartialTensorShape& requested = params.shapes[kNumInfoColumns + column];
  // The timestep dataset's specs describe one row of each column.
  PartialTensorShape compared(shape);
  if (params.timesteps && shape.dims() > 0) {
    TensorShape row = shape;
    row.RemoveDim(0);
    compared = PartialTensorShape(row);
  }
  const bool dtype_ok = static_cast<int32_t>(requested_dtype) == dtype;
  if (!dtype_ok || !requested.IsCompatibleWith(compared) ||
      (params.timesteps && shape.dims() == 0)) {
    allocation->status = tensorflow::errors::InvalidArgument(
        "Received incompatible tensor at flattened index ", column, " from table '", params.table,
        "'.  Specification has (dtype, shape): ", SpecString(requested_dtype, requested),
        ".  Tensor has (dtype, shape): ",
        SpecString(static_cast<DataType>(dtype),
                   params.timesteps ? compared : PartialTensorShape(shape)),
        ".");
    return nullptr;
  }
  if (allocation->columns.size() <= static_cast<size_t>(column)) {
    allocation->columns.resize(column + 1);
  }
  if (params.batch_size > 0) {
    // Row `row` of the batch tensor, allocated with row 0.
    if (allocation->row == 0) {
      if (allocation->item_shapes.size() <= static_cast<size_t>(column)) {
        allocation->item_shapes.resize(column + 1);
      }
      allocation->item_shapes[column] = shape;
      TensorShape batch_shape = shape;
      batch_shape.InsertDim(0, params.batch_size);
      allocation->columns[column] = Tensor(allocation->allocator, requested_dtype, batch_shape);
    } else if (static_cast<size_t>(column) >= allocation->item_shapes.size() ||
               allocation->item_shapes[column] != shape) {
      allocation->status = tensorflow::errors::InvalidArgument(
          "Cannot batch tensors with different shapes in component ", column,
          ". First element had shape ",
          column < static_cast<int32_t>(allocation->item_shapes.size())
              ? allocation->item_shapes[column].DebugString()
              : "(none)",
          " and element ", allocation->row, " had shape ", shape.DebugString(), ".");
      return nullptr;
    }
    Tensor& tensor = allocation->columns[column];
    if (shape.num_elements() == 0) return nullptr;
    if (requested_dtype == tensorflow::DT_STRING) {
      return tensor.flat<tensorflow::tstring>().data() + allocation->row * shape.num_elements();
    }
    const int64_t row_bytes = tensor.TotalBytes() / params.batch_size;
    return const_cast<char*>(tensor.tensor_data().data()) + allocation->row * row_bytes;
  }
  allocation->columns[column] = Tensor(allocation->allocator, requested_dtype, shape);
  Tensor& tensor = allocation->columns[column];
  if (tensor.NumElements() == 0) return nullptr;
  return const_cast<char*>(tensor.tensor_data().data());
}

void SetStringElement(void* opaque, int32_t column, int64_t index, const char* data, size_t size) {
  auto* allocation = static_cast<Allocation*>(opaque);
  const int64_t offset = allocation->dataset->params().batch_size > 0
                             ? allocation->row * allocation->item_shapes[column].num_elements()
                             : 0;
  allocation->columns[column].flat<tensorflow::tstring>()(offset + index).assign(data, size);
}

class ReverbDatasetIterator : public tensorflow::data::DatasetIterator<ReverbDataset> {
 public:
  explicit ReverbDatasetIterator(const Params& params) : DatasetIterator<ReverbDataset>(params) {}

  ~ReverbDatasetIterator() override {
    if (deregister_) deregister_();
    StopAssembly();
    if (sampler_ != nullptr) dataset()->api()->sampler_free(sampler_);
  }

  Status Initialize(IteratorContext* ctx) override {
    TF_RETURN_IF_ERROR(ValidateAgainstSignature());
    char error[kErrorSize] = {0};
    sampler_ = dataset()->api()->sampler_new(dataset()->client(), dataset()->params().table.c_str(),
                                             &dataset()->params().options, error, kErrorSize);
    if (sampler_ == nullptr) return tensorflow::errors::InvalidArgument(error);
    const CoreApi* api = dataset()->api();
    TfReverbSampler* sampler = sampler_;
    TF_RETURN_IF_ERROR(tensorflow::RegisterCancellationCallback(
        ctx->cancellation_manager(), [api, sampler] { api->sampler_close(sampler); },
        &deregister_));
    if (dataset()->params().batch_size > 0) StartAssembly(ctx);
    return Status();
  }

  Status GetNextInternal(IteratorContext* ctx, std::vector<Tensor>* out,
                         bool* end_of_sequence) override {
    if (dataset()->params().batch_size > 0) return GetNextBatch(out, end_of_sequence);
    if (!dataset()->params().timesteps) {
      Allocation allocation;
      TfReverbSampleInfo info;
      TF_RETURN_IF_ERROR(NextSample(ctx->allocator({}), &allocation, &info, end_of_sequence));
      if (*end_of_sequence) return Status();
      AppendInfo(info, out);
      for (Tensor& column : allocation.columns) out->push_back(std::move(column));
      return Status();
    }
    tensorflow::mutex_lock lock(mu_);
    if (row_ >= rows_) {
      Allocation allocation;
      TF_RETURN_IF_ERROR(NextSample(ctx->allocator({}), &allocation, &info_, end_of_sequence));
      if (*end_of_sequence) return Status();
      rows_ = -1;
      for (const Tensor& column : allocation.columns) {
        if (rows_ != -1 && column.dim_size(0) != rows_) {
          return tensorflow::errors::InvalidArgument(
              "Sampled trajectory cannot be decomposed into timesteps.");
        }
        rows_ = column.dim_size(0);
      }
      columns_ = std::move(allocation.columns);
      row_ = 0;
      if (rows_ <= 0) {
        return tensorflow::errors::InvalidArgument(
            "Sampled trajectory from table '", dataset()->params().table, "' has no timesteps.");
      }
    }
    AppendInfo(info_, out);
    for (const Tensor& column : columns_) {
      Tensor row = column.SubSlice(row_);
      out->push_back(row.IsAligned() ? row : tensorflow::tensor::DeepCopy(row));
    }
    ++row_;
    return Status();
  }

 protected:
  Status SaveInternal(tensorflow::data::SerializationContext*,
                      tensorflow::data::IteratorStateWriter*) override {
    return tensorflow::errors::Unimplemented("Reverb datasets cannot be checkpointed.");
  }
  Status RestoreInternal(IteratorContext*, tensorflow::data::IteratorStateReader*) override {
    return tensorflow::errors::Unimplemented("Reverb datasets cannot be restored.");
  }

 private:
  Status ValidateAgainstSignature() {
    const DatasetParams& params = dataset()->params();
    // The requested data columns as the core's specs (the rule lives in the
    // core: server/signature.h's CheckRequestedSpecs).
    const size_t num_data = params.dtypes.size() - kNumInfoColumns;
    std::vector<std::vector<int64_t>> dims(num_data);
    std::vector<TfReverbSpec> specs(num_data);
    for (size_t i = 0; i < num_data; ++i) {
      const PartialTensorShape& shape = params.shapes[kNumInfoColumns + i];
      for (int d = 0; d < shape.dims(); ++d) dims[i].push_back(shape.dim_size(d));
      specs[i].dtype = static_cast<int32_t>(params.dtypes[kNumInfoColumns + i]);
      specs[i].rank = shape.unknown_rank() ? -1 : shape.dims();
      specs[i].dims = dims[i].data();
    }
    char error[kErrorSize] = {0};
    const int code = dataset()->api()->client_check_requested_specs(
        dataset()->client(), params.table.c_str(), kSignatureTimeoutMs, specs.data(),
        static_cast<int32_t>(num_data), error, kErrorSize);
    if (code == kCodeDeadlineExceeded) {
      LOG(WARNING) << "Could not fetch the signature of table '" << params.table << "' from "
                   << params.server_address << " in time; samples are validated as they arrive.";
      return Status();
    }
    if (code == kCodeUnimplemented) {
      LOG(WARNING) << error << " Samples are validated as they arrive.";
      return Status();
    }
    return CoreStatus(code, error);
  }

  // Fused batches are assembled by the core's BatchAssembler
  // (server/client/batch_assembler.h): kAssemblyThreads threads each decode
  // `batch_size` items straight into [batch_size, ...] tensors, up to
  // kPrefetchBatches batches ahead of GetNext, handed out in claim order so
  // that with max_samples the one partial batch comes last; it is emitted
  // (sliced) unless drop_remainder.
  static constexpr int kAssemblyThreads = 2;
  static constexpr int kPrefetchBatches = 2;
  using Assembler = BatchAssembler<std::vector<Tensor>, Status>;

  void StartAssembly(IteratorContext* ctx) {
    allocator_ = ctx->allocator({});
    assembler_ = std::make_unique<Assembler>(
        dataset()->params().batch_size, dataset()->params().options.max_samples, kAssemblyThreads,
        kPrefetchBatches,
        [this](int64_t rows, std::vector<Tensor>* out, bool* ended) {
          return AssembleBatch(rows, out, ended);
        },
        [](const std::vector<Tensor>& batch) { return batch.empty(); });
  }

  void StopAssembly() {
    auto close = [this] {
      if (sampler_ != nullptr) dataset()->api()->sampler_close(sampler_);
    };
    if (assembler_ != nullptr) {
      assembler_->Stop(close);
    } else {
      close();
    }
  }

  // Decodes up to `rows_wanted` items into one batch (empty when none came
  // or a partial batch is dropped); `*ended` when the sampler ended.
  Status AssembleBatch(int64_t rows_wanted, std::vector<Tensor>* out, bool* ended) {
    const DatasetParams& params = dataset()->params();
    const int64_t batch = params.batch_size;
    Allocation allocation;
    Tensor key(tensorflow::DT_UINT64, TensorShape({batch}));
    Tensor probability(tensorflow::DT_DOUBLE, TensorShape({batch}));
    Tensor table_size(tensorflow::DT_INT64, TensorShape({batch}));
    Tensor priority(tensorflow::DT_DOUBLE, TensorShape({batch}));
    Tensor times_sampled(tensorflow::DT_INT32, TensorShape({batch}));
    int64_t rows = 0;
    for (; rows < rows_wanted; ++rows) {
      allocation.row = rows;
      TfReverbSampleInfo info;
      TF_RETURN_IF_ERROR(NextSample(allocator_, &allocation, &info, ended));
      if (*ended) break;
      key.flat<tensorflow::uint64>()(rows) = info.key;
      probability.flat<double>()(rows) = info.probability;
      table_size.flat<int64_t>()(rows) = info.table_size;
      priority.flat<double>()(rows) = info.priority;
      times_sampled.flat<int32_t>()(rows) = info.times_sampled;
    }
    if (rows < rows_wanted) *ended = true;
    if (rows == 0 || (rows < batch && params.drop_remainder)) return Status();
    auto emit = [&](Tensor tensor) {
      out->push_back(rows == batch ? std::move(tensor) : tensor.Slice(0, rows));
    };
    emit(std::move(key));
    emit(std::move(probability));
    emit(std::move(table_size));
    emit(std::move(priority));
    emit(std::move(times_sampled));
    for (Tensor& column : allocation.columns) emit(std::move(column));
    return Status();
  }

  Status GetNextBatch(std::vector<Tensor>* out, bool* end_of_sequence) {
    *end_of_sequence = false;
    if (assembler_->Next(out)) return Status();
    TF_RETURN_IF_ERROR(assembler_->status());
    *end_of_sequence = true;
    return Status();
  }

  Status NextSample(tensorflow::Allocator* allocator, Allocation* allocation,
                    TfReverbSampleInfo* info, bool* end_of_sequence) {
    const DatasetParams& params = dataset()->params();
    allocation->dataset = dataset();
    allocation->allocator = allocator;
    char error[kErrorSize] = {0};
    int32_t num_columns = 0;
    const int code =
        dataset()->api()->sampler_next(sampler_, -1, info, &num_columns, &AllocateColumn,
                                       &SetStringElement, allocation, error, kErrorSize);
    *end_of_sequence = false;
    if (!allocation->status.ok()) return allocation->status;
    if (code == kCodeOutOfRange ||
        (code == kCodeDeadlineExceeded && params.options.rate_limiter_timeout_ms >= 0)) {
      *end_of_sequence = true;
      return Status();
    }
    if (code == kCodeCancelled) {
      return tensorflow::errors::Cancelled("The Reverb dataset iterator was cancelled: ", error);
    }
    TF_RETURN_IF_ERROR(CoreStatus(code, error));
    const int requested = static_cast<int>(params.dtypes.size()) - kNumInfoColumns;
    if (num_columns != requested) {
      return tensorflow::errors::InvalidArgument(
          "Inconsistent number of tensors received from table '", params.table, "'.  Requested ",
          requested, " tensors, but the sample has ", num_columns, ".");
    }
    return Status();
  }

  static void AppendInfo(const TfReverbSampleInfo& info, std::vector<Tensor>* out) {
    Tensor key(tensorflow::DT_UINT64, TensorShape({}));
    key.scalar<tensorflow::uint64>()() = info.key;
    Tensor probability(tensorflow::DT_DOUBLE, TensorShape({}));
    probability.scalar<double>()() = info.probability;
    Tensor table_size(tensorflow::DT_INT64, TensorShape({}));
    table_size.scalar<int64_t>()() = info.table_size;
    Tensor priority(tensorflow::DT_DOUBLE, TensorShape({}));
    priority.scalar<double>()() = info.priority;
    Tensor times_sampled(tensorflow::DT_INT32, TensorShape({}));
    times_sampled.scalar<int32_t>()() = info.times_sampled;
    out->push_back(std::move(key));
    out->push_back(std::move(probability));
    out->push_back(std::move(table_size));
    out->push_back(std::move(priority));
    out->push_back(std::move(times_sampled));
  }

  TfReverbSampler* sampler_ = nullptr;
  std::function<void()> deregister_;

  // Fused batches (batch_size > 0).
  tensorflow::Allocator* allocator_ = nullptr;
  std::unique_ptr<Assembler> assembler_;

  // Timestep dataset: the current sample and the next row to hand out.
  tensorflow::mutex mu_;
  TfReverbSampleInfo info_ TF_GUARDED_BY(mu_);
  std::vector<Tensor> columns_ TF_GUARDED_BY(mu_);
  int64_t rows_ TF_GUARDED_BY(mu_) = 0;
  int64_t row_ TF_GUARDED_BY(mu_) = 0;
};

std::unique_ptr<tensorflow::data::IteratorBase> ReverbDataset::MakeIteratorInternal(
    const std::string& prefix) const {
  return std::make_unique<ReverbDatasetIterator>(
      ReverbDatasetIterator::Params{this, prefix + "::Reverb"});
}

class ReverbDatasetOp : public tensorflow::data::DatasetOpKernel {
 public:
  explicit ReverbDatasetOp(OpKernelConstruction* ctx) : DatasetOpKernel(ctx) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("max_in_flight_samples_per_worker",
                                     &options_.max_in_flight_samples_per_worker));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("num_workers_per_iterator", &options_.num_workers));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("max_samples_per_stream", &options_.max_samples_per_stream));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("rate_limiter_timeout_ms", &options_.rate_limiter_timeout_ms));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("max_samples", &options_.max_samples));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("dtypes", &dtypes_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("shapes", &shapes_));
    OP_REQUIRES(
        ctx, dtypes_.size() == shapes_.size(),
        tensorflow::errors::InvalidArgument("dtypes and shapes must have the same length, got ",
                                            dtypes_.size(), " and ", shapes_.size()));
    const DataTypeVector info = {tensorflow::DT_UINT64, tensorflow::DT_DOUBLE, tensorflow::DT_INT64,
                                 tensorflow::DT_DOUBLE, tensorflow::DT_INT32};
    for (int i = 0; i < kNumInfoColumns; ++i) {
      OP_REQUIRES(ctx, dtypes_[i] == info[i],
                  tensorflow::errors::InvalidArgument(
                      "The first five dtypes must be those of SampleInfo."));
    }
    timesteps_ = ctx->def().op() == "ReverbTimestepDataset";
    if (!timesteps_) {
      OP_REQUIRES_OK(ctx, ctx->GetAttr("batch_size", &batch_size_));
      OP_REQUIRES_OK(ctx, ctx->GetAttr("drop_remainder", &drop_remainder_));
      OP_REQUIRES(
          ctx, batch_size_ >= 0,
          tensorflow::errors::InvalidArgument("batch_size must be >= 0, got ", batch_size_));
    }
    for (const PartialTensorShape& shape : shapes_) {
      if (batch_size_ == 0) {
        output_shapes_.push_back(shape);
        continue;
      }
      PartialTensorShape batched({drop_remainder_ ? batch_size_ : -1});
      output_shapes_.push_back(batched.Concatenate(shape));
    }
  }

  void MakeDataset(OpKernelContext* ctx, DatasetBase** output) override {
    auto api = CoreApi::Get();
    OP_REQUIRES_OK(ctx, api.status());
    tensorflow::tstring address, table;
    OP_REQUIRES_OK(ctx, tensorflow::data::ParseScalarArgument(ctx, "server_address", &address));
    OP_REQUIRES_OK(ctx, tensorflow::data::ParseScalarArgument(ctx, "table", &table));
    *output = new ReverbDataset(
        ctx, *api,
        DatasetParams{std::string(address), std::string(table), options_, dtypes_, shapes_,
                      timesteps_, batch_size_, drop_remainder_, output_shapes_});
  }

 private:
  TfReverbSamplerOptions options_;
  DataTypeVector dtypes_;
  std::vector<PartialTensorShape> shapes_;
  bool timesteps_ = false;
  int64_t batch_size_ = 0;
  bool drop_remainder_ = false;
  std::vector<PartialTensorShape> output_shapes_;
};

REGISTER_KERNEL_BUILDER(Name("ReverbTrajectoryDataset").Device(tensorflow::DEVICE_CPU),
                        ReverbDatasetOp);
REGISTER_KERNEL_BUILDER(Name("ReverbTimestepDataset").Device(tensorflow::DEVICE_CPU),
                        ReverbDatasetOp);

}  // namespace
}  // namespace tf_reverb
