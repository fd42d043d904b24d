// Linked into everything that uses Debian's abseil (@system_libs//:absl,
// alwayslink): in an optimized build, turns off absl::Mutex's lock-order
// ("potential deadlock") detector, as a consistent release build of abseil
// does by default.
//
// Debian builds libabsl without NDEBUG, so the detector is on (and aborts)
// by default, and it tracks mutexes by address. Since abseil 2023, a Mutex's
// destructor is inline and, where NDEBUG is defined (bazel -c opt), empty:
// our mutexes are destroyed without the library forgetting them, a new mutex
// at a reused address inherits the old one's lock-order edges, and the
// detector reports a cycle that never existed and kills the process (seen on
// Debian 13's abseil 20240722 in //server/writer:trajectory_writer_test).
// With abseil's own debug destructor (no NDEBUG, or TSan) the detector
// stays on.

#include "absl/base/config.h"
#include "absl/synchronization/mutex.h"

#if defined(NDEBUG) && !defined(ABSL_HAVE_THREAD_SANITIZER)
namespace {

const bool kDeadlockDetectionOff = [] {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  return true;
}();

}  // namespace
#endif
