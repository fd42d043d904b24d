// What the C++ benchmarks share: one thread's CPU clock, and exiting on an
// error status.
//
// Contract: header-only, thread-safe; for benchmark binaries, which report
// an unexpected error and exit rather than recover.
#ifndef TF_REVERB_BENCHMARKS_BENCHMARK_SUPPORT_H_
#define TF_REVERB_BENCHMARKS_BENCHMARK_SUPPORT_H_

#include <time.h>

#include <cstdio>
#include <cstdlib>

#include "absl/status/status.h"

namespace tf_reverb {
namespace benchmarks {

// Seconds of CPU the calling thread has used (CLOCK_THREAD_CPUTIME_ID), so
// other load on the machine changes a measurement little.
inline double ThreadCpuSeconds() {
  timespec now;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

// Prints `status` and exits with 1 unless it is OK.
inline void CheckOrExit(const absl::Status& status) {
  if (!status.ok()) {
    std::fprintf(stderr, "%s\n", status.ToString().c_str());
    std::exit(1);
  }
}

}  // namespace benchmarks
}  // namespace tf_reverb

#endif  // TF_REVERB_BENCHMARKS_BENCHMARK_SUPPORT_H_
