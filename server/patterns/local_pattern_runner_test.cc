#include "server/patterns/local_pattern_runner.h"

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "patterns.pb.h"
#include "server/tensor.h"
#include "server/testing/tensor_testing.h"

namespace tf_reverb {
namespace {

using ::tf_reverb::tensor_testing::Int32Row;
using ::tf_reverb::tensor_testing::StringScalar;
using ::tf_reverb::tensor_testing::Values;

using ::deepmind::reverb::StructuredWriterConfig;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::unique_ptr<LocalPatternRunner> Runner(std::vector<std::string> texts) {
  std::vector<StructuredWriterConfig> configs;
  for (const std::string& text : texts) {
    configs.emplace_back();
    EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &configs.back()));
  }
  auto runner = LocalPatternRunner::Create(std::move(configs));
  EXPECT_TRUE(runner.ok()) << runner.status();
  return runner.ok() ? *std::move(runner) : nullptr;
}

// obs = [i, -i] (int32), name = "s<i>" (string).
std::vector<Tensor> Step(int32_t i) {
  return {Int32Row({i, -i}), StringScalar("s" + std::to_string(i))};
}

TEST(LocalPatternRunnerTest, StacksSlicesAndSqueezesSingleRows) {
  auto runner =
      Runner({"flat { flat_source_index: 0 start: -2 } "
              "flat { flat_source_index: 1 stop: -1 } table: 't'"});
  ASSERT_TRUE(runner->Append(Step(0), false, true).ok());
  EXPECT_FALSE(runner->Pop().has_value());
  ASSERT_TRUE(runner->Append(Step(1), false, true).ok());
  ASSERT_TRUE(runner->Append(Step(2), false, true).ok());
  auto first = runner->Pop();
  ASSERT_TRUE(first.has_value());
  EXPECT_THAT((*first)[0].shape, ElementsAre(2, 2));
  EXPECT_THAT(Values<int32_t>((*first)[0]), ElementsAre(0, 0, 1, -1));
  EXPECT_TRUE((*first)[1].shape.empty());
  EXPECT_THAT((*first)[1].strings, ElementsAre("s1"));
  auto second = runner->Pop();
  ASSERT_TRUE(second.has_value());
  EXPECT_THAT(Values<int32_t>((*second)[0]), ElementsAre(1, -1, 2, -2));
  EXPECT_FALSE(runner->Pop().has_value());
}

TEST(LocalPatternRunnerTest, EpisodeBoundariesClearOrKeepBuffers) {
  for (bool clear : {true, false}) {
    auto runner = Runner({"flat { flat_source_index: 0 start: -2 } table: 't'"});
    ASSERT_TRUE(runner->Append(Step(0), /*end_of_episode=*/true, clear).ok());
    ASSERT_TRUE(runner->Append(Step(1), false, clear).ok());
    EXPECT_EQ(runner->Pop().has_value(), !clear) << clear;
  }
}

TEST(LocalPatternRunnerTest, EndOfEpisodeConfigsSeeTheLastStep) {
  auto runner =
      Runner({"flat { flat_source_index: 1 stop: -1 } table: 't' "
              "conditions { is_end_episode: true eq: 1 }"});
  ASSERT_TRUE(runner->Append(Step(0), false, true).ok());
  EXPECT_FALSE(runner->Pop().has_value());
  ASSERT_TRUE(runner->Append(Step(1), true, true).ok());
  auto last = runner->Pop();
  ASSERT_TRUE(last.has_value());
  EXPECT_THAT((*last)[0].strings, ElementsAre("s1"));
}

TEST(LocalPatternRunnerTest, RowsOfDifferentShapesAreRejected) {
  auto runner = Runner({"flat { flat_source_index: 0 start: -2 } table: 't'"});
  ASSERT_TRUE(runner->Append(Step(0), false, true).ok());
  std::vector<Tensor> odd = Step(1);
  odd[0].shape = {1, 2};
  absl::Status status = runner->Append(odd, false, true);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("Cannot stack tensors of different specs"));
}

}  // namespace
}  // namespace tf_reverb
