#include "server/wal/log_recovery.h"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "checkpoint.pb.h"
#include "schema.pb.h"
#include "server/chunk_validation.h"
#include "server/item_record.h"
#include "server/logging/event_log.h"
#include "server/table_chunk.h"
#include "server/table_item.h"

namespace tf_reverb {

absl::Status ReplayLog(WriteAheadLog& log, const std::vector<std::shared_ptr<Table>>& tables,
                       const absl::flat_hash_map<std::string, uint64_t>& positions) {
  const absl::Time start = absl::Now();
  absl::flat_hash_map<std::string, Table*> by_name;
  for (const auto& table : tables) by_name[table->name()] = table.get();
  // The log must hold every record after the oldest table position (a
  // checkpoint deletes only the segments it covers), and new records must
  // number after every position, or a later recovery would skip them.
  uint64_t oldest = UINT64_MAX;
  uint64_t newest = 0;
  for (const auto& [name, position] : positions) {
    oldest = std::min(oldest, position);
    newest = std::max(newest, position);
  }
  absl::flat_hash_map<uint64_t, std::shared_ptr<const TableChunk>> chunks;
  int64_t applied = 0;
  bool first = true;
  // Whether a log whose first record is `sequence` lacks records the
  // checkpoint needs.
  auto gap = [&](uint64_t sequence) { return oldest != UINT64_MAX && sequence > oldest + 1; };
  auto gap_error = [&](uint64_t sequence) {
    return absl::DataLossError(absl::StrCat(
        "Write-ahead log in ", log.dir(), " starts at record ", sequence,
        " but the checkpoint restored needs every record after ", oldest,
        ": segments are missing (restored from an older checkpoint than the log was truncated "
        "for?)"));
  };
  auto apply = [&](deepmind::reverb::WalRecord& record) -> absl::Status {
    const uint64_t sequence = record.sequence();
    // Checked before the first record is applied: a gap is the cause of
    // whatever later records would fail on (an item of a lost chunk).
    if (first && gap(sequence)) return gap_error(sequence);
    first = false;
    if (record.change_case() == deepmind::reverb::WalRecord::kChunk) {
      if (absl::Status valid = ValidateChunk(record.chunk()); !valid.ok()) {
        return absl::DataLossError(absl::StrCat("Write-ahead log in ", log.dir(), ": record ",
                                                sequence, ": ", valid.message()));
      }
      const uint64_t key = record.chunk().chunk_key();
      if (!chunks.contains(key)) chunks.emplace(key, TableChunk::FromProto(record.chunk()));
      return absl::OkStatus();
    }
    auto table = by_name.find(record.table());
    if (table == by_name.end()) {
      return absl::InvalidArgumentError(absl::StrCat("Write-ahead log in ", log.dir(), ": record ",
                                                     sequence, " is of table '", record.table(),
                                                     "', which the server does not have"));
    }
    auto position = positions.find(record.table());
    if (position != positions.end() && sequence <= position->second) return absl::OkStatus();
    ++applied;
    Table& target = *table->second;
    switch (record.change_case()) {
      case deepmind::reverb::WalRecord::kInsert: {
        TableItem item;
        for (uint64_t key : UniqueChunkKeys(record.insert().flat_trajectory())) {
          auto chunk = chunks.find(key);
          if (chunk == chunks.end()) {
            return absl::DataLossError(absl::StrCat(
                "Write-ahead log in ", log.dir(), ": record ", sequence, " inserts item ",
                record.insert().key(), " of chunk ", key, ", which the log does not hold"));
          }
          item.chunks.push_back(chunk->second);
        }
        item.item = ItemRecord::FromProto(record.insert());
        return target.ReplayInsert(std::make_shared<const TableItem>(std::move(item)));
      }
      case deepmind::reverb::WalRecord::kUpdate:
        return target.MutateItems({record.update()}, {});
      case deepmind::reverb::WalRecord::kDeleteKey:
        return target.MutateItems({}, {record.delete_key()});
      case deepmind::reverb::WalRecord::kSampleKey:
        target.ReplaySample(record.sample_key());
        return absl::OkStatus();
      case deepmind::reverb::WalRecord::kReset:
        target.Reset();
        return absl::OkStatus();
      case deepmind::reverb::WalRecord::kPolicyVersion:
        return target.SetPolicyVersion(record.policy_version()).status();
      default:
        return absl::DataLossError(absl::StrCat("Write-ahead log in ", log.dir(), ": record ",
                                                sequence, " holds no change"));
    }
  };
  absl::StatusOr<WalReplayReport> report = log.Replay(apply);
  if (!report.ok()) return report.status();
  // Segments without a record applied (say, one torn record) still say
  // where the log starts.
  if (first && report->segments > 0 && gap(report->first_sequence)) {
    return gap_error(report->first_sequence);
  }
  if (report->segments == 0 && newest > 0) {
    LogEvent("wal", "empty",
             {{"dir", log.dir()},
              {"detail",
               "the checkpoint was written with a log, but the log "
               "directory holds none: changes after it are lost"}});
  }
  log.AdvanceTo(newest + 1);
  if (!report->torn.empty()) {
    LogEvent("wal", "torn_record", {{"dir", log.dir()}, {"detail", report->torn}});
  }
  LogEvent("wal", "replayed",
           {{"dir", log.dir()},
            {"segments", report->segments},
            {"records", report->records},
            {"applied", applied},
            {"last_sequence", static_cast<int64_t>(report->last_sequence)},
            {"elapsed_ms", absl::ToInt64Milliseconds(absl::Now() - start)}});
  return absl::OkStatus();
}

}  // namespace tf_reverb
