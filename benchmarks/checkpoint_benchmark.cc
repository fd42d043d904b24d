// Checkpoint benchmark: save and restore throughput for a table of 1e6 small
// items and one of ~1 GB of frames, and the longest pause a concurrent writer
// sees while the 1e6-item table is checkpointed.
//
//   bazel run -c opt //benchmarks:checkpoint_benchmark -- [--dir=/tmp/x]
//       [--small_items=1000000] [--frame_items=16384] [--frame_bytes=65536]
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "schema.pb.h"
#include "server/checkpointing/checkpointer.h"
#include "server/chunk_codec.h"
#include "server/rate_limiter.h"
#include "server/selectors/selector.h"
#include "server/table.h"
#include "server/table_item.h"
#include "server/tensor.h"
#include "tensor.pb.h"

ABSL_FLAG(std::string, dir, "/tmp/tf_reverb_checkpoint_benchmark", "Checkpoint root.");
ABSL_FLAG(int64_t, small_items, 1000000, "Items of the small-item table.");
ABSL_FLAG(int64_t, frame_items, 16384, "Items of the frame table.");
ABSL_FLAG(int64_t, frame_bytes, 65536, "Bytes per frame (incompressible).");

namespace tf_reverb {
namespace {

namespace fs = std::filesystem;

std::shared_ptr<Table> NewTable(const std::string& name, int64_t max_size) {
  deepmind::reverb::KeyDistributionOptions uniform, fifo;
  uniform.set_uniform(true);
  fifo.set_fifo(true);
  return Table::Create(Table::Config{name, CreateSelector(uniform).value(),
                                     CreateSelector(fifo).value(), max_size, 0,
                                     RateLimiter::Create(1, 1, -1e300, 1e300).value(), ""})
      .value();
}

// An item over its own one-row chunk holding `bytes` bytes of uint8 data.
TableItem MakeItem(uint64_t key, const std::string& payload) {
  Tensor tensor;
  tensor.dtype = tf::DT_UINT8;
  tensor.shape = {1, static_cast<int64_t>(payload.size())};
  tensor.data = payload;
  auto chunk =
      std::make_shared<const ChunkData>(BuildChunk(key, {tensor}, key / 100, 0, 0, false).value());
  auto item = std::make_shared<PrioritizedItem>();
  item->set_key(key);
  item->set_priority(1.0);
  auto* slice = item->mutable_flat_trajectory()->add_columns()->add_chunk_slices();
  slice->set_chunk_key(key);
  slice->set_length(1);
  return TableItem{std::move(item), {std::move(chunk)}};
}

int64_t DirectoryBytes(const std::string& path) {
  int64_t bytes = 0;
  for (const auto& entry : fs::directory_iterator(path)) bytes += fs::file_size(entry.path());
  return bytes;
}

void Measure(const std::string& label, const std::shared_ptr<Table>& table, const std::string& root,
             bool concurrent_writer) {
  fs::remove_all(root);
  Checkpointer checkpointer(root, {});
  std::atomic<bool> done{false};
  std::atomic<int64_t> writes{0};
  absl::Duration longest = absl::ZeroDuration();
  std::thread writer;
  if (concurrent_writer) {
    writer = std::thread([&] {
      const std::string payload(64, 'w');
      uint64_t key = uint64_t{1} << 62;
      while (!done) {
        TableItem item = MakeItem(++key, payload);
        const absl::Time start = absl::Now();
        if (!table->InsertOrAssign(std::move(item), absl::InfiniteDuration()).ok()) return;
        longest = std::max(longest, absl::Now() - start);
        ++writes;
      }
    });
  }
  const int64_t items = table->size();
  const absl::Time start = absl::Now();
  const std::string path = checkpointer.Save({table}).value();
  const double save_s = absl::ToDoubleSeconds(absl::Now() - start);
  done = true;
  if (writer.joinable()) writer.join();
  const double mb = DirectoryBytes(path) / 1e6;

  auto restored = NewTable(table->name(), 1 << 30);
  const absl::Time load_start = absl::Now();
  if (absl::Status s = checkpointer.Load(path, {restored}); !s.ok()) {
    std::fprintf(stderr, "load failed: %s\n", s.ToString().c_str());
    return;
  }
  const double load_s = absl::ToDoubleSeconds(absl::Now() - load_start);
  std::printf("%s: %lld items, %.1f MB on disk\n", label.c_str(), static_cast<long long>(items),
              mb);
  std::printf("  checkpoint: %.2f s, %.0f items/s, %.1f MB/s\n", save_s, items / save_s,
              mb / save_s);
  std::printf("  restore:    %.2f s, %.0f items/s, %.1f MB/s (%lld items restored)\n", load_s,
              restored->size() / load_s, mb / load_s, static_cast<long long>(restored->size()));
  if (concurrent_writer) {
    std::printf("  concurrent writer: %lld inserts during the checkpoint, longest pause %.1f ms\n",
                static_cast<long long>(writes.load()), absl::ToDoubleMilliseconds(longest));
  }
  std::fflush(stdout);
  fs::remove_all(root);
}

}  // namespace
}  // namespace tf_reverb

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  using namespace tf_reverb;  // NOLINT
  const std::string dir = absl::GetFlag(FLAGS_dir);
  {
    auto table = NewTable("small", 1 << 30);
    const std::string payload(64, 's');
    for (int64_t i = 0; i < absl::GetFlag(FLAGS_small_items); ++i) {
      (void)table->InsertOrAssign(MakeItem(i + 1, payload), absl::InfiniteDuration());
    }
    Measure("small items (64 B)", table, dir + "/small", /*concurrent_writer=*/true);
  }
  {
    auto table = NewTable("frames", 1 << 30);
    std::mt19937_64 rng(1);
    std::string frame(absl::GetFlag(FLAGS_frame_bytes), '\0');
    for (int64_t i = 0; i < absl::GetFlag(FLAGS_frame_items); ++i) {
      for (char& c : frame) c = static_cast<char>(rng());
      (void)table->InsertOrAssign(MakeItem(i + 1, frame), absl::InfiniteDuration());
    }
    Measure("frames (64 KiB, incompressible)", table, dir + "/frames",
            /*concurrent_writer=*/true);
  }
  return 0;
}
