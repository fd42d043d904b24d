// StructuredWriter against a real server over real gRPC.
#include "server/patterns/structured_writer.h"

#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "patterns.pb.h"
#include "schema.pb.h"
#include "server/client/client.h"
#include "server/client/sample.h"
#include "server/service/server.h"
#include "server/table.h"
#include "server/table_item.h"
#include "server/tensor.h"
#include "server/testing/table_testing.h"
#include "server/testing/tensor_testing.h"
#include "tensor.pb.h"

namespace tf_reverb {
namespace {

// Deadline of calls that must succeed: only a hung test reaches it, however
// loaded the machine.
constexpr absl::Duration kDeadline = absl::Seconds(120);

using ::tf_reverb::tensor_testing::Int32Scalar;
using ::tf_reverb::tensor_testing::Values;

using ::deepmind::reverb::StructuredWriterConfig;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::tf_reverb::testing::Fifo;
using ::tf_reverb::testing::MakeTable;
using ::tf_reverb::testing::MinSize;

StructuredWriterConfig Config(const std::string& text) {
  StructuredWriterConfig config;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &config)) << text;
  return config;
}

class StructuredWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    window_ = MakeTable(Fifo(), Fifo(), 1000, /*max_times_sampled=*/1, MinSize(1), "window");
    last_ = MakeTable(Fifo(), Fifo(), 1000, /*max_times_sampled=*/1, MinSize(1), "last");
    auto server = Server::Start({window_, last_}, 0);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
  }

  std::unique_ptr<StructuredWriter> NewWriter(std::vector<std::string> texts) {
    std::vector<StructuredWriterConfig> configs;
    for (const std::string& text : texts) configs.push_back(Config(text));
    auto writer = StructuredWriter::Create(
        Client(absl::StrCat("127.0.0.1:", server_->port())).channel(), std::move(configs));
    EXPECT_TRUE(writer.ok()) << writer.status();
    return writer.ok() ? *std::move(writer) : nullptr;
  }

  // Column `column` of every item of `table`, in insertion order (sampling
  // removes each item: max_times_sampled is 1).
  std::vector<std::vector<int32_t>> Columns(Table& table, int column) {
    std::vector<std::vector<int32_t>> out;
    std::vector<SampledItem> sampled;
    const int64_t size = table.size();
    for (int64_t i = 0; i < size; ++i) {
      EXPECT_TRUE(table.SampleBatch(1, kDeadline, &sampled).ok());
    }
    for (const SampledItem& item : sampled) {
      absl::StatusOr<Tensor> data = Sample::FromSampledItem(item).UnpackColumn(column);
      EXPECT_TRUE(data.ok()) << data.status();
      if (data.ok()) out.push_back(Values<int32_t>(*data));
    }
    return out;
  }

  std::shared_ptr<Table> window_, last_;
  std::unique_ptr<Server> server_;
};

TEST_F(StructuredWriterTest, ConfigsTurnStepsIntoItemsOfTheirTables) {
  auto writer =
      NewWriter({"flat { flat_source_index: 0 start: -2 } table: 'window' "
                 "priority { constant_fn { value: 3 } }",
                 "flat { flat_source_index: 1 stop: -1 } table: 'last' "
                 "conditions { is_end_episode: true eq: 1 }"});
  for (int i = 0; i < 4; ++i)
    ASSERT_TRUE(writer->Append({Int32Scalar(i), Int32Scalar(100 + i)}, false).ok());
  ASSERT_TRUE(writer->EndEpisode(true, kDeadline).ok());
  ASSERT_TRUE(writer->Flush(0, kDeadline).ok());
  EXPECT_EQ(writer->num_items_created(), 4);
  EXPECT_EQ(window_->size(), 3);
  EXPECT_EQ(window_->Info().max_size(), 1000);
  EXPECT_THAT(Columns(*window_, 0),
              ElementsAre(ElementsAre(0, 1), ElementsAre(1, 2), ElementsAre(2, 3)));
  EXPECT_THAT(Columns(*last_, 0), ElementsAre(ElementsAre(103)));
}

TEST_F(StructuredWriterTest, PrioritiesReachTheTable) {
  auto writer =
      NewWriter({"flat { stop: -1 } table: 'window' "
                 "priority { td_error { max_priority_weight: 1 flat_source_index: 0 } }"});
  ASSERT_TRUE(writer->Append({Int32Scalar(-7)}, false).ok());
  ASSERT_TRUE(writer->Flush(0, kDeadline).ok());
  std::vector<SampledItem> sampled;
  ASSERT_TRUE(window_->SampleBatch(1, kDeadline, &sampled).ok());
  EXPECT_DOUBLE_EQ(sampled[0].priority, 7.0);
}

TEST_F(StructuredWriterTest, UnusedColumnsAreNeverSent) {
  auto writer = NewWriter({"flat { flat_source_index: 1 stop: -1 } table: 'window'"});
  // Column 0 changes dtype and shape every step: it would be rejected if it
  // were written.
  Tensor odd;
  odd.dtype = tf::DT_FLOAT;
  odd.shape = {2};
  odd.data.assign(8, '\0');
  ASSERT_TRUE(writer->Append({Int32Scalar(0), Int32Scalar(1)}, false).ok());
  ASSERT_TRUE(writer->Append({odd, Int32Scalar(2)}, false).ok());
  ASSERT_TRUE(writer->Flush(0, kDeadline).ok());
  EXPECT_THAT(Columns(*window_, 0), ElementsAre(ElementsAre(1), ElementsAre(2)));
}

TEST_F(StructuredWriterTest, PartialAppendsAndErrors) {
  auto writer =
      NewWriter({"flat { flat_source_index: 0 stop: -1 } "
                 "flat { flat_source_index: 1 stop: -1 } table: 'window'"});
  ASSERT_TRUE(writer->Append({Int32Scalar(1), std::nullopt}, true).ok());
  EXPECT_TRUE(writer->step_is_open());
  absl::Status twice = writer->Append({Int32Scalar(1), std::nullopt}, true);
  EXPECT_EQ(twice.code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(writer->Append({std::nullopt, Int32Scalar(2)}, false).ok());
  EXPECT_FALSE(writer->step_is_open());
  absl::Status length = writer->Append({Int32Scalar(1)}, false);
  EXPECT_THAT(length.message(), HasSubstr("Flattened data has an unexpected length"));
  // A dtype change of a used column comes from the TrajectoryWriter.
  Tensor f;
  f.dtype = tf::DT_FLOAT;
  f.data.assign(4, '\0');
  EXPECT_EQ(writer->Append({f, Int32Scalar(2)}, false).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(writer->Flush(0, kDeadline).ok());
  EXPECT_EQ(window_->size(), 1);
}

TEST_F(StructuredWriterTest, InvalidConfigsAreRejected) {
  auto writer =
      StructuredWriter::Create(Client(absl::StrCat("127.0.0.1:", server_->port())).channel(),
                               {Config("flat { stop: 1 } table: 'window'")});
  EXPECT_EQ(writer.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(writer.status().message(), HasSubstr("Invalid configuration at position 0"));
}

}  // namespace
}  // namespace tf_reverb
