#include "server/signature.h"

#include <algorithm>
#include <cstddef>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/util/field_comparator.h"
#include "google/protobuf/util/message_differencer.h"
#include "tensor.pb.h"

namespace tf_reverb {
namespace {

namespace tfp = ::tf_reverb::tf;

// Python's repr of a str, in single quotes.
std::string PythonStringRepr(absl::string_view text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\\' || c == '\'') out += '\\';
    out += c;
  }
  return out + "'";
}

// Python's repr of a path tuple.
std::string PathString(const std::vector<std::string>& path) {
  if (path.size() == 1) return absl::StrCat("(", path[0], ",)");
  return absl::StrCat("(", absl::StrJoin(path, ", "), ")");
}

absl::StatusOr<std::optional<std::vector<int64_t>>> SpecShape(
    const tfp::TensorShapeProto& proto, const std::vector<std::string>& path) {
  if (proto.unknown_rank()) return std::optional<std::vector<int64_t>>();
  std::vector<int64_t> dims;
  dims.reserve(proto.dim_size());
  for (const auto& dim : proto.dim()) {
    if (dim.size() < -1) {
      return absl::InvalidArgumentError(
          absl::StrCat("The table signature's spec at ", PathString(path), " has dimension ",
                       dim.size(), "; dimensions are >= 0, or -1 for unknown."));
    }
    dims.push_back(dim.size());
  }
  return std::optional<std::vector<int64_t>>(std::move(dims));
}

absl::Status AddSpec(const std::string& name, const tfp::TensorShapeProto& shape,
                     tfp::DataType dtype, const std::vector<std::string>& path,
                     std::vector<SignatureSpec>* out) {
  absl::StatusOr<std::optional<std::vector<int64_t>>> dims = SpecShape(shape, path);
  if (!dims.ok()) return dims.status();
  SignatureSpec spec;
  spec.path = PathString(path);
  spec.name = name;
  spec.dtype = dtype;
  spec.shape = *std::move(dims);
  out->push_back(std::move(spec));
  return absl::OkStatus();
}

const char* KindName(tfp::StructuredValue::KindCase kind) {
  using Kind = tfp::StructuredValue;
  switch (kind) {
    case Kind::kNoneValue:
      return "None";
    case Kind::kFloat64Value:
      return "a float";
    case Kind::kInt64Value:
      return "an int";
    case Kind::kStringValue:
      return "a str";
    case Kind::kBoolValue:
      return "a bool";
    case Kind::kTensorShapeValue:
      return "a TensorShape";
    case Kind::kTensorDtypeValue:
      return "a DType";
    case Kind::kTypeSpecValue:
      return "a composite TypeSpec";
    case Kind::kTensorValue:
      return "a tensor";
    case Kind::kNumpyValue:
      return "a numpy array";
    case Kind::KIND_NOT_SET:
      return "an empty value";
    default:
      return "an unknown value";
  }
}

// Nests deeper than this are rejected (a malicious signature must not
// overflow the stack; protobuf's parser already stops at 100 levels).
constexpr int kMaxDepth = 100;

absl::Status Flatten(const tfp::StructuredValue& value, std::vector<std::string>* path,
                     std::vector<SignatureSpec>* out) {
  using Kind = tfp::StructuredValue;
  if (static_cast<int>(path->size()) > kMaxDepth) {
    return absl::InvalidArgumentError("The table signature is nested too deeply.");
  }
  auto nested = [&](std::string element, const tfp::StructuredValue& child) {
    path->push_back(std::move(element));
    absl::Status status = Flatten(child, path, out);
    path->pop_back();
    return status;
  };
  switch (value.kind_case()) {
    case Kind::kTensorSpecValue: {
      const auto& spec = value.tensor_spec_value();
      return AddSpec(spec.name(), spec.shape(), spec.dtype(), *path, out);
    }
    case Kind::kBoundedTensorSpecValue: {
      const auto& spec = value.bounded_tensor_spec_value();
      return AddSpec(spec.name(), spec.shape(), spec.dtype(), *path, out);
    }
    case Kind::kListValue:
    case Kind::kTupleValue: {
      const auto& values = value.kind_case() == Kind::kListValue ? value.list_value().values()
                                                                 : value.tuple_value().values();
      for (int i = 0; i < values.size(); ++i) {
        if (absl::Status s = nested(absl::StrCat(i), values[i]); !s.ok()) return s;
      }
      return absl::OkStatus();
    }
    case Kind::kNamedTupleValue:
      for (const auto& pair : value.named_tuple_value().values()) {
        if (absl::Status s = nested(PythonStringRepr(pair.key()), pair.value()); !s.ok()) {
          return s;
        }
      }
      return absl::OkStatus();
    case Kind::kDictValue: {
      std::vector<const std::string*> keys;
      keys.reserve(value.dict_value().fields_size());
      for (const auto& entry : value.dict_value().fields()) keys.push_back(&entry.first);
      std::sort(keys.begin(), keys.end(),
                [](const std::string* a, const std::string* b) { return *a < *b; });
      for (const std::string* key : keys) {
        if (absl::Status s = nested(PythonStringRepr(*key), value.dict_value().fields().at(*key));
            !s.ok()) {
          return s;
        }
      }
      return absl::OkStatus();
    }
    default:
      return absl::UnimplementedError(absl::StrCat(
          "The table signature has ", KindName(value.kind_case()), " at ", PathString(*path),
          " where tf_reverb expects a TensorSpec; items cannot be checked against it."));
  }
}

}  // namespace

absl::StatusOr<std::vector<SignatureSpec>> ParseSignature(absl::string_view serialized) {
  tfp::StructuredValue value;
  if (!value.ParseFromArray(serialized.data(), static_cast<int>(serialized.size()))) {
    return absl::InvalidArgumentError(
        "The table signature is not a serialized tensorflow.StructuredValue.");
  }
  return FlattenSignature(value);
}

absl::StatusOr<std::vector<SignatureSpec>> FlattenSignature(const tfp::StructuredValue& signature) {
  std::vector<SignatureSpec> columns;
  std::vector<std::string> path;
  if (absl::Status s = Flatten(signature, &path, &columns); !s.ok()) return s;
  return columns;
}

bool SameSignature(absl::string_view a, absl::string_view b) {
  if (a == b) return true;
  if (a.empty() || b.empty()) return false;
  tfp::StructuredValue first, second;
  if (!first.ParseFromArray(a.data(), static_cast<int>(a.size())) ||
      !second.ParseFromArray(b.data(), static_cast<int>(b.size()))) {
    return false;
  }
  // A bound of NaN (BoundedTensorSpec) equals itself: the same signature,
  // whichever NaN bits a serializer wrote.
  google::protobuf::util::DefaultFieldComparator comparator;
  comparator.set_treat_nan_as_equal(true);
  google::protobuf::util::MessageDifferencer differencer;
  differencer.set_field_comparator(&comparator);
  return differencer.Compare(first, second);
}

bool IsCompatibleShape(const std::optional<std::vector<int64_t>>& spec,
                       const std::vector<int64_t>& shape) {
  if (!spec.has_value()) return true;
  if (spec->size() != shape.size()) return false;
  for (size_t i = 0; i < shape.size(); ++i) {
    if ((*spec)[i] >= 0 && (*spec)[i] != shape[i]) return false;
  }
  return true;
}

std::string PartialShapeString(const std::optional<std::vector<int64_t>>& shape) {
  return shape.has_value() ? ShapeString(*shape) : "<unknown>";
}

std::string SignatureSpecString(const SignatureSpec& spec) {
  return absl::StrCat(DataTypeName(spec.dtype), PartialShapeString(spec.shape));
}

std::string SignatureString(const std::vector<SignatureSpec>& signature) {
  std::vector<std::string> parts;
  parts.reserve(signature.size());
  for (const SignatureSpec& spec : signature) {
    parts.push_back(absl::StrCat(spec.path, ": ", SignatureSpecString(spec)));
  }
  return absl::StrCat("[", absl::StrJoin(parts, ", "), "]");
}

std::optional<ItemMismatch> FindItemMismatch(const std::vector<SignatureSpec>& signature,
                                             const std::vector<ItemColumn>& columns,
                                             bool accept_step_shapes) {
  if (columns.size() != signature.size()) return ItemMismatch{true, 0};
  for (size_t c = 0; c < columns.size(); ++c) {
    const ItemColumn& column = columns[c];
    const SignatureSpec& spec = signature[c];
    if (column.dtype != spec.dtype) return ItemMismatch{false, c};
    if (IsCompatibleShape(spec.shape, column.shape)) continue;
    if (accept_step_shapes && !column.squeeze && !column.shape.empty() &&
        IsCompatibleShape(spec.shape,
                          std::vector<int64_t>(column.shape.begin() + 1, column.shape.end()))) {
      continue;
    }
    return ItemMismatch{false, c};
  }
  return std::nullopt;
}

absl::Status CheckItemColumns(absl::string_view table, const std::vector<SignatureSpec>& signature,
                              const std::vector<ItemColumn>& columns) {
  const std::optional<ItemMismatch> mismatch = FindItemMismatch(signature, columns);
  if (!mismatch.has_value()) return absl::OkStatus();
  if (mismatch->column_count) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Item of table '", table, "' is inconsistent with the table signature: the item has ",
        columns.size(), " columns but the signature has ", signature.size(),
        ". Table signature: ", SignatureString(signature), "."));
  }
  const ItemColumn& column = columns[mismatch->column];
  const SignatureSpec& spec = signature[mismatch->column];
  return absl::InvalidArgumentError(
      absl::StrCat("Item of table '", table, "' is inconsistent with the table signature: column ",
                   mismatch->column, " ", spec.path,
                   spec.name.empty() ? "" : absl::StrCat(" (name '", spec.name, "')"), " is ",
                   SignatureSpecString(spec), " in the signature but the item provides ",
                   DataTypeName(column.dtype), PartialShapeString(column.shape), "."));
}

bool AreCompatibleShapes(const std::optional<std::vector<int64_t>>& a,
                         const std::optional<std::vector<int64_t>>& b) {
  if (!a.has_value() || !b.has_value()) return true;
  if (a->size() != b->size()) return false;
  for (size_t i = 0; i < a->size(); ++i) {
    if ((*a)[i] >= 0 && (*b)[i] >= 0 && (*a)[i] != (*b)[i]) return false;
  }
  return true;
}

namespace {

// "(float, [?,3])", as TensorFlow prints a dtype and a partial shape.
std::string DtypeShapeString(const SignatureSpec& spec) {
  return absl::StrCat("(", DataTypeName(spec.dtype), ", ", PartialShapeString(spec.shape), ")");
}

// "[(float, [?,3]), (int64, [])]".
std::string DtypeShapeListString(const std::vector<SignatureSpec>& specs) {
  std::vector<std::string> parts;
  parts.reserve(specs.size());
  for (const SignatureSpec& spec : specs) parts.push_back(DtypeShapeString(spec));
  return absl::StrCat("[", absl::StrJoin(parts, ", "), "]");
}

}  // namespace

absl::Status CheckRequestedSpecs(absl::string_view table,
                                 const std::vector<SignatureSpec>& signature,
                                 const std::vector<SignatureSpec>& requested) {
  if (requested.size() != signature.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Inconsistent number of tensors requested from table '", table, "'.  Requested ",
        requested.size(), " tensors, but table signature shows ", signature.size(),
        " tensors.\nTable signature: ", DtypeShapeListString(signature)));
  }
  for (size_t i = 0; i < signature.size(); ++i) {
    if (requested[i].dtype != signature[i].dtype ||
        !AreCompatibleShapes(requested[i].shape, signature[i].shape)) {
      return absl::InvalidArgumentError(
          absl::StrCat("Requested incompatible tensor at flattened index ", i, " from table '",
                       table, "'.  Requested (dtype, shape): ", DtypeShapeString(requested[i]),
                       ".  Signature (dtype, shape): ", DtypeShapeString(signature[i]),
                       ".\nTable signature: ", DtypeShapeListString(signature)));
    }
  }
  return absl::OkStatus();
}

}  // namespace tf_reverb
