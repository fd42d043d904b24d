// Fuzz target: StructuredWriter configuration (server/patterns): validation
// (pattern_config.h) of arbitrary serialized StructuredWriterConfigs and the
// PatternEngine the StructuredWriter and PatternDataset build from them.
//
// Input: protobuf wire format of a message with `repeated
// StructuredWriterConfig configs = 1; bytes steps = 2;` (at most 8 configs;
// other fields ignored). Each byte of `steps` drives one step of
// LocalPatternRunner (bit 0: end of episode, bit 1: clear buffers, bit 2:
// int64 instead of float32 values, the rest: the value).
//
// Properties: never crashes, never allocates what a config merely names (an
// index or age; run with -malloc_limit_mb); errors are INVALID_ARGUMENT;
// CompleteAndValidateConfigs, PatternEngine::Create and
// LocalPatternRunner::Create agree; each completed config then passes
// ValidateConfig on its own; running valid configs over steps fails, if at
// all, with a status, and every trajectory they produce is well-formed.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/wire_format_lite.h"
#include "patterns.pb.h"
#include "server/fuzz/fuzz_check.h"
#include "server/patterns/local_pattern_runner.h"
#include "server/patterns/pattern_config.h"
#include "server/patterns/pattern_engine.h"
#include "server/tensor.h"
#include "tensor.pb.h"

namespace tf_reverb {
namespace {

namespace tfp = ::tf_reverb::tf;
using ::google::protobuf::internal::WireFormatLite;

constexpr int kMaxConfigs = 8;
// Steps are run only for data this wide (the configs name its columns).
constexpr int kMaxColumns = 64;

struct Input {
  std::vector<StructuredWriterConfig> configs;
  std::string steps;
};

bool ParseInput(const uint8_t* data, size_t size, Input* input) {
  google::protobuf::io::CodedInputStream in(data, static_cast<int>(size));
  while (uint32_t tag = in.ReadTag()) {
    const int field = WireFormatLite::GetTagFieldNumber(tag);
    if (WireFormatLite::GetTagWireType(tag) != WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
      if (!WireFormatLite::SkipField(&in, tag)) return false;
      continue;
    }
    uint32_t length;
    std::string bytes;
    if (!in.ReadVarint32(&length) || !in.ReadString(&bytes, static_cast<int>(length))) {
      return false;
    }
    if (field == 1) {
      if (static_cast<int>(input->configs.size()) == kMaxConfigs) return false;
      input->configs.emplace_back();
      if (!input->configs.back().ParseFromString(bytes)) return false;
    } else if (field == 2) {
      input->steps = std::move(bytes);
    }
  }
  return in.ConsumedEntireMessage();
}

// The widest column any config reads, plus one.
int64_t ColumnsNamed(const std::vector<StructuredWriterConfig>& configs) {
  int64_t columns = 0;
  for (const StructuredWriterConfig& config : configs) {
    for (const PatternNode& node : config.flat()) {
      columns = std::max<int64_t>(columns, int64_t{node.flat_source_index()} + 1);
    }
    for (const Condition& condition : config.conditions()) {
      if (condition.left_case() == Condition::kFlatSourceIndex) {
        columns = std::max<int64_t>(columns, int64_t{condition.flat_source_index()} + 1);
      }
    }
    if (config.priority().has_td_error()) {
      columns =
          std::max<int64_t>(columns, int64_t{config.priority().td_error().flat_source_index()} + 1);
    }
  }
  return columns;
}

Tensor Scalar(uint8_t byte) {
  Tensor t;
  if (byte & 4) {
    t.dtype = tfp::DT_INT64;
    const int64_t v = byte >> 3;
    t.data.assign(reinterpret_cast<const char*>(&v), sizeof(v));
  } else {
    t.dtype = tfp::DT_FLOAT;
    const float v = static_cast<float>(byte >> 3) / 4;
    t.data.assign(reinterpret_cast<const char*>(&v), sizeof(v));
  }
  return t;
}

void RunSteps(const std::vector<StructuredWriterConfig>& configs, int num_columns,
              const std::string& steps) {
  absl::StatusOr<std::unique_ptr<LocalPatternRunner>> runner = LocalPatternRunner::Create(configs);
  FUZZ_CHECK_OK(runner.status());
  for (const char c : steps) {
    const uint8_t byte = static_cast<uint8_t>(c);
    std::vector<Tensor> step;
    for (int column = 0; column < num_columns; ++column) {
      step.push_back(Scalar(static_cast<uint8_t>(byte + column * 8)));
    }
    const absl::Status status = (*runner)->Append(std::move(step), byte & 1, byte & 2);
    FUZZ_CHECK(status.ok() || absl::IsInvalidArgument(status), status.ToString());
    while (std::optional<std::vector<Tensor>> trajectory = (*runner)->Pop()) {
      FUZZ_CHECK(!trajectory->empty(), "an empty trajectory");
      for (const Tensor& tensor : *trajectory) FUZZ_CHECK_OK(ValidateTensor(tensor));
    }
    if (!status.ok()) return;
  }
}

}  // namespace
}  // namespace tf_reverb

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ::tf_reverb;  // NOLINT(build/namespaces): a fuzz entry point
  Input input;
  if (!ParseInput(data, size, &input)) return 0;

  for (const StructuredWriterConfig& config : input.configs) {
    (void)MaxAge(config);
    for (const PatternNode& node : config.flat()) (void)ValidatePatternNode(node);
    for (const Condition& condition : config.conditions()) (void)ValidateCondition(condition);
    const absl::Status status = ValidateConfig(config);
    FUZZ_CHECK(status.ok() || absl::IsInvalidArgument(status), status.ToString());
  }
  std::vector<StructuredWriterConfig> completed = input.configs;
  const absl::Status valid = CompleteAndValidateConfigs(&completed);
  FUZZ_CHECK(valid.ok() || absl::IsInvalidArgument(valid), valid.ToString());
  absl::StatusOr<std::unique_ptr<PatternEngine>> engine = PatternEngine::Create(input.configs);
  FUZZ_CHECK(engine.ok() == valid.ok(),
             absl::StrCat("PatternEngine::Create: ", engine.status().ToString(),
                          "; CompleteAndValidateConfigs: ", valid.ToString()));
  if (!valid.ok()) {
    FUZZ_CHECK(!LocalPatternRunner::Create(input.configs).ok(), "runner accepted bad configs");
    return 0;
  }
  for (const StructuredWriterConfig& config : completed) {
    FUZZ_CHECK_OK(ValidateConfig(config));
    StructuredWriterConfig twice = config;
    AddBufferLengthCondition(&twice);
    FUZZ_CHECK(twice.conditions_size() == config.conditions_size(),
               "AddBufferLengthCondition added a second condition");
  }
  const int64_t columns = ColumnsNamed(input.configs);
  (void)(*engine)->UsesColumn(static_cast<int>(std::min<int64_t>(columns, 1 << 30)));
  if (columns > kMaxColumns) return 0;
  RunSteps(input.configs, static_cast<int>(columns), input.steps);
  return 0;
}
