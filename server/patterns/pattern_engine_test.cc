#include "server/patterns/pattern_engine.h"

#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
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
#include "tensor.pb.h"

namespace tf_reverb {
namespace {

using ::tf_reverb::tensor_testing::FromValues;
using ::tf_reverb::tensor_testing::Values;

using ::deepmind::reverb::StructuredWriterConfig;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

StructuredWriterConfig Config(const std::string& text) {
  StructuredWriterConfig config;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &config)) << text;
  return config;
}

std::unique_ptr<PatternEngine> Engine(std::vector<std::string> texts) {
  std::vector<StructuredWriterConfig> configs;
  for (const std::string& text : texts) configs.push_back(Config(text));
  auto engine = PatternEngine::Create(std::move(configs));
  EXPECT_TRUE(engine.ok()) << engine.status();
  return engine.ok() ? *std::move(engine) : nullptr;
}

template <typename T>
std::optional<PatternCell> Cell(T value, DataType dtype) {
  return PatternCell{std::make_shared<Tensor>(FromValues<T>(dtype, {}, {value})), {}};
}
std::optional<PatternCell> I32(int32_t value) { return Cell(value, tf::DT_INT32); }

int32_t ValueOf(const PatternCell& cell) { return Values<int32_t>(*cell.value)[0]; }
std::vector<int32_t> Rows(const PatternColumn& column) {
  std::vector<int32_t> out;
  for (const PatternCell& cell : column.rows) out.push_back(ValueOf(cell));
  return out;
}

// Appends full steps of one int32 column with values `from`..`to`-1 and
// returns the items, one vector per step.
std::vector<std::vector<PatternItem>> AppendRange(PatternEngine& engine, int from, int to) {
  std::vector<std::vector<PatternItem>> out;
  for (int i = from; i < to; ++i) {
    std::vector<PatternItem> items;
    absl::Status status = engine.Append({I32(i)}, /*partial=*/false, &items);
    EXPECT_TRUE(status.ok()) << status;
    out.push_back(std::move(items));
  }
  return out;
}

TEST(PatternEngineTest, SlidingWindowStartsOnceTheBufferIsLongEnough) {
  auto engine = Engine({"flat { start: -3 } table: 'w'"});
  auto items = AppendRange(*engine, 0, 5);
  EXPECT_TRUE(items[0].empty());
  EXPECT_TRUE(items[1].empty());
  ASSERT_EQ(items[2].size(), 1u);
  EXPECT_EQ(items[2][0].table, "w");
  EXPECT_EQ(items[2][0].priority, 1.0);
  EXPECT_FALSE(items[2][0].columns[0].squeeze);
  EXPECT_THAT(Rows(items[2][0].columns[0]), ElementsAre(0, 1, 2));
  EXPECT_THAT(Rows(items[4][0].columns[0]), ElementsAre(2, 3, 4));
}

TEST(PatternEngineTest, SingleElementNodesAreSqueezed) {
  auto engine = Engine({"flat { stop: -2 } flat { stop: -1 } table: 't'"});
  auto items = AppendRange(*engine, 0, 3);
  EXPECT_TRUE(items[0].empty());
  ASSERT_EQ(items[2].size(), 1u);
  EXPECT_TRUE(items[2][0].columns[0].squeeze);
  EXPECT_THAT(Rows(items[2][0].columns[0]), ElementsAre(1));
  EXPECT_THAT(Rows(items[2][0].columns[1]), ElementsAre(2));
}

TEST(PatternEngineTest, StridedSlicesTakeCeilOfRangeOverStep) {
  // x[-5:-1:2] -> rows N-5 and N-3; x[-4::3] -> rows N-4 and N-1.
  auto engine =
      Engine({"flat { start: -5 stop: -1 step: 2 } flat { start: -4 step: 3 } table: 't'"});
  auto items = AppendRange(*engine, 0, 6);
  EXPECT_TRUE(items[3].empty());
  ASSERT_EQ(items[5].size(), 1u);
  EXPECT_THAT(Rows(items[5][0].columns[0]), ElementsAre(1, 3));
  EXPECT_THAT(Rows(items[5][0].columns[1]), ElementsAre(2, 5));
}

TEST(PatternEngineTest, StepIndexModuloCondition) {
  auto engine =
      Engine({"flat { stop: -1 } table: 't' "
              "conditions { step_index: true mod_eq { mod: 3 eq: 1 } }"});
  auto items = AppendRange(*engine, 0, 8);
  std::vector<int> fired;
  for (int i = 0; i < 8; ++i) {
    if (!items[i].empty()) fired.push_back(i);
  }
  EXPECT_THAT(fired, ElementsAre(1, 4, 7));
}

TEST(PatternEngineTest, StepsSinceAppliedThrottlesAConfig) {
  auto engine =
      Engine({"flat { start: -2 } table: 't' conditions { steps_since_applied: true ge: 3 }"});
  auto items = AppendRange(*engine, 0, 10);
  std::vector<int> fired;
  for (int i = 0; i < 10; ++i) {
    if (!items[i].empty()) fired.push_back(i);
  }
  EXPECT_THAT(fired, ElementsAre(2, 5, 8));
}

TEST(PatternEngineTest, InverseAndGeComparisons) {
  // step_index < 2 is ge: 2 with inverse.
  auto engine =
      Engine({"flat { stop: -1 } table: 't' conditions { step_index: true ge: 2 inverse: true }"});
  auto items = AppendRange(*engine, 0, 4);
  EXPECT_EQ(items[0].size() + items[1].size(), 2u);
  EXPECT_TRUE(items[2].empty());
  EXPECT_TRUE(items[3].empty());
}

TEST(PatternEngineTest, DataConditionsReadTheNewestValueAsInt32) {
  auto engine =
      Engine({"flat { flat_source_index: 0 stop: -1 } table: 't' "
              "conditions { flat_source_index: 1 eq: 1 }"});
  EXPECT_TRUE(engine->UsesColumn(1));
  EXPECT_TRUE(engine->NeedsValue(1));
  EXPECT_FALSE(engine->NeedsValue(0));
  std::vector<PatternItem> items;
  ASSERT_TRUE(engine->Append({I32(0), Cell<uint8_t>(0, tf::DT_BOOL)}, false, &items).ok());
  EXPECT_TRUE(items.empty());
  ASSERT_TRUE(engine->Append({I32(1), Cell<uint8_t>(1, tf::DT_BOOL)}, false, &items).ok());
  EXPECT_EQ(items.size(), 1u);
  ASSERT_TRUE(engine->Append({I32(2), Cell<int64_t>(1, tf::DT_INT64)}, false, &items).ok());
  EXPECT_EQ(items.size(), 2u);
  // Floats cannot be compared: the condition is false.
  ASSERT_TRUE(engine->Append({I32(3), Cell<float>(1.0f, tf::DT_FLOAT)}, false, &items).ok());
  EXPECT_EQ(items.size(), 2u);
  // A missing value is false.
  ASSERT_TRUE(engine->Append({I32(4), std::nullopt}, false, &items).ok());
  EXPECT_EQ(items.size(), 2u);
}

TEST(PatternEngineTest, MissingCellsPreventTheItem) {
  auto engine = Engine({"flat { flat_source_index: 0 start: -2 } table: 't'"});
  std::vector<PatternItem> items;
  ASSERT_TRUE(engine->Append({I32(0)}, false, &items).ok());
  ASSERT_TRUE(engine->Append({std::nullopt}, false, &items).ok());
  ASSERT_TRUE(engine->Append({I32(2)}, false, &items).ok());
  EXPECT_TRUE(items.empty());
  ASSERT_TRUE(engine->Append({I32(3)}, false, &items).ok());
  ASSERT_EQ(items.size(), 1u);
  EXPECT_THAT(Rows(items[0].columns[0]), ElementsAre(2, 3));
}

TEST(PatternEngineTest, PartialStepsFireOnceWhenComplete) {
  auto engine =
      Engine({"flat { flat_source_index: 0 stop: -1 } "
              "flat { flat_source_index: 1 stop: -1 } table: 't'"});
  std::vector<PatternItem> items;
  ASSERT_TRUE(engine->Append({I32(10), std::nullopt}, /*partial=*/true, &items).ok());
  EXPECT_TRUE(items.empty());
  EXPECT_TRUE(engine->step_is_open());
  absl::Status twice = engine->Append({I32(11), std::nullopt}, true, &items);
  EXPECT_EQ(twice.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(twice.message(), HasSubstr("Column 0 was already set"));
  ASSERT_TRUE(engine->Append({std::nullopt, I32(20)}, true, &items).ok());
  ASSERT_EQ(items.size(), 1u);
  EXPECT_THAT(Rows(items[0].columns[0]), ElementsAre(10));
  EXPECT_THAT(Rows(items[0].columns[1]), ElementsAre(20));
  // Closing the step does not fire the config again.
  ASSERT_TRUE(engine->Append({std::nullopt, std::nullopt}, false, &items).ok());
  EXPECT_EQ(items.size(), 1u);
  EXPECT_FALSE(engine->step_is_open());
}

TEST(PatternEngineTest, EndOfEpisodeConfigsFireOnlyAtTheEnd) {
  auto engine =
      Engine({"flat { start: -2 } table: 'every'",
              "flat { stop: -1 } table: 'last' conditions { is_end_episode: true eq: 1 }"});
  auto items = AppendRange(*engine, 0, 3);
  for (const auto& step : items) {
    for (const PatternItem& item : step) EXPECT_EQ(item.table, "every");
  }
  std::vector<PatternItem> end_items;
  ASSERT_TRUE(engine->ApplyEndOfEpisode(&end_items).ok());
  ASSERT_EQ(end_items.size(), 1u);
  EXPECT_EQ(end_items[0].table, "last");
  EXPECT_EQ(end_items[0].config_index, 1);
  EXPECT_THAT(Rows(end_items[0].columns[0]), ElementsAre(2));
  engine->StartNewEpisode(/*clear_buffers=*/true);
  end_items.clear();
  ASSERT_TRUE(engine->ApplyEndOfEpisode(&end_items).ok());
  EXPECT_TRUE(end_items.empty());
  // The buffers were cleared: the window needs two new steps.
  items = AppendRange(*engine, 10, 12);
  EXPECT_TRUE(items[0].empty());
  ASSERT_EQ(items[1].size(), 1u);
  EXPECT_THAT(Rows(items[1][0].columns[0]), ElementsAre(10, 11));
}

TEST(PatternEngineTest, KeepingBuffersAcrossEpisodesRestartsStepIndex) {
  auto engine = Engine({"flat { start: -2 } table: 't' conditions { step_index: true eq: 0 }"});
  auto items = AppendRange(*engine, 0, 3);
  for (const auto& step : items) EXPECT_TRUE(step.empty());
  engine->StartNewEpisode(/*clear_buffers=*/false);
  items = AppendRange(*engine, 3, 4);
  ASSERT_EQ(items[0].size(), 1u);
  EXPECT_THAT(Rows(items[0][0].columns[0]), ElementsAre(2, 3));
}

TEST(PatternEngineTest, TdErrorPriority) {
  auto engine =
      Engine({"flat { start: -2 } table: 't' "
              "priority { td_error { max_priority_weight: 0.5 flat_source_index: 0 } }"});
  EXPECT_TRUE(engine->NeedsValue(0));
  auto items = AppendRange(*engine, 1, 3);  // values 1, 2... then use -3 below
  std::vector<PatternItem> out;
  ASSERT_TRUE(engine->Append({I32(-6)}, false, &out).ok());
  ASSERT_EQ(out.size(), 1u);
  // rows [2, -6]: 0.5 * 6 + 0.5 * 4 = 5.
  EXPECT_DOUBLE_EQ(out[0].priority, 5.0);
  EXPECT_DOUBLE_EQ(items[1][0].priority, 0.5 * 2 + 0.5 * 1.5);
}

TEST(PatternEngineTest, TdErrorNeedsScalarNumbers) {
  auto engine =
      Engine({"flat { stop: -1 } table: 't' "
              "priority { td_error { max_priority_weight: 1 flat_source_index: 0 } }"});
  std::vector<PatternItem> items;
  absl::Status status = engine->Append({Cell<uint8_t>(1, tf::DT_UINT8)}, false, &items);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("TD-error priority needs scalar"));
}

TEST(PatternEngineTest, ConstantPriority) {
  auto engine = Engine({"flat { stop: -1 } table: 't' priority { constant_fn { value: 2.5 } }"});
  auto items = AppendRange(*engine, 0, 1);
  ASSERT_EQ(items[0].size(), 1u);
  EXPECT_EQ(items[0][0].priority, 2.5);
}

TEST(PatternEngineTest, FlattenedLengthIsFixedByTheFirstAppend) {
  auto engine = Engine({"flat { stop: -1 } table: 't'"});
  std::vector<PatternItem> items;
  ASSERT_TRUE(engine->Append({I32(0), I32(1)}, false, &items).ok());
  absl::Status status = engine->Append({I32(0)}, false, &items);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "Flattened data has an unexpected length, got 1 but wanted 2.");
  EXPECT_FALSE(engine->UsesColumn(1));
}

TEST(PatternEngineTest, ColumnsBeyondTheDataAreRejected) {
  auto engine = Engine({"flat { flat_source_index: 3 stop: -1 } table: 't'"});
  std::vector<PatternItem> items;
  absl::Status status = engine->Append({I32(0)}, false, &items);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("references flat_source_index 3"));
}

// Found by //server/fuzz:structured_writer_config_fuzzer: Create sized
// per-column arrays by the largest flat_source_index a config names, so one
// tiny config allocated gigabytes (and INT32_MAX overflowed the index + 1).
TEST(PatternEngineTest, HugeColumnIndicesAllocateNothingAndAreRejectedOnAppend) {
  auto engine = Engine({"flat { flat_source_index: 2147483647 stop: -1 } table: 't'",
                        "flat { flat_source_index: 1073741824 start: -2 } table: 't'"});
  ASSERT_NE(engine, nullptr);
  EXPECT_TRUE(engine->UsesColumn(2147483647));
  EXPECT_FALSE(engine->UsesColumn(0));
  std::vector<PatternItem> items;
  absl::Status status = engine->Append({I32(0)}, false, &items);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("references flat_source_index 2147483647"));
}

TEST(PatternEngineTest, InvalidConfigsFailCreate) {
  auto engine = PatternEngine::Create({Config("flat { start: 1 } table: 't'")});
  EXPECT_EQ(engine.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(engine.status().message(), HasSubstr("Invalid configuration at position 0"));
}

TEST(PatternEngineTest, BuffersAreCappedPerColumn) {
  // Column 0 needs 3 steps, column 1 one: buffer_length is the longest (3).
  auto engine = Engine({"flat { flat_source_index: 0 start: -3 } table: 'a'",
                        "flat { flat_source_index: 1 stop: -1 } table: 'b' "
                        "conditions { buffer_length: true ge: 3 }"});
  std::vector<PatternItem> items;
  for (int i = 0; i < 5; ++i)
    ASSERT_TRUE(engine->Append({I32(i), I32(100 + i)}, false, &items).ok());
  // 'a' fires at steps 2,3,4; 'b' at 2,3,4 too (buffer_length >= 3).
  EXPECT_EQ(items.size(), 6u);
  EXPECT_THAT(Rows(items.back().columns[0]), ElementsAre(104));
}

}  // namespace
}  // namespace tf_reverb
