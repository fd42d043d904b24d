#include "server/wal/table_journal.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "checkpoint.pb.h"

namespace tf_reverb {

TableJournal::TableJournal(std::shared_ptr<WriteAheadLog> log, std::string table)
    : log_(std::move(log)), table_(std::move(table)) {}

void TableJournal::OnInsert(const ExtensionItem& item) {
  for (const auto& chunk : item.data.chunks) {
    if (!logged_chunks_.insert(chunk->key()).second) continue;
    WalChange change;
    change.kind = WalChange::Kind::kChunk;
    change.chunk = chunk;
    log_->Append(std::move(change));
  }
  WalChange change;
  change.kind = WalChange::Kind::kInsert;
  change.table = table_;
  change.item = item.data.item;
  log_->Append(std::move(change));
}

void TableJournal::AppendKey(WalChange::Kind kind, const ExtensionItem& item) {
  WalChange change;
  change.kind = kind;
  change.table = table_;
  change.key = item.data.item.key();
  change.priority = item.priority;
  log_->Append(std::move(change));
}

void TableJournal::OnSample(const ExtensionItem& item) {
  AppendKey(WalChange::Kind::kSample, item);
}

void TableJournal::OnUpdate(const ExtensionItem& item) {
  AppendKey(WalChange::Kind::kUpdate, item);
}

void TableJournal::OnDelete(const ExtensionItem& item) {
  AppendKey(WalChange::Kind::kDelete, item);
}

void TableJournal::OnReset() {
  WalChange change;
  change.kind = WalChange::Kind::kReset;
  change.table = table_;
  log_->Append(std::move(change));
}

void TableJournal::OnPolicyVersion(int64_t version) {
  WalChange change;
  change.kind = WalChange::Kind::kPolicyVersion;
  change.table = table_;
  change.version = version;
  log_->Append(std::move(change));
}

void TableJournal::OnSnapshot(deepmind::reverb::PriorityTableCheckpoint* config) {
  config->set_wal_sequence(log_->last_sequence());
  logged_chunks_.clear();
}

std::string TableJournal::DebugString() const {
  return absl::StrCat("TableJournal(table=", table_, ", dir=", log_->dir(), ")");
}

}  // namespace tf_reverb
