#include "server/checkpointing/zlib_input.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace tf_reverb {
namespace {

constexpr size_t kInputBytes = size_t{1} << 20;
// inflateInit2's window bits: 15, plus 32 to accept zlib and gzip headers.
constexpr int kWindowBitsZlibOrGzip = 15 + 32;

}  // namespace

struct ZlibInput::Stream {
  z_stream z{};
  bool initialized = false;
};

bool ZlibInput::LooksCompressed(const unsigned char* head, size_t size) {
  if (size < 2) return false;
  if (head[0] == 0x1f && head[1] == 0x8b) return true;  // gzip
  // zlib (RFC 1950): deflate, a window of at most 32 KiB, and a header
  // checksum that makes the first two bytes a multiple of 31.
  return (head[0] & 0x0f) == 8 && (head[0] >> 4) <= 7 &&
         ((static_cast<unsigned>(head[0]) << 8) | head[1]) % 31 == 0;
}

ZlibInput::ZlibInput(std::string path, FILE* file)
    : path_(std::move(path)), file_(file), stream_(std::make_unique<Stream>()) {
  if (inflateInit2(&stream_->z, kWindowBitsZlibOrGzip) != Z_OK) {
    error_ = absl::InternalError(absl::StrCat("Cannot start inflating ", path_));
  } else {
    stream_->initialized = true;
  }
}

ZlibInput::~ZlibInput() {
  if (stream_->initialized) inflateEnd(&stream_->z);
}

absl::StatusOr<bool> ZlibInput::Refill() {
  input_.resize(kInputBytes);
  const size_t got = std::fread(input_.data(), 1, input_.size(), file_);
  if (got == 0 && std::ferror(file_)) {
    return absl::InternalError(absl::StrCat("Cannot read ", path_, ": ", std::strerror(errno)));
  }
  stream_->z.next_in = input_.data();
  stream_->z.avail_in = static_cast<uInt>(got);
  return got > 0;
}

absl::StatusOr<size_t> ZlibInput::Read(char* out, size_t size) {
  if (!error_.ok()) return error_;
  z_stream& z = stream_->z;
  size_t produced = 0;
  while (produced < size && !ended_) {
    if (z.avail_in == 0) {
      absl::StatusOr<bool> more = Refill();
      if (!more.ok()) return error_ = more.status();
      if (!*more) {
        // The file ended inside a stream: a truncated file.
        return error_ = absl::DataLossError(absl::StrCat(
                   "Checkpoint file ", path_,
                   " is truncated: its ZLIB-compressed data ends before the stream does"));
      }
    }
    z.next_out = reinterpret_cast<Bytef*>(out + produced);
    z.avail_out = static_cast<uInt>(std::min<size_t>(size - produced, 1u << 30));
    const uInt before = z.avail_out;
    const int result = inflate(&z, Z_NO_FLUSH);
    produced += before - z.avail_out;
    if (result == Z_STREAM_END) {
      // Another stream may follow (data appended with a new deflate stream).
      if (z.avail_in == 0) {
        absl::StatusOr<bool> more = Refill();
        if (!more.ok()) return error_ = more.status();
        if (!*more) {
          ended_ = true;
          break;
        }
      }
      inflateReset(&z);
    } else if (result != Z_OK && !(result == Z_BUF_ERROR && z.avail_in == 0)) {
      return error_ = absl::DataLossError(absl::StrCat(
                 "Checkpoint file ", path_,
                 " has corrupt ZLIB-compressed data: ", z.msg != nullptr ? z.msg : zError(result)));
    }
  }
  return produced;
}

}  // namespace tf_reverb
