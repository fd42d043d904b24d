// Builders shared by the C++ tests of tables and what sits on them:
// selector options, rate limiters, tables, chunks and items.
//
// Contract: test-only helpers; they report failures with gtest EXPECTs and
// are thread-safe where the table is.
#ifndef TF_REVERB_SERVER_TESTING_TABLE_TESTING_H_
#define TF_REVERB_SERVER_TESTING_TABLE_TESTING_H_

#include <cfloat>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "schema.pb.h"
#include "server/chunk_codec.h"
#include "server/item_record.h"
#include "server/rate_limiter.h"
#include "server/selectors/selector.h"
#include "server/table.h"
#include "server/table_chunk.h"
#include "server/table_extension.h"
#include "server/table_item.h"
#include "server/tensor.h"
#include "tensor.pb.h"

namespace tf_reverb {
namespace testing {

using ::deepmind::reverb::KeyDistributionOptions;

inline constexpr absl::Duration kNoWait = absl::ZeroDuration();

inline KeyDistributionOptions Fifo() {
  KeyDistributionOptions o;
  o.set_fifo(true);
  return o;
}
inline KeyDistributionOptions Lifo() {
  KeyDistributionOptions o;
  o.set_lifo(true);
  return o;
}
inline KeyDistributionOptions Uniform() {
  KeyDistributionOptions o;
  o.set_uniform(true);
  return o;
}
inline KeyDistributionOptions Prioritized(double exponent) {
  KeyDistributionOptions o;
  o.mutable_prioritized()->set_priority_exponent(exponent);
  return o;
}
inline KeyDistributionOptions Heap(bool min_heap) {
  KeyDistributionOptions o;
  o.mutable_heap()->set_min_heap(min_heap);
  return o;
}

inline RateLimiter Limiter(double spi, int64_t min_size, double min_diff, double max_diff) {
  absl::StatusOr<RateLimiter> limiter = RateLimiter::Create(spi, min_size, min_diff, max_diff);
  EXPECT_TRUE(limiter.ok()) << limiter.status();
  return *limiter;
}
inline RateLimiter MinSize(int64_t k) { return Limiter(1.0, k, -DBL_MAX, DBL_MAX); }
// Reverb's Queue(n): spi=1, min_size=1, min_diff=0, max_diff=n.
inline RateLimiter QueueLimiter(int64_t n) { return Limiter(1.0, 1, 0.0, n); }

// The config of a table `name` with these selectors, size and limiter, and
// every other field at its default (no max_times_sampled, signature, seed,
// staleness limit or extension): set those on the result. Table::Config
// has no default constructor (RateLimiter has none).
inline Table::Config TableConfig(std::string name, const KeyDistributionOptions& sampler,
                                 const KeyDistributionOptions& remover, int64_t max_size,
                                 RateLimiter limiter) {
  return Table::Config{std::move(name),
                       CreateSelector(sampler).value(),
                       CreateSelector(remover).value(),
                       max_size,
                       0,
                       std::move(limiter)};
}

// A table without a signature; `extensions` see its changes
// (Table::Config::extensions).
inline std::shared_ptr<Table> MakeTable(
    const KeyDistributionOptions& sampler, const KeyDistributionOptions& remover, int64_t max_size,
    int32_t max_times_sampled, RateLimiter limiter, std::string name = "t",
    std::vector<std::shared_ptr<TableExtension>> extensions = {}) {
  Table::Config config = TableConfig(std::move(name), sampler, remover, max_size, limiter);
  config.max_times_sampled = max_times_sampled;
  config.extensions = std::move(extensions);
  absl::StatusOr<std::shared_ptr<Table>> table = Table::Create(std::move(config));
  EXPECT_TRUE(table.ok()) << table.status();
  return *table;
}

// A one-column chunk of `rows` int64 steps (value = chunk_key * 100 + row).
inline std::shared_ptr<const TableChunk> MakeChunk(uint64_t chunk_key, uint64_t episode_id,
                                                   int rows = 1) {
  Tensor column;
  column.dtype = ::tf_reverb::tf::DT_INT64;
  column.shape = {rows};
  for (int r = 0; r < rows; ++r) {
    int64_t v = static_cast<int64_t>(chunk_key) * 100 + r;
    column.data.append(reinterpret_cast<const char*>(&v), sizeof(v));
  }
  absl::StatusOr<ChunkData> chunk = BuildChunk(chunk_key, {column}, episode_id, 0, rows - 1, false);
  EXPECT_TRUE(chunk.ok()) << chunk.status();
  return TableChunk::FromProto(*chunk);
}

// An item with one column referencing every row of each chunk in order.
inline TableItem MakeItem(uint64_t key, double priority,
                          std::vector<std::shared_ptr<const TableChunk>> chunks) {
  auto item = std::make_shared<PrioritizedItem>();
  item->set_key(key);
  item->set_table("t");
  item->set_priority(priority);
  auto* column = item->mutable_flat_trajectory()->add_columns();
  for (const auto& chunk : chunks) {
    auto* slice = column->add_chunk_slices();
    slice->set_chunk_key(chunk->key());
    slice->set_offset(0);
    slice->set_length(static_cast<int32_t>(chunk->View()->tensors[0].shape[0]));
    slice->set_index(0);
  }
  return TableItem{ItemRecord::FromProto(*item), std::move(chunks)};
}

// An item over its own fresh chunk (chunk key = key + 1e9, episode = key).
inline TableItem MakeItem(uint64_t key, double priority = 1.0) {
  return MakeItem(key, priority, {MakeChunk(key + 1000000000, key)});
}

inline absl::Status Insert(Table& table, uint64_t key, double priority = 1.0,
                           absl::Duration timeout = kNoWait) {
  return table.InsertOrAssign(MakeItem(key, priority), timeout);
}

inline absl::StatusOr<SampledItem> SampleOne(Table& table, absl::Duration timeout = kNoWait) {
  std::vector<SampledItem> out;
  absl::Status status = table.SampleBatch(1, timeout, &out);
  if (!status.ok()) return status;
  EXPECT_EQ(out.size(), 1u);
  return out.front();
}

// The keys of `n` samples of `table`, in the order they were picked (each
// sample must succeed).
inline std::vector<uint64_t> SampleKeys(Table& table, int n) {
  std::vector<uint64_t> keys;
  for (int i = 0; i < n; ++i) {
    absl::StatusOr<SampledItem> sample = SampleOne(table);
    EXPECT_TRUE(sample.ok()) << sample.status();
    if (sample.ok()) keys.push_back(sample->data->item.key());
  }
  return keys;
}

}  // namespace testing
}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_TESTING_TABLE_TESTING_H_
