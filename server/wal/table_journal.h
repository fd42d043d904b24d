// TableJournal: the table extension that appends each change of one table
// to the server's write-ahead log (write_ahead_log.h), in the order the
// table makes them.
//
// Each chunk is logged once before the first insert that uses it, and once
// more after every snapshot (OnSnapshot forgets what was logged), so the
// records after a checkpoint's position never need a chunk from before it.
// OnSnapshot writes that position (PriorityTableCheckpoint.wal_sequence):
// the table's records through it are in the snapshot, later ones are not,
// since both happen under the table's mutex.
//
// Contract:
//  * Thread-safety: its hooks run under the table's mutex (one at a time);
//    appending never blocks on I/O.
//  * Ownership: shares the log with the server; attached to one table.
//  * Errors: none here; a failed log fails its confirmations.
#ifndef TF_REVERB_SERVER_WAL_TABLE_JOURNAL_H_
#define TF_REVERB_SERVER_WAL_TABLE_JOURNAL_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "checkpoint.pb.h"
#include "server/table_extension.h"
#include "server/wal/write_ahead_log.h"

namespace tf_reverb {

class TableJournal : public TableExtension {
 public:
  TableJournal(std::shared_ptr<WriteAheadLog> log, std::string table);

  void OnInsert(const ExtensionItem& item) override;
  void OnSample(const ExtensionItem& item) override;
  void OnUpdate(const ExtensionItem& item) override;
  void OnDelete(const ExtensionItem& item) override;
  void OnReset() override;
  void OnPolicyVersion(int64_t version) override;
  void OnSnapshot(deepmind::reverb::PriorityTableCheckpoint* config) override;
  std::string DebugString() const override;

 private:
  void AppendKey(WalChange::Kind kind, const ExtensionItem& item);

  const std::shared_ptr<WriteAheadLog> log_;
  const std::string table_;
  // Keys of the chunks logged since the last snapshot (the table's mutex
  // serialises the hooks).
  absl::flat_hash_set<uint64_t> logged_chunks_;
};

}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_WAL_TABLE_JOURNAL_H_
