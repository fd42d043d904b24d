// ReplayLog: rebuilds tables from a write-ahead log (write_ahead_log.h)
// after a checkpoint restore, exactly as they were when the last record was
// written: items with their inserted_at, priorities and times sampled,
// deletions, resets, and so the rate limiters' counters and the episode and
// unique-sample counts.
//
// Each table takes its records after its checkpoint position (`positions`,
// PriorityTableCheckpoint.wal_sequence; 0 or absent: every record). The
// selectors' random generators are not logged: a seeded table continues
// from its checkpointed state, not from where the crash stopped it.
//
// Contract: a function; the tables are thread-safe, but nothing else may
// use them during the replay. Errors: the log's (Replay: DATA_LOSS naming
// the file and offset); INVALID_ARGUMENT for a record of a table the server
// does not have; DATA_LOSS for an insert naming a chunk the log does not
// hold or a chunk that does not validate. A torn last record is dropped and
// logged (event "wal torn_record").
#ifndef TF_REVERB_SERVER_WAL_LOG_RECOVERY_H_
#define TF_REVERB_SERVER_WAL_LOG_RECOVERY_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "server/table.h"
#include "server/wal/write_ahead_log.h"

namespace tf_reverb {

absl::Status ReplayLog(WriteAheadLog& log, const std::vector<std::shared_ptr<Table>>& tables,
                       const absl::flat_hash_map<std::string, uint64_t>& positions);

}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_WAL_LOG_RECOVERY_H_
