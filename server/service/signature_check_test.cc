// Signatures end to end: the server checks every item against its table's
// signature (Table::Config::check_item_signatures), and Client::InsertStep
// checks before it sends anything. Parsing and comparing signatures is
// tested in server/signature_test.cc.
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "grpcpp/support/status.h"
#include "gtest/gtest.h"
#include "reverb_service.pb.h"
#include "server/chunk_codec.h"
#include "server/client/client.h"
#include "server/table.h"
#include "server/tensor.h"
#include "server/testing/grpc_call_counter.h"
#include "server/testing/server_testing.h"
#include "server/testing/table_testing.h"
#include "server/testing/tensor_testing.h"
#include "struct.pb.h"
#include "tensor.pb.h"

namespace tf_reverb {
namespace {

namespace tfp = ::tf_reverb::tf;
using ::deepmind::reverb::InsertStreamRequest;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::tf_reverb::tensor_testing::FloatScalar;
using ::tf_reverb::tensor_testing::Int32Scalar;
using ::tf_reverb::tensor_testing::Int32Tensor;
using ::tf_reverb::testing::Fifo;
using ::tf_reverb::testing::GrpcCalls;
using ::tf_reverb::testing::GrpcOnlyAddress;
using ::tf_reverb::testing::InsertResult;
using ::tf_reverb::testing::kInsertStreamMethod;
using ::tf_reverb::testing::kServerInfoMethod;
using ::tf_reverb::testing::MinSize;
using ::tf_reverb::testing::RawStub;
using ::tf_reverb::testing::RunInsertStream;
using ::tf_reverb::testing::ServedTable;
using ::tf_reverb::testing::StartServer;
using ::tf_reverb::testing::TableConfig;
using ::tf_reverb::testing::Uniform;
using ::tf_reverb::testing::WireChunk;
using ::tf_reverb::testing::WireItem;

// {'obs': float32[?, 2] (name 'obs'), 'step': int32[]}.
std::string ObsStepSignature() {
  tfp::StructuredValue root;
  auto& fields = *root.mutable_dict_value()->mutable_fields();
  auto* obs = fields["obs"].mutable_tensor_spec_value();
  obs->set_name("obs");
  obs->set_dtype(tfp::DT_FLOAT);
  obs->mutable_shape()->add_dim()->set_size(-1);
  obs->mutable_shape()->add_dim()->set_size(2);
  auto* step = fields["step"].mutable_tensor_spec_value();
  step->set_dtype(tfp::DT_INT32);
  step->mutable_shape();
  return root.SerializeAsString();
}

// A table with the obs/step signature that refuses items inconsistent with
// it (Config::check_item_signatures).
std::shared_ptr<Table> SignatureTable(const std::string& name) {
  Table::Config config = TableConfig(name, Uniform(), Fifo(), 1000, MinSize(1));
  config.signature = ObsStepSignature();
  config.check_item_signatures = true;
  return Table::Create(std::move(config)).value();
}

Tensor FloatRow(const std::vector<float>& values) {
  return tensor_testing::FromValues(tfp::DT_FLOAT, {static_cast<int64_t>(values.size())}, values);
}

TEST(SignatureCheckTest, ServerRejectsItemsInconsistentWithTheSignature) {
  auto table = SignatureTable("sig");
  auto server = StartServer({table});
  ASSERT_NE(server, nullptr);
  auto stub = RawStub(server->port());
  // MakeItem's single int32 [2, 2] column is one column short of the
  // signature: the first request's item is fine, the second's is not.
  InsertStreamRequest good;
  const Tensor obs = tensor_testing::FromValues<float>(tfp::DT_FLOAT, {2, 2}, {1, 2, 3, 4});
  *good.add_chunks() = BuildChunk(1, {obs, Int32Tensor({2}, {4, 5})}, 1, 0, 1, false).value();
  auto* item = good.add_items();
  item->set_key(10);
  item->set_table("sig");
  item->set_priority(1.0);
  for (int c = 0; c < 2; ++c) {
    auto* column = item->mutable_flat_trajectory()->add_columns();
    auto* slice = column->add_chunk_slices();
    slice->set_chunk_key(1);
    slice->set_offset(1);
    slice->set_length(1);
    slice->set_index(c);
    column->set_squeeze(c == 1);  // obs [1, 2], step []
  }
  InsertStreamRequest bad;
  *bad.add_chunks() = WireChunk(2);
  *bad.add_items() = WireItem(20, "sig", 1.0, {2});
  InsertResult r = RunInsertStream(*stub, {good, bad});
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(r.status.error_message(), HasSubstr("table 'sig'"));
  EXPECT_THAT(r.status.error_message(), HasSubstr("1 columns but the signature has 2"));
  EXPECT_THAT(r.confirmed, ElementsAre(10));
  EXPECT_EQ(table->size(), 1);

  // Right count, wrong dtype: the int32 [2, 2] column where obs is float32.
  InsertStreamRequest wrong_dtype;
  *wrong_dtype.add_chunks() = WireChunk(3);
  auto* two = wrong_dtype.add_items();
  *two = WireItem(30, "sig", 1.0, {3});
  *two->mutable_flat_trajectory()->add_columns() = two->flat_trajectory().columns(0);
  r = RunInsertStream(*stub, {wrong_dtype});
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(r.status.error_message(),
              HasSubstr("column 0 ('obs',) (name 'obs') is " + DataTypeName(tfp::DT_FLOAT) +
                        "[?,2] in the signature but the item provides " +
                        DataTypeName(tfp::DT_INT32) + "[2,2]"));
  EXPECT_EQ(table->size(), 1);
}

TEST(SignatureCheckTest, InsertStepChecksBeforeSending) {
  auto server = StartServer({SignatureTable("sig"), ServedTable("free")});
  ASSERT_NE(server, nullptr);
  Client client(GrpcOnlyAddress(server->port()));
  const int streams = GrpcCalls().count(kInsertStreamMethod);
  const int infos = GrpcCalls().count(kServerInfoMethod);

  absl::Status count = client.InsertStep({FloatRow({1, 2})}, {{"sig", 1.0}});
  EXPECT_TRUE(absl::IsInvalidArgument(count)) << count;
  EXPECT_THAT(count.message(), HasSubstr("1 columns but the signature has 2"));

  absl::Status dtype = client.InsertStep({FloatRow({1, 2}), FloatScalar(1)}, {{"sig", 1.0}});
  EXPECT_TRUE(absl::IsInvalidArgument(dtype)) << dtype;
  EXPECT_THAT(dtype.message(), HasSubstr("column 1 ('step',) is " + DataTypeName(tfp::DT_INT32) +
                                         "[] in the signature but the item provides " +
                                         DataTypeName(tfp::DT_FLOAT) + "[1]"));

  absl::Status shape = client.InsertStep({FloatRow({1, 2, 3}), Int32Scalar(1)}, {{"sig", 1.0}});
  EXPECT_TRUE(absl::IsInvalidArgument(shape)) << shape;
  EXPECT_THAT(shape.message(), HasSubstr("column 0 ('obs',) (name 'obs') is " +
                                         DataTypeName(tfp::DT_FLOAT) + "[?,2]"));
  EXPECT_THAT(shape.message(), HasSubstr("provides " + DataTypeName(tfp::DT_FLOAT) + "[1,3]"));
  // Nothing was sent.
  EXPECT_EQ(GrpcCalls().count(kInsertStreamMethod), streams);

  // [1, 2] fits obs [?, 2] and [1] fits step [] as a step; tables without a
  // signature take anything, and the one chunk serves both tables.
  ASSERT_TRUE(
      client.InsertStep({FloatRow({1, 2}), Int32Scalar(7)}, {{"sig", 1.0}, {"free", 1.0}}).ok());
  ASSERT_TRUE(client.InsertStep({FloatScalar(1)}, {{"free", 1.0}}).ok());
  EXPECT_EQ(server->service()->GetTable("sig").value()->size(), 1);
  EXPECT_EQ(server->service()->GetTable("free").value()->size(), 2);
  // Unknown tables are still the server's NOT_FOUND.
  EXPECT_EQ(client.InsertStep({FloatScalar(1)}, {{"nope", 1.0}}).code(),
            absl::StatusCode::kNotFound);
  // The signatures were fetched once.
  EXPECT_EQ(GrpcCalls().count(kServerInfoMethod), infos + 1);
}

}  // namespace
}  // namespace tf_reverb
