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
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "checkpoint.pb.h"
#include "schema.pb.h"
#include "server/checkpointing/record_io.h"
#include "server/chunk_codec.h"
#include "server/chunk_view.h"
#include "server/item_record.h"
#include "server/logging/event_log.h"
#include "server/table.h"
#include "server/table_chunk.h"
#include "server/table_item.h"
#include "server/wal/log_recovery.h"
#include "server/wal/table_journal.h"

namespace tf_reverb {
namespace {

// Whether two chunks hold the same data (what a sample decodes): codec,
// delta encoding and each tensor's dtype, shape, payload and strings; the
// keys (and the episode range) may differ.
bool SameChunkData(const TableChunk& a, const TableChunk& b) {
  if (&a == &b || a.wire() == b.wire()) return true;
  absl::StatusOr<ChunkView> x = a.View();
  absl::StatusOr<ChunkView> y = b.View();
  // Unreadable (never, for chunks a table holds): not known to be the same.
  // Views of wire bytes hold each payload in one piece (or none when empty),
  // so comparing the pieces compares the payloads.
  if (!x.ok() || !y.ok()) return false;
  if (x->compression != y->compression || x->delta_encoded != y->delta_encoded ||
      x->tensors.size() != y->tensors.size()) {
    return false;
  }
  for (size_t i = 0; i < x->tensors.size(); ++i) {
    const TensorView& s = x->tensors[i];
    const TensorView& t = y->tensors[i];
    if (s.dtype != t.dtype || s.shape != t.shape || s.unknown_rank != t.unknown_rank ||
        s.string_val != t.string_val || s.content != t.content) {
      return false;
    }
  }
  return true;
}

namespace fs = std::filesystem;
using ::deepmind::reverb::ChunkSource;
using ::deepmind::reverb::PriorityTableCheckpoint;

constexpr char kTablesFile[] = "tables.tfrecord";
constexpr char kItemsFile[] = "items.tfrecord";
constexpr char kChunksFile[] = "chunks.tfrecord";
constexpr char kChunkSourcesFile[] = "chunk_sources.tfrecord";
constexpr char kDoneFile[] = "DONE";
// Keys per ChunkSource record (records stay small whatever the table).
constexpr size_t kKeysPerSourceRecord = 100000;
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

// Ours always have nine fractional digits; dm-reverb drops the trailing
// zeros of the nanoseconds ("...:26.27264293+00:00"), so any count is a
// checkpoint. Names still sort chronologically: the offset's sign sorts
// before every digit.
bool IsCheckpointName(const std::string& name) {
  absl::Time time;
  std::string error;
  return absl::ParseTime("%Y-%m-%dT%H:%M:%E*S%Ez", name, &time, &error);
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

// Reads every record of `path` as bytes through `handle(record, offset,
// compressed)`: `offset` where the record starts (in the decompressed records
// when `compressed`).
template <typename Handle>
absl::Status ReadAllRecords(const std::string& path, Handle handle) {
  absl::StatusOr<std::unique_ptr<RecordReader>> reader = RecordReader::Open(path);
  if (!reader.ok()) return reader.status();
  std::string record;
  while (true) {
    const int64_t offset = (*reader)->offset();
    absl::Status status = (*reader)->Read(&record);
    if (absl::IsOutOfRange(status)) return absl::OkStatus();
    if (!status.ok()) return status;
    if (absl::Status s = handle(record, offset, (*reader)->compressed()); !s.ok()) return s;
  }
}

}  // namespace

Checkpointer::Checkpointer(std::string root, CheckpointerOptions options)
    : root_(std::move(root)), options_(std::move(options)) {}

std::string Checkpointer::DebugString() const {
  return absl::StrCat("Checkpointer(root=", root_, ", keep_latest=", options_.keep_latest, ")");
}

absl::StatusOr<std::string> Checkpointer::Save(const std::vector<std::shared_ptr<Table>>& tables,
                                               bool full) {
  if (options_.keep_latest < 1) {
    metrics_.save_failures.fetch_add(1, std::memory_order_relaxed);
    return absl::InvalidArgumentError("keep_latest must be >= 1");
  }
  absl::MutexLock lock(&save_mu_);
  const absl::Time start = absl::Now();
  int64_t bytes = 0;
  uint64_t log_position = 0;
  absl::StatusOr<std::string> path =
      SaveLocked(tables, options_.incremental && !full, start, &bytes, &log_position);
  if (!path.ok()) {
    metrics_.save_failures.fetch_add(1, std::memory_order_relaxed);
    return path;
  }
  // The checkpoint holds every table's changes through log_position.
  if (log_ != nullptr) log_->ReleaseThrough(log_position);
  const absl::Time end = absl::Now();
  metrics_.save_seconds.Observe(absl::ToDoubleSeconds(end - start));
  metrics_.saved_bytes.fetch_add(bytes, std::memory_order_relaxed);
  metrics_.last_save_bytes.store(bytes, std::memory_order_relaxed);
  metrics_.last_success_unix_seconds.store(absl::ToDoubleSeconds(end - absl::UnixEpoch()),
                                           std::memory_order_relaxed);
  return path;
}

absl::StatusOr<std::string> Checkpointer::SaveLocked(
    const std::vector<std::shared_ptr<Table>>& tables, bool incremental, absl::Time start,
    int64_t* bytes_out, uint64_t* log_position) {
  *log_position = UINT64_MAX;
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
  // An incremental checkpoint that may reference earlier files rewrites
  // every item record (priorities and times sampled change) beside few new
  // chunks: compressed, the records cost about 2.4x less. Self-contained
  // checkpoints (full ones, and the first of a root) stay uncompressed, as
  // dm-reverb reads them.
  const bool compress_items = incremental && !chunks_in_file_.empty();
  auto items_file =
      RecordWriter::Create((fs::path(temp_path) / kItemsFile).string(), compress_items);
  if (!items_file.ok()) return items_file.status();
  auto chunks_file = RecordWriter::Create((fs::path(temp_path) / kChunksFile).string());
  if (!chunks_file.ok()) return chunks_file.status();

  // Chunks are stored once each, by key. Two streams may have sent different
  // chunks under one key (keys are only unique per writer): the later one is
  // stored under a fresh key and its items' slices are rewritten to it. A
  // chunk an earlier checkpoint file holds (incremental saves) keeps the key
  // it has there and is referenced, unless another chunk of this checkpoint
  // took that key first.
  absl::flat_hash_map<uint64_t, const TableChunk*> written_chunks;  // stored key -> chunk
  absl::flat_hash_map<const TableChunk*, uint64_t> stored_key;
  // Chunks written into this checkpoint's file, and those taken from the
  // files of earlier checkpoints (by checkpoint name).
  std::vector<std::pair<std::shared_ptr<const TableChunk>, uint64_t>> written;
  absl::flat_hash_map<std::string,
                      std::vector<std::pair<std::shared_ptr<const TableChunk>, uint64_t>>>
      referenced;
  absl::flat_hash_map<std::string, bool> source_exists;
  auto usable_source = [&](const std::string& checkpoint) {
    auto [it, inserted] = source_exists.try_emplace(checkpoint, false);
    if (inserted) it->second = fs::exists(fs::path(root_) / checkpoint / kChunksFile);
    return it->second;
  };
  // Where `chunk` goes in this checkpoint: {its key here, whether to write it now}
  // (false: stored already in this save, or referenced in an earlier file).
  uint64_t next_fresh_key = 1;
  auto place = [&](const std::shared_ptr<const TableChunk>& chunk) -> std::pair<uint64_t, bool> {
    const TableChunk* raw = chunk.get();
    if (auto it = stored_key.find(raw); it != stored_key.end()) return {it->second, false};
    if (incremental) {
      auto saved = saved_.find(raw);
      if (saved != saved_.end() && saved->second.chunk.lock().get() == raw &&
          usable_source(saved->second.checkpoint) && !written_chunks.contains(saved->second.key)) {
        const uint64_t key = saved->second.key;
        written_chunks.emplace(key, raw);
        stored_key.emplace(raw, key);
        referenced[saved->second.checkpoint].emplace_back(chunk, key);
        return {key, false};
      }
    }
    uint64_t key = chunk->key();
    auto existing = written_chunks.find(key);
    if (existing != written_chunks.end() && SameChunkData(*existing->second, *chunk)) {
      stored_key.emplace(raw, key);
      return {key, false};
    }
    if (existing != written_chunks.end()) {
      while (written_chunks.contains(next_fresh_key)) ++next_fresh_key;
      key = next_fresh_key;
    }
    written_chunks.emplace(key, raw);
    stored_key.emplace(raw, key);
    return {key, true};
  };
  // A chunk record is a serialized ChunkData: the chunk's own bytes, unless
  // it is renamed or transcoded.
  auto write_chunk = [&](const std::shared_ptr<const TableChunk>& chunk, uint64_t key) {
    written.emplace_back(chunk, key);
    if (key == chunk->key() && chunk->compression() != kZstd) {
      const absl::string_view wire = chunk->wire();
      return (*chunks_file)->Write(std::string_view(wire.data(), wire.size()));
    }
    ChunkData copy = chunk->ToProto();
    copy.set_chunk_key(key);
    // Checkpoints hold Snappy chunks only, so that dm-reverb, which
    // knows no zstd, restores every checkpoint tf_reverb writes.
    absl::Status s = TranscodeChunk(&copy, kSnappy);
    return s.ok() ? (*chunks_file)->WriteMessage(copy) : s;
  };
  int64_t total_items = 0;
  for (const auto& table : tables) {
    const absl::Time table_start = absl::Now();
    Table::Snapshot snapshot = table->TakeSnapshot();
    const absl::Duration snapshot_time = absl::Now() - table_start;
    *log_position = std::min<uint64_t>(*log_position, snapshot.config.wal_sequence());
    if (absl::Status s = (*tables_file)->WriteMessage(snapshot.config); !s.ok()) return s;
    int64_t items = 0;
    for (const Table::CheckpointItem& item : snapshot.items) {
      PrioritizedItem proto = item.data->item.ToProto();
      proto.set_table(table->name());  // items are grouped by it on load
      proto.set_priority(item.priority);
      proto.set_times_sampled(item.times_sampled);
      absl::flat_hash_map<uint64_t, uint64_t> renamed;  // this item's chunks only
      for (const auto& chunk : item.data->chunks) {
        const auto [key, is_new] = place(chunk);
        if (key != chunk->key()) renamed[chunk->key()] = key;
        if (!is_new) continue;
        if (absl::Status s = write_chunk(chunk, key); !s.ok()) return s;
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
  // Each earlier file is referenced, or, when less than half of its chunks
  // are still used, its used chunks are copied forward so it can go.
  std::unique_ptr<RecordWriter> sources_file;
  int64_t num_referenced = 0;
  std::vector<std::string> sources;
  for (auto& [source, chunks] : referenced) {
    auto in_file = chunks_in_file_.find(source);
    if (in_file != chunks_in_file_.end() &&
        2 * static_cast<int64_t>(chunks.size()) < in_file->second) {
      for (const auto& [chunk, key] : chunks) {
        if (absl::Status s = write_chunk(chunk, key); !s.ok()) return s;
      }
      continue;
    }
    if (sources_file == nullptr) {
      auto created = RecordWriter::Create((fs::path(temp_path) / kChunkSourcesFile).string());
      if (!created.ok()) return created.status();
      sources_file = std::move(*created);
    }
    sources.push_back(source);
    num_referenced += static_cast<int64_t>(chunks.size());
    for (size_t begin = 0; begin < chunks.size(); begin += kKeysPerSourceRecord) {
      ChunkSource record;
      record.set_checkpoint(source);
      const size_t end = std::min(chunks.size(), begin + kKeysPerSourceRecord);
      for (size_t i = begin; i < end; ++i) record.add_chunk_keys(chunks[i].second);
      if (absl::Status s = sources_file->WriteMessage(record); !s.ok()) return s;
    }
  }
  for (auto* file : {&*tables_file, &*items_file, &*chunks_file}) {
    if (absl::Status s = (*file)->Close(); !s.ok()) return s;
  }
  if (sources_file != nullptr) {
    if (absl::Status s = sources_file->Close(); !s.ok()) return s;
  }
  if (absl::Status s = WriteEmptyFile((fs::path(temp_path) / kDoneFile).string()); !s.ok()) {
    return s;
  }
  if (absl::Status s = SyncDirectory(temp_path); !s.ok()) return s;
  fs::rename(temp_path, final_path, error);
  if (error) return FsError("publish", final_path, error);
  if (absl::Status s = SyncDirectory(root_); !s.ok()) return s;
  const int64_t bytes = (*tables_file)->bytes_written() + (*items_file)->bytes_written() +
                        (*chunks_file)->bytes_written() +
                        (sources_file != nullptr ? sources_file->bytes_written() : 0);
  *bytes_out = bytes;
  // Remember where the chunks now lie, for the next incremental save.
  for (auto it = saved_.begin(); it != saved_.end();) {
    auto current = it++;
    if (current->second.chunk.expired()) saved_.erase(current);
  }
  for (const auto& [chunk, key] : written) saved_[chunk.get()] = SavedChunk{chunk, name, key};
  chunks_in_file_[name] = static_cast<int64_t>(written.size());
  Log("saved", {{"path", final_path},
                {"tables", tables.size()},
                {"items", total_items},
                {"chunks", written_chunks.size()},
                {"chunks_written", written.size()},
                {"chunks_referenced", num_referenced},
                {"sources", absl::StrJoin(sources, " ")},
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
  const size_t kept = std::min(complete.size(), static_cast<size_t>(options_.keep_latest));
  // The earlier checkpoints whose chunk files the kept ones use.
  absl::flat_hash_set<std::string> needed;
  for (size_t i = 0; i < kept; ++i) {
    const fs::path sources = fs::path(complete[i]) / kChunkSourcesFile;
    if (!fs::exists(sources)) continue;
    absl::Status status = ReadAll<ChunkSource>(sources.string(), [&](ChunkSource source) {
      needed.insert(source.checkpoint());
      return absl::OkStatus();
    });
    if (!status.ok()) {
      // Unsure what is still used: delete nothing this time.
      Log("retention_skipped", {{"path", sources.string()}, {"error", status.message()}});
      return;
    }
  }
  auto forget = [&](const fs::path& path) {
    fs::remove_all(path, error);
    chunks_in_file_.erase(path.filename().string());
  };
  for (size_t i = kept; i < complete.size(); ++i) {
    const fs::path path(complete[i]);
    if (!needed.contains(path.filename().string())) {
      forget(path);
      continue;
    }
    // Retired: no longer a checkpoint (DONE goes first), its chunks stay.
    for (const char* file : {kDoneFile, kTablesFile, kItemsFile, kChunkSourcesFile}) {
      fs::remove(path / file, error);
    }
  }
  for (const auto& entry : fs::directory_iterator(root_, error)) {
    const std::string name = entry.path().filename().string();
    // Retired checkpoints (a chunk file alone) no kept one uses any more.
    if (IsCheckpointName(name) && !needed.contains(name) &&
        fs::exists(entry.path() / kChunksFile) && !fs::exists(entry.path() / kDoneFile) &&
        !fs::exists(entry.path() / kTablesFile)) {
      forget(entry.path());
    }
    // Leftovers of interrupted saves (ours only: ".tmp-" + a checkpoint name).
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

absl::Status Checkpointer::Recover(const std::vector<std::shared_ptr<Table>>& tables,
                                   std::shared_ptr<WriteAheadLog> log) {
  absl::StatusOr<std::string> loaded = LoadLatest(tables);
  if (!loaded.ok() && !absl::IsNotFound(loaded.status())) return loaded.status();
  LogPositions positions;
  {
    absl::MutexLock lock(&save_mu_);
    // Positions only mean something for checkpoints this log's server
    // wrote (a fallback checkpoint elsewhere has other sequence numbers).
    const bool ours = loaded.ok() && fs::path(*loaded).parent_path() == fs::path(root_);
    if (ours) positions = loaded_log_positions_;
    log_ = log;
  }
  if (log == nullptr) return absl::OkStatus();
  if (absl::Status s = ReplayLog(*log, tables, positions); !s.ok()) return s;
  for (const auto& table : tables) {
    table->AddExtension(std::make_shared<TableJournal>(log, table->name()));
  }
  return log->Start();
}

absl::Status Checkpointer::Load(const std::string& path,
                                const std::vector<std::shared_ptr<Table>>& tables) {
  absl::MutexLock lock(&save_mu_);
  SavedChunks saved;
  LogPositions log_positions;
  absl::Status status = LoadImpl(path, tables, &saved, &log_positions);
  if (status.ok()) {
    for (auto& [raw, where] : saved) saved_[raw] = std::move(where);
    loaded_log_positions_ = std::move(log_positions);
  }
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
                                    const std::vector<std::shared_ptr<Table>>& tables,
                                    SavedChunks* saved, LogPositions* log_positions) {
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
  absl::Status tables_status = ReadAll<PriorityTableCheckpoint>(
      (fs::path(path) / kTablesFile).string(), [&](PriorityTableCheckpoint config) {
        if (!by_name.contains(config.table_name())) {
          return absl::InvalidArgumentError(absl::StrCat(
              "Trying to load table '", config.table_name(),
              "' but table was not found in provided list of tables. Available tables: [",
              absl::StrJoin(names, ", "), "]"));
        }
        (*log_positions)[config.table_name()] = config.wal_sequence();
        configs.push_back(std::move(config));
        return absl::OkStatus();
      });
  if (!tables_status.ok()) return tables_status;

  const std::string chunks_path = (fs::path(path) / kChunksFile).string();
  absl::flat_hash_map<uint64_t, std::shared_ptr<const TableChunk>> chunks;
  int64_t chunk_bytes = 0;
  // Chunks of a file under root_ are remembered where they lie, so the next
  // incremental save references them instead of writing them again.
  std::error_code error;
  const bool ours = fs::equivalent(fs::path(path).parent_path(), root_, error);
  // Reads the chunks of `file` (that checkpoint's name: `checkpoint`) whose
  // keys `wanted` holds (null: all of them).
  auto read_chunks = [&](const std::string& file, const std::string& checkpoint,
                         const absl::flat_hash_set<uint64_t>* wanted) {
    int64_t in_file = 0;
    absl::Status status =
        ReadAllRecords(file, [&](const std::string& record, int64_t offset, bool compressed) {
          ++in_file;
          // As RecordReader::ReadMessage reports a record that does not parse.
          auto unparsable = [&]() {
            return absl::DataLossError(
                absl::StrCat("Checkpoint file ", file, " is corrupt at byte ", offset,
                             compressed ? " of its records" : "", ": record does not parse"));
          };
          absl::StatusOr<ChunkView> view = ChunkViewOfWire(record);
          if (!view.ok()) return unparsable();
          const uint64_t key = view->key;
          if (wanted != nullptr && !wanted->contains(key)) {
            // Not restored, but a record that is no ChunkData still fails the load.
            if (!ChunkData().ParseFromString(record)) return unparsable();
            return absl::OkStatus();
          }
          // What a client could not insert is not restored either: a chunk no
          // sample could decode fails the load here, not every later sample.
          absl::StatusOr<std::shared_ptr<const TableChunk>> chunk = TableChunk::FromWire(record);
          if (!chunk.ok()) {
            return absl::DataLossError(
                absl::StrCat("Checkpoint file ", file, ": ", chunk.status().message()));
          }
          if (chunks.contains(key)) {
            return absl::DataLossError(absl::StrCat("Checkpoint file ", file, ": chunk ", key,
                                                    " is stored twice in checkpoint ", path));
          }
          chunk_bytes += (*chunk)->stored_bytes();
          if (ours) (*saved)[chunk->get()] = SavedChunk{*chunk, checkpoint, key};
          chunks.emplace(key, *std::move(chunk));
          return absl::OkStatus();
        });
    if (status.ok() && ours) chunks_in_file_[checkpoint] = in_file;
    return status;
  };
  absl::Status status = read_chunks(chunks_path, fs::path(path).filename().string(), nullptr);
  if (!status.ok()) return status;
  // An incremental checkpoint: the chunks it takes from earlier ones.
  const std::string sources_path = (fs::path(path) / kChunkSourcesFile).string();
  if (fs::exists(sources_path)) {
    absl::flat_hash_map<std::string, absl::flat_hash_set<uint64_t>> wanted;
    status = ReadAll<ChunkSource>(sources_path, [&](ChunkSource source) {
      if (!IsCheckpointName(source.checkpoint())) {
        return absl::DataLossError(absl::StrCat("Checkpoint file ", sources_path,
                                                ": names no checkpoint: '", source.checkpoint(),
                                                "'"));
      }
      wanted[source.checkpoint()].insert(source.chunk_keys().begin(), source.chunk_keys().end());
      return absl::OkStatus();
    });
    if (!status.ok()) return status;
    for (const auto& [checkpoint, keys] : wanted) {
      const std::string file = (fs::path(path).parent_path() / checkpoint / kChunksFile).string();
      status = read_chunks(file, checkpoint, &keys);
      if (!status.ok()) return status;
      for (uint64_t key : keys) {
        if (!chunks.contains(key)) {
          return absl::DataLossError(absl::StrCat("Checkpoint ", path, " uses chunk ", key, " of ",
                                                  file, ", which does not hold it"));
        }
      }
    }
  }

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
    data.item = ItemRecord::FromProto(proto);
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
