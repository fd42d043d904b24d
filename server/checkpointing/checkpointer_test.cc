#include "server/checkpointing/checkpointer.h"

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "schema.pb.h"
#include "server/checkpointing/record_io.h"
#include "server/chunk_codec.h"
#include "server/item_record.h"
#include "server/table.h"
#include "server/table_chunk.h"
#include "server/table_item.h"
#include "server/tensor.h"
#include "server/testing/table_testing.h"
#include "tensor.pb.h"

namespace tf_reverb {
namespace {

namespace fs = std::filesystem;
using namespace ::tf_reverb::testing;  // NOLINT: test builders
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string FreshRoot(const std::string& name) {
  const fs::path root = fs::path(::testing::TempDir()) / name;
  fs::remove_all(root);
  return root.string();
}

TEST(CheckpointerTest, RoundTripKeepsOrderPrioritiesCountersAndSharedChunks) {
  const std::string root = FreshRoot("round_trip");
  auto fifo = MakeTable(Fifo(), Fifo(), 10, 0, MinSize(1), "fifo");
  auto heap = MakeTable(Heap(/*min_heap=*/true), Fifo(), 10, 0, MinSize(1), "heap");
  auto shared_chunk = MakeChunk(999, 7);
  for (uint64_t key : {5, 3, 9}) {
    ASSERT_TRUE(
        fifo->InsertOrAssign(MakeItem(key, key * 1.0, {shared_chunk}), absl::ZeroDuration()).ok());
    ASSERT_TRUE(
        heap->InsertOrAssign(MakeItem(key, 10.0 - key, {shared_chunk}), absl::ZeroDuration()).ok());
  }
  ASSERT_THAT(SampleKeys(*fifo, 2), ElementsAre(5, 5));
  Checkpointer checkpointer(root, {});
  absl::StatusOr<std::string> path = checkpointer.Save({fifo, heap});
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_EQ(fs::path(*path).parent_path(), fs::path(root));

  auto fifo2 = MakeTable(Uniform(), Lifo(), 99, 0, MinSize(1), "fifo");
  auto heap2 = MakeTable(Uniform(), Fifo(), 10, 0, MinSize(1), "heap");
  ASSERT_TRUE(checkpointer.Load(*path, {fifo2, heap2}).ok());
  auto info = fifo2->Info();
  EXPECT_EQ(info.current_size(), 3);
  EXPECT_EQ(info.max_size(), 10);  // the checkpoint's configuration wins
  EXPECT_TRUE(info.sampler_options().fifo());
  EXPECT_EQ(info.rate_limiter_info().insert_stats().completed(), 3);
  EXPECT_EQ(info.rate_limiter_info().sample_stats().completed(), 2);
  EXPECT_EQ(info.num_unique_samples(), 1);
  // FIFO resumes at the same head, with its times_sampled and priority.
  absl::StatusOr<SampledItem> head = SampleOne(*fifo2);
  ASSERT_TRUE(head.ok());
  EXPECT_EQ(head->data->item.key(), 5u);
  EXPECT_EQ(head->times_sampled, 3);
  EXPECT_EQ(head->priority, 5.0);
  // The heap still yields its lowest priority (key 9 has priority 1).
  EXPECT_THAT(SampleKeys(*heap2, 1), ElementsAre(9));
  // The chunk shared by six items across two tables was stored once and is
  // shared again after loading.
  absl::StatusOr<SampledItem> from_heap = SampleOne(*heap2);
  EXPECT_EQ(from_heap->data->chunks[0].get(), head->data->chunks[0].get());
}

TEST(CheckpointerTest, ZstdChunksAreStoredAsSnappySoDmReverbCanRestore) {
  const std::string root = FreshRoot("zstd_chunks");
  Tensor column;
  column.dtype = ::tf_reverb::tf::DT_INT64;
  column.shape = {64};
  for (int64_t r = 0; r < 64; ++r) column.data.append(reinterpret_cast<const char*>(&r), sizeof(r));
  absl::StatusOr<ChunkData> zstd = BuildChunk(77, {column}, 1, 0, 63, false, CodecPolicy::kZstd);
  ASSERT_TRUE(zstd.ok()) << zstd.status();
  ASSERT_EQ(zstd->compression(), kZstd);
  auto chunk = TableChunk::FromProto(*zstd);
  auto table = MakeTable(Fifo(), Fifo(), 10, 0, MinSize(1));
  ASSERT_TRUE(table->InsertOrAssign(MakeItem(1, 1.0, {chunk}), absl::ZeroDuration()).ok());

  Checkpointer checkpointer(root, {});
  const std::string path = checkpointer.Save({table}).value();
  auto reader = RecordReader::Open((fs::path(path) / "chunks.tfrecord").string()).value();
  ChunkData stored;
  ASSERT_TRUE(reader->ReadMessage(&stored).ok());
  EXPECT_EQ(stored.chunk_key(), 77u);
  EXPECT_EQ(stored.compression(), kSnappy);
  absl::StatusOr<Tensor> decoded = DecompressChunkTensor(stored, 0);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->data, column.data);

  // The table in memory keeps its zstd chunk; the restored one holds Snappy.
  EXPECT_EQ(SampleOne(*table)->data->chunks[0]->compression(), kZstd);
  auto restored = MakeTable(Fifo(), Fifo(), 10, 0, MinSize(1));
  ASSERT_TRUE(checkpointer.Load(path, {restored}).ok());
  absl::StatusOr<SampledItem> sampled = SampleOne(*restored);
  ASSERT_TRUE(sampled.ok()) << sampled.status();
  EXPECT_EQ(DecompressChunkTensor(*sampled->data->chunks[0]->View(), 0)->data, column.data);
}

TEST(CheckpointerTest, ChunkRecordsAreSerializedChunkData) {
  const std::string root = FreshRoot("chunk_records");
  auto table = MakeTable(Fifo(), Fifo(), 10, 0, MinSize(1));
  auto chunk = MakeChunk(5, 1, 3);
  ASSERT_TRUE(table->InsertOrAssign(MakeItem(1, 1.0, {chunk}), kNoWait).ok());
  Checkpointer checkpointer(root, {});
  const std::string path = checkpointer.Save({table}).value();
  auto reader = RecordReader::Open((fs::path(path) / "chunks.tfrecord").string()).value();
  std::string record;
  ASSERT_TRUE(reader->Read(&record).ok());
  EXPECT_EQ(record, chunk->ToProto().SerializeAsString());
  EXPECT_TRUE(absl::IsOutOfRange(reader->Read(&record)));
}

TEST(CheckpointerTest, DifferentChunksUnderOneKeyFromTwoStreamsBothSurvive) {
  // Chunk keys are only unique per writer: two streams sent chunk 7, one of
  // one row and one of four, and an item used each.
  const std::string root = FreshRoot("key_collision");
  // Each item is sampled once, oldest first.
  auto table = MakeTable(Fifo(), Fifo(), 10, 1, MinSize(1), "t");
  auto one_row = MakeChunk(7, 1, 1);
  ChunkData four_rows_proto = MakeChunk(70, 2, 4)->ToProto();
  four_rows_proto.set_chunk_key(7);
  auto four_rows = TableChunk::FromProto(four_rows_proto);
  TableItem last_row = MakeItem(2, 1.0, {four_rows});
  PrioritizedItem last_row_proto = last_row.item.ToProto();
  auto* slice =
      last_row_proto.mutable_flat_trajectory()->mutable_columns(0)->mutable_chunk_slices(0);
  slice->set_offset(3);
  slice->set_length(1);
  last_row.item = ItemRecord::FromProto(last_row_proto);
  ASSERT_TRUE(table->InsertOrAssign(MakeItem(1, 1.0, {one_row}), kNoWait).ok());
  ASSERT_TRUE(table->InsertOrAssign(std::move(last_row), kNoWait).ok());
  // The same chunk data sent again under the same key is stored once.
  auto resent = TableChunk::FromProto(one_row->ToProto());
  ASSERT_TRUE(table->InsertOrAssign(MakeItem(3, 1.0, {resent}), kNoWait).ok());

  Checkpointer checkpointer(root, {});
  absl::StatusOr<std::string> path = checkpointer.Save({table});
  ASSERT_TRUE(path.ok()) << path.status();
  auto restored = MakeTable(Fifo(), Fifo(), 10, 0, MinSize(1), "t");
  ASSERT_TRUE(checkpointer.Load(*path, {restored}).ok());
  std::vector<SampledItem> samples;
  ASSERT_TRUE(restored->SampleBatch(3, kNoWait, &samples).ok());
  ASSERT_EQ(samples.size(), 3u);
  EXPECT_EQ(samples[0].data->chunks[0]->key(), 7u);
  EXPECT_NE(samples[1].data->chunks[0]->key(), 7u);  // renamed on save
  const PrioritizedItem renamed = samples[1].data->item.ToProto();
  EXPECT_EQ(renamed.flat_trajectory().columns(0).chunk_slices(0).chunk_key(),
            samples[1].data->chunks[0]->key());
  EXPECT_EQ(samples[1].data->chunks[0]->View()->tensors[0].shape[0], 4);
  EXPECT_EQ(samples[2].data->chunks[0].get(), samples[0].data->chunks[0].get());
  for (const SampledItem& sample : samples) {
    EXPECT_TRUE(DecompressChunkTensor(*sample.data->chunks[0]->View(), 0).ok());
  }
}

TEST(CheckpointerTest, RetentionKeepsLatestAndNeverTouchesForeignFiles) {
  const std::string root = FreshRoot("retention");
  fs::create_directories(fs::path(root) / "my_notes");
  std::ofstream(fs::path(root) / "README.txt") << "not a checkpoint";
  auto table = MakeTable(Uniform(), Fifo(), 10, 0, MinSize(1));
  // Full checkpoints: each stands alone (incremental ones below).
  Checkpointer checkpointer(root, {.keep_latest = 2, .incremental = false});
  std::vector<std::string> paths;
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(Insert(*table, i + 1).ok());
    paths.push_back(checkpointer.Save({table}).value());
  }
  EXPECT_FALSE(fs::exists(paths[0]));
  EXPECT_FALSE(fs::exists(paths[1]));
  EXPECT_TRUE(fs::exists(paths[2]));
  EXPECT_TRUE(fs::exists(paths[3]));
  EXPECT_TRUE(fs::exists(fs::path(root) / "my_notes"));
  EXPECT_TRUE(fs::exists(fs::path(root) / "README.txt"));
}

TEST(CheckpointerTest, PartialCheckpointsAreIgnoredAndCleanedUp) {
  const std::string root = FreshRoot("partial");
  auto table = MakeTable(Fifo(), Fifo(), 10, 0, MinSize(1));
  ASSERT_TRUE(Insert(*table, 1).ok());
  Checkpointer checkpointer(root, {});
  const std::string good = checkpointer.Save({table}).value();
  // A save killed before publishing leaves only a temporary directory; one
  // killed before DONE leaves a directory without it.
  const fs::path temp = fs::path(root) / ".tmp-2999-01-01T00:00:00.000000000+00:00";
  fs::create_directories(temp);
  const fs::path undone = fs::path(root) / "2999-01-01T00:00:00.000000000+00:00";
  fs::create_directories(undone);
  std::ofstream(undone / "tables.tfrecord") << "partial";

  auto restored = MakeTable(Fifo(), Fifo(), 10, 0, MinSize(1));
  absl::StatusOr<std::string> loaded = checkpointer.LoadLatest({restored});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(*loaded, good);
  EXPECT_EQ(restored->size(), 1);
  ASSERT_TRUE(checkpointer.Save({table}).ok());
  EXPECT_FALSE(fs::exists(temp));
}

TEST(CheckpointerTest, CorruptCheckpointNamesTheFileAndCanFallBack) {
  const std::string root = FreshRoot("corrupt");
  auto table = MakeTable(Fifo(), Fifo(), 10, 0, MinSize(1));
  ASSERT_TRUE(Insert(*table, 1).ok());
  Checkpointer writer(root, {.keep_latest = 5});
  const std::string older = writer.Save({table}).value();
  ASSERT_TRUE(Insert(*table, 2).ok());
  const std::string newer = writer.Save({table}).value();
  const fs::path items = fs::path(newer) / "items.tfrecord";
  fs::resize_file(items, fs::file_size(items) - 5);

  auto target = MakeTable(Fifo(), Fifo(), 10, 0, MinSize(1));
  absl::StatusOr<std::string> strict = Checkpointer(root, {}).LoadLatest({target});
  ASSERT_TRUE(absl::IsDataLoss(strict.status())) << strict.status();
  EXPECT_THAT(std::string(strict.status().message()), HasSubstr(items.string()));

  absl::StatusOr<std::string> lenient =
      Checkpointer(root, {.fall_back_to_older = true}).LoadLatest({target});
  ASSERT_TRUE(lenient.ok()) << lenient.status();
  EXPECT_EQ(*lenient, older);
  EXPECT_EQ(target->size(), 1);
}

TEST(CheckpointerTest, CompleteCheckpointMissingAFileIsDataLossNotAnEmptyStart) {
  const std::string root = FreshRoot("missing_file");
  auto table = MakeTable(Fifo(), Fifo(), 10, 0, MinSize(1));
  ASSERT_TRUE(Insert(*table, 1).ok());
  Checkpointer writer(root, {.keep_latest = 5});
  const std::string older = writer.Save({table}).value();
  ASSERT_TRUE(Insert(*table, 2).ok());
  const std::string newer = writer.Save({table}).value();
  const fs::path chunks = fs::path(newer) / "chunks.tfrecord";
  ASSERT_TRUE(fs::remove(chunks));

  auto target = MakeTable(Fifo(), Fifo(), 10, 0, MinSize(1));
  absl::StatusOr<std::string> strict = Checkpointer(root, {}).LoadLatest({target});
  ASSERT_TRUE(absl::IsDataLoss(strict.status())) << strict.status();
  EXPECT_THAT(std::string(strict.status().message()), HasSubstr(chunks.string()));
  EXPECT_EQ(target->size(), 0);

  // Nor does a fallback checkpoint stand in for a damaged one.
  const std::string spare = FreshRoot("missing_file_spare");
  const std::string fallback = Checkpointer(spare, {}).Save({table}).value();
  absl::StatusOr<std::string> with_fallback =
      Checkpointer(root, {.fallback_checkpoint_path = fallback}).LoadLatest({target});
  EXPECT_TRUE(absl::IsDataLoss(with_fallback.status())) << with_fallback.status();

  absl::StatusOr<std::string> lenient =
      Checkpointer(root, {.fall_back_to_older = true}).LoadLatest({target});
  ASSERT_TRUE(lenient.ok()) << lenient.status();
  EXPECT_EQ(*lenient, older);
  EXPECT_EQ(target->size(), 1);
}

TEST(CheckpointerTest, ChunkNoSampleCouldDecodeFailsTheLoad) {
  const std::string root = FreshRoot("undecodable_chunk");
  auto table = MakeTable(Fifo(), Fifo(), 10, 0, MinSize(1));
  ASSERT_TRUE(Insert(*table, 1).ok());
  Checkpointer checkpointer(root, {});
  const std::string path = checkpointer.Save({table}).value();
  // Rewrite the chunks file with well-framed records whose first tensor
  // claims more rows than its payload holds (a file written by another tool,
  // or bit rot the framing cannot see).
  const std::string chunks = (fs::path(path) / "chunks.tfrecord").string();
  std::vector<deepmind::reverb::ChunkData> records;
  {
    auto reader = RecordReader::Open(chunks).value();
    deepmind::reverb::ChunkData chunk;
    while (reader->ReadMessage(&chunk).ok()) records.push_back(chunk);
  }
  ASSERT_FALSE(records.empty());
  auto* shape = records[0].mutable_data()->mutable_tensors(0)->mutable_tensor_shape();
  shape->mutable_dim(0)->set_size(shape->dim(0).size() + 1000);
  {
    auto writer = RecordWriter::Create(chunks).value();
    for (const auto& chunk : records) ASSERT_TRUE(writer->WriteMessage(chunk).ok());
    ASSERT_TRUE(writer->Close().ok());
  }
  auto target = MakeTable(Fifo(), Fifo(), 10, 0, MinSize(1));
  absl::Status status = checkpointer.Load(path, {target});
  ASSERT_TRUE(absl::IsDataLoss(status)) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr(chunks));
  EXPECT_THAT(std::string(status.message()),
              HasSubstr(absl::StrCat("Chunk ", records[0].chunk_key())));
  EXPECT_EQ(target->size(), 0);
}

TEST(CheckpointerTest, ChunkRecordThatIsNoChunkDataFailsTheLoad) {
  const std::string root = FreshRoot("unparsable_chunk");
  auto table = MakeTable(Fifo(), Fifo(), 10, 0, MinSize(1));
  ASSERT_TRUE(Insert(*table, 1).ok());
  Checkpointer checkpointer(root, {});
  const std::string path = checkpointer.Save({table}).value();
  const std::string chunks = (fs::path(path) / "chunks.tfrecord").string();
  // A varint cut short; a chunk whose data field holds no message.
  for (const std::string record :
       {std::string("\x08", 1), std::string("\x08\x07\x2a\x01\xff", 5)}) {
    {
      auto writer = RecordWriter::Create(chunks).value();
      ASSERT_TRUE(writer->Write(record).ok());
      ASSERT_TRUE(writer->Close().ok());
    }
    auto target = MakeTable(Fifo(), Fifo(), 10, 0, MinSize(1));
    absl::Status status = checkpointer.Load(path, {target});
    ASSERT_TRUE(absl::IsDataLoss(status)) << status;
    EXPECT_THAT(std::string(status.message()), HasSubstr(chunks));
    EXPECT_EQ(target->size(), 0);
  }
}

TEST(CheckpointerTest, UnknownTableAndEmptyRootAreClearErrors) {
  const std::string root = FreshRoot("unknown");
  auto table = MakeTable(Fifo(), Fifo(), 10, 0, MinSize(1), "a");
  Checkpointer checkpointer(root, {});
  EXPECT_TRUE(absl::IsNotFound(checkpointer.LoadLatest({table}).status()));
  ASSERT_TRUE(checkpointer.Save({table}).ok());
  auto other = MakeTable(Fifo(), Fifo(), 10, 0, MinSize(1), "b");
  absl::Status status = checkpointer.LoadLatest({other}).status();
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("Trying to load table 'a' but table was not found"));
}

TEST(CheckpointerTest, TableConfigModeKeepsNewSettingsAndEvicts) {
  const std::string root = FreshRoot("table_mode");
  auto table = MakeTable(Fifo(), Fifo(), 10, 0, MinSize(1));
  for (uint64_t key = 1; key <= 5; ++key) ASSERT_TRUE(Insert(*table, key).ok());
  const std::string path = Checkpointer(root, {}).Save({table}).value();
  auto smaller = MakeTable(Lifo(), Fifo(), 3, 0, MinSize(2));
  Checkpointer checkpointer(root, {.restore_mode = Table::RestoreMode::kTableConfig});
  ASSERT_TRUE(checkpointer.Load(path, {smaller}).ok());
  auto info = smaller->Info();
  EXPECT_EQ(info.max_size(), 3);
  EXPECT_TRUE(info.sampler_options().lifo());
  EXPECT_EQ(info.rate_limiter_info().min_size_to_sample(), 2);
  EXPECT_EQ(info.current_size(), 3);
  EXPECT_THAT(SampleKeys(*smaller, 1), ElementsAre(5));  // oldest two evicted
}

TEST(CheckpointerTest, InsertsContinueWhileACheckpointIsWritten) {
  const std::string root = FreshRoot("concurrent");
  auto table = MakeTable(Uniform(), Fifo(), 1000000, 0, MinSize(1));
  for (uint64_t key = 1; key <= 20000; ++key) ASSERT_TRUE(Insert(*table, key).ok());
  std::atomic<bool> done{false};
  std::atomic<int64_t> inserted{0};
  std::thread writer([&] {
    uint64_t key = 1000000;
    while (!done) {
      ASSERT_TRUE(Insert(*table, ++key).ok());
      ++inserted;
    }
  });
  Checkpointer checkpointer(root, {});
  absl::StatusOr<std::string> path = checkpointer.Save({table});
  done = true;
  writer.join();
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_GT(inserted.load(), 0);
  auto restored = MakeTable(Uniform(), Fifo(), 1000000, 0, MinSize(1));
  ASSERT_TRUE(checkpointer.Load(*path, {restored}).ok());
  // The snapshot is consistent: at least the 20000 items present before the
  // save, and never more than what existed when it ended.
  EXPECT_GE(restored->size(), 20000);
  EXPECT_LE(restored->size(), table->size());
}

// Bytes of every file of a checkpoint directory.
int64_t DirectoryBytes(const std::string& path) {
  int64_t bytes = 0;
  for (const auto& entry : fs::directory_iterator(path)) bytes += fs::file_size(entry.path());
  return bytes;
}

// Items of `count` keys from `first`, each with its own chunk of 4 KB of
// random (incompressible) floats.
void InsertLarge(Table& table, uint64_t first, int count) {
  for (uint64_t key = first; key < first + count; ++key) {
    Tensor tensor;
    tensor.dtype = ::tf_reverb::tf::DT_FLOAT;
    tensor.shape = {1, 1024};
    tensor.data.resize(4096);
    std::mt19937_64 random(key);
    for (char& byte : tensor.data) byte = static_cast<char>(random());
    absl::StatusOr<ChunkData> chunk = BuildChunk(key + 1000000, {tensor}, key, 0, 1, false);
    ASSERT_TRUE(chunk.ok()) << chunk.status();
    ASSERT_TRUE(table
                    .InsertOrAssign(MakeItem(key, 1.0, {TableChunk::FromProto(*chunk)}),
                                    absl::ZeroDuration())
                    .ok());
  }
}

// Every item of `table` as (key, priority, times sampled, its chunks' data).
std::vector<std::string> Contents(Table& table) {
  std::vector<std::string> out;
  for (const Table::CheckpointItem& item : table.TakeSnapshot().items) {
    std::string line =
        absl::StrCat(item.data->item.key(), " ", item.priority, " ", item.times_sampled);
    for (const auto& chunk : item.data->chunks) {
      absl::StatusOr<Tensor> tensor = DecompressChunkTensor(*chunk->View(), 0);
      EXPECT_TRUE(tensor.ok()) << tensor.status();
      if (tensor.ok()) absl::StrAppend(&line, " ", tensor->data);
    }
    out.push_back(std::move(line));
  }
  return out;
}

TEST(IncrementalCheckpointTest, WritesOnlyWhatChangedAndRestoresEverything) {
  const std::string root = FreshRoot("incremental");
  auto table = MakeTable(Fifo(), Fifo(), 1000, 0, MinSize(1));
  InsertLarge(*table, 1, 200);
  Checkpointer checkpointer(root, {.keep_latest = 1});
  const std::string first = checkpointer.Save({table}).value();
  // The first checkpoint of a root is self-contained and uncompressed
  // (dm-reverb restores it).
  EXPECT_FALSE(
      RecordReader::Open((fs::path(first) / "items.tfrecord").string()).value()->compressed());
  InsertLarge(*table, 201, 2);  // 1% more
  SampleKeys(*table, 3);
  const std::string second = checkpointer.Save({table}).value();
  const int64_t full_bytes = DirectoryBytes(first);
  const int64_t incremental_bytes = DirectoryBytes(second);
  // The chunks dominate: 2 new chunks of 202 (plus every item's metadata).
  EXPECT_LT(incremental_bytes * 10, full_bytes) << incremental_bytes << " vs " << full_bytes;
  EXPECT_TRUE(fs::exists(fs::path(second) / "chunk_sources.tfrecord"));
  // Its item records (rewritten by every save) are ZLIB-compressed.
  EXPECT_TRUE(
      RecordReader::Open((fs::path(second) / "items.tfrecord").string()).value()->compressed());
  // The first is retired, not deleted: the second uses its chunk file.
  EXPECT_FALSE(fs::exists(fs::path(first) / "DONE"));
  EXPECT_FALSE(fs::exists(fs::path(first) / "items.tfrecord"));
  EXPECT_TRUE(fs::exists(fs::path(first) / "chunks.tfrecord"));

  auto restored = MakeTable(Fifo(), Fifo(), 1000, 0, MinSize(1));
  absl::StatusOr<std::string> loaded = Checkpointer(root, {}).LoadLatest({restored});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(*loaded, second);
  EXPECT_EQ(Contents(*restored), Contents(*table));
}

TEST(IncrementalCheckpointTest, SavesAfterARestoreReferenceTheRestoredFiles) {
  const std::string root = FreshRoot("incremental_restart");
  auto table = MakeTable(Fifo(), Fifo(), 1000, 0, MinSize(1));
  InsertLarge(*table, 1, 100);
  const std::string first = Checkpointer(root, {}).Save({table}).value();

  // A new process: restores, inserts a little, checkpoints.
  auto restored = MakeTable(Fifo(), Fifo(), 1000, 0, MinSize(1));
  Checkpointer checkpointer(root, {});
  ASSERT_TRUE(checkpointer.LoadLatest({restored}).ok());
  InsertLarge(*restored, 101, 1);
  const std::string second = checkpointer.Save({restored}).value();
  EXPECT_LT(DirectoryBytes(second) * 10, DirectoryBytes(first));

  auto again = MakeTable(Fifo(), Fifo(), 1000, 0, MinSize(1));
  ASSERT_TRUE(Checkpointer(root, {}).LoadLatest({again}).ok());
  EXPECT_EQ(Contents(*again), Contents(*restored));
}

TEST(IncrementalCheckpointTest, FullSavesStandAloneAndReleaseOlderFiles) {
  const std::string root = FreshRoot("incremental_full");
  auto table = MakeTable(Fifo(), Fifo(), 1000, 0, MinSize(1));
  InsertLarge(*table, 1, 50);
  Checkpointer checkpointer(root, {.keep_latest = 1});
  const std::string first = checkpointer.Save({table}).value();
  InsertLarge(*table, 51, 1);
  const std::string second = checkpointer.Save({table}).value();
  ASSERT_TRUE(fs::exists(first));  // retired, used by the second
  const std::string full = checkpointer.Save({table}, /*full=*/true).value();
  EXPECT_FALSE(fs::exists(fs::path(full) / "chunk_sources.tfrecord"));
  // Reverb's format, uncompressed, as dm-reverb restores it.
  EXPECT_FALSE(
      RecordReader::Open((fs::path(full) / "items.tfrecord").string()).value()->compressed());
  // Nothing kept uses the older files any more: both are gone.
  EXPECT_FALSE(fs::exists(first));
  EXPECT_FALSE(fs::exists(second));
  auto restored = MakeTable(Fifo(), Fifo(), 1000, 0, MinSize(1));
  ASSERT_TRUE(Checkpointer(root, {}).Load(full, {restored}).ok());
  EXPECT_EQ(Contents(*restored), Contents(*table));
}

TEST(IncrementalCheckpointTest, MostlyUnusedFilesAreCopiedForwardNotKept) {
  const std::string root = FreshRoot("incremental_compaction");
  auto table = MakeTable(Fifo(), Fifo(), 10, 0, MinSize(1));
  InsertLarge(*table, 1, 10);
  Checkpointer checkpointer(root, {.keep_latest = 1});
  const std::string first = checkpointer.Save({table}).value();
  // FIFO eviction: 8 of the first file's 10 chunks leave the table.
  InsertLarge(*table, 11, 8);
  const std::string second = checkpointer.Save({table}).value();
  // The 2 chunks still used were written again; the first file is gone.
  EXPECT_FALSE(fs::exists(first));
  EXPECT_FALSE(fs::exists(fs::path(second) / "chunk_sources.tfrecord"));
  auto restored = MakeTable(Fifo(), Fifo(), 10, 0, MinSize(1));
  ASSERT_TRUE(Checkpointer(root, {}).LoadLatest({restored}).ok());
  EXPECT_EQ(Contents(*restored), Contents(*table));
}

TEST(IncrementalCheckpointTest, AMissingOrCorruptSourceFileIsDataLossNamingIt) {
  const std::string root = FreshRoot("incremental_damage");
  auto table = MakeTable(Fifo(), Fifo(), 1000, 0, MinSize(1));
  InsertLarge(*table, 1, 20);
  Checkpointer checkpointer(root, {.keep_latest = 1});
  const std::string first = checkpointer.Save({table}).value();
  InsertLarge(*table, 21, 1);
  checkpointer.Save({table}).value();
  const fs::path source = fs::path(first) / "chunks.tfrecord";
  fs::resize_file(source, fs::file_size(source) - 7);
  auto restored = MakeTable(Fifo(), Fifo(), 1000, 0, MinSize(1));
  absl::StatusOr<std::string> loaded = Checkpointer(root, {}).LoadLatest({restored});
  ASSERT_TRUE(absl::IsDataLoss(loaded.status())) << loaded.status();
  EXPECT_THAT(std::string(loaded.status().message()), HasSubstr(source.string()));
  fs::remove(source);
  loaded = Checkpointer(root, {}).LoadLatest({restored});
  ASSERT_TRUE(absl::IsDataLoss(loaded.status())) << loaded.status();
  EXPECT_THAT(std::string(loaded.status().message()), HasSubstr(source.string()));
}

}  // namespace
}  // namespace tf_reverb
