// Fuzz target: table signature decoding (server/signature.h) of arbitrary
// bytes as a serialized tensorflow.StructuredValue (proto/struct.proto), and
// the Table's use of it.
//
// Properties: never crashes; errors are INVALID_ARGUMENT (not a
// StructuredValue, malformed shape) or UNIMPLEMENTED (a leaf that is not a
// tensor spec); a parsed signature survives a re-serialization unchanged and
// is the SameSignature as itself; an item built from the signature's own
// specs passes CheckItemColumns, one with a column too few or a wrong dtype
// does not; Table::Create accepts exactly the signatures that are not
// INVALID_ARGUMENT.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "server/fuzz/fuzz_check.h"
#include "server/fuzz/fuzz_tables.h"
#include "server/signature.h"
#include "server/table.h"
#include "server/tensor.h"
#include "struct.pb.h"
#include "tensor.pb.h"

namespace tf_reverb {
namespace {

namespace tfp = ::tf_reverb::tf;

// Concrete dimensions for a partial shape (unknown dimensions: 2).
std::vector<int64_t> Concrete(const std::optional<std::vector<int64_t>>& shape) {
  std::vector<int64_t> dims;
  if (!shape.has_value()) return dims;
  for (int64_t d : *shape) dims.push_back(d < 0 ? 2 : d);
  return dims;
}

bool SameSpecs(const std::vector<SignatureSpec>& a, const std::vector<SignatureSpec>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].path != b[i].path || a[i].name != b[i].name || a[i].dtype != b[i].dtype ||
        a[i].shape != b[i].shape) {
      return false;
    }
  }
  return true;
}

void CheckTableCreate(const std::string& bytes, const absl::Status& parsed) {
  absl::StatusOr<std::shared_ptr<Table>> table = fuzz::MakeFuzzTable("t", 10, bytes);
  const bool want_ok = bytes.empty() || !absl::IsInvalidArgument(parsed);
  FUZZ_CHECK(table.ok() == want_ok, absl::StrCat("Table::Create: ", table.status().ToString(),
                                                 "; ParseSignature: ", parsed.ToString()));
  if (table.ok()) FUZZ_CHECK((*table)->Info().signature() == bytes, "signature not kept");
}

}  // namespace
}  // namespace tf_reverb

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ::tf_reverb;  // NOLINT(build/namespaces): a fuzz entry point
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<std::vector<SignatureSpec>> specs = ParseSignature(bytes);
  FUZZ_CHECK(specs.ok() || absl::IsInvalidArgument(specs.status()) ||
                 absl::IsUnimplemented(specs.status()),
             specs.status().ToString());
  CheckTableCreate(bytes, specs.status());
  if (!specs.ok()) return 0;

  // Printing never fails, whatever the dtype numbers.
  (void)SignatureString(*specs);
  FUZZ_CHECK(SameSignature(bytes, bytes), "a signature differs from itself");

  // A re-serialized signature has the same columns.
  tfp::StructuredValue value;
  FUZZ_CHECK(value.ParseFromString(bytes), "ParseSignature accepted what does not parse");
  const std::string again = value.SerializeAsString();
  absl::StatusOr<std::vector<SignatureSpec>> reparsed = ParseSignature(again);
  FUZZ_CHECK_OK(reparsed.status());
  FUZZ_CHECK(SameSpecs(*specs, *reparsed), "re-serialized signature has other columns");
  FUZZ_CHECK(SameSignature(bytes, again), "re-serialized signature is not the same");

  // Items built from the specs match; broken ones do not.
  std::vector<ItemColumn> squeezed, batched;
  for (const SignatureSpec& spec : *specs) {
    FUZZ_CHECK(IsCompatibleShape(spec.shape, Concrete(spec.shape)), SignatureSpecString(spec));
    squeezed.push_back(ItemColumn{spec.dtype, Concrete(spec.shape), /*squeeze=*/true});
    std::vector<int64_t> rows = {3};
    for (int64_t d : Concrete(spec.shape)) rows.push_back(d);
    batched.push_back(ItemColumn{spec.dtype, rows, /*squeeze=*/false});
  }
  FUZZ_CHECK_OK(CheckItemColumns("t", *specs, squeezed));
  FUZZ_CHECK_OK(CheckItemColumns("t", *specs, batched));
  if (!specs->empty()) {
    std::vector<ItemColumn> fewer(squeezed.begin(), squeezed.end() - 1);
    FUZZ_CHECK(!CheckItemColumns("t", *specs, fewer).ok(), "a missing column passed");
    std::vector<ItemColumn> wrong = squeezed;
    wrong.back().dtype =
        static_cast<DataType>(wrong.back().dtype == tfp::DT_FLOAT ? tfp::DT_DOUBLE : tfp::DT_FLOAT);
    FUZZ_CHECK(!CheckItemColumns("t", *specs, wrong).ok(), "a wrong dtype passed");
  }
  return 0;
}
