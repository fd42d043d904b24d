#include "server/metrics/process_metrics.h"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstddef>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"

namespace tf_reverb {
namespace {

bool ReadFile(const char* path, std::string* out) {
  std::ifstream file(path);
  if (!file) return false;
  std::stringstream buffer;
  buffer << file.rdbuf();
  *out = buffer.str();
  return true;
}

// The boot time (seconds since the epoch) from /proc/stat's "btime".
bool BootTime(double* seconds) {
  std::string stat;
  if (!ReadFile("/proc/stat", &stat)) return false;
  for (absl::string_view line : absl::StrSplit(stat, '\n')) {
    if (absl::ConsumePrefix(&line, "btime ")) {
      int64_t value;
      if (!absl::SimpleAtoi(line, &value)) return false;
      *seconds = static_cast<double>(value);
      return true;
    }
  }
  return false;
}

}  // namespace

absl::StatusOr<ProcessStats> ReadProcessStats() {
  std::string stat;
  if (!ReadFile("/proc/self/stat", &stat)) {
    return absl::UnavailableError("Cannot read /proc/self/stat");
  }
  // The command name (field 2) is in parentheses and may hold spaces.
  const size_t paren = stat.rfind(')');
  if (paren == std::string::npos) return absl::UnavailableError("Unreadable /proc/self/stat");
  std::vector<absl::string_view> fields =
      absl::StrSplit(absl::string_view(stat).substr(paren + 1), ' ', absl::SkipEmpty());
  // fields[0] is field 3 (state): field N is fields[N - 3].
  auto field = [&](int n, int64_t* value) {
    return n - 3 < static_cast<int>(fields.size()) &&
           absl::SimpleAtoi(absl::StripAsciiWhitespace(fields[n - 3]), value);
  };
  int64_t utime, stime, threads, start_ticks, vsize, rss_pages;
  if (!field(14, &utime) || !field(15, &stime) || !field(20, &threads) ||
      !field(22, &start_ticks) || !field(23, &vsize) || !field(24, &rss_pages)) {
    return absl::UnavailableError("Unreadable /proc/self/stat");
  }
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  ProcessStats stats;
  stats.cpu_seconds = static_cast<double>(utime + stime) / ticks;
  stats.threads = threads;
  stats.virtual_bytes = vsize;
  stats.resident_bytes = rss_pages * static_cast<int64_t>(sysconf(_SC_PAGESIZE));
  double boot = 0;
  if (BootTime(&boot)) stats.start_time_seconds = boot + static_cast<double>(start_ticks) / ticks;
  if (DIR* dir = opendir("/proc/self/fd")) {
    int64_t count = 0;
    while (struct dirent* entry = readdir(dir)) {
      if (entry->d_name[0] != '.') ++count;
    }
    closedir(dir);
    stats.open_fds = count - 1;  // without the descriptor of this listing
  }
  struct rlimit limit;
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0) {
    stats.max_fds = static_cast<int64_t>(limit.rlim_cur);
  }
  return stats;
}

}  // namespace tf_reverb
