// ZlibInput: the inflated bytes of a ZLIB-compressed file, read in order.
//
// dm-reverb writes its checkpoint files as TFRecords compressed with
// TensorFlow's "ZLIB" option: the whole record stream deflated as zlib data
// (RFC 1950; a gzip header is accepted too), possibly several such streams
// one after the other. RecordReader reads those files through this class.
//
// Contract:
//  * Thread-safety: none; one thread reads at a time.
//  * Ownership: borrows the FILE*, which must outlive it; the caller closes.
//  * Errors: Read returns DATA_LOSS naming `path` for corrupt compressed
//    data and for a file that ends inside a compressed stream (truncated),
//    INTERNAL for read errors; after an error every Read repeats it.
#ifndef TF_REVERB_SERVER_CHECKPOINTING_ZLIB_INPUT_H_
#define TF_REVERB_SERVER_CHECKPOINTING_ZLIB_INPUT_H_

#include <cstddef>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tf_reverb {

class ZlibInput {
 public:
  // Whether a file starting with `head` (its first `size` bytes) is zlib or
  // gzip data.
  static bool LooksCompressed(const unsigned char* head, size_t size);

  ZlibInput(std::string path, FILE* file);
  ~ZlibInput();
  ZlibInput(const ZlibInput&) = delete;
  ZlibInput& operator=(const ZlibInput&) = delete;

  // Inflates up to `size` bytes into `out`; returns how many, fewer only at
  // the clean end of the data (after a complete stream).
  absl::StatusOr<size_t> Read(char* out, size_t size);

 private:
  struct Stream;  // zlib's z_stream, kept out of this header

  // Refills the input buffer; false at the end of the file.
  absl::StatusOr<bool> Refill();

  const std::string path_;
  FILE* const file_;
  std::unique_ptr<Stream> stream_;
  std::vector<unsigned char> input_;
  bool ended_ = false;  // a stream ended and no input follows it
  absl::Status error_;
};

}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_CHECKPOINTING_ZLIB_INPUT_H_
