// Fuzz target: chunk decoding (server/chunk_codec.h) of a serialized
// deepmind.reverb.ChunkData, Snappy, zstd and delta-encoded tensors alike.
//
// Properties: decoding never crashes and never allocates what a corrupt
// header merely claims (run with -malloc_limit_mb); every failure is a status;
// a decoded tensor matches its header (dtype, shape, byte count); a row slice
// decoded with DecompressRowsInto equals the same rows of the whole tensor;
// an out-of-range slice is an error; TranscodeChunk to the other codec keeps
// every tensor's decoded value and fails exactly when a numeric tensor does
// not decode.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "schema.pb.h"
#include "server/chunk_codec.h"
#include "server/chunk_view.h"
#include "server/fuzz/fuzz_check.h"
#include "server/tensor.h"
#include "tensor.pb.h"

namespace tf_reverb {
namespace {

namespace tfp = ::tf_reverb::tf;

// Tensors of one chunk looked at (each costs a few decodes).
constexpr int kMaxTensors = 16;
// Largest slice buffer the target allocates itself.
constexpr int64_t kMaxSliceBytes = int64_t{64} << 20;

std::string Describe(const Tensor& t) {
  return absl::StrCat(DataTypeName(t.dtype), ShapeString(t.shape), " (", t.data.size(), " bytes, ",
                      t.strings.size(), " strings)");
}

void CheckSameTensor(const Tensor& got, const Tensor& want, const std::string& what) {
  FUZZ_CHECK(got.dtype == want.dtype && got.shape == want.shape && got.data == want.data &&
                 got.strings == want.strings,
             absl::StrCat(what, ": got ", Describe(got), ", want ", Describe(want)));
}

// Rows and bytes per row of a numeric tensor header, or nullopt when the
// header is implausible (the codec must reject those itself).
struct RowLayout {
  int64_t rows;
  int64_t row_bytes;
};
std::optional<RowLayout> Layout(const tfp::TensorProto& proto) {
  absl::StatusOr<int64_t> elem = DataTypeSize(proto.dtype());
  if (!elem.ok()) return std::nullopt;
  const std::vector<int64_t> shape = ProtoShape(proto);
  int64_t row_bytes = *elem;
  for (size_t i = 1; i < shape.size(); ++i) {
    if (shape[i] < 0 || __builtin_mul_overflow(row_bytes, shape[i], &row_bytes)) {
      return std::nullopt;
    }
  }
  const int64_t rows = shape.empty() ? 1 : shape[0];
  if (rows < 0) return std::nullopt;
  return RowLayout{rows, row_bytes};
}

// Slices worth trying on a tensor of `rows` rows: whole, first, last, and
// one chosen by the input (the chunk's sequence range).
std::vector<std::pair<int64_t, int64_t>> Slices(int64_t rows,
                                                const deepmind::reverb::ChunkData& chunk) {
  std::vector<std::pair<int64_t, int64_t>> slices = {{0, rows}};
  if (rows > 0) {
    slices.push_back({0, 1});
    slices.push_back({rows - 1, 1});
    const int64_t offset = static_cast<uint32_t>(chunk.sequence_range().start()) % rows;
    const int64_t length =
        static_cast<uint32_t>(chunk.sequence_range().end()) % (rows - offset + 1);
    slices.push_back({offset, length});
  }
  return slices;
}

void CheckSlices(const deepmind::reverb::ChunkData& chunk, const tfp::TensorProto& proto,
                 const std::optional<Tensor>& whole) {
  const std::optional<RowLayout> layout = Layout(proto);
  if (!layout.has_value()) return;
  const ChunkCompression compression = chunk.compression();
  for (const auto& [offset, length] : Slices(layout->rows, chunk)) {
    int64_t bytes = 0;
    if (__builtin_mul_overflow(length, layout->row_bytes, &bytes) || bytes > kMaxSliceBytes) {
      continue;
    }
    std::string dst(static_cast<size_t>(bytes), '\0');
    const absl::Status status =
        DecompressRowsInto(proto, chunk.delta_encoded(), compression, offset, length, dst.data());
    if (!whole.has_value()) continue;  // a prefix may still decode; no crash is the check
    FUZZ_CHECK_OK(status);
    FUZZ_CHECK(dst == whole->data.substr(offset * layout->row_bytes, bytes),
               absl::StrCat("rows [", offset, ", ", offset + length, ") of ", Describe(*whole),
                            " differ from the whole tensor's"));
  }
  // Out of range: an error, and nothing written (the buffer is empty).
  for (const auto& [offset, length] :
       std::vector<std::pair<int64_t, int64_t>>{{layout->rows, 1}, {-1, 1}, {0, -1}}) {
    const absl::Status status =
        DecompressRowsInto(proto, chunk.delta_encoded(), compression, offset, length, nullptr);
    FUZZ_CHECK(!status.ok(), absl::StrCat("slice [", offset, ", +", length, ") of ", layout->rows,
                                          " rows accepted"));
  }
}

ChunkCompression Other(int compression) { return compression == kZstd ? kSnappy : kZstd; }

}  // namespace
}  // namespace tf_reverb

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ::tf_reverb;  // NOLINT(build/namespaces): a fuzz entry point
  deepmind::reverb::ChunkData chunk;
  if (!chunk.ParseFromArray(data, static_cast<int>(size))) return 0;
  const int n = std::min(chunk.data().tensors_size(), kMaxTensors);

  std::vector<std::optional<Tensor>> decoded(n);
  for (int i = 0; i < n; ++i) {
    const tfp::TensorProto& proto = chunk.data().tensors(i);
    absl::StatusOr<Tensor> tensor = DecompressChunkTensor(chunk, i);
    if (tensor.ok()) {
      FUZZ_CHECK(tensor->dtype == proto.dtype() && tensor->shape == ProtoShape(proto),
                 absl::StrCat("decoded ", Describe(*tensor), " under a header of ",
                              DataTypeName(proto.dtype()), ShapeString(ProtoShape(proto))));
      if (tensor->dtype == tfp::DT_STRING) {
        FUZZ_CHECK(static_cast<int64_t>(tensor->strings.size()) == tensor->num_elements(),
                   Describe(*tensor));
      } else {
        FUZZ_CHECK_OK(ValidateTensor(*tensor));
      }
      decoded[i] = *std::move(tensor);
    }
    if (proto.dtype() != tfp::DT_STRING) CheckSlices(chunk, proto, decoded[i]);
    // The same bytes under the other codec and delta flag: errors, no crash.
    (void)DecompressTensor(proto, !chunk.delta_encoded(), Other(chunk.compression()));
  }
  FUZZ_CHECK(!DecompressChunkTensor(chunk, chunk.data().tensors_size()).ok(),
             "a tensor index past the end decoded");

  // Transcoding keeps every value (and decodes every numeric tensor first).
  deepmind::reverb::ChunkData transcoded = chunk;
  const ChunkCompression target = Other(chunk.compression());
  const absl::Status status = TranscodeChunk(&transcoded, target);
  if (CheckCompression(chunk.compression()).ok() && chunk.data().tensors_size() <= kMaxTensors) {
    bool numeric_ok = true;
    for (int i = 0; i < n; ++i) {
      if (chunk.data().tensors(i).dtype() != tfp::DT_STRING && !decoded[i].has_value()) {
        numeric_ok = false;
      }
    }
    FUZZ_CHECK(status.ok() == numeric_ok,
               absl::StrCat("TranscodeChunk returned ", status.ToString(),
                            numeric_ok ? " though every numeric tensor decodes"
                                       : " though a numeric tensor does not decode"));
  }
  if (!status.ok()) return 0;
  FUZZ_CHECK(transcoded.compression() == target, "TranscodeChunk left the codec");
  for (int i = 0; i < n; ++i) {
    absl::StatusOr<Tensor> after = DecompressChunkTensor(transcoded, i);
    if (!decoded[i].has_value()) continue;  // a corrupt string tensor stays corrupt
    FUZZ_CHECK_OK(after.status());
    CheckSameTensor(*after, *decoded[i], absl::StrCat("tensor ", i, " after transcoding"));
  }
  return 0;
}
