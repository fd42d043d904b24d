// Graph-mode StructuredWriter (tf_reverb.TFStructuredWriter): a resource
// holding the core's StructuredWriter (server/patterns/structured_writer.h)
// and the ops that append steps, flush and end episodes, so actor loops in
// tf.function write N-step items with no Python per step.
//
// Ops: ReverbStructuredWriter (resource; one writer, one insert stream, per
// op instance / shared_name), ReverbStructuredWriterAppend,
// ReverbStructuredWriterFlush, ReverbStructuredWriterEndEpisode. Errors are
// the writer's: INVALID_ARGUMENT for invalid configs and bad steps,
// DEADLINE_EXCEEDED for flush / end_episode timeouts.
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "server/c_api/c_api.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/resource_mgr.h"
#include "tensorflow/core/framework/resource_op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"
#include "tensorflow/core/framework/tensor.h"
#include "tf_reverb/kernels/core_api.h"
#include "tf_reverb/kernels/tensor_views.h"

namespace tf_reverb {
namespace {

using ::tensorflow::OpKernel;
using ::tensorflow::OpKernelConstruction;
using ::tensorflow::OpKernelContext;
using ::tensorflow::Status;
using ::tensorflow::Tensor;

REGISTER_OP("ReverbStructuredWriter")
    .Output("handle: resource")
    .Attr("server_address: string")
    .Attr("configs: list(string) >= 1")
    .Attr("container: string = ''")
    .Attr("shared_name: string = ''")
    .SetIsStateful()
    .SetShapeFn(tensorflow::shape_inference::ScalarShape)
    .Doc(
        "A StructuredWriter (serialized StructuredWriterConfigs `configs`) "
        "writing to the Reverb server at `server_address`.");

REGISTER_OP("ReverbStructuredWriterAppend")
    .Input("handle: resource")
    .Input("data: T")
    .Attr("T: list(type) >= 1")
    .SetIsStateful()
    .SetShapeFn(tensorflow::shape_inference::NoOutputs)
    .Doc(
        "Appends the flattened step `data` (every leaf present) and creates "
        "the items of the configs that apply.");

REGISTER_OP("ReverbStructuredWriterFlush")
    .Input("handle: resource")
    .Attr("block_until_num_items: int = 0")
    .Attr("timeout_ms: int = -1")
    .SetIsStateful()
    .SetShapeFn(tensorflow::shape_inference::NoOutputs)
    .Doc("Waits until at most block_until_num_items items are unconfirmed.");

REGISTER_OP("ReverbStructuredWriterEndEpisode")
    .Input("handle: resource")
    .Attr("clear_buffers: bool = true")
    .Attr("timeout_ms: int = -1")
    .SetIsStateful()
    .SetShapeFn(tensorflow::shape_inference::NoOutputs)
    .Doc("Creates the end-of-episode items, flushes and starts a new episode.");

// The resource: one core client and one StructuredWriter over it.
class StructuredWriterResource : public tensorflow::ResourceBase {
 public:
  StructuredWriterResource(const CoreApi* api, std::string server_address,
                           TfReverbStructuredWriter* writer)
      : api_(api), server_address_(std::move(server_address)), writer_(writer) {}
  ~StructuredWriterResource() override { api_->structured_writer_free(writer_); }

  std::string DebugString() const override {
    return "ReverbStructuredWriter(" + server_address_ + ")";
  }
  const CoreApi* api() const { return api_; }
  TfReverbStructuredWriter* writer() const { return writer_; }

 private:
  const CoreApi* const api_;
  const std::string server_address_;
  TfReverbStructuredWriter* const writer_;
};

class StructuredWriterHandleOp : public tensorflow::ResourceOpKernel<StructuredWriterResource> {
 public:
  explicit StructuredWriterHandleOp(OpKernelConstruction* context) : ResourceOpKernel(context) {
    OP_REQUIRES_OK(context, context->GetAttr("server_address", &server_address_));
    OP_REQUIRES_OK(context, context->GetAttr("configs", &configs_));
  }

 private:
  Status CreateResource(StructuredWriterResource** resource) override {
    auto api = CoreApi::Get();
    if (!api.ok()) return api.status();
    std::vector<const char*> data;
    std::vector<size_t> sizes;
    for (const std::string& config : configs_) {
      data.push_back(config.data());
      sizes.push_back(config.size());
    }
    TfReverbClient* client = (*api)->client_new(server_address_.c_str());
    char error[kErrorSize] = {0};
    TfReverbStructuredWriter* writer = (*api)->structured_writer_new(
        client, data.data(), sizes.data(), static_cast<int32_t>(data.size()), error, kErrorSize);
    (*api)->client_free(client);
    if (writer == nullptr) return tensorflow::errors::InvalidArgument(error);
    *resource = new StructuredWriterResource(*api, server_address_, writer);
    return Status();
  }

  std::string server_address_;
  std::vector<std::string> configs_;
};

// Looks up the writer resource of input 0 and runs `call` on it.
template <typename Call>
void WithWriter(OpKernelContext* context, Call call) {
  StructuredWriterResource* resource;
  OP_REQUIRES_OK(context, LookupResource(context, HandleFromInput(context, 0), &resource));
  tensorflow::core::ScopedUnref unref(resource);
  char error[kErrorSize] = {0};
  const int code = call(*resource, error);
  OP_REQUIRES_OK(context, CoreStatus(code, error));
}

class StructuredWriterAppendOp : public OpKernel {
 public:
  using OpKernel::OpKernel;

  void Compute(OpKernelContext* context) override {
    tensorflow::OpInputList data;
    OP_REQUIRES_OK(context, context->input_list("data", &data));
    std::vector<const Tensor*> tensors;
    for (int i = 0; i < data.size(); ++i) tensors.push_back(&data[i]);
    const TensorViews views(tensors);
    WithWriter(context, [&](StructuredWriterResource& resource, char* error) {
      return resource.api()->structured_writer_append(resource.writer(), views.data(), views.size(),
                                                      /*partial=*/0, error, kErrorSize);
    });
  }
};

class StructuredWriterFlushOp : public OpKernel {
 public:
  explicit StructuredWriterFlushOp(OpKernelConstruction* context) : OpKernel(context) {
    OP_REQUIRES_OK(context, context->GetAttr("block_until_num_items", &block_until_num_items_));
    OP_REQUIRES_OK(context, context->GetAttr("timeout_ms", &timeout_ms_));
    OP_REQUIRES(context, block_until_num_items_ >= 0,
                tensorflow::errors::InvalidArgument("block_until_num_items must be >= 0, got ",
                                                    block_until_num_items_));
  }

  void Compute(OpKernelContext* context) override {
    WithWriter(context, [&](StructuredWriterResource& resource, char* error) {
      return resource.api()->structured_writer_flush(resource.writer(), block_until_num_items_,
                                                     timeout_ms_, error, kErrorSize);
    });
  }

 private:
  int block_until_num_items_ = 0;
  int64_t timeout_ms_ = -1;
};

class StructuredWriterEndEpisodeOp : public OpKernel {
 public:
  explicit StructuredWriterEndEpisodeOp(OpKernelConstruction* context) : OpKernel(context) {
    OP_REQUIRES_OK(context, context->GetAttr("clear_buffers", &clear_buffers_));
    OP_REQUIRES_OK(context, context->GetAttr("timeout_ms", &timeout_ms_));
  }

  void Compute(OpKernelContext* context) override {
    WithWriter(context, [&](StructuredWriterResource& resource, char* error) {
      return resource.api()->structured_writer_end_episode(
          resource.writer(), clear_buffers_ ? 1 : 0, timeout_ms_, error, kErrorSize);
    });
  }

 private:
  bool clear_buffers_ = true;
  int64_t timeout_ms_ = -1;
};

REGISTER_KERNEL_BUILDER(Name("ReverbStructuredWriter").Device(tensorflow::DEVICE_CPU),
                        StructuredWriterHandleOp);
REGISTER_KERNEL_BUILDER(Name("ReverbStructuredWriterAppend").Device(tensorflow::DEVICE_CPU),
                        StructuredWriterAppendOp);
REGISTER_KERNEL_BUILDER(Name("ReverbStructuredWriterFlush").Device(tensorflow::DEVICE_CPU),
                        StructuredWriterFlushOp);
REGISTER_KERNEL_BUILDER(Name("ReverbStructuredWriterEndEpisode").Device(tensorflow::DEVICE_CPU),
                        StructuredWriterEndEpisodeOp);

}  // namespace
}  // namespace tf_reverb
