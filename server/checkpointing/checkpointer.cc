#include "server/checkpointing/checkpointer.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <initializer_list>
#include <system_error>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "checkpoint.pb.h"
#include "server/checkpointing/record_io.h"
#include "server/chunk_codec.h"
#include "server/chunk_validation.h"
#include "server/logging/event_log.h"
#include "server/table_item.h"

namespace tf_reverb {
namespace {

// Whether two chunks hold the same data (what a sample decodes).
bool SameChunkData(const ChunkData& a, const ChunkData& b) {
  if (&a == &b) return true;
  if (a.compression() != b.compression() || a.delta_encoded() != b.delta_encoded() ||
      a.data().tensors_size() != b.data().tensors_size()) {
    return false;
  }
  for (int i = 0; i < a.data().tensors_size(); ++i) {
    const auto& x = a.data().tensors(i);
    const auto& y = b.data().tensors(i);
    if (x.dtype() != y.dtype() || x.tensor_content() != y.tensor_content() ||
        x.tensor_shape().SerializeAsString() != y.tensor_shape().SerializeAsString() ||
        x.string_val_size() != y.string_val_size()) {
      return false;
    }
    for (int j = 0; j < x.string_val_size(); ++j) {
      if (x.string_val(j) != y.string_val(j)) return false;
    }
  }
  return true;
}

namespace fs = std::filesystem;
using ::deepmind::reverb::PriorityTableCheckpoint;

constexpr char kTablesFile[] = "tables.tfrecord";
constexpr char kItemsFile[] = "items.tfrecord";
constexpr char kChunksFile[] = "chunks.tfrecord";
constexpr char kDoneFile[] = "DONE";
constexpr char kTempPrefix[] = ".tmp-";
constexpr int64_t kProgressEvery = 100000;

void Log(absl::string_view event, std::initializer_list<LogField> fields) {
  LogEvent("checkpointer", event, fields);
}

// "2026-11-30T20:23:42.588863703+00:00": Reverb's format, always in UTC so
// names sort chronologically.
std::string CheckpointName(absl::Time time) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E9S%Ez", time, absl::UTCTimeZone());
}

bool IsCheckpointName(const std::string& name) {
  absl::Time time;
  std::string error;
  return name.size() == 35 && absl::ParseTime("%Y-%m-%dT%H:%M:%E9S%Ez", name, &time, &error);
}

absl::Status FsError(const std::string& action, const std::string& path,
                     const std::error_code& error) {
  return absl::InternalError(absl::StrCat("Cannot ", action, " ", path, ": ", error.message()));
}

absl::Status SyncDirectory(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) return absl::InternalError(absl::StrCat("Cannot open directory ", path));
  const int result = fsync(fd);
  close(fd);
  if (result != 0) return absl::InternalError(absl::StrCat("Cannot sync directory ", path));
  return absl::OkStatus();
}

absl::Status WriteEmptyFile(const std::string& path) {
  FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) {
    return absl::InternalError(absl::StrCat("Cannot create ", path, ": ", std::strerror(errno)));
  }
  const bool ok = std::fflush(file) == 0 && fsync(fileno(file)) == 0;
  std::fclose(file);
  return ok ? absl::OkStatus() : absl::InternalError(absl::StrCat("Cannot sync ", path));
}

// Reads every record of `path` through `handle`.
template <typename Message, typename Handle>
absl::Status ReadAll(const std::string& path, Handle handle) {
  absl::StatusOr<std::unique_ptr<RecordReader>> reader = RecordReader::Open(path);
  if (!reader.ok()) return reader.status();
  while (true) {
    Message message;
    absl::Status status = (*reader)->ReadMessage(&message);
    if (absl::IsOutOfRange(status)) return absl::OkStatus();
    if (!status.ok()) return status;
    if (absl::Status s = handle(std::move(message)); !s.ok()) return s;
  }
}

}  // namespace

Checkpointer::Checkpointer(std::string root, CheckpointerOptions options)
    : root_(std::move(root)), options_(std::move(options)) {}

std::string Checkpointer::DebugString() const {
  return absl::StrCat("Checkpointer(root=", root_, ", keep_latest=", options_.keep_latest, ")");
}

absl::StatusOr<std::string> Checkpointer::Save(const std::vector<std::shared_ptr<Table>>& tables) {
  if (options_.keep_latest < 1) {
    metrics_.save_failures.fetch_add(1, std::memory_order_relaxed);
    return absl::InvalidArgumentError("keep_latest must be >= 1");
  }
  absl::MutexLock lock(&save_mu_);
  const absl::Time start = absl::Now();
  int64_t bytes = 0;
  absl::StatusOr<std::string> path = SaveLocked(tables, start, &bytes);
  if (!path.ok()) {
    metrics_.save_failures.fetch_add(1, std::memory_order_relaxed);
    return path;
  }
  const absl::Time end = absl::Now();
  metrics_.save_seconds.Observe(absl::ToDoubleSeconds(end - start));
  metrics_.saved_bytes.fetch_add(bytes, std::memory_order_relaxed);
  metrics_.last_save_bytes.store(bytes, std::memory_order_relaxed);
  metrics_.last_success_unix_seconds.store(absl::ToDoubleSeconds(end - absl::UnixEpoch()),
                                           std::memory_order_relaxed);
  return path;
}

absl::StatusOr<std::string> Checkpointer::SaveLocked(
    const std::vector<std::shared_ptr<Table>>& tables, absl::Time start, int64_t* bytes_out) {
  std::error_code error;
  fs::create_directories(root_, error);
  if (error) return FsError("create", root_, error);
  const std::string name = CheckpointName(start);
  const std::string final_path = (fs::path(root_) / name).string();
  const std::string temp_path = (fs::path(root_) / (kTempPrefix + name)).string();
  fs::create_directory(temp_path, error);
  if (error) return FsError("create", temp_path, error);

  auto tables_file = RecordWriter::Create((fs::path(temp_path) / kTablesFile).string());
  if (!tables_file.ok()) return tables_file.status();
  auto items_file = RecordWriter::Create((fs::path(temp_path) / kItemsFile).string());
  if (!items_file.ok()) return items_file.status();
  auto chunks_file = RecordWriter::Create((fs::path(temp_path) / kChunksFile).string());
  if (!chunks_file.ok()) return chunks_file.status();

  // Chunks are stored once each, by key. Two streams may have sent different
  // chunks under one key (keys are only unique per writer): the later one is
  // stored under a fresh key and its items' slices are rewritten to it.
  absl::flat_hash_map<uint64_t, const ChunkData*> written_chunks;  // stored key -> chunk
  absl::flat_hash_map<const ChunkData*, uint64_t> stored_key;
  uint64_t next_fresh_key = 1;
  auto store_key = [&](const ChunkData* chunk) -> std::pair<uint64_t, bool> {
    if (auto it = stored_key.find(chunk); it != stored_key.end()) return {it->second, false};
    uint64_t key = chunk->chunk_key();
    auto existing = written_chunks.find(key);
    if (existing != written_chunks.end() && SameChunkData(*existing->second, *chunk)) {
      stored_key.emplace(chunk, key);
      return {key, false};
    }
    if (existing != written_chunks.end()) {
      while (written_chunks.contains(next_fresh_key)) ++next_fresh_key;
      key = next_fresh_key;
    }
    written_chunks.emplace(key, chunk);
    stored_key.emplace(chunk, key);
    return {key, true};
  };
  int64_t total_items = 0;
  for (const auto& table : tables) {
    const absl::Time table_start = absl::Now();
    Table::Snapshot snapshot = table->TakeSnapshot();
    const absl::Duration snapshot_time = absl::Now() - table_start;
    if (absl::Status s = (*tables_file)->WriteMessage(snapshot.config); !s.ok()) return s;
    int64_t items = 0;
    for (const Table::CheckpointItem& item : snapshot.items) {
      PrioritizedItem proto = *item.data->item;
      proto.set_table(table->name());  // items are grouped by it on load
      proto.set_priority(item.priority);
      proto.set_times_sampled(item.times_sampled);
      absl::flat_hash_map<uint64_t, uint64_t> renamed;  // this item's chunks only
      for (const auto& chunk : item.data->chunks) {
        const auto [key, is_new] = store_key(chunk.get());
        if (key != chunk->chunk_key()) renamed[chunk->chunk_key()] = key;
        if (!is_new) continue;
        absl::Status s;
        if (key == chunk->chunk_key() && chunk->compression() != kZstd) {
          s = (*chunks_file)->WriteMessage(*chunk);
        } else {
          ChunkData copy = *chunk;
          copy.set_chunk_key(key);
          // Checkpoints hold Snappy chunks only, so that dm-reverb, which
          // knows no zstd, restores every checkpoint tf_reverb writes.
          s = TranscodeChunk(&copy, kSnappy);
          if (s.ok()) s = (*chunks_file)->WriteMessage(copy);
        }
        if (!s.ok()) return s;
      }
      for (auto& column : *proto.mutable_flat_trajectory()->mutable_columns()) {
        for (auto& slice : *column.mutable_chunk_slices()) {
          if (auto it = renamed.find(slice.chunk_key()); it != renamed.end()) {
            slice.set_chunk_key(it->second);
          }
        }
      }
      if (absl::Status s = (*items_file)->WriteMessage(proto); !s.ok()) return s;
      if (++items % kProgressEvery == 0) {
        Log("save_progress",
            {{"table", table->name()},
             {"items", items},
             {"bytes", (*chunks_file)->bytes_written() + (*items_file)->bytes_written()},
             {"elapsed_ms", absl::ToInt64Milliseconds(absl::Now() - start)}});
      }
    }
    total_items += items;
    Log("save_table", {{"table", table->name()},
                       {"items", items},
                       {"snapshot_ms", absl::ToDoubleMilliseconds(snapshot_time)}});
  }
  for (auto* file : {&*tables_file, &*items_file, &*chunks_file}) {
    if (absl::Status s = (*file)->Close(); !s.ok()) return s;
  }
  if (absl::Status s = WriteEmptyFile((fs::path(temp_path) / kDoneFile).string()); !s.ok()) {
    return s;
  }
  if (absl::Status s = SyncDirectory(temp_path); !s.ok()) return s;
  fs::rename(temp_path, final_path, error);
  if (error) return FsError("publish", final_path, error);
  if (absl::Status s = SyncDirectory(root_); !s.ok()) return s;
  const int64_t bytes = (*tables_file)->bytes_written() + (*items_file)->bytes_written() +
                        (*chunks_file)->bytes_written();
  *bytes_out = bytes;
  Log("saved", {{"path", final_path},
                {"tables", tables.size()},
                {"items", total_items},
                {"chunks", written_chunks.size()},
                {"bytes", bytes},
                {"elapsed_ms", absl::ToInt64Milliseconds(absl::Now() - start)}});
  DeleteOld();
  return final_path;
}

std::vector<std::string> Checkpointer::CompleteCheckpoints() const {
  std::vector<std::string> names;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(root_, error)) {
    const std::string name = entry.path().filename().string();
    if (IsCheckpointName(name) && fs::exists(entry.path() / kDoneFile)) names.push_back(name);
  }
  std::sort(names.rbegin(), names.rend());
  std::vector<std::string> paths;
  for (const auto& name : names) paths.push_back((fs::path(root_) / name).string());
  return paths;
}

void Checkpointer::DeleteOld() {
  std::error_code error;
  const std::vector<std::string> complete = CompleteCheckpoints();
  for (size_t i = options_.keep_latest; i < complete.size(); ++i) {
    fs::remove_all(complete[i], error);
  }
  // Leftovers of interrupted saves (ours only: ".tmp-" + a checkpoint name).
  for (const auto& entry : fs::directory_iterator(root_, error)) {
    const std::string name = entry.path().filename().string();
    if (absl::StartsWith(name, kTempPrefix) && IsCheckpointName(name.substr(strlen(kTempPrefix)))) {
      fs::remove_all(entry.path(), error);
    }
  }
}

absl::StatusOr<std::string> Checkpointer::LoadLatest(
    const std::vector<std::shared_ptr<Table>>& tables) {
  absl::Status last_error = absl::NotFoundError(absl::StrCat("No complete checkpoint in ", root_));
  for (const std::string& path : CompleteCheckpoints()) {
    last_error = Load(path, tables);
    if (last_error.ok()) return path;
    Log("load_failed", {{"path", path}, {"error", last_error.message()}});
    if (!options_.fall_back_to_older) return last_error;
  }
  if (absl::IsNotFound(last_error) && !options_.fallback_checkpoint_path.empty() &&
      fs::exists(fs::path(options_.fallback_checkpoint_path) / kDoneFile)) {
    if (absl::Status s = Load(options_.fallback_checkpoint_path, tables); !s.ok()) return s;
    return options_.fallback_checkpoint_path;
  }
  return last_error;
}

absl::Status Checkpointer::Load(const std::string& path,
                                const std::vector<std::shared_ptr<Table>>& tables) {
  absl::Status status = LoadImpl(path, tables);
  // A checkpoint with its DONE marker is complete: a file of it that cannot
  // be found is damage, not "no checkpoint" (NOT_FOUND would let a server
  // start empty, or load the fallback, over a checkpoint it could not read).
  if (absl::IsNotFound(status)) {
    status =
        absl::DataLossError(absl::StrCat("Checkpoint ", path, " is damaged: ", status.message()));
  }
  (status.ok() ? metrics_.restores : metrics_.restore_failures)
      .fetch_add(1, std::memory_order_relaxed);
  return status;
}

absl::Status Checkpointer::LoadImpl(const std::string& path,
                                    const std::vector<std::shared_ptr<Table>>& tables) {
  const absl::Time start = absl::Now();
  if (!fs::exists(fs::path(path) / kDoneFile)) {
    return absl::InvalidArgumentError(
        absl::StrCat("Checkpoint ", path, " is incomplete (no ", kDoneFile, " file)"));
  }
  absl::flat_hash_map<std::string, std::shared_ptr<Table>> by_name;
  std::vector<std::string> names;
  for (const auto& table : tables) {
    by_name[table->name()] = table;
    names.push_back(absl::StrCat("'", table->name(), "'"));
  }
  std::vector<PriorityTableCheckpoint> configs;
  absl::Status status = ReadAll<PriorityTableCheckpoint>(
      (fs::path(path) / kTablesFile).string(), [&](PriorityTableCheckpoint config) {
        if (!by_name.contains(config.table_name())) {
          return absl::InvalidArgumentError(absl::StrCat(
              "Trying to load table '", config.table_name(),
              "' but table was not found in provided list of tables. Available tables: [",
              absl::StrJoin(names, ", "), "]"));
        }
        configs.push_back(std::move(config));
        return absl::OkStatus();
      });
  if (!status.ok()) return status;

  const std::string chunks_path = (fs::path(path) / kChunksFile).string();
  absl::flat_hash_map<uint64_t, std::shared_ptr<const ChunkData>> chunks;
  int64_t chunk_bytes = 0;
  status = ReadAll<ChunkData>(chunks_path, [&](ChunkData chunk) {
    // What a client could not insert is not restored either: a chunk no
    // sample could decode fails the load here, not every later sample.
    if (absl::Status valid = ValidateChunk(chunk); !valid.ok()) {
      return absl::DataLossError(
          absl::StrCat("Checkpoint file ", chunks_path, ": ", valid.message()));
    }
    for (const auto& tensor : chunk.data().tensors()) chunk_bytes += tensor.tensor_content().size();
    const uint64_t key = chunk.chunk_key();
    chunks.emplace(key, std::make_shared<const ChunkData>(std::move(chunk)));
    return absl::OkStatus();
  });
  if (!status.ok()) return status;

  const std::string items_path = (fs::path(path) / kItemsFile).string();
  absl::flat_hash_map<std::string, std::vector<Table::CheckpointItem>> items;
  int64_t num_items = 0;
  status = ReadAll<PrioritizedItem>(items_path, [&](PrioritizedItem proto) {
    TableItem data;
    for (uint64_t key : UniqueChunkKeys(proto.flat_trajectory())) {
      auto it = chunks.find(key);
      if (it == chunks.end()) {
        return absl::DataLossError(absl::StrCat("Checkpoint file ", items_path, ": item ",
                                                proto.key(), " references chunk ", key,
                                                " missing from ", chunks_path));
      }
      data.chunks.push_back(it->second);
    }
    const double priority = proto.priority();
    const int32_t times_sampled = proto.times_sampled();
    std::string table = proto.table();
    data.item = std::make_shared<const PrioritizedItem>(std::move(proto));
    items[table].push_back(Table::CheckpointItem{std::make_shared<const TableItem>(std::move(data)),
                                                 priority, times_sampled});
    if (++num_items % kProgressEvery == 0) {
      Log("load_progress", {{"path", path},
                            {"items", num_items},
                            {"elapsed_ms", absl::ToInt64Milliseconds(absl::Now() - start)}});
    }
    return absl::OkStatus();
  });
  if (!status.ok()) return status;

  for (const PriorityTableCheckpoint& config : configs) {
    auto& table_items = items[config.table_name()];
    const size_t count = table_items.size();
    absl::StatusOr<std::vector<std::string>> differences = by_name[config.table_name()]->Restore(
        config, std::move(table_items), options_.restore_mode);
    if (!differences.ok()) return differences.status();
    for (const std::string& difference : *differences) {
      Log("config_differs",
          {{"table", config.table_name()},
           {"kept", options_.restore_mode == Table::RestoreMode::kCheckpointConfig ? "checkpoint"
                                                                                   : "table"},
           {"detail", difference}});
    }
    Log("loaded_table", {{"table", config.table_name()}, {"items", count}});
  }
  Log("loaded", {{"path", path},
                 {"items", num_items},
                 {"chunks", chunks.size()},
                 {"chunk_bytes", chunk_bytes},
                 {"elapsed_ms", absl::ToInt64Milliseconds(absl::Now() - start)}});
  return absl::OkStatus();
}

}  // namespace tf_reverb
