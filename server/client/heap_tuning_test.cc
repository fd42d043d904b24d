#include "server/client/heap_tuning.h"

#include <sys/resource.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace tf_reverb {
namespace {

constexpr size_t kBlockBytes = 512 << 10;
constexpr int kBlocks = 48;  // 24 MiB in flight, as a sampler's prefetch
constexpr int kCycles = 8;
constexpr long kPagesPerCycle = kBlocks * kBlockBytes / 4096;

long MinorFaults() {
  rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

// Minor faults per page written over the last cycles of a sampler-like
// pattern on a fresh thread (its own glibc heap): fill kBlocks blocks,
// free them all, again.
double FaultsPerPageInSteadyState() {
  double result = 0;
  std::thread([&result] {
    long counted = 0;
    for (int cycle = 0; cycle < kCycles; ++cycle) {
      const long before = MinorFaults();
      std::vector<char*> blocks;
      for (int i = 0; i < kBlocks; ++i) {
        blocks.push_back(static_cast<char*>(std::malloc(kBlockBytes)));
        std::memset(blocks.back(), cycle, kBlockBytes);
      }
      for (char* block : blocks) std::free(block);
      if (cycle >= 2) counted += MinorFaults() - before;
    }
    result = static_cast<double>(counted) / ((kCycles - 2) * kPagesPerCycle);
  }).join();
  return result;
}

// Each case runs in a fresh process (threadsafe death tests re-execute the
// binary), since the setting is process-wide and applied once.
class HeapTuningTest : public ::testing::Test {
 protected:
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

TEST_F(HeapTuningTest, FreedMemoryStaysMappedForReuse) {
  EXPECT_EXIT(
      {
        unsetenv("TF_REVERB_MALLOC_TUNING");
        if (!KeepFreedHeapMapped()) std::exit(2);
        std::exit(FaultsPerPageInSteadyState() < 0.05 ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST_F(HeapTuningTest, OptOutLeavesGlibcTrimmingFreedMemory) {
  // The same pattern without the setting refaults (almost) every page: what
  // the setting is for, and proof that the test above can fail.
  EXPECT_EXIT(
      {
        setenv("TF_REVERB_MALLOC_TUNING", "0", 1);
        if (KeepFreedHeapMapped()) std::exit(2);
        std::exit(FaultsPerPageInSteadyState() > 0.5 ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST_F(HeapTuningTest, UsersOwnTrimThresholdWins) {
  EXPECT_EXIT(
      {
        unsetenv("TF_REVERB_MALLOC_TUNING");
        setenv("MALLOC_TRIM_THRESHOLD_", "131072", 1);
        std::exit(KeepFreedHeapMapped() ? 1 : 0);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST_F(HeapTuningTest, AppliedOncePerProcess) {
  EXPECT_EXIT(
      {
        unsetenv("TF_REVERB_MALLOC_TUNING");
        const bool first = KeepFreedHeapMapped();
        setenv("TF_REVERB_MALLOC_TUNING", "0", 1);  // too late: already applied
        std::exit(first && KeepFreedHeapMapped() ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace tf_reverb
