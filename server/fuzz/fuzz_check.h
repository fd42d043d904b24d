// Property checks of the fuzz targets (server/fuzz): a violated property is a
// finding, so it prints what failed and aborts, which libFuzzer records as a
// crash with the input that caused it.
//
// Contract: header-only, thread-safe; used only by the fuzz targets and
// their corpus tests.
#ifndef TF_REVERB_SERVER_FUZZ_FUZZ_CHECK_H_
#define TF_REVERB_SERVER_FUZZ_FUZZ_CHECK_H_

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/status/status.h"

namespace tf_reverb {
namespace fuzz {

[[noreturn]] inline void PropertyFailed(const char* file, int line, const char* what,
                                        const std::string& detail) {
  std::fprintf(stderr, "%s:%d: fuzz property violated: %s %s\n", file, line, what, detail.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace fuzz
}  // namespace tf_reverb

// FUZZ_CHECK(condition) << is not offered: the detail is a std::string.
#define FUZZ_CHECK(condition, detail)                                              \
  do {                                                                             \
    if (!(condition)) {                                                            \
      ::tf_reverb::fuzz::PropertyFailed(__FILE__, __LINE__, #condition, (detail)); \
    }                                                                              \
  } while (false)

#define FUZZ_CHECK_OK(status_expr)                                        \
  do {                                                                    \
    const ::absl::Status fuzz_check_status = (status_expr);               \
    if (!fuzz_check_status.ok()) {                                        \
      ::tf_reverb::fuzz::PropertyFailed(__FILE__, __LINE__, #status_expr, \
                                        fuzz_check_status.ToString());    \
    }                                                                     \
  } while (false)

#endif  // TF_REVERB_SERVER_FUZZ_FUZZ_CHECK_H_
