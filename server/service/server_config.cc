#include "server/service/server_config.h"

#include <cstdint>
#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/json_util.h"
#include "server/rate_limiter.h"
#include "server/selectors/selector.h"

namespace tf_reverb {
namespace {

// Collects text-format parse errors into one message.
class ErrorCollector : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, int column, const std::string& message) override {
    absl::StrAppend(&errors_, errors_.empty() ? "" : "; ", "line ", line + 1, " column ",
                    column + 1, ": ", message);
  }
  const std::string& errors() const { return errors_; }

 private:
  std::string errors_;
};

}  // namespace

const char kDefaultServerConfig[] = R"pb(
  port: 8000
  tables {
    table_name: "my_table"
    sampler { uniform: true }
    remover { fifo: true }
    max_size: 1000000
    max_times_sampled: 0
    rate_limiter {
      samples_per_insert: 1
      min_size_to_sample: 1
      min_diff: -1.7976931348623157e+308
      max_diff: 1.7976931348623157e+308
    }
  }
)pb";

absl::StatusOr<deepmind::reverb::ReverbServerConfig> ParseServerConfig(const std::string& text) {
  deepmind::reverb::ReverbServerConfig config;
  if (absl::StartsWith(absl::StripLeadingAsciiWhitespace(text), "{")) {
    auto status = google::protobuf::util::JsonStringToMessage(text, &config);
    if (!status.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("Invalid JSON server config: ", status.ToString()));
    }
    return config;
  }
  google::protobuf::TextFormat::Parser parser;
  ErrorCollector errors;
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(text, &config)) {
    return absl::InvalidArgumentError(
        absl::StrCat("Invalid text-format server config: ", errors.errors()));
  }
  return config;
}

absl::StatusOr<std::shared_ptr<Table>> TableFromConfig(
    const deepmind::reverb::PriorityTableCheckpoint& config, bool check_item_signatures) {
  auto in_table = [&config](const absl::Status& status) {
    return absl::InvalidArgumentError(
        absl::StrCat("Table '", config.table_name(), "': ", status.message()));
  };
  absl::StatusOr<std::unique_ptr<ItemSelector>> sampler = CreateSelector(config.sampler());
  if (!sampler.ok()) return in_table(sampler.status());
  absl::StatusOr<std::unique_ptr<ItemSelector>> remover = CreateSelector(config.remover());
  if (!remover.ok()) return in_table(remover.status());
  const auto& limiter = config.rate_limiter();
  absl::StatusOr<RateLimiter> rate_limiter =
      RateLimiter::Create(limiter.samples_per_insert(), limiter.min_size_to_sample(),
                          limiter.min_diff(), limiter.max_diff());
  if (!rate_limiter.ok()) return in_table(rate_limiter.status());
  absl::StatusOr<std::shared_ptr<Table>> table = Table::Create(Table::Config{
      config.table_name(),
      std::move(*sampler),
      std::move(*remover),
      config.max_size(),
      config.max_times_sampled(),
      *rate_limiter,
      config.signature(),
      {},
      check_item_signatures,
      config.has_seed() ? std::optional<uint64_t>(config.seed()) : std::nullopt,
      config.has_max_staleness() ? std::optional<int64_t>(config.max_staleness()) : std::nullopt,
      config.evict_stale()});
  if (!table.ok()) return in_table(table.status());
  return table;
}

absl::StatusOr<std::vector<std::shared_ptr<Table>>> TablesFromConfig(
    const deepmind::reverb::ReverbServerConfig& config, bool check_item_signatures) {
  std::vector<std::shared_ptr<Table>> tables;
  for (const auto& table_config : config.tables()) {
    absl::StatusOr<std::shared_ptr<Table>> table =
        TableFromConfig(table_config, check_item_signatures);
    if (!table.ok()) return table.status();
    tables.push_back(std::move(*table));
  }
  return tables;
}

}  // namespace tf_reverb
