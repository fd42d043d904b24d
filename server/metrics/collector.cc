#include "server/metrics/collector.h"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "prometheus/client_metric.h"
#include "prometheus/metric_type.h"
#include "server/metrics/atomic_histogram.h"
#include "server/metrics/checkpoint_metrics.h"
#include "server/metrics/process_metrics.h"
#include "server/metrics/table_metrics.h"
#include "server/metrics/wal_metrics.h"
#include "server/wal/write_ahead_log.h"

namespace tf_reverb {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;
using Labels = std::vector<ClientMetric::Label>;

MetricFamily Family(std::string name, std::string help, MetricType type) {
  MetricFamily family;
  family.name = std::move(name);
  family.help = std::move(help);
  family.type = type;
  return family;
}

void AddValue(MetricFamily* family, Labels labels, double value) {
  ClientMetric metric;
  metric.label = std::move(labels);
  if (family->type == MetricType::Counter) {
    metric.counter.value = value;
  } else {
    metric.gauge.value = value;
  }
  family->metric.push_back(std::move(metric));
}

// One family per scalar: a metric without labels and its value now.
struct Scalar {
  const char* name;
  const char* help;
  MetricType type;
  double value;
};

template <size_t N>
void AddScalars(const Scalar (&scalars)[N], std::vector<MetricFamily>* out) {
  for (const Scalar& scalar : scalars) {
    MetricFamily family = Family(scalar.name, scalar.help, scalar.type);
    AddValue(&family, {}, scalar.value);
    out->push_back(std::move(family));
  }
}

void AddHistogram(MetricFamily* family, Labels labels, const AtomicHistogram& histogram) {
  const AtomicHistogram::Snapshot snapshot = histogram.Read();
  ClientMetric metric;
  metric.label = std::move(labels);
  metric.histogram.sample_count = snapshot.count;
  metric.histogram.sample_sum = snapshot.sum;
  for (size_t i = 0; i < snapshot.cumulative.size(); ++i) {
    ClientMetric::Bucket bucket;
    bucket.cumulative_count = snapshot.cumulative[i];
    bucket.upper_bound = i < snapshot.upper_bounds.size() ? snapshot.upper_bounds[i]
                                                          : std::numeric_limits<double>::infinity();
    metric.histogram.bucket.push_back(bucket);
  }
  family->metric.push_back(std::move(metric));
}

double Get(const std::atomic<int64_t>& value) {
  return static_cast<double>(value.load(std::memory_order_relaxed));
}

void CollectTables(const std::vector<std::shared_ptr<Table>>& tables,
                   std::vector<MetricFamily>* out) {
  struct Level {
    const char* name;
    const char* help;
    MetricType type;
    std::atomic<int64_t> TableMetrics::* field;
  };
  const Level levels[] = {
      {"tf_reverb_table_items", "Items in the table.", MetricType::Gauge, &TableMetrics::items},
      {"tf_reverb_table_max_size", "The table's max_size.", MetricType::Gauge,
       &TableMetrics::max_size},
      {"tf_reverb_table_episodes", "Episodes with at least one item in the table.",
       MetricType::Gauge, &TableMetrics::episodes},
      {"tf_reverb_table_chunks", "Distinct chunks referenced by the table's items.",
       MetricType::Gauge, &TableMetrics::chunks},
      {"tf_reverb_table_chunk_stored_bytes", "Bytes of the table's chunks as stored (compressed).",
       MetricType::Gauge, &TableMetrics::chunk_compressed_bytes},
      {"tf_reverb_table_chunk_uncompressed_bytes",
       "Bytes of the table's chunks uncompressed (as the writers report).", MetricType::Gauge,
       &TableMetrics::chunk_uncompressed_bytes},
      {"tf_reverb_table_inserts_total", "Items inserted (not counting priority updates).",
       MetricType::Counter, &TableMetrics::inserts},
      {"tf_reverb_table_samples_total", "Items sampled.", MetricType::Counter,
       &TableMetrics::samples},
      {"tf_reverb_table_deletes_total",
       "Items removed (eviction, max_times_sampled, deletes; not Reset).", MetricType::Counter,
       &TableMetrics::deletes},
      {"tf_reverb_table_priority_updates_total",
       "Priority updates (MutatePriorities and inserts of present keys).", MetricType::Counter,
       &TableMetrics::priority_updates},
      {"tf_reverb_table_inserted_bytes_total",
       "Stored bytes of the chunks inserts brought into the table.", MetricType::Counter,
       &TableMetrics::inserted_bytes},
      {"tf_reverb_table_sampled_bytes_total", "Stored bytes of the chunks of the sampled items.",
       MetricType::Counter, &TableMetrics::sampled_bytes},
  };
  for (const Level& level : levels) {
    MetricFamily family = Family(level.name, level.help, level.type);
    for (const auto& table : tables) {
      AddValue(&family, {{"table", table->name()}}, Get(table->metrics().*level.field));
    }
    out->push_back(std::move(family));
  }
  MetricFamily blocked =
      Family("tf_reverb_table_rate_limiter_blocked_seconds",
             "Time each insert or sample waited for the rate limiter (one observation per wait).",
             MetricType::Histogram);
  MetricFamily callers =
      Family("tf_reverb_table_rate_limiter_blocked_callers",
             "Inserts or samples waiting for the rate limiter now.", MetricType::Gauge);
  for (const auto& table : tables) {
    AddHistogram(&blocked, {{"operation", "insert"}, {"table", table->name()}},
                 table->metrics().insert_blocked_seconds);
    AddHistogram(&blocked, {{"operation", "sample"}, {"table", table->name()}},
                 table->metrics().sample_blocked_seconds);
    const Table::BlockedCallers now = table->blocked_callers();
    AddValue(&callers, {{"operation", "insert"}, {"table", table->name()}},
             static_cast<double>(now.inserts));
    AddValue(&callers, {{"operation", "sample"}, {"table", table->name()}},
             static_cast<double>(now.samples));
  }
  out->push_back(std::move(blocked));
  out->push_back(std::move(callers));
}

void CollectRpcs(const RpcObserver& rpcs, std::vector<MetricFamily>* out) {
  MetricFamily calls = Family("tf_reverb_rpc_calls_total", "RPCs started.", MetricType::Counter);
  MetricFamily errors =
      Family("tf_reverb_rpc_errors_total", "RPCs that ended with a status other than OK, by code.",
             MetricType::Counter);
  MetricFamily seconds =
      Family("tf_reverb_rpc_duration_seconds",
             "Duration of finished RPCs (streams: their lifetime).", MetricType::Histogram);
  MetricFamily active =
      Family("tf_reverb_rpc_active_calls",
             "RPCs in progress (for the stream methods: open streams).", MetricType::Gauge);
  for (const RpcObserver::MethodStats* method : rpcs.methods()) {
    AddValue(&calls, {{"method", method->name}}, Get(method->started));
    for (int code = 1; code < RpcObserver::kNumCodes; ++code) {
      const double count = Get(method->finished[code]);
      if (count > 0) {
        AddValue(&errors, {{"code", RpcObserver::CodeName(code)}, {"method", method->name}}, count);
      }
    }
    AddHistogram(&seconds, {{"method", method->name}}, method->seconds);
    AddValue(&active, {{"method", method->name}}, Get(method->active));
  }
  for (MetricFamily* family : {&calls, &errors, &seconds, &active}) {
    out->push_back(std::move(*family));
  }
}

void CollectCheckpoints(const Checkpointer* checkpointer, std::vector<MetricFamily>* out) {
  static const CheckpointMetrics* const kNone = new CheckpointMetrics();
  const CheckpointMetrics& metrics = checkpointer != nullptr ? checkpointer->metrics() : *kNone;
  MetricFamily duration = Family("tf_reverb_checkpoint_duration_seconds",
                                 "Duration of successful checkpoint saves.", MetricType::Histogram);
  AddHistogram(&duration, {}, metrics.save_seconds);
  out->push_back(std::move(duration));
  const Scalar values[] = {
      {"tf_reverb_checkpoint_saved_bytes_total", "Bytes written by successful saves.",
       MetricType::Counter, Get(metrics.saved_bytes)},
      {"tf_reverb_checkpoint_last_save_bytes", "Bytes of the newest successful save.",
       MetricType::Gauge, Get(metrics.last_save_bytes)},
      {"tf_reverb_checkpoint_last_success_timestamp_seconds",
       "Unix time of the newest successful save (0: none yet).", MetricType::Gauge,
       metrics.last_success_unix_seconds.load(std::memory_order_relaxed)},
      {"tf_reverb_checkpoint_save_failures_total", "Checkpoint saves that failed.",
       MetricType::Counter, Get(metrics.save_failures)},
      {"tf_reverb_checkpoint_restores_total", "Checkpoints restored.", MetricType::Counter,
       Get(metrics.restores)},
      {"tf_reverb_checkpoint_restore_failures_total", "Checkpoint restores that failed.",
       MetricType::Counter, Get(metrics.restore_failures)},
  };
  AddScalars(values, out);
}

void CollectWal(const Checkpointer* checkpointer, std::vector<MetricFamily>* out) {
  std::shared_ptr<WriteAheadLog> log = checkpointer != nullptr ? checkpointer->log() : nullptr;
  if (log == nullptr) return;  // no log: no tf_reverb_wal_* families
  const WalMetrics& metrics = log->metrics();
  MetricFamily batch = Family("tf_reverb_wal_batch_records",
                              "Log records written by one write (and, with sync, one fsync).",
                              MetricType::Histogram);
  AddHistogram(&batch, {}, metrics.batch_records);
  out->push_back(std::move(batch));
  MetricFamily fsync = Family("tf_reverb_wal_fsync_duration_seconds",
                              "Duration of the log's fdatasync calls.", MetricType::Histogram);
  AddHistogram(&fsync, {}, metrics.fsync_seconds);
  out->push_back(std::move(fsync));
  const Scalar values[] = {
      {"tf_reverb_wal_records_total", "Records appended to the write-ahead log.",
       MetricType::Counter, Get(metrics.records)},
      {"tf_reverb_wal_written_bytes_total", "Bytes written to the write-ahead log.",
       MetricType::Counter, Get(metrics.written_bytes)},
      {"tf_reverb_wal_fsyncs_total", "fdatasync calls of the write-ahead log.", MetricType::Counter,
       Get(metrics.fsyncs)},
      {"tf_reverb_wal_disk_bytes", "Bytes of the log's segment files on disk.", MetricType::Gauge,
       Get(metrics.disk_bytes)},
      {"tf_reverb_wal_segments", "Segment files of the log on disk.", MetricType::Gauge,
       Get(metrics.segments)},
      {"tf_reverb_wal_failures_total",
       "Log writes or fsyncs that failed (the log then confirms nothing more).",
       MetricType::Counter, Get(metrics.failures)},
  };
  AddScalars(values, out);
}

void CollectProcess(std::vector<MetricFamily>* out) {
  absl::StatusOr<ProcessStats> stats = ReadProcessStats();
  if (!stats.ok()) return;
  const Scalar values[] = {
      {"process_cpu_seconds_total", "User and system CPU time spent in seconds.",
       MetricType::Counter, stats->cpu_seconds},
      {"process_resident_memory_bytes", "Resident memory size in bytes.", MetricType::Gauge,
       static_cast<double>(stats->resident_bytes)},
      {"process_virtual_memory_bytes", "Virtual memory size in bytes.", MetricType::Gauge,
       static_cast<double>(stats->virtual_bytes)},
      {"process_start_time_seconds", "Start time of the process since the Unix epoch.",
       MetricType::Gauge, stats->start_time_seconds},
      {"process_threads", "Threads of the process.", MetricType::Gauge,
       static_cast<double>(stats->threads)},
      {"process_open_fds", "Open file descriptors.", MetricType::Gauge,
       static_cast<double>(stats->open_fds)},
      {"process_max_fds", "Limit of open file descriptors.", MetricType::Gauge,
       static_cast<double>(stats->max_fds)},
  };
  AddScalars(values, out);
}

}  // namespace

MetricsCollector::MetricsCollector(std::vector<std::shared_ptr<Table>> tables,
                                   std::shared_ptr<RpcObserver> rpcs,
                                   std::shared_ptr<Checkpointer> checkpointer)
    : tables_(std::move(tables)), rpcs_(std::move(rpcs)), checkpointer_(std::move(checkpointer)) {}

std::vector<MetricFamily> MetricsCollector::Collect() const {
  std::vector<MetricFamily> families;
  CollectTables(tables_, &families);
  if (rpcs_ != nullptr) CollectRpcs(*rpcs_, &families);
  CollectCheckpoints(checkpointer_.get(), &families);
  CollectWal(checkpointer_.get(), &families);
  CollectProcess(&families);
  return families;
}

}  // namespace tf_reverb
