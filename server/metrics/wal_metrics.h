// WalMetrics: what the exporter reports about a server's write-ahead log
// (tf_reverb_wal_* families).
//
// Contract:
//  * Thread-safety: written by the log (its appenders and its writer
//    thread), read lock-free by the exporter at any time; relaxed atomics,
//    each value exact, values read together not a consistent snapshot.
//  * Ownership: a member of its WriteAheadLog.
#ifndef TF_REVERB_SERVER_METRICS_WAL_METRICS_H_
#define TF_REVERB_SERVER_METRICS_WAL_METRICS_H_

#include <atomic>
#include <cstdint>

#include "server/metrics/atomic_histogram.h"

namespace tf_reverb {

struct WalMetrics {
  std::atomic<int64_t> records{0};        // appended since start
  std::atomic<int64_t> written_bytes{0};  // written since start (framing included)
  std::atomic<int64_t> fsyncs{0};
  std::atomic<int64_t> disk_bytes{0};  // the segments on disk now
  std::atomic<int64_t> segments{0};    // on disk now
  std::atomic<int64_t> failures{0};    // writes or fsyncs that failed
  // Records per write: how many changes shared one write (and, with sync,
  // one fsync).
  AtomicHistogram batch_records{{1, 2, 4, 8, 16, 32, 64, 128, 256, 1024}};
  AtomicHistogram fsync_seconds{{0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.5, 1}};
};

}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_METRICS_WAL_METRICS_H_
