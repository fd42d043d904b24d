// ZlibOutput: writes bytes to a file as one zlib stream (RFC 1950), the
// ZLIB-compressed TFRecord layout that ZlibInput and dm-reverb read.
// Incremental checkpoints write their item records so (they compress about
// 2.4x: the items file is what an incremental checkpoint rewrites whole).
//
// Contract:
//  * Thread-safety: none; one thread writes.
//  * Ownership: borrows `file` (the caller closes it, after Finish).
//  * Errors: INTERNAL naming the path when zlib or the file fails; after an
//    error every call returns it.
#ifndef TF_REVERB_SERVER_CHECKPOINTING_ZLIB_OUTPUT_H_
#define TF_REVERB_SERVER_CHECKPOINTING_ZLIB_OUTPUT_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace tf_reverb {

class ZlibOutput {
 public:
  ZlibOutput(std::string path, FILE* file);
  ~ZlibOutput();
  ZlibOutput(const ZlibOutput&) = delete;
  ZlibOutput& operator=(const ZlibOutput&) = delete;

  // Deflates `data` (buffered: part of it may reach the file only later).
  absl::Status Write(std::string_view data);
  // Ends the stream and writes what is left; the file is then complete.
  absl::Status Finish();
  // Compressed bytes handed to the file so far.
  int64_t bytes_written() const { return bytes_written_; }

 private:
  struct Stream;  // zlib's z_stream, kept out of this header

  // Runs deflate with `flush` until it needs more input (or, with
  // Z_FINISH, until the stream ends), writing its output to the file.
  absl::Status Deflate(int flush);

  const std::string path_;
  FILE* const file_;
  std::unique_ptr<Stream> stream_;
  std::vector<unsigned char> output_;
  int64_t bytes_written_ = 0;
  absl::Status error_;
};

}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_CHECKPOINTING_ZLIB_OUTPUT_H_
