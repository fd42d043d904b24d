#include "server/client/heap_tuning.h"

#include <cstdlib>
#include <cstring>
#include <mutex>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace tf_reverb {
namespace {

bool UserChoseTrimThreshold() {
  if (std::getenv("MALLOC_TRIM_THRESHOLD_") != nullptr) return true;
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  return tunables != nullptr && std::strstr(tunables, "glibc.malloc.trim_threshold") != nullptr;
}

bool OptedOut() {
  const char* value = std::getenv("TF_REVERB_MALLOC_TUNING");
  return value != nullptr && std::strcmp(value, "0") == 0;
}

bool Apply() {
#if defined(__GLIBC__)
  if (OptedOut() || UserChoseTrimThreshold()) return false;
  return mallopt(M_MMAP_THRESHOLD, static_cast<int>(kMmapThresholdBytes)) == 1 &&
         mallopt(M_TRIM_THRESHOLD, static_cast<int>(kTrimThresholdBytes)) == 1;
#else
  return false;
#endif
}

}  // namespace

bool KeepFreedHeapMapped() {
  static std::once_flag once;
  static bool applied = false;
  std::call_once(once, [] { applied = Apply(); });
  return applied;
}

}  // namespace tf_reverb
