// Scratch files for fuzz targets whose code under test reads files: one
// private directory per process (under $TMPDIR, else /dev/shm or /tmp),
// removed at exit, and the separator that splits one input into several
// files.
//
// Contract: header-only; not thread-safe (libFuzzer runs one input at a time).
#ifndef TF_REVERB_SERVER_FUZZ_FUZZ_FILES_H_
#define TF_REVERB_SERVER_FUZZ_FUZZ_FILES_H_

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace tf_reverb {
namespace fuzz {

// Separates the files of a multi-file input; mutations rarely create or
// destroy one, so the parts stay aligned while their contents mutate.
inline constexpr char kFileSeparator[] = "@@TF_REVERB_FILE@@";

// Splits `input` at kFileSeparator into exactly `n` parts (missing ones are
// empty; extra separators stay in the last part).
inline std::vector<std::string> SplitFiles(absl::string_view input, int n) {
  std::vector<std::string> parts = absl::StrSplit(input, absl::MaxSplits(kFileSeparator, n - 1));
  parts.resize(n);
  return parts;
}

inline const std::string& ScratchDirectory() {
  static const std::string* dir = [] {
    // tmpfs where there is one: the code under test fsyncs what it writes.
    const char* tmp = std::getenv("TMPDIR");
    std::string base = tmp != nullptr && *tmp ? tmp : "/tmp";
    if ((tmp == nullptr || !*tmp) && access("/dev/shm", W_OK) == 0) base = "/dev/shm";
    std::string pattern = base + "/tf_reverb_fuzz_XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) {
      std::perror("mkdtemp");
      std::abort();
    }
    auto* path = new std::string(pattern);
    std::atexit([] {
      std::error_code error;
      std::filesystem::remove_all(ScratchDirectory(), error);
    });
    return path;
  }();
  return *dir;
}

// Writes `bytes` to `path`; aborts when the scratch disk fails (not a finding
// in the code under test, but nothing could be tested).
inline void WriteFileOrDie(const std::string& path, absl::string_view bytes) {
  FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr || std::fwrite(bytes.data(), 1, bytes.size(), file) != bytes.size() ||
      std::fclose(file) != 0) {
    std::perror(path.c_str());
    std::abort();
  }
}

inline std::string ReadFileOrDie(const std::string& path) {
  FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) {
    std::perror(path.c_str());
    std::abort();
  }
  std::string bytes;
  char buffer[1 << 16];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), file)) > 0) bytes.append(buffer, n);
  std::fclose(file);
  return bytes;
}

}  // namespace fuzz
}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_FUZZ_FUZZ_FILES_H_
