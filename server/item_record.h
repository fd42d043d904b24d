// ItemRecord: an item as tables store it (docs/concepts/items-and-chunks.md).
//
// An item arrives as a PrioritizedItem proto: with its FlatTrajectory, about
// ten messages and 500 bytes of heap for an item of one column. A table
// keeps instead the item's wire encoding in one buffer, beside the few
// fields it reads on every call (key, priority at insertion, policy version,
// insertion time). Sample responses send those bytes as they are; the rare
// paths that need the proto (checkpoints, lookups, extensions) parse it.
//
// Contract: a value type, immutable once made (copies share nothing), safe
// to read from any thread. FromProto never fails; Trajectory returns
// DATA_LOSS for bytes that do not parse (never, for a record made here).
#ifndef TF_REVERB_SERVER_ITEM_RECORD_H_
#define TF_REVERB_SERVER_ITEM_RECORD_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "schema.pb.h"

namespace tf_reverb {

using PrioritizedItem = deepmind::reverb::PrioritizedItem;

class ItemRecord {
 public:
  ItemRecord() = default;
  static ItemRecord FromProto(const PrioritizedItem& item);

  uint64_t key() const { return key_; }
  // The priority the item was inserted with (the table keeps the current one).
  double priority() const { return priority_; }
  bool has_policy_version() const { return has_policy_version_; }
  int64_t policy_version() const { return policy_version_; }
  // PrioritizedItem.inserted_at (the epoch when unset).
  absl::Time inserted_at() const { return inserted_at_; }
  // The PrioritizedItem's wire encoding.
  absl::string_view wire() const { return wire_; }

  // The same item as inserted into a table at `now`: inserted_at set,
  // times_sampled 0, and `policy_version` unless it has one.
  ItemRecord Inserted(absl::Time now, int64_t policy_version) const;
  // The same item with `policy_version`.
  ItemRecord WithPolicyVersion(int64_t policy_version) const;

  // The item as a proto (a parse of wire()).
  PrioritizedItem ToProto() const;
  // Parses the item's flat_trajectory into `out` (cleared first; its
  // allocations are reused).
  absl::Status Trajectory(deepmind::reverb::FlatTrajectory* out) const;

 private:
  std::string wire_;
  uint64_t key_ = 0;
  double priority_ = 0;
  int64_t policy_version_ = 0;
  absl::Time inserted_at_ = absl::UnixEpoch();
  bool has_policy_version_ = false;
};

}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_ITEM_RECORD_H_
