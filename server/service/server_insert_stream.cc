#include "server/service/server_insert_stream.h"

#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "schema.pb.h"
#include "server/chunk_validation.h"
#include "server/item_record.h"
#include "server/table_item.h"

namespace tf_reverb {

ServerInsertStream::ServerInsertStream(TableLookup tables) : tables_(std::move(tables)) {}

absl::StatusOr<TableItem> ServerInsertStream::MakeItem(
    const deepmind::reverb::PrioritizedItem& item) const {
  TableItem table_item;
  for (uint64_t key : UniqueChunkKeys(item.flat_trajectory())) {
    auto it = chunks_.find(key);
    if (it == chunks_.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("Could not find sequence chunk ", key, " of item ", item.key(),
                       ": this stream did not send it or no longer keeps it (keep_chunk_keys)."));
    }
    table_item.chunks.push_back(it->second);
  }
  table_item.item = ItemRecord::FromProto(item);
  return table_item;
}

absl::Status ServerInsertStream::Start(const deepmind::reverb::InsertStreamRequest* request,
                                       std::vector<WireChunk> wire_chunks) {
  if (request_ != nullptr) {
    return absl::FailedPreconditionError("The previous InsertStreamRequest is not done.");
  }
  if (request->chunks_size() == 0 && wire_chunks.empty() && request->items_size() == 0) {
    return absl::InvalidArgumentError("Request lacks both chunks and item");
  }
  // All of the request's new chunks are made (and so validated) before any
  // is stored; of a key sent twice, the first copy stays.
  std::vector<std::shared_ptr<const TableChunk>> made;
  for (const ChunkData& chunk : request->chunks()) {
    if (chunks_.contains(chunk.chunk_key())) continue;
    if (absl::Status s = ValidateChunk(chunk); !s.ok()) return s;
    made.push_back(TableChunk::FromProto(chunk));
  }
  for (WireChunk& chunk : wire_chunks) {
    if (chunks_.contains(chunk.key)) continue;
    absl::StatusOr<std::shared_ptr<const TableChunk>> stored =
        TableChunk::FromPlainWire(std::move(chunk.wire));
    if (!stored.ok()) return stored.status();
    made.push_back(*std::move(stored));
  }
  for (std::shared_ptr<const TableChunk>& chunk : made) {
    const uint64_t key = chunk->key();
    chunks_.emplace(key, std::move(chunk));
  }
  request_ = request;
  next_item_ = 0;
  return absl::OkStatus();
}

absl::StatusOr<ServerInsertStream::Progress> ServerInsertStream::Continue(
    std::vector<uint64_t>* confirmed, const std::shared_ptr<Table::Waker>& wake) {
  absl::StatusOr<Progress> progress = ContinueRequest(confirmed, wake);
  if (!progress.ok()) {  // an error ends the request
    pending_.reset();
    pending_table_.reset();
  }
  if (!progress.ok() || *progress == Progress::kDone) request_ = nullptr;  // no longer borrowed
  return progress;
}

absl::StatusOr<ServerInsertStream::Progress> ServerInsertStream::ContinueRequest(
    std::vector<uint64_t>* confirmed, const std::shared_ptr<Table::Waker>& wake) {
  if (request_ == nullptr) return Progress::kDone;
  // A request of chunks only leaves the stream's chunks as they are.
  if (request_->items_size() == 0) return Progress::kDone;
  while (next_item_ < request_->items_size()) {
    if (!pending_.has_value()) {
      const deepmind::reverb::PrioritizedItem& item = request_->items(next_item_);
      absl::StatusOr<std::shared_ptr<Table>> table = tables_(item.table());
      if (!table.ok()) return table.status();
      absl::StatusOr<TableItem> table_item = MakeItem(item);
      if (!table_item.ok()) return table_item.status();
      pending_table_ = *std::move(table);
      pending_ = *std::move(table_item);
    }
    const uint64_t key = pending_->item.key();
    // Moves the item into the table when it returns true.
    absl::StatusOr<bool> inserted = pending_table_->TryInsertOrAssign(*pending_, wake);
    if (!inserted.ok()) return inserted.status();
    if (!*inserted) return Progress::kBlocked;
    confirmed->push_back(key);
    pending_.reset();
    pending_table_.reset();
    ++next_item_;
  }
  if (absl::Status s = KeepChunks(); !s.ok()) return s;
  return Progress::kDone;
}

absl::Status ServerInsertStream::KeepChunks() {
  absl::flat_hash_set<uint64_t> keep(request_->keep_chunk_keys().begin(),
                                     request_->keep_chunk_keys().end());
  absl::erase_if(chunks_, [&keep](const auto& entry) { return !keep.contains(entry.first); });
  if (chunks_.size() != keep.size()) {
    return absl::FailedPreconditionError(
        absl::StrCat("ReleaseOutOfRangeChunks: Kept less chunks than expected (", chunks_.size(),
                     " of ", keep.size(), ")."));
  }
  return absl::OkStatus();
}

absl::Status ServerInsertStream::Handle(deepmind::reverb::InsertStreamRequest request,
                                        std::vector<uint64_t>* confirmed, const Flush& flush,
                                        const std::function<bool()>& cancelled) {
  if (absl::Status s = Start(&request); !s.ok()) return s;
  auto woken = std::make_shared<absl::Notification>();
  while (true) {
    auto wake = std::make_shared<Table::Waker>([woken] { woken->Notify(); });
    absl::StatusOr<Progress> progress = Continue(confirmed, wake);
    if (!progress.ok()) return progress.status();
    if (*progress == Progress::kDone) return absl::OkStatus();
    if (!confirmed->empty() && !flush(confirmed)) {
      request_ = nullptr;
      return absl::OkStatus();
    }
    while (!woken->WaitForNotificationWithTimeout(absl::Milliseconds(100))) {
      if (cancelled && cancelled()) {
        request_ = nullptr;
        return absl::CancelledError("The call was cancelled.");
      }
    }
    woken = std::make_shared<absl::Notification>();
  }
}

}  // namespace tf_reverb
