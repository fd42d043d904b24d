#include "server/checkpointing/zlib_output.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace tf_reverb {
namespace {

constexpr size_t kOutputBytes = size_t{1} << 18;

}  // namespace

struct ZlibOutput::Stream {
  z_stream z{};
  bool initialized = false;
};

ZlibOutput::ZlibOutput(std::string path, FILE* file)
    : path_(std::move(path)), file_(file), stream_(std::make_unique<Stream>()) {
  // The fastest level: item records are small and checkpoints must not wait.
  if (deflateInit(&stream_->z, Z_BEST_SPEED) != Z_OK) {
    error_ = absl::InternalError(absl::StrCat("Cannot start deflating ", path_));
  } else {
    stream_->initialized = true;
  }
  output_.resize(kOutputBytes);
}

ZlibOutput::~ZlibOutput() {
  if (stream_->initialized) deflateEnd(&stream_->z);
}

absl::Status ZlibOutput::Deflate(int flush) {
  z_stream& z = stream_->z;
  while (true) {
    z.next_out = output_.data();
    z.avail_out = static_cast<uInt>(output_.size());
    const int result = deflate(&z, flush);
    if (result != Z_OK && result != Z_STREAM_END && result != Z_BUF_ERROR) {
      return error_ = absl::InternalError(
                 absl::StrCat("Cannot deflate ", path_, ": zlib error ", result));
    }
    const size_t produced = output_.size() - z.avail_out;
    if (produced > 0 && std::fwrite(output_.data(), 1, produced, file_) != produced) {
      return error_ = absl::InternalError(
                 absl::StrCat("Cannot write ", path_, ": ", std::strerror(errno)));
    }
    bytes_written_ += static_cast<int64_t>(produced);
    if (flush == Z_FINISH ? result == Z_STREAM_END : z.avail_out != 0) return absl::OkStatus();
  }
}

absl::Status ZlibOutput::Write(std::string_view data) {
  if (!error_.ok()) return error_;
  z_stream& z = stream_->z;
  while (!data.empty()) {
    // avail_in is 32 bits: feed very large records in parts.
    const size_t part = std::min<size_t>(data.size(), 1u << 30);
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
    z.avail_in = static_cast<uInt>(part);
    if (absl::Status s = Deflate(Z_NO_FLUSH); !s.ok()) return s;
    data.remove_prefix(part);
  }
  return absl::OkStatus();
}

absl::Status ZlibOutput::Finish() {
  if (!error_.ok()) return error_;
  stream_->z.next_in = nullptr;
  stream_->z.avail_in = 0;
  return Deflate(Z_FINISH);
}

}  // namespace tf_reverb
