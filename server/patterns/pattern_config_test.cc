#include "server/patterns/pattern_config.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"

namespace tf_reverb {
namespace {

using ::testing::HasSubstr;

template <typename T>
T Parse(const std::string& text) {
  T proto;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &proto)) << text;
  return proto;
}

TEST(PatternConfigTest, ValidNodes) {
  for (const char* text : {"flat_source_index: 0 stop: -1", "start: -3", "start: -3 stop: -1",
                           "start: -5 stop: 0 step: 2"}) {
    EXPECT_TRUE(ValidatePatternNode(Parse<PatternNode>(text)).ok()) << text;
  }
}

TEST(PatternConfigTest, InvalidNodesAreRejectedWithTheRuleBroken) {
  const std::vector<std::pair<const char*, const char*>> cases = {
      {"flat_source_index: -1 stop: -1", "flat_source_index must be >= 0"},
      {"flat_source_index: 0", "at least one of start and stop"},
      {"start: 0", "start must be < 0"},
      {"start: -2 stop: 1", "stop must be <= 0"},
      {"start: -2 stop: -2", "must be < stop"},
      {"stop: 0", "stop must be < 0 when start is unset"},
      {"stop: -1 step: 1", "step requires start"},
      {"start: -2 step: 0", "step must be > 0"},
  };
  for (const auto& [text, message] : cases) {
    absl::Status status = ValidatePatternNode(Parse<PatternNode>(text));
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_THAT(status.message(), HasSubstr(message)) << text;
  }
}

TEST(PatternConfigTest, InvalidConditions) {
  const std::vector<std::pair<const char*, const char*>> cases = {
      {"eq: 1", "left must be set"},
      {"step_index: true", "cmp must be set"},
      {"step_index: true mod_eq { mod: 0 eq: 0 }", "mod must be > 0"},
      {"step_index: true mod_eq { mod: 2 eq: -1 }", "eq must be >= 0"},
      {"is_end_episode: true eq: 0", "is_end_episode"},
      {"is_end_episode: true eq: 1 inverse: true", "is_end_episode"},
      {"is_end_episode: true ge: 1", "is_end_episode"},
  };
  for (const auto& [text, message] : cases) {
    absl::Status status = ValidateCondition(Parse<Condition>(text));
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_THAT(status.message(), HasSubstr(message)) << text;
  }
  EXPECT_TRUE(ValidateCondition(Parse<Condition>("is_end_episode: true eq: 1")).ok());
}

TEST(PatternConfigTest, MaxAgeIsTheOldestNode) {
  auto config = Parse<StructuredWriterConfig>(
      "flat { stop: -2 } flat { start: -5 stop: -3 } flat { start: -1 } table: 't'");
  EXPECT_EQ(MaxAge(config), 5);
}

// std::abs(INT32_MIN) is undefined behaviour (UBSan, found by fuzzing).
TEST(PatternConfigTest, AgeOfTheMostNegativeOffsetSaturates) {
  EXPECT_EQ(NodeAge(Parse<PatternNode>("start: -2147483648")), 2147483647);
  EXPECT_EQ(NodeAge(Parse<PatternNode>("stop: -2147483648")), 2147483647);
  EXPECT_EQ(
      MaxAge(Parse<StructuredWriterConfig>("flat { start: -2147483648 stop: -1 } table: 't'")),
      2147483647);
}

TEST(PatternConfigTest, BufferLengthConditionIsAddedOnceAndRequired) {
  auto config = Parse<StructuredWriterConfig>("flat { start: -3 } table: 't'");
  EXPECT_THAT(ValidateConfig(config).message(), HasSubstr("buffer_length >= 3"));
  AddBufferLengthCondition(&config);
  AddBufferLengthCondition(&config);
  ASSERT_EQ(config.conditions_size(), 1);
  EXPECT_TRUE(config.conditions(0).buffer_length());
  EXPECT_EQ(config.conditions(0).ge(), 3);
  EXPECT_TRUE(ValidateConfig(config).ok());
}

TEST(PatternConfigTest, ConfigLevelRules) {
  EXPECT_THAT(ValidateConfig(Parse<StructuredWriterConfig>("table: 't'")).message(),
              HasSubstr("`flat` must not be empty"));
  EXPECT_THAT(ValidateConfig(Parse<StructuredWriterConfig>("flat { stop: -1 }")).message(),
              HasSubstr("`table` must not be empty"));
  auto td = Parse<StructuredWriterConfig>(
      "flat { flat_source_index: 0 stop: -1 } table: 't' "
      "priority { td_error { max_priority_weight: 0.9 flat_source_index: 3 } } "
      "conditions { buffer_length: true ge: 1 }");
  EXPECT_THAT(ValidateConfig(td).message(), HasSubstr("no node of the pattern references"));
}

TEST(PatternConfigTest, CompleteAndValidateNamesThePosition) {
  std::vector<StructuredWriterConfig> configs = {
      Parse<StructuredWriterConfig>("flat { stop: -1 } table: 't'"),
      Parse<StructuredWriterConfig>("flat { start: 0 } table: 't'")};
  absl::Status status = CompleteAndValidateConfigs(&configs);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("Invalid configuration at position 1: "));
  std::vector<StructuredWriterConfig> none;
  EXPECT_FALSE(CompleteAndValidateConfigs(&none).ok());
}

}  // namespace
}  // namespace tf_reverb
