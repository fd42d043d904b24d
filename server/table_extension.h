// TableExtension: hooks a Table calls as its items change
// (docs/concepts/tables.md) — after an insert, before a delete, after a priority update, before a
// sample is returned (times_sampled already counts it), on reset, when the
// policy version is set, and when a snapshot (for a checkpoint) is taken.
//
// Contract:
//  * Thread-safety: a table calls its extensions' hooks one at a time, under
//    its mutex, in the order the operations happen. Hooks must be quick,
//    must not block and must not call back into the table; slow work (such as
//    writing to another table) belongs on the extension's own thread (see
//    extensions/insert_on_sample.h). An extension shared by several tables
//    must synchronise its own state.
//  * Ownership: tables hold their extensions by std::shared_ptr.
//  * Errors: hooks cannot fail the table operation; an extension reports its
//    own failures (logs, counters).
#ifndef TF_REVERB_SERVER_TABLE_EXTENSION_H_
#define TF_REVERB_SERVER_TABLE_EXTENSION_H_

#include <cstdint>
#include <string>

#include "checkpoint.pb.h"
#include "server/table_item.h"

namespace tf_reverb {

// An item as an extension sees it; valid only during the hook call (copy
// `data` to keep it: its parts are shared, immutable pointers).
struct ExtensionItem {
  const TableItem& data;
  double priority;
  int32_t times_sampled;
};

class TableExtension {
 public:
  virtual ~TableExtension() = default;

  virtual void OnInsert(const ExtensionItem& item) {}
  virtual void OnSample(const ExtensionItem& item) {}
  virtual void OnUpdate(const ExtensionItem& item) {}
  virtual void OnDelete(const ExtensionItem& item) {}
  virtual void OnReset() {}
  // After the table's current policy version was set (before the items it
  // made stale are evicted).
  virtual void OnPolicyVersion(int64_t version) {}
  // The table's configuration and counters as the snapshot holds them; the
  // extension may add what it needs to find again after a restore.
  virtual void OnSnapshot(deepmind::reverb::PriorityTableCheckpoint* config) {}
  virtual std::string DebugString() const = 0;
};

}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_TABLE_EXTENSION_H_
