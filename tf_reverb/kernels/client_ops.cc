// The TFClient ops: ReverbClient (resource), ReverbClientSample,
// ReverbClientInsert and ReverbClientUpdatePriorities (docs/guides/graph-mode.md).
// As in Reverb, ReverbClientSample returns only the FIRST TIMESTEP of the
// sampled item: row 0 of every column (a squeezed column as it is), so an
// item of one step comes back with the shapes it was inserted with; later
// timesteps of longer items are dropped. Every bad input (dtypes or column
// count that do not match the item, a non-scalar table) is an
// InvalidArgument error of the op, never a crash.
#include <cstddef>
#include <cstdint>
#include <deque>
#include <initializer_list>
#include <string>
#include <vector>

#include "server/c_api/c_api.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/resource_op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/framework/tensor_shape.h"
#include "tensorflow/core/framework/types.h"
#include "tf_reverb/kernels/client_resource.h"
#include "tf_reverb/kernels/core_api.h"
#include "tf_reverb/kernels/tensor_views.h"

namespace tf_reverb {
namespace {

using ::tensorflow::DEVICE_CPU;
using ::tensorflow::OpKernel;
using ::tensorflow::OpKernelConstruction;
using ::tensorflow::OpKernelContext;
using ::tensorflow::Status;
using ::tensorflow::Tensor;
using ::tensorflow::TensorShape;
using ::tensorflow::shape_inference::InferenceContext;

REGISTER_OP("ReverbClient")
    .Output("handle: resource")
    .Attr("server_address: string")
    .Attr("container: string = ''")
    .Attr("shared_name: string = ''")
    .SetIsStateful()
    .SetShapeFn(tensorflow::shape_inference::ScalarShape)
    .Doc("A client of the Reverb server at `server_address`.");

REGISTER_OP("ReverbClientSample")
    .Input("handle: resource")
    .Input("table: string")
    .Attr("timeout_ms: int = -1")
    .Attr("Toutput_list: list(type) >= 0")
    .Output("key: uint64")
    .Output("probability: double")
    .Output("table_size: int64")
    .Output("priority: double")
    .Output("times_sampled: int32")
    .Output("outputs: Toutput_list")
    .SetIsStateful()
    .SetShapeFn([](InferenceContext* c) {
      for (int i = 0; i < 5; ++i) c->set_output(i, c->Scalar());
      for (int i = 5; i < c->num_outputs(); ++i) c->set_output(i, c->UnknownShape());
      return Status();
    })
    .Doc(R"doc(
Samples one item from `table` and returns its first timestep.

`outputs` holds row 0 of each of the item's columns (a squeezed column as it
is): an item inserted as one step comes back with the inserted shapes, and
the later timesteps of a longer item are dropped. InvalidArgument when the
item's column count or dtypes differ from `Toutput_list`.
)doc");

REGISTER_OP("ReverbClientInsert")
    .Input("handle: resource")
    .Input("data: T")
    .Input("tables: string")
    .Input("priorities: double")
    .Attr("T: list(type) >= 1")
    .SetIsStateful()
    .SetShapeFn(tensorflow::shape_inference::NoOutputs)
    .Doc("Inserts `data` as one step, one item per (tables[i], priorities[i]).");

// A tf_reverb op (not in Reverb): ReverbClientInsert with the items' policy
// version (a scalar, so it may change between calls of one graph).
REGISTER_OP("ReverbClientInsertWithPolicyVersion")
    .Input("handle: resource")
    .Input("data: T")
    .Input("tables: string")
    .Input("priorities: double")
    .Input("policy_version: int64")
    .Attr("T: list(type) >= 1")
    .SetIsStateful()
    .SetShapeFn(tensorflow::shape_inference::NoOutputs)
    .Doc(R"doc(
Inserts `data` as one step, one item per (tables[i], priorities[i]), each
item of policy version `policy_version` (a scalar >= 0).
)doc");

REGISTER_OP("ReverbClientUpdatePriorities")
    .Input("handle: resource")
    .Input("table: string")
    .Input("keys: uint64")
    .Input("priorities: double")
    .SetIsStateful()
    .SetShapeFn(tensorflow::shape_inference::NoOutputs)
    .Doc("Sets the priorities of items of `table`; absent keys are ignored.");

class ReverbClientHandleOp : public tensorflow::ResourceOpKernel<ReverbClientResource> {
 public:
  explicit ReverbClientHandleOp(OpKernelConstruction* context) : ResourceOpKernel(context) {
    OP_REQUIRES_OK(context, context->GetAttr("server_address", &server_address_));
  }

 private:
  Status CreateResource(ReverbClientResource** resource) override {
    auto api = CoreApi::Get();
    if (!api.ok()) return api.status();
    *resource = new ReverbClientResource(*api, server_address_);
    return Status();
  }

  std::string server_address_;
};

// Output allocation for the core's sample callback. The first failure is
// kept in `status` and makes every later allocation fail too. Columns beyond
// the requested ones are decoded into `surplus` so the call completes and
// `num_columns` ends up the item's real column count for the error message.
struct SampleOutputs {
  OpKernelContext* context;
  tensorflow::DataTypeVector expected;
  std::vector<Tensor*> tensors;
  std::deque<Tensor> surplus;
  int32_t num_columns = 0;
  Status status;
};

void* AllocateOutput(void* opaque, int32_t column, int32_t dtype, int32_t rank,
                     const int64_t* dims) {
  auto* outputs = static_cast<SampleOutputs*>(opaque);
  if (!outputs->status.ok()) return nullptr;
  outputs->num_columns = column + 1;
  TensorShape shape;
  for (int i = 0; i < rank; ++i) {
    outputs->status = shape.AddDimWithStatus(dims[i]);
    if (!outputs->status.ok()) return nullptr;
  }
  const auto data_type = static_cast<tensorflow::DataType>(dtype);
  if (column >= static_cast<int32_t>(outputs->expected.size())) {
    if (!tensorflow::DataTypeCanUseMemcpy(data_type) && data_type != tensorflow::DT_STRING) {
      outputs->status =
          tensorflow::errors::InvalidArgument("The sampled item has more columns than the ",
                                              outputs->expected.size(), " dtypes requested.");
      return nullptr;
    }
    outputs->surplus.emplace_back(data_type, shape);
    outputs->tensors.push_back(&outputs->surplus.back());
    return outputs->surplus.back().data();
  }
  if (outputs->expected[column] != data_type) {
    outputs->status = tensorflow::errors::InvalidArgument(
        "Column ", column, " of the sampled item has dtype ", tensorflow::DataTypeString(data_type),
        " but ", tensorflow::DataTypeString(outputs->expected[column]), " was requested.");
    return nullptr;
  }
  Tensor* tensor = nullptr;
  outputs->status = outputs->context->allocate_output(5 + column, shape, &tensor);
  if (!outputs->status.ok()) return nullptr;
  outputs->tensors[column] = tensor;
  return tensor->data();
}

void SetString(void* opaque, int32_t column, int64_t index, const char* data, size_t size) {
  auto* outputs = static_cast<SampleOutputs*>(opaque);
  if (column < 0 || column >= static_cast<int32_t>(outputs->tensors.size())) return;
  Tensor* tensor = outputs->tensors[column];
  if (tensor == nullptr || tensor->dtype() != tensorflow::DT_STRING || index < 0 ||
      index >= tensor->NumElements()) {
    return;
  }
  tensor->flat<tensorflow::tstring>()(index).assign(data, size);
}

// The `table` input of the sample and update ops: a scalar string.
Status TableName(OpKernelContext* context, std::string* table) {
  const Tensor& tensor = context->input(1);
  if (!tensorflow::TensorShapeUtils::IsScalar(tensor.shape())) {
    return tensorflow::errors::InvalidArgument("table must be a scalar string, got shape ",
                                               tensor.shape().DebugString());
  }
  *table = tensor.scalar<tensorflow::tstring>()();
  return Status();
}

class ReverbClientSampleOp : public OpKernel {
 public:
  explicit ReverbClientSampleOp(OpKernelConstruction* context) : OpKernel(context) {
    OP_REQUIRES_OK(context, context->GetAttr("Toutput_list", &dtypes_));
    OP_REQUIRES_OK(context, context->GetAttr("timeout_ms", &timeout_ms_));
  }

  void Compute(OpKernelContext* context) override {
    std::string table;
    OP_REQUIRES_OK(context, TableName(context, &table));
    ReverbClientResource* resource;
    OP_REQUIRES_OK(context, LookupResource(context, HandleFromInput(context, 0), &resource));
    tensorflow::core::ScopedUnref unref(resource);
    SampleOutputs outputs{context, dtypes_, std::vector<Tensor*>(dtypes_.size())};
    TfReverbSampleInfo info;
    char error[kErrorSize] = {0};
    int code =
        resource->api()->client_sample(resource->client(), table.c_str(), timeout_ms_, &info,
                                       &AllocateOutput, &SetString, &outputs, error, kErrorSize);
    OP_REQUIRES_OK(context, outputs.status);
    OP_REQUIRES_OK(context, CoreStatus(code, error));
    OP_REQUIRES(context, outputs.num_columns == static_cast<int32_t>(dtypes_.size()),
                tensorflow::errors::InvalidArgument("The sampled item of table '", table, "' has ",
                                                    outputs.num_columns, " columns but ",
                                                    dtypes_.size(), " dtypes were requested."));
    auto scalar = [context](int index, auto value) {
      Tensor* tensor;
      OP_REQUIRES_OK(context, context->allocate_output(index, TensorShape({}), &tensor));
      tensor->scalar<decltype(value)>()() = value;
    };
    scalar(0, static_cast<tensorflow::uint64>(info.key));
    scalar(1, info.probability);
    scalar(2, static_cast<int64_t>(info.table_size));
    scalar(3, info.priority);
    scalar(4, static_cast<int32_t>(info.times_sampled));
  }

 private:
  tensorflow::DataTypeVector dtypes_;
  int64_t timeout_ms_;
};

class ReverbClientInsertOp : public OpKernel {
 public:
  explicit ReverbClientInsertOp(OpKernelConstruction* context)
      : OpKernel(context),
        versioned_(context->def().op() == "ReverbClientInsertWithPolicyVersion") {}

  void Compute(OpKernelContext* context) override {
    ReverbClientResource* resource;
    OP_REQUIRES_OK(context, LookupResource(context, HandleFromInput(context, 0), &resource));
    tensorflow::core::ScopedUnref unref(resource);
    tensorflow::OpInputList data;
    OP_REQUIRES_OK(context, context->input_list("data", &data));
    const Tensor& tables = context->input(data.size() + 1);
    const Tensor& priorities = context->input(data.size() + 2);
    OP_REQUIRES(context,
                tables.dims() == 1 && priorities.dims() == 1 &&
                    tables.NumElements() == priorities.NumElements(),
                tensorflow::errors::InvalidArgument(
                    "tables and priorities must be rank-1 tensors of equal length, got ",
                    tables.shape().DebugString(), " and ", priorities.shape().DebugString()));

    int64_t policy_version = -1;  // the tables' current versions
    if (versioned_) {
      const Tensor& version = context->input(data.size() + 3);
      OP_REQUIRES(context,
                  tensorflow::TensorShapeUtils::IsScalar(version.shape()) &&
                      version.scalar<int64_t>()() >= 0,
                  tensorflow::errors::InvalidArgument("policy_version must be a scalar >= 0, got ",
                                                      version.DebugString()));
      policy_version = version.scalar<int64_t>()();
    }

    std::vector<const Tensor*> tensors;
    for (int i = 0; i < data.size(); ++i) tensors.push_back(&data[i]);
    const TensorViews views(tensors);
    std::vector<const char*> table_names;
    auto names = tables.flat<tensorflow::tstring>();
    for (int64_t i = 0; i < names.size(); ++i) table_names.push_back(names(i).c_str());
    char error[kErrorSize] = {0};
    int code = resource->api()->client_insert(resource->client(), views.data(), views.size(),
                                              table_names.data(), priorities.flat<double>().data(),
                                              static_cast<int32_t>(table_names.size()),
                                              policy_version, error, kErrorSize);
    OP_REQUIRES_OK(context, CoreStatus(code, error));
  }

 private:
  const bool versioned_;
};

class ReverbClientUpdatePrioritiesOp : public OpKernel {
 public:
  using OpKernel::OpKernel;

  void Compute(OpKernelContext* context) override {
    std::string table;
    OP_REQUIRES_OK(context, TableName(context, &table));
    ReverbClientResource* resource;
    OP_REQUIRES_OK(context, LookupResource(context, HandleFromInput(context, 0), &resource));
    tensorflow::core::ScopedUnref unref(resource);
    const Tensor& keys = context->input(2);
    const Tensor& priorities = context->input(3);
    OP_REQUIRES(context, keys.dims() == 1 && keys.shape() == priorities.shape(),
                tensorflow::errors::InvalidArgument(
                    "keys must be rank 1 and match priorities, got ", keys.shape().DebugString(),
                    " and ", priorities.shape().DebugString()));
    char error[kErrorSize] = {0};
    int code = resource->api()->client_update_priorities(
        resource->client(), table.c_str(),
        reinterpret_cast<const uint64_t*>(keys.flat<tensorflow::uint64>().data()),
        priorities.flat<double>().data(), keys.NumElements(), error, kErrorSize);
    OP_REQUIRES_OK(context, CoreStatus(code, error));
  }
};

REGISTER_KERNEL_BUILDER(Name("ReverbClient").Device(DEVICE_CPU), ReverbClientHandleOp);
REGISTER_KERNEL_BUILDER(Name("ReverbClientSample").Device(DEVICE_CPU), ReverbClientSampleOp);
REGISTER_KERNEL_BUILDER(Name("ReverbClientInsert").Device(DEVICE_CPU), ReverbClientInsertOp);
REGISTER_KERNEL_BUILDER(Name("ReverbClientInsertWithPolicyVersion").Device(DEVICE_CPU),
                        ReverbClientInsertOp);
REGISTER_KERNEL_BUILDER(Name("ReverbClientUpdatePriorities").Device(DEVICE_CPU),
                        ReverbClientUpdatePrioritiesOp);

}  // namespace
}  // namespace tf_reverb
