#include "server/chunk_view.h"

#include <cstddef>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "server/wire_reader.h"

namespace tf_reverb {
namespace {

absl::Status Corrupt(absl::string_view what) {
  return absl::DataLossError(absl::StrCat("Corrupt stored chunk: ", what, "."));
}

absl::Status ReadShape(absl::string_view bytes, TensorView* out) {
  WireReader shape(bytes);
  int field = 0, type = 0;
  while (!shape.done() && shape.NextTag(&field, &type)) {
    if (field == 2 && type == WireReader::kLengthDelimited) {  // dim
      absl::string_view dim_bytes;
      if (!shape.Bytes(&dim_bytes)) break;
      WireReader dim(dim_bytes);
      int64_t size = 0;
      while (!dim.done() && dim.NextTag(&field, &type)) {
        uint64_t value = 0;
        if (field == 1 && type == WireReader::kVarint) {
          if (dim.Varint(&value)) size = static_cast<int64_t>(value);
        } else {
          dim.Skip(type);
        }
      }
      if (!dim.ok()) return Corrupt("unreadable dimension");
      out->shape.push_back(size);
    } else if (field == 3 && type == WireReader::kVarint) {  // unknown_rank
      uint64_t value = 0;
      if (shape.Varint(&value)) out->unknown_rank = value != 0;
    } else {
      shape.Skip(type);
    }
  }
  return shape.ok() ? absl::OkStatus() : Corrupt("unreadable tensor shape");
}

absl::Status ReadTensor(absl::string_view bytes, TensorView* out) {
  WireReader tensor(bytes);
  int field = 0, type = 0;
  while (!tensor.done() && tensor.NextTag(&field, &type)) {
    absl::string_view value;
    uint64_t number = 0;
    if (field == 1 && type == WireReader::kVarint) {
      if (tensor.Varint(&number)) out->dtype = static_cast<DataType>(number);
    } else if (field == 2 && type == WireReader::kLengthDelimited) {
      if (!tensor.Bytes(&value)) break;
      if (absl::Status s = ReadShape(value, out); !s.ok()) return s;
    } else if (field == 4 && type == WireReader::kLengthDelimited) {
      if (!tensor.Bytes(&value)) break;
      out->content.clear();
      if (!value.empty()) out->content.push_back(value);
    } else if (field == 8 && type == WireReader::kLengthDelimited) {
      if (tensor.Bytes(&value)) out->string_val.push_back(value);
    } else {
      tensor.Skip(type);
    }
  }
  return tensor.ok() ? absl::OkStatus() : Corrupt("unreadable tensor");
}

}  // namespace

size_t TensorView::content_size() const {
  size_t size = 0;
  for (absl::string_view piece : content) size += piece.size();
  return size;
}

TensorView TensorViewOf(const ::tf_reverb::tf::TensorProto& tensor) {
  TensorView view;
  view.dtype = tensor.dtype();
  for (const auto& dim : tensor.tensor_shape().dim()) view.shape.push_back(dim.size());
  view.unknown_rank = tensor.tensor_shape().unknown_rank();
  if (!tensor.tensor_content().empty()) view.content.push_back(tensor.tensor_content());
  view.string_val.assign(tensor.string_val().begin(), tensor.string_val().end());
  return view;
}

ChunkView ChunkViewOf(const deepmind::reverb::ChunkData& chunk,
                      const std::vector<std::vector<absl::string_view>>* payloads) {
  ChunkView view;
  view.key = chunk.chunk_key();
  view.delta_encoded = chunk.delta_encoded();
  view.compression = chunk.compression();
  const int n = chunk.data().tensors_size();
  view.tensors.reserve(n);
  for (int i = 0; i < n; ++i) {
    view.tensors.push_back(TensorViewOf(chunk.data().tensors(i)));
    if (payloads != nullptr && static_cast<size_t>(i) < payloads->size() &&
        !(*payloads)[i].empty()) {
      view.tensors.back().content.assign((*payloads)[i].begin(), (*payloads)[i].end());
    }
  }
  return view;
}

absl::StatusOr<ChunkView> ChunkViewOfWire(absl::string_view wire) {
  ChunkView view;
  WireReader chunk(wire);
  int field = 0, type = 0;
  while (!chunk.done() && chunk.NextTag(&field, &type)) {
    uint64_t number = 0;
    if (field == 1 && type == WireReader::kVarint) {
      if (chunk.Varint(&number)) view.key = number;
    } else if (field == 4 && type == WireReader::kVarint) {
      if (chunk.Varint(&number)) view.delta_encoded = number != 0;
    } else if (field == 1000 && type == WireReader::kVarint) {
      if (chunk.Varint(&number)) view.compression = static_cast<ChunkCompression>(number);
    } else if (field == 5 && type == WireReader::kLengthDelimited) {  // data
      absl::string_view data_bytes;
      if (!chunk.Bytes(&data_bytes)) break;
      WireReader data(data_bytes);
      while (!data.done() && data.NextTag(&field, &type)) {
        absl::string_view tensor_bytes;
        if (field == 1 && type == WireReader::kLengthDelimited) {
          if (!data.Bytes(&tensor_bytes)) break;
          view.tensors.emplace_back();
          if (absl::Status s = ReadTensor(tensor_bytes, &view.tensors.back()); !s.ok()) return s;
        } else {
          data.Skip(type);
        }
      }
      if (!data.ok()) return Corrupt("unreadable data");
    } else {
      chunk.Skip(type);
    }
  }
  if (!chunk.ok()) return Corrupt("unreadable chunk");
  return view;
}

absl::StatusOr<const ChunkView*> ChunkViews::Find(uint64_t key) const {
  // Items reference few chunks: a scan beats building a map per sample.
  for (const ChunkView& view : views_) {
    if (view.key == key) return &view;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("The trajectory references chunk ", key, ", which its sample does not hold."));
}

}  // namespace tf_reverb
