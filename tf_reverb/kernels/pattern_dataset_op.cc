// ReverbPatternDataset (docs/concepts/datasets.md, PatternDataset): runs the
// StructuredWriter pattern engine over the steps of an input dataset, with no
// server, and emits the trajectories it produces. The engine lives in the
// core and is reached through the C ABI (tf_reverb_pattern_engine_*).
//
// Input elements are the flattened step followed by a scalar bool
// is_end_of_episode (PatternDataset appends it with a map). After a step
// whose flag is true, the end-of-episode configs apply and a new episode
// starts (buffers cleared when clear_after_episode).
//
// Outputs: one tensor per pattern node, checked against `dtypes`/`shapes`.
// Cardinality: infinite for an infinite input, else unknown. Iterator
// save/restore is UNIMPLEMENTED (the engine's buffers are not serialized).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "server/c_api/c_api.h"
#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/dataset.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/partial_tensor_shape.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/platform/mutex.h"
#include "tf_reverb/kernels/core_api.h"
#include "tf_reverb/kernels/tensor_views.h"

namespace tf_reverb {
namespace {

using ::tensorflow::DataTypeVector;
using ::tensorflow::OpKernelConstruction;
using ::tensorflow::OpKernelContext;
using ::tensorflow::PartialTensorShape;
using ::tensorflow::Status;
using ::tensorflow::Tensor;
using ::tensorflow::TensorShape;
using ::tensorflow::data::DatasetBase;
using ::tensorflow::data::IteratorContext;

constexpr int kCodeOutOfRange = 11;

REGISTER_OP("ReverbPatternDataset")
    .Input("input_dataset: variant")
    .Attr("configs: list(string) >= 1")
    .Attr("clear_after_episode: bool")
    .Attr("dtypes: list(type) >= 1")
    .Attr("shapes: list(shape) >= 1")
    .Output("dataset: variant")
    .SetShapeFn(tensorflow::shape_inference::ScalarShape)
    .Doc(
        "Trajectories produced by StructuredWriterConfigs over the steps of "
        "input_dataset (each followed by a scalar bool is_end_of_episode).");

class PatternDataset : public DatasetBase {
 public:
  PatternDataset(OpKernelContext* ctx, const CoreApi* api, const DatasetBase* input,
                 std::vector<std::string> configs, bool clear_after_episode, DataTypeVector dtypes,
                 std::vector<PartialTensorShape> shapes)
      : DatasetBase(tensorflow::data::DatasetContext(ctx)),
        api_(api),
        input_(input),
        configs_(std::move(configs)),
        clear_after_episode_(clear_after_episode),
        dtypes_(std::move(dtypes)),
        shapes_(std::move(shapes)) {
    input_->Ref();
  }

  ~PatternDataset() override { input_->Unref(); }

  std::unique_ptr<tensorflow::data::IteratorBase> MakeIteratorInternal(
      const std::string& prefix) const override;

  const DataTypeVector& output_dtypes() const override { return dtypes_; }
  const std::vector<PartialTensorShape>& output_shapes() const override { return shapes_; }
  std::string DebugString() const override { return "ReverbPatternDatasetOp::Dataset"; }
  int64_t CardinalityInternal(tensorflow::data::CardinalityOptions options) const override {
    return input_->Cardinality(options) == tensorflow::data::kInfiniteCardinality
               ? tensorflow::data::kInfiniteCardinality
               : tensorflow::data::kUnknownCardinality;
  }
  Status InputDatasets(std::vector<const DatasetBase*>* inputs) const override {
    inputs->push_back(input_);
    return Status();
  }
  Status CheckExternalState() const override { return input_->CheckExternalState(); }

  const CoreApi* api() const { return api_; }
  const DatasetBase* input() const { return input_; }
  const std::vector<std::string>& configs() const { return configs_; }
  bool clear_after_episode() const { return clear_after_episode_; }

 protected:
  Status AsGraphDefInternal(tensorflow::data::SerializationContext* ctx, DatasetGraphDefBuilder* b,
                            tensorflow::Node** output) const override {
    tensorflow::Node* input = nullptr;
    TF_RETURN_IF_ERROR(b->AddInputDataset(ctx, input_, &input));
    tensorflow::AttrValue configs, clear, dtypes, shapes;
    b->BuildAttrValue(configs_, &configs);
    b->BuildAttrValue(clear_after_episode_, &clear);
    b->BuildAttrValue(dtypes_, &dtypes);
    b->BuildAttrValue(shapes_, &shapes);
    return b->AddDataset(this, {input},
                         {{"configs", configs},
                          {"clear_after_episode", clear},
                          {"dtypes", dtypes},
                          {"shapes", shapes}},
                         output);
  }

 private:
  const CoreApi* const api_;
  const DatasetBase* const input_;
  const std::vector<std::string> configs_;
  const bool clear_after_episode_;
  const DataTypeVector dtypes_;
  const std::vector<PartialTensorShape> shapes_;
};

// The output tensors of one popped trajectory.
struct Outputs {
  tensorflow::Allocator* allocator;
  std::vector<Tensor> columns;
};

void* AllocateOutput(void* opaque, int32_t column, int32_t dtype, int32_t rank,
                     const int64_t* dims) {
  auto* outputs = static_cast<Outputs*>(opaque);
  TensorShape shape;
  for (int i = 0; i < rank; ++i) shape.AddDim(dims[i]);
  if (static_cast<size_t>(column) >= outputs->columns.size()) {
    outputs->columns.resize(column + 1);
  }
  Tensor& tensor = outputs->columns[column];
  tensor = Tensor(outputs->allocator, static_cast<tensorflow::DataType>(dtype), shape);
  if (tensor.NumElements() == 0) return nullptr;
  if (tensor.dtype() == tensorflow::DT_STRING) return tensor.flat<tensorflow::tstring>().data();
  return const_cast<char*>(tensor.tensor_data().data());
}

void SetOutputString(void* opaque, int32_t column, int64_t index, const char* data, size_t size) {
  static_cast<Outputs*>(opaque)->columns[column].flat<tensorflow::tstring>()(index).assign(data,
                                                                                           size);
}

class PatternDatasetIterator : public tensorflow::data::DatasetIterator<PatternDataset> {
 public:
  explicit PatternDatasetIterator(const Params& params) : DatasetIterator<PatternDataset>(params) {}

  ~PatternDatasetIterator() override {
    if (engine_ != nullptr) dataset()->api()->pattern_engine_free(engine_);
  }

  Status Initialize(IteratorContext* ctx) override {
    std::vector<const char*> data;
    std::vector<size_t> sizes;
    for (const std::string& config : dataset()->configs()) {
      data.push_back(config.data());
      sizes.push_back(config.size());
    }
    char error[kErrorSize] = {0};
    engine_ = dataset()->api()->pattern_engine_new(
        data.data(), sizes.data(), static_cast<int32_t>(data.size()), error, kErrorSize);
    if (engine_ == nullptr) return tensorflow::errors::InvalidArgument(error);
    return dataset()->input()->MakeIterator(ctx, this, prefix(), &input_impl_);
  }

  Status GetNextInternal(IteratorContext* ctx, std::vector<Tensor>* out,
                         bool* end_of_sequence) override {
    tensorflow::mutex_lock lock(mu_);
    *end_of_sequence = false;
    while (true) {
      bool popped = false;
      TF_RETURN_IF_ERROR(Pop(ctx, out, &popped));
      if (popped) return Status();
      std::vector<Tensor> step;
      TF_RETURN_IF_ERROR(input_impl_->GetNext(ctx, &step, end_of_sequence));
      if (*end_of_sequence) return Status();
      TF_RETURN_IF_ERROR(Append(step));
    }
  }

 protected:
  Status SaveInternal(tensorflow::data::SerializationContext*,
                      tensorflow::data::IteratorStateWriter*) override {
    return tensorflow::errors::Unimplemented("PatternDataset iterators cannot be checkpointed.");
  }
  Status RestoreInternal(IteratorContext*, tensorflow::data::IteratorStateReader*) override {
    return tensorflow::errors::Unimplemented("PatternDataset iterators cannot be restored.");
  }

 private:
  // Hands the step (all but the trailing end-of-episode flag) to the engine.
  Status Append(const std::vector<Tensor>& step) TF_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (step.empty() || step.back().dtype() != tensorflow::DT_BOOL ||
        step.back().NumElements() != 1) {
      return tensorflow::errors::InvalidArgument(
          "is_end_of_episode must return a scalar bool for every step.");
    }
    const bool end_of_episode = step.back().flat<bool>()(0);
    std::vector<const Tensor*> columns;
    for (size_t c = 0; c + 1 < step.size(); ++c) columns.push_back(&step[c]);
    const TensorViews views(columns);
    char error[kErrorSize] = {0};
    const int code = dataset()->api()->pattern_engine_append(
        engine_, views.data(), views.size(), end_of_episode ? 1 : 0,
        dataset()->clear_after_episode() ? 1 : 0, error, kErrorSize);
    return CoreStatus(code, error);
  }

  // Moves the oldest produced trajectory into `out` (checked against the
  // dataset's dtypes and shapes); `*popped` is false when there is none.
  Status Pop(IteratorContext* ctx, std::vector<Tensor>* out, bool* popped)
      TF_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    Outputs outputs{ctx->allocator({}), {}};
    int32_t num_columns = 0;
    char error[kErrorSize] = {0};
    const int code = dataset()->api()->pattern_engine_pop(
        engine_, &num_columns, &AllocateOutput, &SetOutputString, &outputs, error, kErrorSize);
    if (code == kCodeOutOfRange) return Status();
    TF_RETURN_IF_ERROR(CoreStatus(code, error));
    const DataTypeVector& dtypes = dataset()->output_dtypes();
    const std::vector<PartialTensorShape>& shapes = dataset()->output_shapes();
    if (outputs.columns.size() != dtypes.size()) {
      return tensorflow::errors::InvalidArgument("The pattern produced ", outputs.columns.size(),
                                                 " tensors but the dataset declares ",
                                                 dtypes.size(), ".");
    }
    for (size_t c = 0; c < dtypes.size(); ++c) {
      const Tensor& tensor = outputs.columns[c];
      if (tensor.dtype() != dtypes[c] || !shapes[c].IsCompatibleWith(tensor.shape())) {
        return tensorflow::errors::InvalidArgument(
            "The pattern produced ", tensorflow::DataTypeString(tensor.dtype()),
            tensor.shape().DebugString(), " at flattened index ", c, " but the dataset declares ",
            tensorflow::DataTypeString(dtypes[c]), shapes[c].DebugString(), ".");
      }
    }
    *out = std::move(outputs.columns);
    *popped = true;
    return Status();
  }

  tensorflow::mutex mu_;
  TfReverbPatternEngine* engine_ = nullptr;
  std::unique_ptr<tensorflow::data::IteratorBase> input_impl_ TF_GUARDED_BY(mu_);
};

std::unique_ptr<tensorflow::data::IteratorBase> PatternDataset::MakeIteratorInternal(
    const std::string& prefix) const {
  return std::make_unique<PatternDatasetIterator>(
      PatternDatasetIterator::Params{this, prefix + "::ReverbPattern"});
}

class PatternDatasetOp : public tensorflow::data::UnaryDatasetOpKernel {
 public:
  explicit PatternDatasetOp(OpKernelConstruction* ctx) : UnaryDatasetOpKernel(ctx) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("configs", &configs_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("clear_after_episode", &clear_after_episode_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("dtypes", &dtypes_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("shapes", &shapes_));
    OP_REQUIRES(
        ctx, dtypes_.size() == shapes_.size(),
        tensorflow::errors::InvalidArgument("dtypes and shapes must have the same length, got ",
                                            dtypes_.size(), " and ", shapes_.size()));
  }

  void MakeDataset(OpKernelContext* ctx, DatasetBase* input, DatasetBase** output) override {
    auto api = CoreApi::Get();
    OP_REQUIRES_OK(ctx, api.status());
    *output =
        new PatternDataset(ctx, *api, input, configs_, clear_after_episode_, dtypes_, shapes_);
  }

 private:
  std::vector<std::string> configs_;
  bool clear_after_episode_ = true;
  DataTypeVector dtypes_;
  std::vector<PartialTensorShape> shapes_;
};

REGISTER_KERNEL_BUILDER(Name("ReverbPatternDataset").Device(tensorflow::DEVICE_CPU),
                        PatternDatasetOp);

}  // namespace
}  // namespace tf_reverb
