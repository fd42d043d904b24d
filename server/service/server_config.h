// Server configuration: parsing ReverbServerConfig (text format or JSON,
// docs/reference/config-format.md) and building tables from it.
//
// Contract: pure functions, thread-safe. Errors: INVALID_ARGUMENT naming the
// problem (parse position, the table and field at fault).
#ifndef TF_REVERB_SERVER_SERVICE_SERVER_CONFIG_H_
#define TF_REVERB_SERVER_SERVICE_SERVER_CONFIG_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "checkpoint.pb.h"
#include "server/table.h"

namespace tf_reverb {

// The configuration the server binary uses when given none: one uniform
// table "my_table" (FIFO eviction, max_size 1e6, MinSize(1)) on port 8000.
extern const char kDefaultServerConfig[];

// Parses a JSON object (text starting with '{') or text format.
absl::StatusOr<deepmind::reverb::ReverbServerConfig> ParseServerConfig(const std::string& text);

// Builds a table from its configuration (name, selectors, max_size,
// max_times_sampled, rate limiter parameters, signature);
// `check_item_signatures` is Table::Config's (off: as Reverb).
absl::StatusOr<std::shared_ptr<Table>> TableFromConfig(
    const deepmind::reverb::PriorityTableCheckpoint& config, bool check_item_signatures = false);

absl::StatusOr<std::vector<std::shared_ptr<Table>>> TablesFromConfig(
    const deepmind::reverb::ReverbServerConfig& config, bool check_item_signatures = false);

}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_SERVICE_SERVER_CONFIG_H_
