#include "chunk_codec.h"

#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "snappy.h"

namespace tf_reverb {
namespace {

namespace tfp = ::tf_reverb::tf;

bool IsDeltaEncodable(DataType dtype) {
  switch (dtype) {
    case tfp::DT_INT8: case tfp::DT_UINT8: case tfp::DT_INT16:
    case tfp::DT_UINT16: case tfp::DT_INT32: case tfp::DT_UINT32:
    case tfp::DT_INT64: case tfp::DT_UINT64:
      return true;
    default:
      return false;
  }
}

// In-place delta (encode=true) or prefix-sum (encode=false) over rows, in the
// unsigned type of width W.
template <typename U>
void DeltaRows(char* data, int64_t rows, int64_t row_elems, bool encode) {
  U* values = reinterpret_cast<U*>(data);
  if (encode) {
    for (int64_t r = rows - 1; r > 0; --r) {
      for (int64_t e = 0; e < row_elems; ++e) {
        values[r * row_elems + e] -= values[(r - 1) * row_elems + e];
      }
    }
  } else {
    for (int64_t r = 1; r < rows; ++r) {
      for (int64_t e = 0; e < row_elems; ++e) {
        values[r * row_elems + e] += values[(r - 1) * row_elems + e];
      }
    }
  }
}

void ApplyDelta(DataType dtype, const std::vector<int64_t>& shape, char* data,
                bool encode) {
  if (!IsDeltaEncodable(dtype) || shape.size() < 2) return;
  int64_t row_elems = 1;
  for (size_t i = 1; i < shape.size(); ++i) row_elems *= shape[i];
  switch (DataTypeSize(dtype).value()) {
    case 1: DeltaRows<uint8_t>(data, shape[0], row_elems, encode); break;
    case 2: DeltaRows<uint16_t>(data, shape[0], row_elems, encode); break;
    case 4: DeltaRows<uint32_t>(data, shape[0], row_elems, encode); break;
    case 8: DeltaRows<uint64_t>(data, shape[0], row_elems, encode); break;
  }
}

void PutVarint(std::string* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

bool GetVarint(const std::string& in, size_t* pos, uint64_t* v) {
  *v = 0;
  for (int shift = 0; shift < 64 && *pos < in.size(); shift += 7) {
    uint8_t byte = static_cast<uint8_t>(in[(*pos)++]);
    *v |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if (!(byte & 0x80)) return true;
  }
  return false;
}

// Elements declared by `shape`, each `elem_bytes` wide, as a byte count;
// DATA_LOSS for negative dimensions or counts that overflow int64 (a corrupt
// or hostile proto must not make the decoder allocate whatever it claims).
absl::StatusOr<int64_t> DeclaredBytes(const std::vector<int64_t>& shape,
                                      int64_t elem_bytes) {
  int64_t bytes = elem_bytes;
  for (int64_t d : shape) {
    if (d < 0 || __builtin_mul_overflow(bytes, d, &bytes)) {
      return absl::DataLossError(absl::StrCat(
          "Corrupt chunk tensor: implausible shape ", ShapeString(shape), "."));
    }
  }
  return bytes;
}

absl::Status DecodeStrings(const tfp::TensorProto& proto, Tensor* out) {
  absl::StatusOr<int64_t> declared = DeclaredBytes(out->shape, 1);
  if (!declared.ok()) return declared.status();
  const int64_t n = *declared;
  if (proto.string_val_size() > 0) {  // TF's other string layout
    if (proto.string_val_size() != n) {
      return absl::DataLossError("String chunk has the wrong element count.");
    }
    out->strings.assign(proto.string_val().begin(), proto.string_val().end());
    return absl::OkStatus();
  }
  const std::string& content = proto.tensor_content();
  // Every element has at least a one-byte length prefix.
  if (static_cast<uint64_t>(n) > content.size()) {
    return absl::DataLossError("Corrupt string chunk (too few length prefixes).");
  }
  std::vector<uint64_t> lengths(n);
  size_t pos = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (!GetVarint(content, &pos, &lengths[i])) {
      return absl::DataLossError("Corrupt string chunk (bad length prefix).");
    }
  }
  out->strings.resize(n);
  for (int64_t i = 0; i < n; ++i) {
    if (content.size() - pos < lengths[i]) {
      return absl::DataLossError("Corrupt string chunk (truncated data).");
    }
    out->strings[i] = content.substr(pos, lengths[i]);
    pos += lengths[i];
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<int64_t> ProtoShape(const tfp::TensorProto& proto) {
  std::vector<int64_t> shape;
  for (const auto& dim : proto.tensor_shape().dim()) shape.push_back(dim.size());
  return shape;
}

absl::StatusOr<tfp::TensorProto> CompressTensor(const Tensor& tensor,
                                                bool delta_encode) {
  if (absl::Status s = ValidateTensor(tensor); !s.ok()) return s;
  tfp::TensorProto proto;
  proto.set_dtype(tensor.dtype);
  for (int64_t d : tensor.shape) proto.mutable_tensor_shape()->add_dim()->set_size(d);
  if (tensor.dtype == tfp::DT_STRING) {
    std::string* content = proto.mutable_tensor_content();
    for (const std::string& s : tensor.strings) PutVarint(content, s.size());
    for (const std::string& s : tensor.strings) content->append(s);
    return proto;
  }
  if (delta_encode && IsDeltaEncodable(tensor.dtype) && tensor.shape.size() >= 2) {
    std::string copy = tensor.data;
    ApplyDelta(tensor.dtype, tensor.shape, copy.data(), /*encode=*/true);
    snappy::Compress(copy.data(), copy.size(), proto.mutable_tensor_content());
  } else {
    snappy::Compress(tensor.data.data(), tensor.data.size(),
                     proto.mutable_tensor_content());
  }
  return proto;
}

absl::Status DecompressRowsInto(const tfp::TensorProto& proto,
                                bool delta_encoded, int64_t offset,
                                int64_t length, char* dst) {
  Tensor meta;
  meta.dtype = proto.dtype();
  meta.shape = ProtoShape(proto);
  absl::StatusOr<int64_t> elem = DataTypeSize(meta.dtype);
  if (!elem.ok()) return elem.status();
  const int64_t rows = meta.num_rows();
  if (rows < 0) {
    return absl::DataLossError(absl::StrCat(
        "Corrupt chunk tensor: implausible shape ", ShapeString(meta.shape), "."));
  }
  if (offset < 0 || length < 0 || offset > rows || length > rows - offset) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Slice [", offset, ", ", offset + length, ") is out of range for a chunk of ",
        rows, " rows."));
  }
  absl::StatusOr<int64_t> declared = DeclaredBytes(meta.shape, *elem);
  if (!declared.ok()) return declared.status();
  const int64_t total = *declared;
  const int64_t row_bytes = rows == 0 ? 0 : total / rows;
  const std::string& content = proto.tensor_content();
  size_t uncompressed = 0;
  if (!snappy::GetUncompressedLength(content.data(), content.size(), &uncompressed) ||
      static_cast<int64_t>(uncompressed) != total) {
    return absl::DataLossError(absl::StrCat(
        "Corrupt chunk tensor: expected ", total, " bytes for ",
        DataTypeName(meta.dtype), ShapeString(meta.shape), "."));
  }
  const bool whole = offset == 0 && length == rows;
  std::string scratch;
  char* out = dst;
  if (!whole) {
    scratch.resize(total);
    out = scratch.data();
  }
  if (!snappy::RawUncompress(content.data(), content.size(), out)) {
    return absl::DataLossError("Corrupt chunk tensor: Snappy decompression failed.");
  }
  if (delta_encoded) ApplyDelta(meta.dtype, meta.shape, out, /*encode=*/false);
  if (!whole) std::memcpy(dst, out + offset * row_bytes, length * row_bytes);
  return absl::OkStatus();
}

absl::StatusOr<Tensor> DecompressTensor(const tfp::TensorProto& proto,
                                        bool delta_encoded) {
  Tensor out;
  out.dtype = proto.dtype();
  out.shape = ProtoShape(proto);
  if (out.dtype == tfp::DT_STRING) {
    if (absl::Status s = DecodeStrings(proto, &out); !s.ok()) return s;
    return out;
  }
  absl::StatusOr<int64_t> elem = DataTypeSize(out.dtype);
  if (!elem.ok()) return elem.status();
  absl::StatusOr<int64_t> declared = DeclaredBytes(out.shape, *elem);
  if (!declared.ok()) return declared.status();
  // Check the payload before allocating what the shape claims.
  size_t uncompressed = 0;
  const std::string& content = proto.tensor_content();
  if (!snappy::GetUncompressedLength(content.data(), content.size(), &uncompressed) ||
      static_cast<int64_t>(uncompressed) != *declared) {
    return absl::DataLossError(absl::StrCat(
        "Corrupt chunk tensor: expected ", *declared, " bytes for ",
        DataTypeName(out.dtype), ShapeString(out.shape), "."));
  }
  out.data.resize(*declared);
  if (absl::Status s = DecompressRowsInto(proto, delta_encoded, 0, out.num_rows(),
                                          out.data.data());
      !s.ok()) {
    return s;
  }
  return out;
}

absl::StatusOr<deepmind::reverb::ChunkData> BuildChunk(
    uint64_t chunk_key, const std::vector<Tensor>& columns, uint64_t episode_id,
    int32_t start, int32_t end, bool delta_encode) {
  deepmind::reverb::ChunkData chunk;
  chunk.set_chunk_key(chunk_key);
  chunk.mutable_sequence_range()->set_episode_id(episode_id);
  chunk.mutable_sequence_range()->set_start(start);
  chunk.mutable_sequence_range()->set_end(end);
  chunk.set_delta_encoded(delta_encode);
  int64_t uncompressed = 0;
  for (const Tensor& column : columns) {
    absl::StatusOr<tfp::TensorProto> proto = CompressTensor(column, delta_encode);
    if (!proto.ok()) return proto.status();
    *chunk.mutable_data()->add_tensors() = std::move(*proto);
    uncompressed += column.dtype == tfp::DT_STRING ? 0 : column.data.size();
    for (const std::string& s : column.strings) uncompressed += s.size();
  }
  chunk.set_data_tensors_len(static_cast<int32_t>(columns.size()));
  chunk.set_data_uncompressed_size(uncompressed);
  return chunk;
}

}  // namespace tf_reverb
