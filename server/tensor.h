// Tensor: the core's TensorFlow-free tensor, (dtype, shape, bytes).
//
// Dtypes use TensorFlow's DataType numbering so they travel unchanged on the
// wire. Numeric data is little-endian, C-order, in `data`; DT_STRING tensors
// keep one std::string per element in `strings` instead.
//
// Contract: a plain value type; not synchronised. Errors: the helpers return
// INVALID_ARGUMENT for unsupported dtypes (DT_RESOURCE, DT_VARIANT, ...) or
// byte counts that do not match the shape.
#ifndef TF_REVERB_SERVER_TENSOR_H_
#define TF_REVERB_SERVER_TENSOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tensor.pb.h"

namespace tf_reverb {

using DataType = ::tf_reverb::tf::DataType;

struct Tensor {
  DataType dtype = ::tf_reverb::tf::DT_INVALID;
  std::vector<int64_t> shape;
  std::string data;                  // numeric dtypes
  std::vector<std::string> strings;  // DT_STRING

  int64_t num_elements() const;
  // Rows along axis 0 (1 for scalars).
  int64_t num_rows() const { return shape.empty() ? 1 : shape[0]; }
};

// Size in bytes of one element; INVALID_ARGUMENT for DT_STRING and dtypes the
// core does not store.
absl::StatusOr<int64_t> DataTypeSize(DataType dtype);

// "float", "double", "int64", "string", ... (TensorFlow's names, as Reverb's
// error messages print them).
std::string DataTypeName(DataType dtype);

// "[2,3]"; negative (unknown) dimensions print as "?" ("[?,3]"), as
// TensorFlow prints shapes.
std::string ShapeString(const std::vector<int64_t>& shape);

// Checks that the payload matches dtype and shape.
absl::Status ValidateTensor(const Tensor& tensor);

// Stacks same-dtype, same-shape tensors along a new axis 0.
absl::StatusOr<Tensor> StackTensors(const std::vector<const Tensor*>& parts);

}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_TENSOR_H_
