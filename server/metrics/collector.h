// MetricsCollector: the prometheus::Collectable of a server. At each scrape
// it reads the tables' TableMetrics, the RpcObserver, the Checkpointer's
// CheckpointMetrics and /proc, and returns the metric families below; it
// keeps no state of its own. Names follow Prometheus' conventions (base
// units, `_total` counters, `_seconds`, `_bytes`).
//
//   per table (label table):
//     tf_reverb_table_items, _max_size, _episodes, _chunks,
//     _chunk_stored_bytes, _chunk_uncompressed_bytes            (gauges)
//     tf_reverb_table_inserts_total, _samples_total, _deletes_total,
//     _priority_updates_total, _inserted_bytes_total,
//     _sampled_bytes_total                                      (counters)
//     tf_reverb_table_rate_limiter_blocked_seconds{operation}   (histogram)
//     tf_reverb_table_rate_limiter_blocked_callers{operation}   (gauge)
//   per RPC method (label method):
//     tf_reverb_rpc_calls_total, tf_reverb_rpc_errors_total{code},
//     tf_reverb_rpc_duration_seconds (histogram), tf_reverb_rpc_active_calls
//   checkpoints:
//     tf_reverb_checkpoint_duration_seconds (histogram of successful saves),
//     _saved_bytes_total, _last_save_bytes,
//     _last_success_timestamp_seconds, _save_failures_total,
//     _restores_total, _restore_failures_total
//   process: process_cpu_seconds_total, process_resident_memory_bytes,
//     process_virtual_memory_bytes, process_start_time_seconds,
//     process_threads, process_open_fds, process_max_fds
//
// Contract:
//  * Thread-safety: Collect() is thread-safe and takes no table lock except
//    one short section per table for the blocked-callers gauge.
//  * Ownership: shares the tables, the observer and the checkpointer (which
//    may be null: the checkpoint families are then all zero).
#ifndef TF_REVERB_SERVER_METRICS_COLLECTOR_H_
#define TF_REVERB_SERVER_METRICS_COLLECTOR_H_

#include <memory>
#include <vector>

#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"
#include "server/checkpointing/checkpointer.h"
#include "server/metrics/rpc_observer.h"
#include "server/table.h"

namespace tf_reverb {

class MetricsCollector final : public prometheus::Collectable {
 public:
  MetricsCollector(std::vector<std::shared_ptr<Table>> tables, std::shared_ptr<RpcObserver> rpcs,
                   std::shared_ptr<Checkpointer> checkpointer);

  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  const std::vector<std::shared_ptr<Table>> tables_;
  const std::shared_ptr<RpcObserver> rpcs_;
  const std::shared_ptr<Checkpointer> checkpointer_;
};

}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_METRICS_COLLECTOR_H_
