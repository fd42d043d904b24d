// CheckpointMetrics: what the exporter reports about one Checkpointer's
// saves and restores (tf_reverb_checkpoint_* families).
//
// Contract:
//  * Thread-safety: written by the Checkpointer (saves are serialised), read
//    lock-free by the exporter at any time; relaxed atomics, each value exact,
//    values read together not a consistent snapshot.
//  * Ownership: a member of its Checkpointer.
#ifndef TF_REVERB_SERVER_METRICS_CHECKPOINT_METRICS_H_
#define TF_REVERB_SERVER_METRICS_CHECKPOINT_METRICS_H_

#include <atomic>
#include <cstdint>

#include "server/metrics/atomic_histogram.h"

namespace tf_reverb {

struct CheckpointMetrics {
  // Successful saves: their count (the histogram's) and durations.
  AtomicHistogram save_seconds{{0.01, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600}};
  std::atomic<int64_t> saved_bytes{0};               // all successful saves
  std::atomic<int64_t> last_save_bytes{0};           // the newest successful save
  std::atomic<double> last_success_unix_seconds{0};  // 0: none yet
  std::atomic<int64_t> save_failures{0};
  std::atomic<int64_t> restores{0};  // checkpoints loaded
  std::atomic<int64_t> restore_failures{0};
};

}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_METRICS_CHECKPOINT_METRICS_H_
