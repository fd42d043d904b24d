// Tensors for the C++ tests: building small ones from values and reading
// their values back.
//
// Contract: plain functions on value types; thread-safe. Test-only.
#ifndef TF_REVERB_SERVER_TESTING_TENSOR_TESTING_H_
#define TF_REVERB_SERVER_TESTING_TENSOR_TESTING_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "server/tensor.h"
#include "tensor.pb.h"

namespace tf_reverb {
namespace tensor_testing {

// A numeric tensor of `dtype` and `shape` whose elements are `values`
// (C-order; sizeof(T) must be the dtype's size).
template <typename T>
Tensor FromValues(DataType dtype, std::vector<int64_t> shape, const std::vector<T>& values) {
  Tensor t;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.data.assign(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
  return t;
}

inline Tensor Int32Tensor(std::vector<int64_t> shape, const std::vector<int32_t>& values) {
  return FromValues(::tf_reverb::tf::DT_INT32, std::move(shape), values);
}
inline Tensor Int32Scalar(int32_t value) { return Int32Tensor({}, {value}); }
inline Tensor Int32Row(const std::vector<int32_t>& values) {
  return Int32Tensor({static_cast<int64_t>(values.size())}, values);
}
inline Tensor FloatScalar(float value) {
  return FromValues<float>(::tf_reverb::tf::DT_FLOAT, {}, {value});
}
inline Tensor StringTensor(std::vector<int64_t> shape, std::vector<std::string> values) {
  Tensor t;
  t.dtype = ::tf_reverb::tf::DT_STRING;
  t.shape = std::move(shape);
  t.strings = std::move(values);
  return t;
}
inline Tensor StringScalar(std::string value) { return StringTensor({}, {std::move(value)}); }

// The elements of a numeric tensor, read as T.
template <typename T>
std::vector<T> Values(const Tensor& t) {
  std::vector<T> out(t.data.size() / sizeof(T));
  std::memcpy(out.data(), t.data.data(), t.data.size());
  return out;
}

}  // namespace tensor_testing
}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_TESTING_TENSOR_TESTING_H_
