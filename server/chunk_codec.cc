#include "server/chunk_codec.h"

#include <snappy-sinksource.h>
#include <snappy.h>
#include <zstd.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace tf_reverb {
namespace {

namespace tfp = ::tf_reverb::tf;

bool IsDeltaEncodable(DataType dtype) {
  switch (dtype) {
    case tfp::DT_INT8:
    case tfp::DT_UINT8:
    case tfp::DT_INT16:
    case tfp::DT_UINT16:
    case tfp::DT_INT32:
    case tfp::DT_UINT32:
    case tfp::DT_INT64:
    case tfp::DT_UINT64:
      return true;
    default:
      return false;
  }
}

// In-place delta (encode=true) or prefix-sum (encode=false) over rows, in the
// unsigned type U. `data` need not be aligned for U (a row cache's columns
// follow their layout, server/item_rows_cache.h): values are read and
// written with memcpy, which compiles to plain loads and stores.
template <typename U>
void DeltaRows(char* data, int64_t rows, int64_t row_elems, bool encode) {
  auto at = [data](int64_t i) { return data + i * static_cast<int64_t>(sizeof(U)); };
  auto load = [&at](int64_t i) {
    U value;
    std::memcpy(&value, at(i), sizeof(U));
    return value;
  };
  auto store = [&at](int64_t i, U value) { std::memcpy(at(i), &value, sizeof(U)); };
  if (encode) {
    for (int64_t r = rows - 1; r > 0; --r) {
      for (int64_t e = 0; e < row_elems; ++e) {
        const int64_t i = r * row_elems + e;
        store(i, static_cast<U>(load(i) - load(i - row_elems)));
      }
    }
  } else {
    for (int64_t r = 1; r < rows; ++r) {
      for (int64_t e = 0; e < row_elems; ++e) {
        const int64_t i = r * row_elems + e;
        store(i, static_cast<U>(load(i) + load(i - row_elems)));
      }
    }
  }
}

void ApplyDelta(DataType dtype, const std::vector<int64_t>& shape, char* data, bool encode) {
  if (!IsDeltaEncodable(dtype) || shape.size() < 2) return;
  int64_t row_elems = 1;
  for (size_t i = 1; i < shape.size(); ++i) row_elems *= shape[i];
  switch (DataTypeSize(dtype).value()) {
    case 1:
      DeltaRows<uint8_t>(data, shape[0], row_elems, encode);
      break;
    case 2:
      DeltaRows<uint16_t>(data, shape[0], row_elems, encode);
      break;
    case 4:
      DeltaRows<uint32_t>(data, shape[0], row_elems, encode);
      break;
    case 8:
      DeltaRows<uint64_t>(data, shape[0], row_elems, encode);
      break;
  }
}

void PutVarint(std::string* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

bool GetVarint(absl::string_view in, size_t* pos, uint64_t* v) {
  *v = 0;
  for (int shift = 0; shift < 64 && *pos < in.size(); shift += 7) {
    uint8_t byte = static_cast<uint8_t>(in[(*pos)++]);
    *v |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if (!(byte & 0x80)) return true;
  }
  return false;
}

// Elements declared by `shape`, each `elem_bytes` wide, as a byte count;
// DATA_LOSS for negative dimensions and for counts beyond
// kMaxChunkTensorBytes (a corrupt or hostile proto must not make the decoder
// allocate whatever it claims).
absl::StatusOr<int64_t> DeclaredBytes(const std::vector<int64_t>& shape, int64_t elem_bytes) {
  int64_t bytes = elem_bytes;
  for (int64_t d : shape) {
    if (d < 0 || __builtin_mul_overflow(bytes, d, &bytes)) {
      return absl::DataLossError(
          absl::StrCat("Corrupt chunk tensor: implausible shape ", ShapeString(shape), "."));
    }
  }
  if (bytes > kMaxChunkTensorBytes) {
    return absl::DataLossError(
        absl::StrCat("Chunk tensor of shape ", ShapeString(shape), " would decode to ", bytes,
                     " bytes, more than the limit of ", kMaxChunkTensorBytes, "."));
  }
  return bytes;
}

// Parses the length prefixes of a DT_STRING tensor_content of `n` elements
// (TensorFlow's encoding: every varint length, then every string's bytes,
// nothing after) and checks that the bytes are all there; `lengths` may be
// null. Returns the offset of the first string's bytes.
absl::StatusOr<size_t> ParseStringLengths(absl::string_view content, int64_t n,
                                          std::vector<uint64_t>* lengths) {
  // Every element has at least a one-byte length prefix.
  if (static_cast<uint64_t>(n) > content.size()) {
    return absl::DataLossError(absl::StrCat("Corrupt string chunk: ", n, " elements cannot fit in ",
                                            content.size(), " bytes."));
  }
  if (lengths != nullptr) lengths->resize(n);
  size_t pos = 0;
  uint64_t remaining = 0;  // bytes the lengths claim, all within `content`
  for (int64_t i = 0; i < n; ++i) {
    uint64_t length = 0;
    if (!GetVarint(content, &pos, &length)) {
      return absl::DataLossError(
          absl::StrCat("Corrupt string chunk: bad length prefix of element ", i, "."));
    }
    if (length > content.size() || remaining + length > content.size()) {
      return absl::DataLossError(absl::StrCat("Corrupt string chunk: element ", i, " claims ",
                                              length, " bytes, more than the tensor holds."));
    }
    remaining += length;
    if (lengths != nullptr) (*lengths)[i] = length;
  }
  if (content.size() - pos != remaining) {
    return absl::DataLossError(absl::StrCat("Corrupt string chunk: the lengths add up to ",
                                            remaining, " bytes but ", content.size() - pos,
                                            " follow them."));
  }
  return pos;
}

// A payload in one piece: the piece itself, or the pieces joined in `joined`.
absl::string_view Contiguous(const TensorView& view, std::string* joined) {
  if (view.content.empty()) return {};
  if (view.content.size() == 1) return view.content[0];
  joined->clear();
  for (absl::string_view piece : view.content) joined->append(piece.data(), piece.size());
  return *joined;
}

absl::Status DecodeStrings(const TensorView& view, Tensor* out) {
  absl::StatusOr<int64_t> declared = DeclaredBytes(out->shape, 1);
  if (!declared.ok()) return declared.status();
  const int64_t n = *declared;
  if (!view.string_val.empty() || n == 0) {  // TF's other string layout
    if (static_cast<int64_t>(view.string_val.size()) != n) {
      return absl::DataLossError(absl::StrCat("String chunk has ", view.string_val.size(),
                                              " elements for shape ", ShapeString(out->shape),
                                              "."));
    }
    out->strings.clear();
    for (absl::string_view element : view.string_val) out->strings.emplace_back(element);
    return absl::OkStatus();
  }
  std::string joined;
  const absl::string_view content = Contiguous(view, &joined);
  std::vector<uint64_t> lengths;
  absl::StatusOr<size_t> pos = ParseStringLengths(content, n, &lengths);
  if (!pos.ok()) return pos.status();
  out->strings.resize(n);
  for (int64_t i = 0; i < n; ++i) {
    out->strings[i] = std::string(content.substr(*pos, lengths[i]));
    *pos += lengths[i];
  }
  return absl::OkStatus();
}

// One zstd context of each kind per thread: creating them costs more than
// compressing a small chunk.
ZSTD_CCtx* ThreadCCtx() {
  thread_local std::unique_ptr<ZSTD_CCtx, size_t (*)(ZSTD_CCtx*)> cctx(ZSTD_createCCtx(),
                                                                       ZSTD_freeCCtx);
  return cctx.get();
}

ZSTD_DCtx* ThreadDCtx() {
  thread_local std::unique_ptr<ZSTD_DCtx, size_t (*)(ZSTD_DCtx*)> dctx(ZSTD_createDCtx(),
                                                                       ZSTD_freeDCtx);
  return dctx.get();
}

absl::Status CompressBytes(const char* data, size_t size, ChunkCompression compression,
                           int zstd_level, std::string* out) {
  switch (compression) {
    case tf_reverb::kSnappy:
      snappy::Compress(data, size, out);
      return absl::OkStatus();
    case tf_reverb::kZstd: {
      out->resize(ZSTD_compressBound(size));
      // The one-shot API records the content size in the frame header.
      const size_t n =
          ZSTD_compressCCtx(ThreadCCtx(), out->data(), out->size(), data, size, zstd_level);
      if (ZSTD_isError(n)) {
        return absl::InternalError(absl::StrCat("zstd compression failed: ", ZSTD_getErrorName(n)));
      }
      out->resize(n);
      return absl::OkStatus();
    }
    default:
      return CheckCompression(compression);
  }
}

// The most bytes `compressed_bytes` of a valid payload can decode to. Snappy:
// its densest element is a 3-byte copy of 64 bytes. zstd: a block decodes to
// at most 128 KiB (ZSTD_BLOCKSIZE_MAX) and takes at least 4 bytes (a 3-byte
// header and one RLE byte). Zeros, the densest real data, stay within both
// (chunk_codec_test: HighlyCompressibleTensorsStillDecode).
uint64_t MaxDecodedBytes(uint64_t compressed_bytes, ChunkCompression compression) {
  if (compression == tf_reverb::kSnappy) return (compressed_bytes * 64 + 2) / 3;
  return (compressed_bytes / 4 + 1) * ZSTD_BLOCKSIZE_MAX;
}

// DATA_LOSS unless `content` (compressed with `compression`) declares
// exactly `total` uncompressed bytes, and could hold that many.
absl::Status CheckDeclaredSize(absl::string_view content, ChunkCompression compression,
                               int64_t total, DataType dtype, const std::vector<int64_t>& shape) {
  bool ok = false;
  if (compression == tf_reverb::kSnappy) {
    size_t uncompressed = 0;
    ok = snappy::GetUncompressedLength(content.data(), content.size(), &uncompressed) &&
         static_cast<int64_t>(uncompressed) == total;
  } else if (compression == tf_reverb::kZstd) {
    const unsigned long long size =  // NOLINT(runtime/int): zstd's type
        ZSTD_getFrameContentSize(content.data(), content.size());
    ok = size != ZSTD_CONTENTSIZE_UNKNOWN && size != ZSTD_CONTENTSIZE_ERROR &&
         size == static_cast<unsigned long long>(total);  // NOLINT(runtime/int)
  } else {
    return CheckCompression(compression);
  }
  if (!ok) {
    return absl::DataLossError(absl::StrCat("Corrupt chunk tensor: expected ", total, " bytes for ",
                                            DataTypeName(dtype), ShapeString(shape), "."));
  }
  // The header alone proves nothing: a 10-byte payload can declare 2 GiB.
  // Callers allocate `total` bytes next, so refuse sizes the payload cannot
  // possibly decode to (MaxDecodedBytes), before anything is allocated.
  if (static_cast<uint64_t>(total) > MaxDecodedBytes(content.size(), compression)) {
    return absl::DataLossError(absl::StrCat(
        "Corrupt chunk tensor: ", content.size(), " compressed bytes cannot decode to the ", total,
        " bytes declared for ", DataTypeName(dtype), ShapeString(shape), "."));
  }
  return absl::OkStatus();
}

// Decompresses the whole payload (already size-checked) into `out`, `total`
// bytes.
absl::Status DecompressAll(absl::string_view content, ChunkCompression compression, int64_t total,
                           char* out) {
  if (compression == tf_reverb::kSnappy) {
    if (!snappy::RawUncompress(content.data(), content.size(), out)) {
      return absl::DataLossError("Corrupt chunk tensor: Snappy decompression failed.");
    }
    return absl::OkStatus();
  }
  const size_t n = ZSTD_decompressDCtx(ThreadDCtx(), out, total, content.data(), content.size());
  if (ZSTD_isError(n) || static_cast<int64_t>(n) != total) {
    return absl::DataLossError(
        absl::StrCat("Corrupt chunk tensor: zstd decompression failed",
                     ZSTD_isError(n) ? absl::StrCat(" (", ZSTD_getErrorName(n), ")") : "", "."));
  }
  return absl::OkStatus();
}

// Decodes bytes [skip, skip + size) of a zstd payload into `out`, decoding
// the frame only up to that point; the skipped prefix goes through a small
// per-thread buffer.
absl::Status ZstdDecodeRange(absl::string_view content, int64_t skip, int64_t size, char* out) {
  ZSTD_DCtx* dctx = ThreadDCtx();
  ZSTD_DCtx_reset(dctx, ZSTD_reset_session_only);
  ZSTD_inBuffer in{content.data(), content.size(), 0};
  constexpr size_t kDiscardBytes = 64 << 10;
  thread_local std::unique_ptr<char[]> discard(new char[kDiscardBytes]);
  auto fill = [&](char* dst, size_t bytes) -> absl::Status {
    ZSTD_outBuffer buffer{dst, bytes, 0};
    while (buffer.pos < buffer.size) {
      const size_t in_before = in.pos;
      const size_t out_before = buffer.pos;
      const size_t r = ZSTD_decompressStream(dctx, &buffer, &in);
      if (ZSTD_isError(r)) {
        return absl::DataLossError(absl::StrCat("Corrupt chunk tensor: zstd decompression failed (",
                                                ZSTD_getErrorName(r), ")."));
      }
      const bool stuck = in.pos == in_before && buffer.pos == out_before;
      if (buffer.pos < buffer.size && (r == 0 || stuck)) {
        return absl::DataLossError("Corrupt chunk tensor: zstd frame is truncated.");
      }
    }
    return absl::OkStatus();
  };
  while (skip > 0) {
    const size_t bytes = static_cast<size_t>(std::min<int64_t>(skip, kDiscardBytes));
    if (absl::Status s = fill(discard.get(), bytes); !s.ok()) return s;
    skip -= bytes;
  }
  return fill(out, static_cast<size_t>(size));
}

// Decodes the whole zstd payload through a small per-thread buffer (nothing
// sized by the frame's claims) and checks that it is one frame of exactly
// `total` bytes with nothing after it.
absl::Status ZstdValidate(absl::string_view content, int64_t total) {
  ZSTD_DCtx* dctx = ThreadDCtx();
  ZSTD_DCtx_reset(dctx, ZSTD_reset_session_only);
  ZSTD_inBuffer in{content.data(), content.size(), 0};
  constexpr size_t kDiscardBytes = 64 << 10;
  thread_local std::unique_ptr<char[]> discard(new char[kDiscardBytes]);
  int64_t produced = 0;
  while (true) {
    ZSTD_outBuffer out{discard.get(), kDiscardBytes, 0};
    const size_t in_before = in.pos;
    const size_t r = ZSTD_decompressStream(dctx, &out, &in);
    if (ZSTD_isError(r)) {
      return absl::DataLossError(absl::StrCat("Corrupt chunk tensor: zstd decompression failed (",
                                              ZSTD_getErrorName(r), ")."));
    }
    produced += static_cast<int64_t>(out.pos);
    if (produced > total) break;
    if (r == 0) break;  // the frame is complete
    if (in.pos == in_before && out.pos == 0) {
      return absl::DataLossError("Corrupt chunk tensor: zstd frame is truncated.");
    }
  }
  if (produced > total) {
    return absl::DataLossError(
        absl::StrCat("Corrupt chunk tensor: the zstd frame decodes to more than the ", total,
                     " bytes it declares."));
  }
  if (produced < total) {
    return absl::DataLossError(absl::StrCat("Corrupt chunk tensor: the zstd frame decodes to ",
                                            produced, " bytes, not the ", total, " it declares."));
  }
  if (in.pos != in.size) {
    return absl::DataLossError(
        absl::StrCat("Corrupt chunk tensor: ", in.size - in.pos, " bytes follow the zstd frame."));
  }
  return absl::OkStatus();
}

}  // namespace

bool CodecsListZstd(absl::string_view value) {
  for (absl::string_view name : absl::StrSplit(value, ',')) {
    if (absl::EqualsIgnoreCase(absl::StripAsciiWhitespace(name), kZstdCodecName)) {
      return true;
    }
  }
  return false;
}

bool ZstdEnabledByEnvironment() {
  const char* value = std::getenv("TF_REVERB_ZSTD");
  if (value == nullptr) return true;
  const std::string v = absl::AsciiStrToLower(absl::StripAsciiWhitespace(value));
  return !(v == "0" || v == "false" || v == "off" || v == "no");
}

CodecPolicy CodecPolicyFromEnvironment() {
  if (!ZstdEnabledByEnvironment()) return CodecPolicy::kSnappy;
  const char* value = std::getenv("TF_REVERB_ZSTD");
  if (value != nullptr && absl::AsciiStrToLower(absl::StripAsciiWhitespace(value)) == "always") {
    return CodecPolicy::kZstd;
  }
  return CodecPolicy::kAuto;
}

absl::Status CheckCompression(int compression) {
  if (compression == kSnappy || compression == kZstd) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("Unsupported chunk compression ", compression, "."));
}

int64_t ChunkPayloadBytes(const deepmind::reverb::ChunkData& chunk) {
  int64_t bytes = 0;
  for (const auto& tensor : chunk.data().tensors()) bytes += tensor.tensor_content().size();
  return bytes;
}

std::vector<int64_t> ProtoShape(const tfp::TensorProto& proto) {
  std::vector<int64_t> shape;
  for (const auto& dim : proto.tensor_shape().dim()) shape.push_back(dim.size());
  return shape;
}

absl::Status ValidateTensor(const TensorView& view, ChunkCompression compression) {
  if (absl::Status s = CheckCompression(compression); !s.ok()) return s;
  const std::vector<int64_t> shape(view.shape.begin(), view.shape.end());
  std::string joined;
  const absl::string_view content = Contiguous(view, &joined);
  if (view.dtype == tfp::DT_STRING) {
    absl::StatusOr<int64_t> n = DeclaredBytes(shape, 1);
    if (!n.ok()) return n.status();
    if (!view.string_val.empty() || *n == 0) {
      if (static_cast<int64_t>(view.string_val.size()) == *n) return absl::OkStatus();
      return absl::DataLossError(absl::StrCat("String chunk has ", view.string_val.size(),
                                              " elements for shape ", ShapeString(shape), "."));
    }
    return ParseStringLengths(content, *n, nullptr).status();
  }
  absl::StatusOr<int64_t> elem = DataTypeSize(view.dtype);
  if (!elem.ok()) return elem.status();
  absl::StatusOr<int64_t> total = DeclaredBytes(shape, *elem);
  if (!total.ok()) return total.status();
  if (absl::Status s = CheckDeclaredSize(content, compression, *total, view.dtype, shape);
      !s.ok()) {
    return s;
  }
  if (compression == kSnappy) {
    if (!snappy::IsValidCompressedBuffer(content.data(), content.size())) {
      return absl::DataLossError("Corrupt chunk tensor: invalid Snappy block.");
    }
    return absl::OkStatus();
  }
  return ZstdValidate(content, *total);
}

absl::StatusOr<tfp::TensorProto> CompressTensor(const Tensor& tensor, bool delta_encode,
                                                ChunkCompression compression, int zstd_level) {
  if (absl::Status s = ValidateTensor(tensor); !s.ok()) return s;
  if (absl::Status s = CheckCompression(compression); !s.ok()) return s;
  tfp::TensorProto proto;
  proto.set_dtype(tensor.dtype);
  for (int64_t d : tensor.shape) proto.mutable_tensor_shape()->add_dim()->set_size(d);
  if (tensor.dtype == tfp::DT_STRING) {
    std::string* content = proto.mutable_tensor_content();
    for (const std::string& s : tensor.strings) PutVarint(content, s.size());
    for (const std::string& s : tensor.strings) content->append(s);
    return proto;
  }
  absl::Status status;
  if (delta_encode && IsDeltaEncodable(tensor.dtype) && tensor.shape.size() >= 2) {
    std::string copy = tensor.data;
    ApplyDelta(tensor.dtype, tensor.shape, copy.data(), /*encode=*/true);
    status = CompressBytes(copy.data(), copy.size(), compression, zstd_level,
                           proto.mutable_tensor_content());
  } else {
    status = CompressBytes(tensor.data.data(), tensor.data.size(), compression, zstd_level,
                           proto.mutable_tensor_content());
  }
  if (!status.ok()) return status;
  return proto;
}

namespace {

// A snappy::Source over the pieces of a payload split over gRPC slices.
class PiecesSource : public snappy::Source {
 public:
  explicit PiecesSource(absl::Span<const absl::string_view> pieces) : pieces_(pieces) {
    for (absl::string_view piece : pieces) left_ += piece.size();
    SkipEmpty();
  }
  size_t Available() const override { return left_; }
  const char* Peek(size_t* len) override {
    if (index_ == pieces_.size()) {
      *len = 0;
      return nullptr;
    }
    *len = pieces_[index_].size() - offset_;
    return pieces_[index_].data() + offset_;
  }
  void Skip(size_t n) override {
    left_ -= n;
    while (n > 0 && index_ < pieces_.size()) {
      const size_t here = std::min(n, pieces_[index_].size() - offset_);
      offset_ += here;
      n -= here;
      if (offset_ == pieces_[index_].size()) {
        ++index_;
        offset_ = 0;
      }
    }
    SkipEmpty();
  }

 private:
  void SkipEmpty() {
    while (index_ < pieces_.size() && pieces_[index_].size() == offset_) {
      ++index_;
      offset_ = 0;
    }
  }

  absl::Span<const absl::string_view> pieces_;
  size_t index_ = 0;
  size_t offset_ = 0;
  size_t left_ = 0;
};

// The shape, dtype size, total bytes and row bytes of a numeric chunk tensor,
// and the check of a row range [offset, offset + length) against it.
struct RowsLayout {
  Tensor meta;
  int64_t rows = 0;
  int64_t total = 0;
  int64_t row_bytes = 0;
  bool apply_delta = false;
};

absl::StatusOr<RowsLayout> Layout(const TensorView& view, bool delta_encoded,
                                  ChunkCompression compression, int64_t offset, int64_t length) {
  if (absl::Status s = CheckCompression(compression); !s.ok()) return s;
  RowsLayout layout;
  layout.meta.dtype = view.dtype;
  layout.meta.shape.assign(view.shape.begin(), view.shape.end());
  absl::StatusOr<int64_t> elem = DataTypeSize(layout.meta.dtype);
  if (!elem.ok()) return elem.status();
  layout.rows = layout.meta.num_rows();
  if (layout.rows < 0) {
    return absl::DataLossError(absl::StrCat("Corrupt chunk tensor: implausible shape ",
                                            ShapeString(layout.meta.shape), "."));
  }
  if (offset < 0 || length < 0 || offset > layout.rows || length > layout.rows - offset) {
    return absl::InvalidArgumentError(absl::StrCat("Slice [", offset, ", ", offset + length,
                                                   ") is out of range for a chunk of ", layout.rows,
                                                   " rows."));
  }
  absl::StatusOr<int64_t> declared = DeclaredBytes(layout.meta.shape, *elem);
  if (!declared.ok()) return declared.status();
  layout.total = *declared;
  layout.row_bytes = layout.rows == 0 ? 0 : layout.total / layout.rows;
  // Delta decoding needs rows [0, offset + length); nothing needs later rows.
  layout.apply_delta =
      delta_encoded && IsDeltaEncodable(layout.meta.dtype) && layout.meta.shape.size() >= 2;
  return layout;
}

absl::Status DecodeRows(const RowsLayout& layout, absl::string_view content,
                        ChunkCompression compression, int64_t offset, int64_t length, char* dst) {
  const Tensor& meta = layout.meta;
  const int64_t rows = layout.rows, total = layout.total, row_bytes = layout.row_bytes;
  const bool apply_delta = layout.apply_delta;
  if (absl::Status s = CheckDeclaredSize(content, compression, total, meta.dtype, meta.shape);
      !s.ok()) {
    return s;
  }
  if (offset == 0 && length == rows) {
    if (absl::Status s = DecompressAll(content, compression, total, dst); !s.ok()) return s;
    if (apply_delta) ApplyDelta(meta.dtype, meta.shape, dst, /*encode=*/false);
    return absl::OkStatus();
  }
  if (length == 0 || row_bytes == 0) return absl::OkStatus();
  if (compression == kZstd && !apply_delta) {
    return ZstdDecodeRange(content, offset * row_bytes, length * row_bytes, dst);
  }
  std::string scratch;
  int64_t needed_rows = rows;
  if (compression == kZstd) {
    needed_rows = offset + length;
    scratch.resize(needed_rows * row_bytes);
    if (absl::Status s = ZstdDecodeRange(content, 0, scratch.size(), scratch.data()); !s.ok()) {
      return s;
    }
  } else {  // A raw Snappy block can only be decoded whole.
    scratch.resize(total);
    if (absl::Status s = DecompressAll(content, compression, total, scratch.data()); !s.ok()) {
      return s;
    }
    needed_rows = offset + length;
  }
  if (apply_delta) {
    std::vector<int64_t> prefix_shape = meta.shape;
    prefix_shape[0] = needed_rows;
    ApplyDelta(meta.dtype, prefix_shape, scratch.data(), /*encode=*/false);
  }
  std::memcpy(dst, scratch.data() + offset * row_bytes, length * row_bytes);
  return absl::OkStatus();
}

}  // namespace

absl::Status DecompressRowsInto(const TensorView& view, bool delta_encoded,
                                ChunkCompression compression, int64_t offset, int64_t length,
                                char* dst) {
  absl::StatusOr<RowsLayout> layout = Layout(view, delta_encoded, compression, offset, length);
  if (!layout.ok()) return layout.status();
  const auto& pieces = view.content;
  if (pieces.size() <= 1) {
    return DecodeRows(*layout, pieces.empty() ? absl::string_view() : pieces[0], compression,
                      offset, length, dst);
  }
  const size_t compressed = view.content_size();
  if (compression == kSnappy && offset == 0 && length == layout->rows) {
    // Straight from the pieces into `dst`, after the checks DecodeRows makes.
    PiecesSource header(pieces);
    uint32_t uncompressed = 0;
    if (!snappy::GetUncompressedLength(&header, &uncompressed) ||
        static_cast<int64_t>(uncompressed) != layout->total) {
      return absl::DataLossError(absl::StrCat("Corrupt chunk tensor: expected ", layout->total,
                                              " bytes for ", DataTypeName(layout->meta.dtype),
                                              ShapeString(layout->meta.shape), "."));
    }
    if (static_cast<uint64_t>(layout->total) > MaxDecodedBytes(compressed, compression)) {
      return absl::DataLossError(absl::StrCat(
          "Corrupt chunk tensor: ", compressed, " compressed bytes cannot decode to the ",
          layout->total, " bytes declared for ", DataTypeName(layout->meta.dtype),
          ShapeString(layout->meta.shape), "."));
    }
    PiecesSource source(pieces);
    if (!snappy::RawUncompress(&source, dst)) {
      return absl::DataLossError("Corrupt chunk tensor: Snappy decompression failed.");
    }
    if (layout->apply_delta) {
      ApplyDelta(layout->meta.dtype, layout->meta.shape, dst, /*encode=*/false);
    }
    return absl::OkStatus();
  }
  // Joined first: a copy of the compressed bytes only (zstd is chosen for
  // payloads that compress well, so that is the small side).
  thread_local std::string joined;
  joined.reserve(compressed);
  absl::Status status =
      DecodeRows(*layout, Contiguous(view, &joined), compression, offset, length, dst);
  if (joined.capacity() > (size_t{16} << 20)) std::string().swap(joined);
  return status;
}

absl::Status DecompressRowsInto(const tfp::TensorProto& proto, bool delta_encoded,
                                ChunkCompression compression, int64_t offset, int64_t length,
                                char* dst) {
  return DecompressRowsInto(TensorViewOf(proto), delta_encoded, compression, offset, length, dst);
}

absl::StatusOr<Tensor> DecompressTensor(const TensorView& view, bool delta_encoded,
                                        ChunkCompression compression) {
  if (absl::Status s = CheckCompression(compression); !s.ok()) return s;
  Tensor out;
  out.dtype = view.dtype;
  out.shape.assign(view.shape.begin(), view.shape.end());
  if (out.dtype == tfp::DT_STRING) {
    if (absl::Status s = DecodeStrings(view, &out); !s.ok()) return s;
    return out;
  }
  absl::StatusOr<int64_t> elem = DataTypeSize(out.dtype);
  if (!elem.ok()) return elem.status();
  absl::StatusOr<int64_t> declared = DeclaredBytes(out.shape, *elem);
  if (!declared.ok()) return declared.status();
  // Check the payload before allocating what the shape claims.
  std::string joined;
  if (absl::Status s = CheckDeclaredSize(Contiguous(view, &joined), compression, *declared,
                                         out.dtype, out.shape);
      !s.ok()) {
    return s;
  }
  out.data.resize(*declared);
  if (absl::Status s =
          DecompressRowsInto(view, delta_encoded, compression, 0, out.num_rows(), out.data.data());
      !s.ok()) {
    return s;
  }
  return out;
}

absl::StatusOr<Tensor> DecompressTensor(const tfp::TensorProto& proto, bool delta_encoded,
                                        ChunkCompression compression) {
  return DecompressTensor(TensorViewOf(proto), delta_encoded, compression);
}

absl::StatusOr<Tensor> DecompressChunkTensor(const ChunkView& chunk, int index) {
  if (index < 0 || static_cast<size_t>(index) >= chunk.tensors.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("Chunk ", chunk.key, " has no tensor ", index, "."));
  }
  return DecompressTensor(chunk.tensors[index], chunk.delta_encoded, chunk.compression);
}

absl::StatusOr<Tensor> DecompressChunkTensor(const deepmind::reverb::ChunkData& chunk, int index) {
  return DecompressChunkTensor(ChunkViewOf(chunk), index);
}

absl::StatusOr<deepmind::reverb::ChunkData> BuildChunk(uint64_t chunk_key,
                                                       const std::vector<Tensor>& columns,
                                                       uint64_t episode_id, int32_t start,
                                                       int32_t end, bool delta_encode,
                                                       CodecPolicy policy, int zstd_level) {
  deepmind::reverb::ChunkData chunk;
  chunk.set_chunk_key(chunk_key);
  chunk.mutable_sequence_range()->set_episode_id(episode_id);
  chunk.mutable_sequence_range()->set_start(start);
  chunk.mutable_sequence_range()->set_end(end);
  chunk.set_delta_encoded(delta_encode);
  const ChunkCompression first = policy == CodecPolicy::kZstd ? kZstd : kSnappy;
  chunk.set_compression(first);
  int64_t uncompressed = 0;
  int64_t numeric_raw = 0;
  int64_t numeric_compressed = 0;
  for (const Tensor& column : columns) {
    absl::StatusOr<tfp::TensorProto> proto =
        CompressTensor(column, delta_encode, first, zstd_level);
    if (!proto.ok()) return proto.status();
    if (column.dtype != tfp::DT_STRING) {
      numeric_raw += column.data.size();
      numeric_compressed += proto->tensor_content().size();
    }
    *chunk.mutable_data()->add_tensors() = std::move(*proto);
    uncompressed += column.dtype == tfp::DT_STRING ? 0 : column.data.size();
    for (const std::string& s : column.strings) uncompressed += s.size();
  }
  chunk.set_data_tensors_len(static_cast<int32_t>(columns.size()));
  chunk.set_data_uncompressed_size(uncompressed);
  if (policy == CodecPolicy::kAuto && numeric_raw >= kAutoZstdMinBytes &&
      numeric_compressed * kAutoZstdMinSnappyRatio <= numeric_raw) {
    // Structured data: re-encode from the raw tensors (not via the Snappy
    // payload) with zstd.
    int index = 0;
    for (const Tensor& column : columns) {
      if (column.dtype != tfp::DT_STRING) {
        absl::StatusOr<tfp::TensorProto> proto =
            CompressTensor(column, delta_encode, kZstd, zstd_level);
        if (!proto.ok()) return proto.status();
        *chunk.mutable_data()->mutable_tensors(index) = std::move(*proto);
      }
      ++index;
    }
    chunk.set_compression(kZstd);
  }
  return chunk;
}

absl::Status TranscodeChunk(deepmind::reverb::ChunkData* chunk, ChunkCompression target,
                            int zstd_level) {
  if (absl::Status s = CheckCompression(target); !s.ok()) return s;
  if (absl::Status s = CheckCompression(chunk->compression()); !s.ok()) return s;
  if (chunk->compression() == target) return absl::OkStatus();
  const ChunkCompression source = chunk->compression();
  for (tfp::TensorProto& proto : *chunk->mutable_data()->mutable_tensors()) {
    if (proto.dtype() == tfp::DT_STRING) continue;  // never compressed
    // Decode without undoing delta encoding: only the codec changes.
    absl::StatusOr<Tensor> stored = DecompressTensor(proto, /*delta_encoded=*/false, source);
    if (!stored.ok()) return stored.status();
    std::string compressed;
    if (absl::Status s = CompressBytes(stored->data.data(), stored->data.size(), target, zstd_level,
                                       &compressed);
        !s.ok()) {
      return s;
    }
    *proto.mutable_tensor_content() = std::move(compressed);
  }
  chunk->set_compression(target);
  return absl::OkStatus();
}

}  // namespace tf_reverb
