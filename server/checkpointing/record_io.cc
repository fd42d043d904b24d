#include "server/checkpointing/record_io.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/checkpointing/crc32c.h"
#include "server/checkpointing/zlib_input.h"
#include "server/checkpointing/zlib_output.h"

namespace tf_reverb {
namespace {

absl::Status IoError(const std::string& action, const std::string& path) {
  const int error = errno;
  const std::string message =
      absl::StrCat("Cannot ", action, " ", path, ": ", std::strerror(error));
  if (error == ENOENT) return absl::NotFoundError(message);
  if (error == EACCES || error == EPERM) return absl::PermissionDeniedError(message);
  return absl::InternalError(message);
}

void PutFixed32(char* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<char>(v >> (8 * i));
}
void PutFixed64(char* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(v >> (8 * i));
}
uint32_t GetFixed32(const char* in) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<uint8_t>(in[i])) << (8 * i);
  return v;
}
uint64_t GetFixed64(const char* in) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(in[i])) << (8 * i);
  return v;
}

// Records larger than this are treated as corruption (a damaged length).
constexpr uint64_t kMaxRecordBytes = uint64_t{1} << 40;

}  // namespace

absl::StatusOr<std::unique_ptr<RecordWriter>> RecordWriter::Create(const std::string& path,
                                                                   bool compressed) {
  FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) return IoError("create", path);
  return std::unique_ptr<RecordWriter>(new RecordWriter(path, file, compressed));
}

RecordWriter::RecordWriter(std::string path, FILE* file, bool compressed)
    : path_(std::move(path)),
      file_(file),
      zlib_(compressed ? std::make_unique<ZlibOutput>(path_, file_) : nullptr) {}

RecordWriter::~RecordWriter() {
  zlib_.reset();  // before the file it writes to closes
  if (file_ != nullptr) std::fclose(file_);
}

int64_t RecordWriter::bytes_written() const {
  return zlib_ != nullptr ? zlib_->bytes_written() : bytes_written_;
}

// The frame around a payload of `size` bytes at `data`.
static void FrameHeader(size_t size, char (&header)[kRecordHeaderBytes]) {
  PutFixed64(header, size);
  PutFixed32(header + 8, MaskCrc(Crc32c(header, 8)));
}
static void FrameFooter(std::string_view payload, char (&footer)[kRecordFooterBytes]) {
  PutFixed32(footer, MaskCrc(Crc32c(payload.data(), payload.size())));
}

void AppendRecordFrame(std::string_view payload, std::string* out) {
  const size_t begin = BeginRecordFrame(out);
  out->append(payload.data(), payload.size());
  EndRecordFrame(begin, out);
}

size_t BeginRecordFrame(std::string* out) {
  const size_t begin = out->size();
  out->append(kRecordHeaderBytes, '\0');
  return begin;
}

void EndRecordFrame(size_t begin, std::string* out) {
  const size_t payload = begin + kRecordHeaderBytes;
  char header[kRecordHeaderBytes];
  char footer[kRecordFooterBytes];
  FrameHeader(out->size() - payload, header);
  FrameFooter(std::string_view(*out).substr(payload), footer);
  out->replace(begin, kRecordHeaderBytes, header, kRecordHeaderBytes);
  out->append(footer, sizeof(footer));
}

absl::Status RecordWriter::Write(std::string_view record) {
  char header[kRecordHeaderBytes];
  char footer[kRecordFooterBytes];
  FrameHeader(record.size(), header);
  FrameFooter(record, footer);
  if (zlib_ != nullptr) {
    for (std::string_view part :
         {std::string_view(header, sizeof(header)), std::string_view(record),
          std::string_view(footer, sizeof(footer))}) {
      if (absl::Status s = zlib_->Write(part); !s.ok()) return s;
    }
    return absl::OkStatus();
  }
  if (std::fwrite(header, 1, sizeof(header), file_) != sizeof(header) ||
      std::fwrite(record.data(), 1, record.size(), file_) != record.size() ||
      std::fwrite(footer, 1, sizeof(footer), file_) != sizeof(footer)) {
    return IoError("write", path_);
  }
  bytes_written_ += sizeof(header) + record.size() + sizeof(footer);
  return absl::OkStatus();
}

absl::Status RecordWriter::WriteMessage(const google::protobuf::MessageLite& message) {
  std::string record;
  if (!message.SerializeToString(&record)) {
    return absl::InternalError(absl::StrCat("Cannot serialize a record for ", path_));
  }
  return Write(record);
}

absl::Status RecordWriter::Close() {
  if (file_ == nullptr) return absl::OkStatus();
  if (zlib_ != nullptr) {
    if (absl::Status s = zlib_->Finish(); !s.ok()) return s;
  }
  const bool ok = std::fflush(file_) == 0 && fsync(fileno(file_)) == 0;
  const bool closed = std::fclose(file_) == 0;
  file_ = nullptr;
  if (!ok || !closed) return IoError("flush", path_);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<RecordReader>> RecordReader::Open(const std::string& path,
                                                                 std::string kind,
                                                                 bool may_be_compressed) {
  FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) return IoError("open", path);
  // A file whose first record header checks out is uncompressed, whatever
  // its first bytes look like; otherwise zlib's header marks dm-reverb's.
  unsigned char head[12];
  const size_t got = std::fread(head, 1, sizeof(head), file);
  const bool plain_header =
      got == sizeof(head) && GetFixed32(reinterpret_cast<const char*>(head) + 8) ==
                                 MaskCrc(Crc32c(reinterpret_cast<const char*>(head), 8));
  const bool compressed =
      may_be_compressed && !plain_header && ZlibInput::LooksCompressed(head, got);
  if (std::fseek(file, 0, SEEK_SET) != 0) {
    absl::Status error = IoError("seek in", path);
    std::fclose(file);
    return error;
  }
  return std::unique_ptr<RecordReader>(new RecordReader(path, file, compressed, std::move(kind)));
}

RecordReader::RecordReader(std::string path, FILE* file, bool compressed, std::string kind)
    : path_(std::move(path)),
      kind_(std::move(kind)),
      file_(file),
      zlib_(compressed ? std::make_unique<ZlibInput>(path_, file) : nullptr) {}

RecordReader::~RecordReader() {
  zlib_.reset();  // borrows file_
  std::fclose(file_);
}

absl::Status RecordReader::Corrupt(const std::string& what) const {
  return absl::DataLossError(absl::StrCat(kind_, " ", path_, " is corrupt at byte ", offset_,
                                          compressed() ? " of its records" : "", ": ", what));
}

absl::Status RecordReader::Torn(const std::string& what) {
  absl::Status status = Corrupt(what);
  torn_ = !compressed();
  return status;
}

int64_t RecordReader::RemainingBytes() const {
  if (compressed()) return -1;
  struct stat st;
  const off_t position = ftello(file_);
  if (position < 0 || fstat(fileno(file_), &st) != 0) return -1;
  return st.st_size > position ? st.st_size - position : 0;
}

absl::StatusOr<size_t> RecordReader::ReadBytes(char* out, size_t size) {
  if (zlib_ != nullptr) return zlib_->Read(out, size);
  const size_t got = std::fread(out, 1, size, file_);
  if (got < size && std::ferror(file_)) return IoError("read", path_);
  return got;
}

absl::Status RecordReader::Read(std::string* record) {
  torn_ = false;
  char header[12];
  absl::StatusOr<size_t> got = ReadBytes(header, sizeof(header));
  if (!got.ok()) return got.status();
  if (*got == 0) return absl::OutOfRangeError("end of file");
  if (*got != sizeof(header)) return Torn("truncated record header");
  if (GetFixed32(header + 8) != MaskCrc(Crc32c(header, 8))) {
    return Corrupt("length checksum mismatch");
  }
  const uint64_t length = GetFixed64(header);
  if (length > kMaxRecordBytes) return Corrupt("implausible record length");
  // A damaged (or hostile) length must not be allocated: no record is longer
  // than what is left of the file, and where that is unknown (compressed)
  // the record grows only as its bytes arrive.
  char footer[4];
  const int64_t remaining = RemainingBytes();
  if (remaining >= 0 && length + sizeof(footer) > static_cast<uint64_t>(remaining)) {
    return Torn(absl::StrCat("truncated record (", length, " bytes claimed, ", remaining,
                             " left in the file)"));
  }
  constexpr uint64_t kPiece = uint64_t{64} << 20;
  record->clear();
  while (record->size() < length) {
    const size_t start = record->size();
    const size_t piece = static_cast<size_t>(std::min(kPiece, length - start));
    record->resize(start + piece);
    got = ReadBytes(record->data() + start, piece);
    if (!got.ok()) return got.status();
    if (*got != piece) return Torn("truncated record");
  }
  got = ReadBytes(footer, sizeof(footer));
  if (!got.ok()) return got.status();
  if (*got != sizeof(footer)) return Torn("truncated record");
  if (GetFixed32(footer) != MaskCrc(Crc32c(record->data(), record->size()))) {
    // The last record of the file: as a write cut short would leave it.
    if (RemainingBytes() == 0) return Torn("record checksum mismatch");
    return Corrupt("record checksum mismatch");
  }
  offset_ += sizeof(header) + length + sizeof(footer);
  return absl::OkStatus();
}

absl::Status RecordReader::ReadMessage(google::protobuf::MessageLite* message) {
  std::string record;
  if (absl::Status s = Read(&record); !s.ok()) return s;
  if (!message->ParseFromString(record)) return Corrupt("record does not parse");
  return absl::OkStatus();
}

}  // namespace tf_reverb
