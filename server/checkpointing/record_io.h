// RecordWriter / RecordReader: files of length-delimited records in
// TensorFlow's TFRecord framing (uint64 length, masked CRC32C of the length,
// payload, masked CRC32C of the payload). RecordWriter writes them
// uncompressed, or ZLIB-compressed on request (zlib_output.h); RecordReader
// reads both, as dm-reverb writes its checkpoints compressed (TFRecord's
// "ZLIB" option, zlib_input.h), telling the two apart by the file's first
// bytes.
//
// Checkpoints are streams of such bounded records, so a checkpoint has no
// size ceiling (no single giant protobuf message) and every record is
// verified when read.
//
// Contract:
//  * Thread-safety: none; one thread uses a writer or reader at a time.
//  * Ownership: each owns its file descriptor and closes it.
//  * Errors: NOT_FOUND / PERMISSION_DENIED / INTERNAL for I/O failures,
//    DATA_LOSS for truncated or corrupt records (or compressed data); every
//    message names the file (and the byte offset of a bad record, in the
//    decompressed records for a compressed file).
#ifndef TF_REVERB_SERVER_CHECKPOINTING_RECORD_IO_H_
#define TF_REVERB_SERVER_CHECKPOINTING_RECORD_IO_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "google/protobuf/message_lite.h"

namespace tf_reverb {

inline constexpr size_t kRecordHeaderBytes = 12;  // length and its checksum
inline constexpr size_t kRecordFooterBytes = 4;   // the payload's checksum

// Appends `payload` framed as one record to `out` (for writers that batch
// records into one write, such as the write-ahead log).
void AppendRecordFrame(std::string_view payload, std::string* out);
// The same without a copy of the payload: BeginRecordFrame reserves the
// header and returns where it starts; the caller appends the payload to
// `out`; EndRecordFrame fills the header in and appends the footer.
size_t BeginRecordFrame(std::string* out);
void EndRecordFrame(size_t begin, std::string* out);

class ZlibOutput;

class RecordWriter {
 public:
  // `compressed`: the records as one zlib stream (TFRecord's "ZLIB").
  static absl::StatusOr<std::unique_ptr<RecordWriter>> Create(const std::string& path,
                                                              bool compressed = false);
  ~RecordWriter();

  absl::Status Write(std::string_view record);
  absl::Status WriteMessage(const google::protobuf::MessageLite& message);
  // Flushes, fsyncs and closes; required for the data to count as written.
  absl::Status Close();
  // Bytes in the file (compressed ones; complete after Close).
  int64_t bytes_written() const;

 private:
  RecordWriter(std::string path, FILE* file, bool compressed);

  const std::string path_;
  FILE* file_;
  std::unique_ptr<ZlibOutput> zlib_;  // null: uncompressed
  int64_t bytes_written_ = 0;
};

class ZlibInput;

class RecordReader {
 public:
  // `kind` starts the messages of errors ("<kind> <path> is corrupt ...").
  // `may_be_compressed`: false for files this project alone writes (always
  // plain), so that a short torn file is never taken for a compressed one.
  static absl::StatusOr<std::unique_ptr<RecordReader>> Open(const std::string& path,
                                                            std::string kind = "Checkpoint file",
                                                            bool may_be_compressed = true);
  ~RecordReader();

  // Reads the next record into `record`; OUT_OF_RANGE at a clean end of file.
  absl::Status Read(std::string* record);
  // Reads and parses the next record.
  absl::Status ReadMessage(google::protobuf::MessageLite* message);
  // The offset of the next record (of the failed one after an error).
  int64_t offset() const { return offset_; }
  // Whether the last failed Read met the end of an uncompressed file inside
  // a record (a record cut short, or the last record with a bad payload
  // checksum): what a write interrupted by a crash leaves. Other DATA_LOSS
  // is corruption.
  bool last_read_torn() const { return torn_; }
  // Whether the file is ZLIB-compressed.
  bool compressed() const { return zlib_ != nullptr; }

 private:
  RecordReader(std::string path, FILE* file, bool compressed, std::string kind);
  absl::Status Corrupt(const std::string& what) const;
  // Corrupt, marking the failure as a torn end (last_read_torn).
  absl::Status Torn(const std::string& what);
  // Bytes of the file after the current position; -1 when unknown (always
  // for a compressed file).
  int64_t RemainingBytes() const;
  // Reads up to `size` bytes of records (inflated when compressed); fewer
  // only at the end of the data.
  absl::StatusOr<size_t> ReadBytes(char* out, size_t size);

  const std::string path_;
  const std::string kind_;
  FILE* file_;
  std::unique_ptr<ZlibInput> zlib_;  // null: the file is uncompressed
  int64_t offset_ = 0;
  bool torn_ = false;
};

}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_CHECKPOINTING_RECORD_IO_H_
