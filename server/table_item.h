// TableItem and SampledItem: what a table stores and what a sample returns.
//
// An item (ItemRecord, item_record.h: its PrioritizedItem as wire bytes) and
// its chunks (TableChunk, table_chunk.h) are immutable once inserted and
// shared by pointer between the table, the in-flight samples and the insert
// streams; only priority and times_sampled change, and those are kept by the
// table beside the shared part.
//
// Contract: plain values; the shared parts are immutable, so copies may be
// read from any thread.
#ifndef TF_REVERB_SERVER_TABLE_ITEM_H_
#define TF_REVERB_SERVER_TABLE_ITEM_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "schema.pb.h"
#include "server/item_record.h"
#include "server/item_rows_cache.h"
#include "server/signature.h"
#include "server/table_chunk.h"

namespace tf_reverb {

struct TableItem {
  // Key, table, flat_trajectory, inserted_at and policy_version; priority
  // and times_sampled in here are those at insertion and are not kept up to
  // date.
  ItemRecord item;
  // Every chunk the trajectory references, each once, in order of first
  // appearance over columns and slices.
  std::vector<std::shared_ptr<const TableChunk>> chunks;
  // The item's columns decoded, once it was sampled in a batch (filled and
  // read by server/service/sample_batch.cc; empty for most items).
  ItemRowsCache rows;
};

struct SampledItem {
  std::shared_ptr<const TableItem> data;  // never null
  double priority = 0;
  int32_t times_sampled = 0;  // including this sample
  double probability = 0;
  int64_t table_size = 0;
  bool rate_limited = false;
};

// The SampleInfo clients receive for `sampled`: its item with the current
// priority and times sampled, its probability and the table's size.
deepmind::reverb::SampleInfo SampleInfoOf(const SampledItem& sampled);
// The same SampleInfo serialized, without parsing the item: its stored wire
// bytes followed by the current priority and times sampled (a parser takes
// the last occurrence of a field), so not protobuf's canonical encoding.
std::string SampleInfoWire(const SampledItem& sampled);

// Unique chunk keys of a trajectory, in order of first appearance.
std::vector<uint64_t> UniqueChunkKeys(const deepmind::reverb::FlatTrajectory& t);

// Checks that `item` is non-empty, that every slice lies inside the chunk it
// names (`chunks` in UniqueChunkKeys order) and that the slices of each
// column agree in dtype and row shape (read from the chunks' tensor headers
// without decompressing), so that a sampler can unpack every column.
// INVALID_ARGUMENT otherwise. With `columns`, the same pass also gives the
// dtype and shape of each column as a sample would hold it
// ([rows, *row_shape], or row_shape when squeezed).
absl::Status ValidateTableItem(const TableItem& item, std::vector<ItemColumn>* columns = nullptr);

}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_TABLE_ITEM_H_
