// Validation of StructuredWriterConfig (patterns.proto; docs/concepts/writers-and-patterns.md)
// and the automatic `buffer_length >= max_age` condition.
//
// Contract: pure functions, thread-safe. Errors are INVALID_ARGUMENT with a
// message naming the offending node or condition; ValidateConfigs prefixes
// "Invalid configuration at position i: ".
#ifndef TF_REVERB_SERVER_PATTERNS_PATTERN_CONFIG_H_
#define TF_REVERB_SERVER_PATTERNS_PATTERN_CONFIG_H_

#include <vector>

#include "absl/status/status.h"
#include "patterns.pb.h"

namespace tf_reverb {

using deepmind::reverb::Condition;
using deepmind::reverb::PatternNode;
using deepmind::reverb::StructuredWriterConfig;

// How many of the newest steps `node` reaches back: |start| when start is
// set, else |stop| (INT_MAX for INT_MIN, whose magnitude an int cannot hold).
int NodeAge(const PatternNode& node);

// max NodeAge over the config's nodes (0 for an empty config).
int MaxAge(const StructuredWriterConfig& config);

absl::Status ValidatePatternNode(const PatternNode& node);
absl::Status ValidateCondition(const Condition& condition);

// Checks one config, including the presence of a `buffer_length >= max_age`
// condition.
absl::Status ValidateConfig(const StructuredWriterConfig& config);

// Appends `buffer_length >= MaxAge(config)` unless the config already has a
// buffer_length condition with ge >= max_age.
void AddBufferLengthCondition(StructuredWriterConfig* config);

// AddBufferLengthCondition then ValidateConfig on each config; errors name
// the position. INVALID_ARGUMENT also for an empty list.
absl::Status CompleteAndValidateConfigs(std::vector<StructuredWriterConfig>* configs);

}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_PATTERNS_PATTERN_CONFIG_H_
