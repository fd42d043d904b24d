#include "server/tensor.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tf_reverb {

namespace tfp = ::tf_reverb::tf;

int64_t Tensor::num_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

absl::StatusOr<int64_t> DataTypeSize(DataType dtype) {
  switch (dtype) {
    case tfp::DT_BOOL:
    case tfp::DT_INT8:
    case tfp::DT_UINT8:
    case tfp::DT_QINT8:
    case tfp::DT_QUINT8:
      return 1;
    case tfp::DT_INT16:
    case tfp::DT_UINT16:
    case tfp::DT_HALF:
    case tfp::DT_BFLOAT16:
    case tfp::DT_QINT16:
    case tfp::DT_QUINT16:
      return 2;
    case tfp::DT_FLOAT:
    case tfp::DT_INT32:
    case tfp::DT_UINT32:
    case tfp::DT_QINT32:
      return 4;
    case tfp::DT_DOUBLE:
    case tfp::DT_INT64:
    case tfp::DT_UINT64:
    case tfp::DT_COMPLEX64:
      return 8;
    case tfp::DT_COMPLEX128:
      return 16;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("Tensor of dtype ", DataTypeName(dtype), " is not supported."));
  }
}

std::string DataTypeName(DataType dtype) {
  switch (dtype) {
    case tfp::DT_FLOAT:
      return "float";
    case tfp::DT_DOUBLE:
      return "double";
    case tfp::DT_INT32:
      return "int32";
    case tfp::DT_UINT8:
      return "uint8";
    case tfp::DT_INT16:
      return "int16";
    case tfp::DT_INT8:
      return "int8";
    case tfp::DT_STRING:
      return "string";
    case tfp::DT_COMPLEX64:
      return "complex64";
    case tfp::DT_INT64:
      return "int64";
    case tfp::DT_BOOL:
      return "bool";
    case tfp::DT_BFLOAT16:
      return "bfloat16";
    case tfp::DT_UINT16:
      return "uint16";
    case tfp::DT_COMPLEX128:
      return "complex128";
    case tfp::DT_HALF:
      return "half";
    case tfp::DT_UINT32:
      return "uint32";
    case tfp::DT_UINT64:
      return "uint64";
    default:
      return absl::StrCat("DataType(", static_cast<int>(dtype), ")");
  }
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[",
                      absl::StrJoin(shape, ",",
                                    [](std::string* out, int64_t d) {
                                      if (d < 0) {
                                        out->append("?");
                                      } else {
                                        absl::StrAppend(out, d);
                                      }
                                    }),
                      "]");
}

absl::Status ValidateTensor(const Tensor& tensor) {
  for (int64_t d : tensor.shape) {
    if (d < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("Negative dimension in shape ", ShapeString(tensor.shape)));
    }
  }
  if (tensor.dtype == tfp::DT_STRING) {
    if (static_cast<int64_t>(tensor.strings.size()) != tensor.num_elements()) {
      return absl::InvalidArgumentError(absl::StrCat("String tensor of shape ",
                                                     ShapeString(tensor.shape), " has ",
                                                     tensor.strings.size(), " elements"));
    }
    return absl::OkStatus();
  }
  absl::StatusOr<int64_t> size = DataTypeSize(tensor.dtype);
  if (!size.ok()) return size.status();
  if (static_cast<int64_t>(tensor.data.size()) != *size * tensor.num_elements()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Tensor of dtype ", DataTypeName(tensor.dtype), " and shape ", ShapeString(tensor.shape),
        " needs ", *size * tensor.num_elements(), " bytes but has ", tensor.data.size()));
  }
  return absl::OkStatus();
}

absl::StatusOr<Tensor> StackTensors(const std::vector<const Tensor*>& parts) {
  if (parts.empty()) return absl::InvalidArgumentError("Nothing to stack.");
  const Tensor& first = *parts.front();
  Tensor out;
  out.dtype = first.dtype;
  out.shape.push_back(static_cast<int64_t>(parts.size()));
  out.shape.insert(out.shape.end(), first.shape.begin(), first.shape.end());
  for (const Tensor* part : parts) {
    if (part->dtype != first.dtype || part->shape != first.shape) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Cannot stack tensors of different specs: ", DataTypeName(first.dtype),
          ShapeString(first.shape), " and ", DataTypeName(part->dtype), ShapeString(part->shape)));
    }
    if (first.dtype == tfp::DT_STRING) {
      out.strings.insert(out.strings.end(), part->strings.begin(), part->strings.end());
    } else {
      out.data.append(part->data);
    }
  }
  return out;
}

}  // namespace tf_reverb
