// ReadProcessStats: the standard process_* metrics of this process, read
// from /proc (prometheus-cpp 1.0.1 provides none of its own).
//
// Contract:
//  * Thread-safety: thread-safe (reads /proc/self each call).
//  * Errors: UNAVAILABLE when /proc/self cannot be read (not Linux, /proc
//    not mounted); the exporter then omits the process families.
#ifndef TF_REVERB_SERVER_METRICS_PROCESS_METRICS_H_
#define TF_REVERB_SERVER_METRICS_PROCESS_METRICS_H_

#include <cstdint>

#include "absl/status/statusor.h"

namespace tf_reverb {

struct ProcessStats {
  double cpu_seconds = 0;  // user + system
  int64_t resident_bytes = 0;
  int64_t virtual_bytes = 0;
  double start_time_seconds = 0;  // since the Unix epoch
  int64_t threads = 0;
  int64_t open_fds = 0;
  int64_t max_fds = 0;
};

absl::StatusOr<ProcessStats> ReadProcessStats();

}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_METRICS_PROCESS_METRICS_H_
