// Table signatures: the flat column specs of a serialized
// tensorflow.StructuredValue, and the check of an item's columns against
// them (docs/concepts/tables.md, docs/concepts/writers-and-patterns.md; issue 12 item 6).
//
// A signature is a nest of TensorSpecs encoded by TensorFlow's
// nested_structure_coder (or by tf_reverb/reverb_types.py without TF). Its
// columns are its leaves in dm-tree order: dict keys sorted, lists, tuples
// and namedtuples in order. BoundedTensorSpecs count as TensorSpecs (bounds
// are not checked, as in Reverb).
//
// Item rule (both the server and the C++ client apply it): an item matches
// when it has as many columns as the signature and each column has the
// signature's dtype and a shape compatible with the column spec; a column's
// shape is [rows, *step_shape], or step_shape when squeezed. An unsqueezed
// column is also accepted when its step_shape alone is compatible: the
// legacy Writer and Client.insert store [1, *step] items against
// step-shaped signatures, and dm-reverb's clients do the same.
//
// Contract: pure functions and plain values; thread-safe. Errors:
//  * ParseSignature: INVALID_ARGUMENT when the bytes are not a
//    StructuredValue or a spec has a malformed shape; UNIMPLEMENTED when the
//    nest is well-formed but has a leaf that is not a tensor spec (a
//    composite TypeSpec, None, a Python value), against which items cannot
//    be checked.
//  * CheckItemColumns: INVALID_ARGUMENT naming the table, the column (index
//    and dm-tree path) and both specs.
//  * CheckRequestedSpecs: INVALID_ARGUMENT in Reverb's words for datasets
//    (the number of tensors, or the first incompatible one, and the table
//    signature on a line of its own).
//
// This file holds the one copy of both rules: the table (server side), the
// C++ client's insert, the TrajectoryWriter (which words the item rule as
// Reverb's writer does, through FindItemMismatch) and the TensorFlow
// datasets (through the C ABI) all call it.
#ifndef TF_REVERB_SERVER_SIGNATURE_H_
#define TF_REVERB_SERVER_SIGNATURE_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/tensor.h"
#include "struct.pb.h"
#include "tensor.pb.h"

namespace tf_reverb {

// One column of a table signature.
struct SignatureSpec {
  // The leaf's dm-tree path in Python tuple syntax: "('obs', 0)"; "()" when
  // the signature is a single spec.
  std::string path;
  std::string name;  // the TensorSpec's name, often empty
  DataType dtype = ::tf_reverb::tf::DT_INVALID;
  // Dimensions with -1 for unknown ones; nullopt for an unknown rank.
  std::optional<std::vector<int64_t>> shape;
};

// The columns of a serialized StructuredValue in dm-tree order.
absl::StatusOr<std::vector<SignatureSpec>> ParseSignature(absl::string_view serialized);
// The same for a parsed one.
absl::StatusOr<std::vector<SignatureSpec>> FlattenSignature(
    const ::tf_reverb::tf::StructuredValue& signature);

// Whether a concrete `shape` is compatible with a spec's (partial) shape.
bool IsCompatibleShape(const std::optional<std::vector<int64_t>>& spec,
                       const std::vector<int64_t>& shape);

// "[?,3]" for a partial shape, "<unknown>" for an unknown rank.
std::string PartialShapeString(const std::optional<std::vector<int64_t>>& shape);
// "float[?,3]" (DataTypeName and PartialShapeString).
std::string SignatureSpecString(const SignatureSpec& spec);
// "[('a',): float[?,3], ('b',): int64[]]".
std::string SignatureString(const std::vector<SignatureSpec>& signature);

// Whether two serialized signatures are the same nest: equal bytes, or equal
// messages (dict entries serialize in an order that differs between
// processes, so equal signatures often have different bytes).
bool SameSignature(absl::string_view a, absl::string_view b);

// The dtype and shape of one column of an item as it would be sampled.
struct ItemColumn {
  DataType dtype = ::tf_reverb::tf::DT_INVALID;
  // [rows, *step_shape], or step_shape when squeezed.
  std::vector<int64_t> shape;
  bool squeeze = false;
};

// Where an item's columns first break the item rule.
struct ItemMismatch {
  // The item has another number of columns than the signature.
  bool column_count = false;
  // Otherwise: the first column that does not match its spec.
  size_t column = 0;
};

// The first break of the item rule by `columns`, nullopt when they match.
// `accept_step_shapes`: an unsqueezed column also matches when its
// step_shape alone is compatible (the rule above; the TrajectoryWriter asks
// for the exact rule).
std::optional<ItemMismatch> FindItemMismatch(const std::vector<SignatureSpec>& signature,
                                             const std::vector<ItemColumn>& columns,
                                             bool accept_step_shapes = true);

// Checks the columns of an item for `table` against its signature (see the
// item rule above).
absl::Status CheckItemColumns(absl::string_view table, const std::vector<SignatureSpec>& signature,
                              const std::vector<ItemColumn>& columns);

// Whether two partial shapes can describe the same tensor: either rank is
// unknown, or equal ranks whose known dimensions agree.
bool AreCompatibleShapes(const std::optional<std::vector<int64_t>>& a,
                         const std::optional<std::vector<int64_t>>& b);

// Checks the columns a dataset requests from `table` (their dtypes and
// partial shapes; paths and names are not compared) against its signature:
// as many, each of the signature's dtype with a compatible shape.
absl::Status CheckRequestedSpecs(absl::string_view table,
                                 const std::vector<SignatureSpec>& signature,
                                 const std::vector<SignatureSpec>& requested);

}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_SIGNATURE_H_
