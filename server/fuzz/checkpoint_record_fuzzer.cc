// Fuzz target: checkpoint files (server/checkpointing). The input is used
// twice:
//  1. as one record file read with RecordReader to its end, as it is and
//     with its length checksums recomputed (lengths kept, however large);
//  2. split at kFileSeparator into tables.tfrecord, chunks.tfrecord and
//     items.tfrecord of a checkpoint directory that Checkpointer::Load
//     restores into two fresh tables ("t" and "u"), decoding every record as
//     the loader does (PriorityTableCheckpoint, ChunkData, PrioritizedItem)
//     and handing them to Table::Restore; then once more with every record's
//     checksums recomputed (Reframe), so that mutated payloads reach the
//     loader instead of stopping at the checksum.
//
// Properties: never crashes, never allocates what a corrupt length merely
// claims (run with -malloc_limit_mb); failures are statuses; the records a
// reader returns, written again with RecordWriter, reproduce the bytes it
// consumed, and a clean end of file comes exactly at the end of the bytes;
// after a successful load every restored item is well-formed
// (ValidateTableItem) and decoding its slices fails, if at all, with a
// status.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "server/checkpointing/checkpointer.h"
#include "server/checkpointing/crc32c.h"
#include "server/checkpointing/record_io.h"
#include "server/fuzz/fuzz_check.h"
#include "server/fuzz/fuzz_files.h"
#include "server/fuzz/fuzz_tables.h"
#include "server/fuzz/item_decoder.h"
#include "server/table.h"
#include "server/table_item.h"

namespace tf_reverb {
namespace {

constexpr int kMaxRecords = 10000;
constexpr int64_t kMaxSliceBytes = int64_t{64} << 20;

uint64_t GetFixed64(const char* in) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(in[i])) << (8 * i);
  return v;
}

void PutFixed(std::string* out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
}

// `file` read loosely as records (a length, 4 checksum bytes, the payload,
// 4 checksum bytes; lengths clamped to what is there) and written again with
// correct checksums. With `keep_lengths`, each header keeps the length it
// claimed (so the reader meets lengths beyond the file behind valid length
// checksums).
std::string Reframe(const std::string& file, bool keep_lengths) {
  std::string out;
  size_t pos = 0;
  while (pos + 12 <= file.size()) {
    const uint64_t claimed = GetFixed64(file.data() + pos);
    pos += 12;
    const size_t length = static_cast<size_t>(std::min<uint64_t>(claimed, file.size() - pos));
    const absl::string_view payload(file.data() + pos, length);
    pos = std::min(file.size(), pos + length + 4);
    std::string header;
    PutFixed(&header, keep_lengths ? claimed : length, 8);
    out += header;
    PutFixed(&out, MaskCrc(Crc32c(header.data(), 8)), 4);
    out.append(payload.data(), payload.size());
    PutFixed(&out, MaskCrc(Crc32c(payload.data(), payload.size())), 4);
  }
  return out;
}

void ReadRecordFile(const std::string& bytes) {
  const std::string dir = fuzz::ScratchDirectory();
  const std::string path = dir + "/records";
  const std::string copy = dir + "/records.copy";
  fuzz::WriteFileOrDie(path, bytes);
  absl::StatusOr<std::unique_ptr<RecordReader>> reader = RecordReader::Open(path);
  FUZZ_CHECK_OK(reader.status());
  absl::StatusOr<std::unique_ptr<RecordWriter>> writer = RecordWriter::Create(copy);
  FUZZ_CHECK_OK(writer.status());
  absl::Status status;
  for (int i = 0; i < kMaxRecords; ++i) {
    const int64_t before = (*reader)->offset();
    std::string record;
    status = (*reader)->Read(&record);
    if (!status.ok()) {
      FUZZ_CHECK((*reader)->offset() == before, "a failed read moved the offset");
      break;
    }
    FUZZ_CHECK((*reader)->offset() == before + 16 + static_cast<int64_t>(record.size()),
               absl::StrCat("offset ", (*reader)->offset(), " after a ", record.size(),
                            "-byte record read at ", before));
    FUZZ_CHECK_OK((*writer)->Write(record));
  }
  FUZZ_CHECK(status.ok() || absl::IsOutOfRange(status) || absl::IsDataLoss(status),
             status.ToString());
  if (absl::IsOutOfRange(status)) {
    FUZZ_CHECK(
        (*reader)->offset() == static_cast<int64_t>(bytes.size()),
        absl::StrCat("clean end of file at ", (*reader)->offset(), " of ", bytes.size(), " bytes"));
  }
  FUZZ_CHECK_OK((*writer)->Close());
  const std::string written = fuzz::ReadFileOrDie(copy);
  FUZZ_CHECK(written == bytes.substr(0, (*reader)->offset()),
             "re-written records differ from the bytes read");
}

void LoadCheckpoint(const std::string& bytes, bool reframe) {
  const std::string dir = fuzz::ScratchDirectory() + "/checkpoint";
  std::filesystem::create_directories(dir);
  std::vector<std::string> files = fuzz::SplitFiles(bytes, 3);
  if (reframe) {
    for (std::string& file : files) file = Reframe(file, /*keep_lengths=*/false);
  }
  fuzz::WriteFileOrDie(dir + "/tables.tfrecord", files[0]);
  fuzz::WriteFileOrDie(dir + "/chunks.tfrecord", files[1]);
  fuzz::WriteFileOrDie(dir + "/items.tfrecord", files[2]);
  fuzz::WriteFileOrDie(dir + "/DONE", "");
  std::vector<std::shared_ptr<Table>> tables;
  for (const char* name : {"t", "u"}) {
    absl::StatusOr<std::shared_ptr<Table>> table = fuzz::MakeFuzzTable(name);
    FUZZ_CHECK_OK(table.status());
    tables.push_back(*std::move(table));
  }
  // The first byte picks whose configuration wins (both paths restore).
  CheckpointerOptions options;
  options.restore_mode = !bytes.empty() && (bytes[0] & 1) ? Table::RestoreMode::kTableConfig
                                                          : Table::RestoreMode::kCheckpointConfig;
  Checkpointer checkpointer(fuzz::ScratchDirectory() + "/root", options);
  const absl::Status status = checkpointer.Load(dir, tables);
  if (!status.ok()) return;
  for (const auto& table : tables) {
    const Table::Snapshot snapshot = table->TakeSnapshot();
    FUZZ_CHECK(static_cast<int64_t>(snapshot.items.size()) == table->size(),
               "snapshot and size disagree");
    for (const Table::CheckpointItem& item : snapshot.items) {
      FUZZ_CHECK_OK(ValidateTableItem(*item.data));
      (void)fuzz::DecodeItem(*item.data, kMaxSliceBytes);
    }
    (void)table->Info();
    (void)table->DebugString();
  }
}

}  // namespace
}  // namespace tf_reverb

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  tf_reverb::ReadRecordFile(bytes);
  tf_reverb::ReadRecordFile(tf_reverb::Reframe(bytes, /*keep_lengths=*/true));
  tf_reverb::LoadCheckpoint(bytes, /*reframe=*/false);
  tf_reverb::LoadCheckpoint(bytes, /*reframe=*/true);
  return 0;
}
