#include "insert_stream.h"

#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "chunk_validation.h"
#include "scoped_counter.h"

namespace tf_reverb {

InsertStreamHandler::InsertStreamHandler(TableLookup tables, std::function<bool()> cancelled,
                                         std::atomic<int>* calls_in_tables)
    : tables_(std::move(tables)),
      cancelled_(std::move(cancelled)),
      calls_in_tables_(calls_in_tables) {}

absl::StatusOr<TableItem> InsertStreamHandler::MakeItem(
    deepmind::reverb::PrioritizedItem* item) const {
  TableItem table_item;
  for (uint64_t key : UniqueChunkKeys(item->flat_trajectory())) {
    auto it = chunks_.find(key);
    if (it == chunks_.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Could not find sequence chunk ", key, " of item ", item->key(),
          ": this stream did not send it or no longer keeps it (keep_chunk_keys)."));
    }
    table_item.chunks.push_back(it->second);
  }
  table_item.item = std::make_shared<const PrioritizedItem>(std::move(*item));
  return table_item;
}

absl::Status InsertStreamHandler::Handle(deepmind::reverb::InsertStreamRequest* request,
                                         std::vector<uint64_t>* confirmed,
                                         const Flush& flush) {
  if (request->chunks_size() == 0 && request->items_size() == 0) {
    return absl::InvalidArgumentError("Request lacks both chunks and item");
  }
  for (const ChunkData& chunk : request->chunks()) {
    if (chunks_.contains(chunk.chunk_key())) continue;
    if (absl::Status s = ValidateChunk(chunk); !s.ok()) return s;
  }
  for (ChunkData& chunk : *request->mutable_chunks()) {
    const uint64_t key = chunk.chunk_key();
    if (!chunks_.contains(key)) {
      chunks_.emplace(key, std::make_shared<const ChunkData>(std::move(chunk)));
    }
  }
  // A request of chunks only leaves the stream's chunks as they are.
  if (request->items_size() == 0) return absl::OkStatus();
  for (auto& item : *request->mutable_items()) {
    absl::StatusOr<std::shared_ptr<Table>> table = tables_(item.table());
    if (!table.ok()) return table.status();
    const uint64_t key = item.key();
    absl::StatusOr<TableItem> table_item = MakeItem(&item);
    if (!table_item.ok()) return table_item.status();
    // About to block in the rate limiter: confirm the items already inserted
    // first, so a writer's flush is not held up by later items.
    if (!confirmed->empty() && !(*table)->CanInsert(1) && !flush(confirmed)) {
      return absl::OkStatus();
    }
    absl::Status status;
    {
      ScopedCounter in_table(calls_in_tables_);
      status = (*table)->InsertOrAssign(*std::move(table_item), absl::InfiniteDuration(),
                                        cancelled_);
    }
    if (!status.ok()) return status;
    confirmed->push_back(key);
  }
  absl::flat_hash_set<uint64_t> keep(request->keep_chunk_keys().begin(),
                                     request->keep_chunk_keys().end());
  absl::erase_if(chunks_, [&keep](const auto& entry) { return !keep.contains(entry.first); });
  if (chunks_.size() != keep.size()) {
    return absl::FailedPreconditionError(
        absl::StrCat("ReleaseOutOfRangeChunks: Kept less chunks than expected (",
                     chunks_.size(), " of ", keep.size(), ")."));
  }
  return absl::OkStatus();
}

}  // namespace tf_reverb
