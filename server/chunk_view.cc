#include "server/chunk_view.h"

#include <cstddef>
#include <cstdint>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "server/wire_reader.h"

namespace tf_reverb {
namespace {

absl::Status Corrupt(absl::string_view what) {
  return absl::DataLossError(absl::StrCat("Corrupt stored chunk: ", what, "."));
}

// Protobuf stores an int32 enum's varint truncated; a plain encoding has
// none that needs truncating.
bool FitsEnum(uint64_t value) { return value <= uint64_t{0x7fffffff}; }

// Each reader below sets `*plain` to false (when not null) on anything
// outside the plain subset (see ChunkViewOfWire).
absl::Status ReadShape(absl::string_view bytes, TensorView* out, bool* plain) {
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
          *plain = false;  // a name (a string protobuf checks for UTF-8), or unknown
          dim.Skip(type);
        }
      }
      if (!dim.ok()) return Corrupt("unreadable dimension");
      if (dim.beyond_protobuf()) *plain = false;
      out->shape.push_back(size);
    } else if (field == 3 && type == WireReader::kVarint) {  // unknown_rank
      uint64_t value = 0;
      if (shape.Varint(&value)) out->unknown_rank = value != 0;
    } else {
      *plain = false;
      shape.Skip(type);
    }
  }
  if (shape.beyond_protobuf()) *plain = false;
  return shape.ok() ? absl::OkStatus() : Corrupt("unreadable tensor shape");
}

absl::Status ReadTensor(absl::string_view bytes, TensorView* out, bool* plain) {
  WireReader tensor(bytes);
  int field = 0, type = 0;
  while (!tensor.done() && tensor.NextTag(&field, &type)) {
    absl::string_view value;
    uint64_t number = 0;
    if (field == 1 && type == WireReader::kVarint) {
      if (!tensor.Varint(&number)) break;
      if (!FitsEnum(number)) *plain = false;
      out->dtype = static_cast<DataType>(static_cast<int32_t>(number));
    } else if (field == 2 && type == WireReader::kLengthDelimited) {
      if (!tensor.Bytes(&value)) break;
      if (absl::Status s = ReadShape(value, out, plain); !s.ok()) return s;
    } else if (field == 3 && type == WireReader::kVarint) {  // version_number
      tensor.Varint(&number);
    } else if (field == 4 && type == WireReader::kLengthDelimited) {
      if (!tensor.Bytes(&value)) break;
      out->content.clear();
      if (!value.empty()) out->content.push_back(value);
    } else if (field == 8 && type == WireReader::kLengthDelimited) {
      if (tensor.Bytes(&value)) out->string_val.push_back(value);
    } else {
      *plain = false;
      tensor.Skip(type);
    }
  }
  if (tensor.beyond_protobuf()) *plain = false;
  return tensor.ok() ? absl::OkStatus() : Corrupt("unreadable tensor");
}

// SequenceRange: only its episode_id is kept.
absl::Status ReadSequenceRange(absl::string_view bytes, uint64_t* episode_id, bool* plain) {
  WireReader range(bytes);
  int field = 0, type = 0;
  while (!range.done() && range.NextTag(&field, &type)) {
    uint64_t number = 0;
    if (field >= 1 && field <= 4 && type == WireReader::kVarint) {
      if (range.Varint(&number) && field == 1) *episode_id = number;
    } else {
      *plain = false;
      range.Skip(type);
    }
  }
  if (range.beyond_protobuf()) *plain = false;
  return range.ok() ? absl::OkStatus() : Corrupt("unreadable sequence range");
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
  view.episode_id = chunk.sequence_range().episode_id();
  view.uncompressed_size = chunk.data_uncompressed_size();
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

absl::StatusOr<ChunkView> ChunkViewOfWire(absl::string_view wire, bool* plain) {
  bool ignored = true;
  if (plain == nullptr) plain = &ignored;
  *plain = true;
  ChunkView view;
  WireReader chunk(wire);
  int field = 0, type = 0;
  while (!chunk.done() && chunk.NextTag(&field, &type)) {
    uint64_t number = 0;
    absl::string_view bytes;
    if (field == 1 && type == WireReader::kVarint) {
      if (chunk.Varint(&number)) view.key = number;
    } else if (field == 2 && type == WireReader::kLengthDelimited) {  // sequence_range
      if (!chunk.Bytes(&bytes)) break;
      if (absl::Status s = ReadSequenceRange(bytes, &view.episode_id, plain); !s.ok()) return s;
    } else if (field == 4 && type == WireReader::kVarint) {
      if (chunk.Varint(&number)) view.delta_encoded = number != 0;
    } else if (field == 5 && type == WireReader::kLengthDelimited) {  // data
      if (!chunk.Bytes(&bytes)) break;
      WireReader data(bytes);
      while (!data.done() && data.NextTag(&field, &type)) {
        absl::string_view tensor_bytes;
        if (field == 1 && type == WireReader::kLengthDelimited) {
          if (!data.Bytes(&tensor_bytes)) break;
          view.tensors.emplace_back();
          if (absl::Status s = ReadTensor(tensor_bytes, &view.tensors.back(), plain); !s.ok()) {
            return s;
          }
        } else {
          *plain = false;
          data.Skip(type);
        }
      }
      if (!data.ok()) return Corrupt("unreadable data");
      if (data.beyond_protobuf()) *plain = false;
    } else if (field == 6 && type == WireReader::kVarint) {  // data_tensors_len
      chunk.Varint(&number);
    } else if (field == 7 && type == WireReader::kVarint) {
      if (chunk.Varint(&number)) view.uncompressed_size = static_cast<int64_t>(number);
    } else if (field == 1000 && type == WireReader::kVarint) {
      if (!chunk.Varint(&number)) break;
      if (!FitsEnum(number)) *plain = false;
      view.compression = static_cast<ChunkCompression>(static_cast<int32_t>(number));
    } else {
      *plain = false;  // deprecated_data, or a field this build does not know
      chunk.Skip(type);
    }
  }
  if (!chunk.ok()) return Corrupt("unreadable chunk");
  if (chunk.beyond_protobuf()) *plain = false;
  return view;
}

absl::StatusOr<TensorView> TensorViewOfWire(absl::string_view wire, bool* plain) {
  bool ignored = true;
  if (plain == nullptr) plain = &ignored;
  *plain = true;
  TensorView view;
  if (absl::Status s = ReadTensor(wire, &view, plain); !s.ok()) return s;
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
