#include "server/signature.h"

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/tensor.h"
#include "struct.pb.h"
#include "tensor.pb.h"

namespace tf_reverb {
namespace {

namespace tfp = ::tf_reverb::tf;
using ::testing::HasSubstr;

tfp::StructuredValue Spec(tfp::DataType dtype, std::vector<int64_t> dims,
                          const std::string& name = "") {
  tfp::StructuredValue value;
  auto* spec = value.mutable_tensor_spec_value();
  spec->set_dtype(dtype);
  spec->set_name(name);
  auto* shape = spec->mutable_shape();
  for (int64_t d : dims) shape->add_dim()->set_size(d);
  return value;
}

tfp::StructuredValue UnknownRankSpec(tfp::DataType dtype) {
  tfp::StructuredValue value;
  value.mutable_tensor_spec_value()->set_dtype(dtype);
  value.mutable_tensor_spec_value()->mutable_shape()->set_unknown_rank(true);
  return value;
}

std::vector<std::string> Paths(const std::vector<SignatureSpec>& columns) {
  std::vector<std::string> paths;
  for (const SignatureSpec& column : columns) paths.push_back(column.path);
  return paths;
}

TEST(ParseSignatureTest, LoneSpecIsOneColumnWithTheEmptyPath) {
  absl::StatusOr<std::vector<SignatureSpec>> columns =
      ParseSignature(Spec(tfp::DT_FLOAT, {-1, 3}, "obs").SerializeAsString());
  ASSERT_TRUE(columns.ok()) << columns.status();
  ASSERT_EQ(columns->size(), 1);
  EXPECT_EQ((*columns)[0].path, "()");
  EXPECT_EQ((*columns)[0].name, "obs");
  EXPECT_EQ((*columns)[0].dtype, tfp::DT_FLOAT);
  EXPECT_EQ((*columns)[0].shape, (std::vector<int64_t>{-1, 3}));
}

TEST(ParseSignatureTest, FlattensInDmTreeOrder) {
  // {'z': [int32[], (int64[2], uint8[])], 'a': Point(y=float[], x=bool[]),
  //  'm': {'b': double[], 'a': string[]}}
  tfp::StructuredValue root;
  auto& fields = *root.mutable_dict_value()->mutable_fields();
  auto* list = fields["z"].mutable_list_value();
  *list->add_values() = Spec(tfp::DT_INT32, {});
  auto* tuple = list->add_values()->mutable_tuple_value();
  *tuple->add_values() = Spec(tfp::DT_INT64, {2});
  *tuple->add_values() = Spec(tfp::DT_UINT8, {});
  auto* point = fields["a"].mutable_named_tuple_value();
  point->set_name("Point");
  auto* y = point->add_values();
  y->set_key("y");
  *y->mutable_value() = Spec(tfp::DT_FLOAT, {});
  auto* x = point->add_values();
  x->set_key("x");
  *x->mutable_value() = Spec(tfp::DT_BOOL, {});
  auto& inner = *fields["m"].mutable_dict_value()->mutable_fields();
  inner["b"] = Spec(tfp::DT_DOUBLE, {});
  inner["a"] = Spec(tfp::DT_STRING, {});

  absl::StatusOr<std::vector<SignatureSpec>> columns = ParseSignature(root.SerializeAsString());
  ASSERT_TRUE(columns.ok()) << columns.status();
  // Dict keys sorted; namedtuple fields in field order, not sorted.
  EXPECT_EQ(Paths(*columns),
            (std::vector<std::string>{"('a', 'y')", "('a', 'x')", "('m', 'a')", "('m', 'b')",
                                      "('z', 0)", "('z', 1, 0)", "('z', 1, 1)"}));
  std::vector<tfp::DataType> dtypes;
  for (const SignatureSpec& column : *columns) dtypes.push_back(column.dtype);
  EXPECT_EQ(dtypes,
            (std::vector<tfp::DataType>{tfp::DT_FLOAT, tfp::DT_BOOL, tfp::DT_STRING, tfp::DT_DOUBLE,
                                        tfp::DT_INT32, tfp::DT_INT64, tfp::DT_UINT8}));
  EXPECT_EQ((*columns)[5].shape, (std::vector<int64_t>{2}));
}

TEST(ParseSignatureTest, SingleKeyPathsAreOneTuples) {
  tfp::StructuredValue root;
  (*root.mutable_dict_value()->mutable_fields())["it's"] = Spec(tfp::DT_INT32, {});
  absl::StatusOr<std::vector<SignatureSpec>> columns = ParseSignature(root.SerializeAsString());
  ASSERT_TRUE(columns.ok()) << columns.status();
  EXPECT_EQ((*columns)[0].path, "('it\\'s',)");
}

TEST(ParseSignatureTest, UnknownRankAndBoundedSpecs) {
  tfp::StructuredValue root;
  auto* list = root.mutable_list_value();
  *list->add_values() = UnknownRankSpec(tfp::DT_INT64);
  auto* bounded = list->add_values()->mutable_bounded_tensor_spec_value();
  bounded->set_dtype(tfp::DT_INT32);
  bounded->set_name("action");
  bounded->mutable_shape()->add_dim()->set_size(4);
  absl::StatusOr<std::vector<SignatureSpec>> columns = ParseSignature(root.SerializeAsString());
  ASSERT_TRUE(columns.ok()) << columns.status();
  ASSERT_EQ(columns->size(), 2);
  EXPECT_FALSE((*columns)[0].shape.has_value());
  EXPECT_EQ(SignatureSpecString((*columns)[0]), DataTypeName(tfp::DT_INT64) + "<unknown>");
  EXPECT_EQ((*columns)[1].name, "action");
  EXPECT_EQ((*columns)[1].shape, (std::vector<int64_t>{4}));
}

TEST(ParseSignatureTest, EmptyContainersHaveNoColumns) {
  tfp::StructuredValue root;
  root.mutable_dict_value();
  absl::StatusOr<std::vector<SignatureSpec>> columns = ParseSignature(root.SerializeAsString());
  ASSERT_TRUE(columns.ok()) << columns.status();
  EXPECT_TRUE(columns->empty());
}

TEST(ParseSignatureTest, UnreadableBytesAreInvalidArgument) {
  absl::StatusOr<std::vector<SignatureSpec>> columns = ParseSignature("\xff\xff\xff");
  EXPECT_TRUE(absl::IsInvalidArgument(columns.status())) << columns.status();
  EXPECT_THAT(columns.status().message(), HasSubstr("not a serialized"));
}

TEST(ParseSignatureTest, MalformedDimensionIsInvalidArgument) {
  tfp::StructuredValue root;
  *root.mutable_tuple_value()->add_values() = Spec(tfp::DT_FLOAT, {3, -7});
  absl::StatusOr<std::vector<SignatureSpec>> columns = ParseSignature(root.SerializeAsString());
  EXPECT_TRUE(absl::IsInvalidArgument(columns.status())) << columns.status();
  EXPECT_THAT(columns.status().message(), HasSubstr("(0,)"));
  EXPECT_THAT(columns.status().message(), HasSubstr("-7"));
}

TEST(ParseSignatureTest, NonSpecLeavesAreUnimplemented) {
  tfp::StructuredValue root;
  auto& fields = *root.mutable_dict_value()->mutable_fields();
  fields["a"] = Spec(tfp::DT_FLOAT, {});
  fields["ragged"].mutable_type_spec_value()->set_type_spec_class(3);
  absl::StatusOr<std::vector<SignatureSpec>> columns = ParseSignature(root.SerializeAsString());
  EXPECT_TRUE(absl::IsUnimplemented(columns.status())) << columns.status();
  EXPECT_THAT(columns.status().message(), HasSubstr("TypeSpec at ('ragged',)"));

  tfp::StructuredValue none;
  none.mutable_none_value();
  EXPECT_TRUE(absl::IsUnimplemented(ParseSignature(none.SerializeAsString()).status()));
}

TEST(SameSignatureTest, NanBoundsAreEqual) {
  // Found by signature_fuzzer: a bounded spec whose maximum is NaN differed
  // from its own re-serialization.
  auto bounded = [](uint32_t nan_bits) {
    tfp::StructuredValue value;
    auto* spec = value.mutable_bounded_tensor_spec_value();
    spec->set_dtype(tfp::DT_FLOAT);
    float nan;
    std::memcpy(&nan, &nan_bits, sizeof(nan));
    spec->mutable_maximum()->add_float_val(nan);
    return value.SerializeAsString();
  };
  const std::string quiet = bounded(0x7fc00000u), payload = bounded(0x7fc00001u);
  ASSERT_NE(quiet, payload);
  EXPECT_TRUE(SameSignature(quiet, payload));
  EXPECT_FALSE(SameSignature(quiet, bounded(0x3f800000u)));  // 1.0f
}

TEST(SameSignatureTest, ComparesNestsNotBytes) {
  tfp::StructuredValue a;
  auto& fields = *a.mutable_dict_value()->mutable_fields();
  for (const char* key : {"a", "b", "c", "d", "e", "f"}) fields[key] = Spec(tfp::DT_FLOAT, {1});
  // The same dict serialized with its entries in another order.
  std::string forward, backward;
  for (const char* key : {"a", "b", "c", "d", "e", "f"}) {
    // A map entry: key = 1, value = 2 (all lengths here are < 128).
    const std::string value = fields[key].SerializeAsString();
    const std::string entry =
        std::string("\x0a\x01") + key + "\x12" + static_cast<char>(value.size()) + value;
    const std::string field = std::string("\x0a") + static_cast<char>(entry.size()) + entry;
    forward += field;
    backward = field + backward;
  }
  auto wrap = [](const std::string& dict) {
    // StructuredValue.dict_value is field 53 (tag 0x1aa 0x03).
    return std::string("\xaa\x03") + static_cast<char>(dict.size()) + dict;
  };
  ASSERT_NE(wrap(forward), wrap(backward));
  EXPECT_TRUE(SameSignature(wrap(forward), wrap(backward)));
  EXPECT_TRUE(SameSignature(wrap(forward), a.SerializeAsString()));
  fields["f"] = Spec(tfp::DT_INT32, {1});
  EXPECT_FALSE(SameSignature(wrap(forward), a.SerializeAsString()));
  EXPECT_FALSE(SameSignature("", a.SerializeAsString()));
  EXPECT_TRUE(SameSignature("", ""));
}

TEST(IsCompatibleShapeTest, UnknownDimsAndRank) {
  EXPECT_TRUE(IsCompatibleShape(std::nullopt, {1, 2, 3}));
  EXPECT_TRUE(IsCompatibleShape(std::vector<int64_t>{-1, 3}, {7, 3}));
  EXPECT_FALSE(IsCompatibleShape(std::vector<int64_t>{-1, 3}, {7, 4}));
  EXPECT_FALSE(IsCompatibleShape(std::vector<int64_t>{-1, 3}, {3}));
  EXPECT_TRUE(IsCompatibleShape(std::vector<int64_t>{}, {}));
  EXPECT_FALSE(IsCompatibleShape(std::vector<int64_t>{}, {1}));
}

std::vector<SignatureSpec> ObsAndReward() {
  tfp::StructuredValue root;
  auto& fields = *root.mutable_dict_value()->mutable_fields();
  fields["obs"] = Spec(tfp::DT_FLOAT, {-1, 3}, "obs");
  fields["reward"] = Spec(tfp::DT_FLOAT, {});
  return *ParseSignature(root.SerializeAsString());
}

TEST(CheckItemColumnsTest, AcceptsCompatibleColumns) {
  // Trajectory-shaped obs, squeezed reward.
  EXPECT_TRUE(CheckItemColumns("t", ObsAndReward(),
                               {{tfp::DT_FLOAT, {5, 3}, false}, {tfp::DT_FLOAT, {}, true}})
                  .ok());
}

TEST(CheckItemColumnsTest, AcceptsStepShapesOfUnsqueezedColumns) {
  // Client.insert / legacy Writer: [1, *step] against a step-shaped spec.
  EXPECT_TRUE(CheckItemColumns("t", ObsAndReward(),
                               {{tfp::DT_FLOAT, {1, 2, 3}, false}, {tfp::DT_FLOAT, {1}, false}})
                  .ok());
  EXPECT_TRUE(CheckItemColumns("t", ObsAndReward(),
                               {{tfp::DT_FLOAT, {4, 2, 3}, false}, {tfp::DT_FLOAT, {4}, false}})
                  .ok());
}

TEST(CheckItemColumnsTest, RejectsWrongColumnCount) {
  absl::Status status = CheckItemColumns("t", ObsAndReward(), {{tfp::DT_FLOAT, {5, 3}, false}});
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("table 't'"));
  EXPECT_THAT(status.message(), HasSubstr("1 columns but the signature has 2"));
  EXPECT_THAT(status.message(), HasSubstr("('obs',): " + DataTypeName(tfp::DT_FLOAT) + "[?,3]"));
}

TEST(CheckItemColumnsTest, RejectsWrongDtypeNamingColumnAndBothSpecs) {
  absl::Status status = CheckItemColumns(
      "t", ObsAndReward(), {{tfp::DT_INT64, {5, 3}, false}, {tfp::DT_FLOAT, {}, true}});
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_THAT(status.message(),
              HasSubstr("column 0 ('obs',) (name 'obs') is " + DataTypeName(tfp::DT_FLOAT) +
                        "[?,3] in the signature but the item provides " +
                        DataTypeName(tfp::DT_INT64) + "[5,3]"));
}

TEST(CheckItemColumnsTest, RejectsIncompatibleShapes) {
  // Neither [5, 4] nor its step shape [4] fits [?, 3].
  absl::Status status = CheckItemColumns(
      "t", ObsAndReward(), {{tfp::DT_FLOAT, {5, 4}, false}, {tfp::DT_FLOAT, {}, true}});
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("column 0 ('obs',)"));
  // A squeezed column never falls back to its step shape.
  status = CheckItemColumns("t", ObsAndReward(),
                            {{tfp::DT_FLOAT, {3}, true}, {tfp::DT_FLOAT, {}, true}});
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  // The reward spec is a scalar: two rows are neither [] nor a step of [].
  status = CheckItemColumns("t", ObsAndReward(),
                            {{tfp::DT_FLOAT, {1, 3}, false}, {tfp::DT_FLOAT, {2, 1}, false}});
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("column 1 ('reward',) is"));
}

TEST(FindItemMismatchTest, ExactRuleRefusesStepShapesTheDefaultAccepts) {
  const std::vector<ItemColumn> step_shaped = {{tfp::DT_FLOAT, {1, 2, 3}, false},
                                               {tfp::DT_FLOAT, {1}, false}};
  EXPECT_FALSE(FindItemMismatch(ObsAndReward(), step_shaped).has_value());
  const std::optional<ItemMismatch> exact =
      FindItemMismatch(ObsAndReward(), step_shaped, /*accept_step_shapes=*/false);
  ASSERT_TRUE(exact.has_value());
  EXPECT_FALSE(exact->column_count);
  EXPECT_EQ(exact->column, 0u);
}

TEST(FindItemMismatchTest, ReportsTheCountBeforeAnyColumn) {
  const std::optional<ItemMismatch> mismatch =
      FindItemMismatch(ObsAndReward(), {{tfp::DT_INT64, {5, 3}, false}});
  ASSERT_TRUE(mismatch.has_value());
  EXPECT_TRUE(mismatch->column_count);
}

TEST(FindItemMismatchTest, NamesTheFirstColumnThatBreaksTheRule) {
  const std::optional<ItemMismatch> mismatch = FindItemMismatch(
      ObsAndReward(), {{tfp::DT_FLOAT, {5, 3}, false}, {tfp::DT_DOUBLE, {}, true}});
  ASSERT_TRUE(mismatch.has_value());
  EXPECT_FALSE(mismatch->column_count);
  EXPECT_EQ(mismatch->column, 1u);
}

TEST(AreCompatibleShapesTest, UnknownRankOrDimsMatchAnything) {
  EXPECT_TRUE(AreCompatibleShapes(std::nullopt, std::vector<int64_t>{3, 3}));
  EXPECT_TRUE(AreCompatibleShapes(std::vector<int64_t>{-1, 3}, std::vector<int64_t>{3, -1}));
  EXPECT_FALSE(AreCompatibleShapes(std::vector<int64_t>{2, 3}, std::vector<int64_t>{3, -1}));
  EXPECT_FALSE(AreCompatibleShapes(std::vector<int64_t>{3}, std::vector<int64_t>{3, 3}));
}

SignatureSpec Requested(tfp::DataType dtype, std::optional<std::vector<int64_t>> shape) {
  SignatureSpec spec;
  spec.dtype = dtype;
  spec.shape = std::move(shape);
  return spec;
}

TEST(CheckRequestedSpecsTest, AcceptsCompatibleRequests) {
  // dm-tree order: obs, then reward; unknown dims and ranks requested.
  EXPECT_TRUE(CheckRequestedSpecs("t", ObsAndReward(),
                                  {Requested(tfp::DT_FLOAT, std::vector<int64_t>{7, 3}),
                                   Requested(tfp::DT_FLOAT, std::nullopt)})
                  .ok());
}

TEST(CheckRequestedSpecsTest, WrongCountInReverbsWords) {
  absl::Status status = CheckRequestedSpecs("t", ObsAndReward(),
                                            {Requested(tfp::DT_FLOAT, std::vector<int64_t>{7, 3})});
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_EQ(status.message(),
            "Inconsistent number of tensors requested from table 't'.  Requested 1 tensors, but "
            "table signature shows 2 tensors.\nTable signature: [(float, [?,3]), (float, [])]");
}

TEST(CheckRequestedSpecsTest, IncompatibleTensorInReverbsWords) {
  absl::Status status = CheckRequestedSpecs("t", ObsAndReward(),
                                            {Requested(tfp::DT_INT64, std::vector<int64_t>{3, 3}),
                                             Requested(tfp::DT_FLOAT, std::vector<int64_t>{})});
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_EQ(status.message(),
            "Requested incompatible tensor at flattened index 0 from table 't'.  Requested "
            "(dtype, shape): (int64, [3,3]).  Signature (dtype, shape): (float, [?,3])."
            "\nTable signature: [(float, [?,3]), (float, [])]");
  status = CheckRequestedSpecs("t", ObsAndReward(),
                               {Requested(tfp::DT_FLOAT, std::vector<int64_t>{3, 4}),
                                Requested(tfp::DT_FLOAT, std::vector<int64_t>{})});
  EXPECT_THAT(status.message(), HasSubstr("flattened index 0"));
}

}  // namespace
}  // namespace tf_reverb
