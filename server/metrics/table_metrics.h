// TableMetrics: the monotonic counters and current levels of one table that
// the metrics exporter reads at scrape time (tf_reverb_table_* families).
//
// Contract:
//  * Thread-safety: the owning Table writes every field while holding its
//    own mutex (so writes never contend with each other and add no lock);
//    readers (the exporter) read them lock-free at any time. All accesses are
//    relaxed atomics: each value is exact, a set of values read together is
//    not a consistent snapshot.
//  * Counters only grow for the life of the process (Reset and checkpoint
//    restores do not rewind them: Prometheus counters must not go back);
//    levels (items, episodes, chunks, ...) follow the table.
//  * Ownership: a member of its Table.
#ifndef TF_REVERB_SERVER_METRICS_TABLE_METRICS_H_
#define TF_REVERB_SERVER_METRICS_TABLE_METRICS_H_

#include <atomic>
#include <cstdint>

#include "server/metrics/atomic_histogram.h"

namespace tf_reverb {

struct TableMetrics {
  // Relaxed helpers for the writer (who holds the table's mutex).
  static void Add(std::atomic<int64_t>& value, int64_t delta) {
    value.store(value.load(std::memory_order_relaxed) + delta, std::memory_order_relaxed);
  }
  static void Set(std::atomic<int64_t>& value, int64_t level) {
    value.store(level, std::memory_order_relaxed);
  }
  static int64_t Get(const std::atomic<int64_t>& value) {
    return value.load(std::memory_order_relaxed);
  }

  // Counters.
  std::atomic<int64_t> inserts{0};           // new items (not priority updates)
  std::atomic<int64_t> samples{0};           // sampled items
  std::atomic<int64_t> deletes{0};           // removed by eviction, max_times_sampled, deletes
  std::atomic<int64_t> priority_updates{0};  // MutatePriorities and re-inserted keys
  std::atomic<int64_t> inserted_bytes{0};    // stored bytes of chunks new to the table
  std::atomic<int64_t> sampled_bytes{0};     // stored bytes of the chunks of sampled items
  // Levels.
  std::atomic<int64_t> items{0};
  std::atomic<int64_t> max_size{0};
  std::atomic<int64_t> episodes{0};
  std::atomic<int64_t> chunks{0};                    // distinct chunks referenced by items
  std::atomic<int64_t> chunk_compressed_bytes{0};    // their stored (compressed) bytes
  std::atomic<int64_t> chunk_uncompressed_bytes{0};  // their data_uncompressed_size
  // Time each blocked insert / sample waited for the rate limiter (one
  // observation per wait, when it ends).
  AtomicHistogram insert_blocked_seconds{AtomicHistogram::SecondsBuckets()};
  AtomicHistogram sample_blocked_seconds{AtomicHistogram::SecondsBuckets()};
};

}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_METRICS_TABLE_METRICS_H_
