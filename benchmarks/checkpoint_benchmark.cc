// Checkpoint benchmark: save and restore throughput for a table of 1e6 small
// items and one of ~1 GB of frames, the longest pause a concurrent writer
// sees while the 1e6-item table is checkpointed, and, after 1% more frames,
// an incremental checkpoint against a full one (bytes written, save and
// restore time).
//
//   bazel run -c opt //benchmarks:checkpoint_benchmark -- [--dir=/tmp/x]
//       [--small_items=1000000] [--frame_items=16384] [--frame_bytes=65536]
//
// With --large_items=N it runs only the no-size-limit check instead: a table
// of N items of --large_bytes each (3,000,000 x 700 B: more than 2 GB of
// item records and chunks, past protobuf's 2 GB message limit that stops
// Reverb), checkpointed, 1% more items checkpointed incrementally, restored
// and compared item by item (key, priority, times sampled, chunk bytes,
// order); exits 1 on any difference.
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
#include "server/item_record.h"
#include "server/rate_limiter.h"
#include "server/selectors/selector.h"
#include "server/table.h"
#include "server/table_chunk.h"
#include "server/table_item.h"
#include "server/tensor.h"
#include "tensor.pb.h"

ABSL_FLAG(std::string, dir, "/tmp/tf_reverb_checkpoint_benchmark", "Checkpoint root.");
ABSL_FLAG(int64_t, small_items, 1000000, "Items of the small-item table.");
ABSL_FLAG(int64_t, frame_items, 16384, "Items of the frame table.");
ABSL_FLAG(int64_t, frame_bytes, 65536, "Bytes per frame (incompressible).");
ABSL_FLAG(int64_t, large_items, 0, "> 0: only the large-checkpoint check, with this many items.");
ABSL_FLAG(int64_t, large_bytes, 700, "Bytes per item of the large-checkpoint check.");

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
  std::shared_ptr<const TableChunk> chunk =
      TableChunk::FromProto(BuildChunk(key, {tensor}, key / 100, 0, 0, false).value());
  auto item = std::make_shared<PrioritizedItem>();
  item->set_key(key);
  item->set_priority(1.0);
  auto* slice = item->mutable_flat_trajectory()->add_columns()->add_chunk_slices();
  slice->set_chunk_key(key);
  slice->set_length(1);
  return TableItem{ItemRecord::FromProto(*item), {std::move(chunk)}};
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

// A frame item of `frame_bytes` random bytes.
TableItem MakeFrameItem(uint64_t key, int64_t frame_bytes, std::mt19937_64& rng) {
  std::string frame(frame_bytes, '\0');
  for (char& c : frame) c = static_cast<char>(rng());
  return MakeItem(key, frame);
}

// Seconds `save` takes, and the bytes it wrote (the checkpointer's count).
std::pair<double, int64_t> TimedSave(Checkpointer& checkpointer,
                                     const std::shared_ptr<Table>& table, bool full,
                                     std::string* path) {
  const absl::Time start = absl::Now();
  *path = checkpointer.Save({table}, full).value();
  return {absl::ToDoubleSeconds(absl::Now() - start),
          checkpointer.metrics().last_save_bytes.load()};
}

double TimedLoad(Checkpointer& checkpointer, const std::string& path, const std::string& name) {
  auto restored = NewTable(name, 1 << 30);
  const absl::Time start = absl::Now();
  if (absl::Status s = checkpointer.Load(path, {restored}); !s.ok()) {
    std::fprintf(stderr, "load failed: %s\n", s.ToString().c_str());
  }
  return absl::ToDoubleSeconds(absl::Now() - start);
}

// After a full checkpoint, 1% more frames, then an incremental checkpoint
// and a full one of the same table.
void MeasureIncremental(const std::shared_ptr<Table>& table, const std::string& root,
                        int64_t frame_bytes) {
  fs::remove_all(root);
  Checkpointer checkpointer(root, {.keep_latest = 2});
  std::string base, incremental, full;
  const auto [base_s, base_bytes] = TimedSave(checkpointer, table, false, &base);
  const int64_t added = std::max<int64_t>(1, table->size() / 100);
  std::mt19937_64 rng(2);
  for (int64_t i = 0; i < added; ++i) {
    (void)table->InsertOrAssign(MakeFrameItem((uint64_t{1} << 40) + i, frame_bytes, rng),
                                absl::InfiniteDuration());
  }
  const auto [incremental_s, incremental_bytes] =
      TimedSave(checkpointer, table, false, &incremental);
  const auto [full_s, full_bytes] = TimedSave(checkpointer, table, true, &full);
  const double incremental_load_s = TimedLoad(checkpointer, incremental, table->name());
  const double full_load_s = TimedLoad(checkpointer, full, table->name());
  std::printf("incremental vs full after +%lld frames (1%%) on %lld:\n",
              static_cast<long long>(added), static_cast<long long>(table->size()));
  std::printf("  first (full) checkpoint: %.1f MB in %.2f s\n", base_bytes / 1e6, base_s);
  std::printf("  incremental: %.1f MB written in %.2f s, restore %.2f s\n", incremental_bytes / 1e6,
              incremental_s, incremental_load_s);
  std::printf("  full:        %.1f MB written in %.2f s, restore %.2f s\n", full_bytes / 1e6,
              full_s, full_load_s);
  std::printf("  incremental / full bytes: %.2f%%\n", 100.0 * incremental_bytes / full_bytes);
  std::fflush(stdout);
  fs::remove_all(root);
}

// The no-size-limit check (see the top of the file); returns the exit code.
int CheckLargeCheckpoint(const std::string& root, int64_t items, int64_t bytes) {
  fs::remove_all(root);
  auto table = NewTable("large", 1 << 30);
  std::mt19937_64 rng(3);
  for (int64_t i = 0; i < items; ++i) {
    TableItem item = MakeFrameItem(i + 1, bytes, rng);
    PrioritizedItem proto = item.item.ToProto();
    proto.set_priority(1.0 + static_cast<double>(i % 1000));
    item.item = ItemRecord::FromProto(proto);
    (void)table->InsertOrAssign(std::move(item), absl::InfiniteDuration());
  }
  Checkpointer checkpointer(root, {});
  std::string first, second;
  const auto [first_s, first_bytes] = TimedSave(checkpointer, table, false, &first);
  std::printf("large table: %lld items, first checkpoint %.2f GB in %.1f s\n",
              static_cast<long long>(table->size()), first_bytes / 1e9, first_s);
  for (int64_t i = 0; i < std::max<int64_t>(1, items / 100); ++i) {
    (void)table->InsertOrAssign(MakeFrameItem((uint64_t{1} << 40) + i, bytes, rng),
                                absl::InfiniteDuration());
  }
  const auto [second_s, second_bytes] = TimedSave(checkpointer, table, false, &second);
  std::printf("  +1%%: incremental checkpoint %.3f GB in %.1f s\n", second_bytes / 1e9, second_s);
  auto restored = NewTable("large", 1 << 30);
  const absl::Time start = absl::Now();
  if (absl::Status s = Checkpointer(root, {}).Load(second, {restored}); !s.ok()) {
    std::printf("  restore FAILED: %s\n", s.ToString().c_str());
    return 1;
  }
  std::printf("  restored %lld items in %.1f s\n", static_cast<long long>(restored->size()),
              absl::ToDoubleSeconds(absl::Now() - start));
  const Table::Snapshot want = table->TakeSnapshot();
  const Table::Snapshot got = restored->TakeSnapshot();
  int64_t differences = want.items.size() == got.items.size() ? 0 : 1;
  for (size_t i = 0; i < std::min(want.items.size(), got.items.size()); ++i) {
    const Table::CheckpointItem& a = want.items[i];
    const Table::CheckpointItem& b = got.items[i];
    const bool same = a.data->item.key() == b.data->item.key() && a.priority == b.priority &&
                      a.times_sampled == b.times_sampled &&
                      a.data->chunks[0]->wire() == b.data->chunks[0]->wire();
    differences += same ? 0 : 1;
  }
  std::printf("  compared %lld items: %lld differences\n",
              static_cast<long long>(want.items.size()), static_cast<long long>(differences));
  fs::remove_all(root);
  return differences == 0 ? 0 : 1;
}

}  // namespace
}  // namespace tf_reverb

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  using namespace tf_reverb;  // NOLINT
  const std::string dir = absl::GetFlag(FLAGS_dir);
  if (absl::GetFlag(FLAGS_large_items) > 0) {
    return CheckLargeCheckpoint(dir + "/large", absl::GetFlag(FLAGS_large_items),
                                absl::GetFlag(FLAGS_large_bytes));
  }
  {
    auto table = NewTable("small", 1 << 30);
    const std::string payload(64, 's');
    for (int64_t i = 0; i < absl::GetFlag(FLAGS_small_items); ++i) {
      (void)table->InsertOrAssign(MakeItem(i + 1, payload), absl::InfiniteDuration());
    }
    Measure("small items (64 B)", table, dir + "/small", /*concurrent_writer=*/true);
  }
  auto frames_table = [] {
    auto table = NewTable("frames", 1 << 30);
    std::mt19937_64 rng(1);
    for (int64_t i = 0; i < absl::GetFlag(FLAGS_frame_items); ++i) {
      (void)table->InsertOrAssign(MakeFrameItem(i + 1, absl::GetFlag(FLAGS_frame_bytes), rng),
                                  absl::InfiniteDuration());
    }
    return table;
  };
  Measure("frames (64 KiB, incompressible)", frames_table(), dir + "/frames",
          /*concurrent_writer=*/true);
  MeasureIncremental(frames_table(), dir + "/incremental", absl::GetFlag(FLAGS_frame_bytes));
  return 0;
}
