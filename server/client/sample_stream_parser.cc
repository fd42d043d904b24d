#include "server/client/sample_stream_parser.h"

#include <algorithm>
#include <cstddef>
#include <memory>
#include <string>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "grpcpp/support/slice.h"
#include "grpcpp/support/status.h"
#include "reverb_service.pb.h"
#include "server/chunk_view.h"
#include "server/table_chunk.h"
#include "server/table_item.h"
#include "server/tensor.h"
#include "server/trajectory_columns.h"
#include "tensor.pb.h"

namespace tf_reverb {
namespace {

// Field numbers walked (proto/reverb_service.proto, schema.proto, tensor.proto).
constexpr uint32_t kResponseEntries = 1;
constexpr uint32_t kResponseBatch = 1000;
constexpr uint32_t kBatchColumns = 8;
constexpr uint32_t kEntryInfo = 1;
constexpr uint32_t kEntryData = 2;
constexpr uint32_t kEntryEndOfSequence = 3;
constexpr uint32_t kChunkData = 5;
constexpr uint32_t kDataTensors = 1;
constexpr uint32_t kTensorContent = 4;

constexpr int kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5;

absl::Status Malformed(absl::string_view what) {
  return absl::InternalError(absl::StrCat("Malformed SampleStreamResponse: ", what, "."));
}

// Random access to the bytes of a message held in several slices.
class Bytes {
 public:
  explicit Bytes(std::shared_ptr<const std::vector<grpc::Slice>> slices)
      : slices_(std::move(slices)) {
    for (const grpc::Slice& slice : *slices_) {
      starts_.push_back(size_);
      size_ += slice.size();
    }
  }
  size_t size() const { return size_; }
  const std::shared_ptr<const std::vector<grpc::Slice>>& slices() const { return slices_; }

  // Calls fn(const char*, size_t) for the pieces of [pos, pos + n).
  template <typename Fn>
  void ForEachPiece(size_t pos, size_t n, Fn fn) const {
    if (n == 0) return;
    size_t i = SliceOf(pos);
    while (n > 0) {
      const grpc::Slice& slice = (*slices_)[i];
      const size_t at = pos - starts_[i];
      const size_t here = std::min(n, slice.size() - at);
      if (here > 0) fn(reinterpret_cast<const char*>(slice.begin()) + at, here);
      pos += here;
      n -= here;
      ++i;
    }
  }
  void Append(size_t pos, size_t n, std::string* out) const {
    ForEachPiece(pos, n, [out](const char* p, size_t k) { out->append(p, k); });
  }
  uint8_t At(size_t pos) const {
    const size_t i = SliceOf(pos);
    return (*slices_)[i].begin()[pos - starts_[i]];
  }

 private:
  size_t SliceOf(size_t pos) const {
    if (hint_ < starts_.size() && starts_[hint_] <= pos &&
        pos - starts_[hint_] < (*slices_)[hint_].size()) {
      return hint_;
    }
    // The last slice starting at or before pos (pos < size(): never an
    // empty one, which starts where the next begins).
    size_t i = std::upper_bound(starts_.begin(), starts_.end(), pos) - starts_.begin() - 1;
    hint_ = i;
    return i;
  }

  std::shared_ptr<const std::vector<grpc::Slice>> slices_;
  std::vector<size_t> starts_;
  size_t size_ = 0;
  mutable size_t hint_ = 0;
};

// One field of a message in [pos, end): its number and wire type, and for
// length-delimited fields the range of its bytes; the whole field (tag
// included) is [start, next).
struct Field {
  uint32_t number = 0;
  int type = 0;
  uint64_t varint = 0;
  size_t start = 0, data = 0, length = 0, next = 0;
};

class FieldReader {
 public:
  FieldReader(const Bytes& bytes, size_t begin, size_t end)
      : bytes_(bytes), pos_(begin), end_(end) {}

  // False at the end; `status` tells a malformed field from the end.
  bool Next(Field* field, absl::Status* status) {
    if (pos_ >= end_) return false;
    field->start = pos_;
    uint64_t tag = 0;
    if (!Varint(&tag)) return Fail(status, "truncated tag");
    if (tag > 0xffffffffu) return Fail(status, "a tag beyond 32 bits");
    field->number = static_cast<uint32_t>(tag >> 3);
    field->type = static_cast<int>(tag & 7);
    if (field->number == 0) return Fail(status, "field number 0");
    switch (field->type) {
      case kVarint:
        if (!Varint(&field->varint)) return Fail(status, "truncated varint");
        break;
      case kFixed64:
        if (end_ - pos_ < 8) return Fail(status, "truncated fixed64");
        pos_ += 8;
        break;
      case kFixed32:
        if (end_ - pos_ < 4) return Fail(status, "truncated fixed32");
        pos_ += 4;
        break;
      case kLengthDelimited: {
        uint64_t length = 0;
        if (!Varint(&length)) return Fail(status, "truncated length");
        if (length > 0x7fffffffu) return Fail(status, "a length beyond 2 GiB");
        if (length > end_ - pos_) return Fail(status, "a field runs past its message");
        field->data = pos_;
        field->length = static_cast<size_t>(length);
        pos_ += field->length;
        break;
      }
      default:
        return Fail(status, absl::StrCat("unsupported wire type ", field->type));
    }
    field->next = pos_;
    return true;
  }

 private:
  bool Varint(uint64_t* out) {
    uint64_t value = 0;
    for (int shift = 0; shift < 64 && pos_ < end_; shift += 7) {
      const uint8_t byte = bytes_.At(pos_++);
      value |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) {
        *out = value;
        return true;
      }
    }
    return false;
  }
  static bool Fail(absl::Status* status, absl::string_view what) {
    *status = Malformed(what);
    return false;
  }

  const Bytes& bytes_;
  size_t pos_;
  const size_t end_;
};

// Walks the TensorProto in [begin, end): appends every field but its payload
// (tensor_content) to `rest` and sets `content` to the payload's field (the
// last one wins; length 0 when there is none).
absl::Status SplitTensor(const Bytes& bytes, size_t begin, size_t end, std::string* rest,
                         Field* content) {
  *content = Field();
  FieldReader reader(bytes, begin, end);
  Field field;
  absl::Status status;
  while (reader.Next(&field, &status)) {
    if (field.number == kTensorContent && field.type == kLengthDelimited) {
      *content = field;
    } else {
      bytes.Append(field.start, field.next - field.start, rest);
    }
  }
  return status;
}

// A TensorProto: everything but a large numeric tensor_content parsed from a
// copy; that payload as pieces of the message.
absl::Status ParseTensor(const Bytes& bytes, size_t begin, size_t end, tf::TensorProto* tensor,
                         std::vector<absl::string_view>* pieces) {
  std::string copied;
  Field content;
  if (absl::Status s = SplitTensor(bytes, begin, end, &copied, &content); !s.ok()) return s;
  if (!tensor->ParseFromString(copied)) return Malformed("a TensorProto does not parse");
  pieces->clear();
  if (content.length == 0) return absl::OkStatus();
  if (static_cast<int64_t>(content.length) < SampleStreamParser::kMinPiecesBytes ||
      tensor->dtype() == tf::DT_STRING) {
    bytes.Append(content.data, content.length, tensor->mutable_tensor_content());
    return absl::OkStatus();
  }
  bytes.ForEachPiece(content.data, content.length,
                     [pieces](const char* p, size_t n) { pieces->emplace_back(p, n); });
  return absl::OkStatus();
}

// What a chunk read by ViewChunk borrows: the message's slices (its large
// payloads) and copies of its small payloads.
struct ViewedBytes {
  std::shared_ptr<const std::vector<grpc::Slice>> slices;
  std::string copies;
};

// The chunk in [begin, end) read into out->view without protobuf, when it
// keeps to the plain encoding (ChunkViewOfWire, chunk_view.h) and holds no
// strings; false for anything else (malformed bytes included), which
// ParseChunkProto then parses or rejects. Writes `out` only on success. Only
// the metadata is copied (to be read contiguously), and payloads under
// kMinPiecesBytes.
bool ViewChunk(const Bytes& bytes, size_t begin, size_t end, SampleChunk* out) {
  std::string fields, tensor_fields;  // the chunk's, a tensor's, minus payloads
  std::string copies;                 // the small payloads
  absl::InlinedVector<TensorView, 1> tensors;
  struct Copied {
    size_t tensor, offset, length;
  };
  absl::InlinedVector<Copied, 4> copied;
  bool pieces = false;
  FieldReader reader(bytes, begin, end);
  Field field;
  absl::Status status;
  while (reader.Next(&field, &status)) {
    if (field.number != kChunkData || field.type != kLengthDelimited) {
      bytes.Append(field.start, field.next - field.start, &fields);
      continue;
    }
    FieldReader data(bytes, field.data, field.data + field.length);
    Field tensor;
    while (data.Next(&tensor, &status)) {
      if (tensor.number != kDataTensors || tensor.type != kLengthDelimited) return false;
      tensor_fields.clear();
      Field content;
      if (!SplitTensor(bytes, tensor.data, tensor.data + tensor.length, &tensor_fields, &content)
               .ok()) {
        return false;
      }
      bool plain = true;
      absl::StatusOr<TensorView> view = TensorViewOfWire(tensor_fields, &plain);
      // A string_val would point into tensor_fields.
      if (!view.ok() || !plain || view->dtype == tf::DT_STRING || !view->string_val.empty()) {
        return false;
      }
      view->content.clear();  // empty anyway: tensor_fields has no payload
      if (content.length >= static_cast<size_t>(SampleStreamParser::kMinPiecesBytes)) {
        bytes.ForEachPiece(content.data, content.length,
                           [&view](const char* p, size_t n) { view->content.emplace_back(p, n); });
        pieces = true;
      } else if (content.length > 0) {
        copied.push_back({tensors.size(), copies.size(), content.length});
        bytes.Append(content.data, content.length, &copies);
      }
      tensors.push_back(*std::move(view));
    }
    if (!status.ok()) return false;
  }
  if (!status.ok()) return false;
  bool plain = true;
  absl::StatusOr<ChunkView> view = ChunkViewOfWire(fields, &plain);
  if (!view.ok() || !plain) return false;
  view->tensors = std::move(tensors);
  if (pieces || !copied.empty()) {
    auto owned = std::make_shared<ViewedBytes>();
    if (pieces) owned->slices = bytes.slices();
    owned->copies = std::move(copies);
    // Views into the copies once they are in their final place.
    const absl::string_view kept(owned->copies);
    for (const Copied& c : copied) {
      view->tensors[c.tensor].content = {kept.substr(c.offset, c.length)};
    }
    out->owner = std::move(owned);
  }
  out->view = *std::move(view);
  return true;
}

// The chunk in [begin, end) parsed by protobuf, its large payloads left in the
// message's slices (for encodings ViewChunk does not read).
absl::Status ParseChunkProto(const Bytes& bytes, size_t begin, size_t end, SampleChunk* out) {
  std::string copied;
  std::vector<tf::TensorProto> tensors;
  std::vector<std::vector<absl::string_view>> payloads;
  FieldReader reader(bytes, begin, end);
  Field field;
  absl::Status status;
  while (reader.Next(&field, &status)) {
    if (field.number != kChunkData || field.type != kLengthDelimited) {
      bytes.Append(field.start, field.next - field.start, &copied);
      continue;
    }
    // ChunkData.Data: repeated tensors (several occurrences merge).
    FieldReader data(bytes, field.data, field.data + field.length);
    Field tensor;
    while (data.Next(&tensor, &status)) {
      if (tensor.number != kDataTensors || tensor.type != kLengthDelimited) continue;
      tensors.emplace_back();
      payloads.emplace_back();
      if (absl::Status s = ParseTensor(bytes, tensor.data, tensor.data + tensor.length,
                                       &tensors.back(), &payloads.back());
          !s.ok()) {
        return s;
      }
    }
    if (!status.ok()) return status;
  }
  if (!status.ok()) return status;
  auto chunk = std::make_shared<ChunkData>();
  if (!chunk->ParseFromString(copied)) return Malformed("a ChunkData does not parse");
  bool any_pieces = false;
  for (auto& tensor : tensors) *chunk->mutable_data()->add_tensors() = std::move(tensor);
  for (const auto& pieces : payloads) any_pieces = any_pieces || !pieces.empty();
  out->data = std::move(chunk);
  if (any_pieces) {
    out->payloads = std::move(payloads);
    out->owner = bytes.slices();
  }
  return absl::OkStatus();
}

// A SampleBatch: every field but the columns parsed from a copy; each
// column's payload left in the message's slices when large.
absl::Status ParseBatch(const Bytes& bytes, size_t begin, size_t end, std::vector<Sample>* out) {
  std::string copied;
  std::vector<tf::TensorProto> tensors;
  std::vector<std::vector<absl::string_view>> payloads;
  FieldReader reader(bytes, begin, end);
  Field field;
  absl::Status status;
  while (reader.Next(&field, &status)) {
    if (field.number == kBatchColumns && field.type == kLengthDelimited) {
      tensors.emplace_back();
      payloads.emplace_back();
      if (absl::Status s = ParseTensor(bytes, field.data, field.data + field.length,
                                       &tensors.back(), &payloads.back());
          !s.ok()) {
        return s;
      }
    } else {
      bytes.Append(field.start, field.next - field.start, &copied);
    }
  }
  if (!status.ok()) return status;
  deepmind::reverb::SampleBatch batch;
  if (!batch.ParseFromString(copied)) return Malformed("a SampleBatch does not parse");
  const int n = batch.keys_size();
  if (batch.priorities_size() != n || batch.times_sampled_size() != n ||
      batch.probabilities_size() != n || batch.table_sizes_size() != n ||
      batch.rate_limited_size() != n ||
      (batch.policy_versions_size() != 0 && batch.policy_versions_size() != n)) {
    return Malformed("the per-sample fields of a SampleBatch differ in length");
  }
  if (batch.squeeze_size() != static_cast<int>(tensors.size())) {
    return Malformed("a SampleBatch has a squeeze flag per column");
  }
  auto block = std::make_shared<SampleBlock>();
  block->copies.resize(tensors.size());
  block->owner = bytes.slices();
  for (size_t c = 0; c < tensors.size(); ++c) {
    tf::TensorProto& tensor = tensors[c];
    const auto& dims = tensor.tensor_shape().dim();
    if (dims.empty() || dims[0].size() != n || tensor.dtype() == tf::DT_STRING ||
        !DataTypeSize(static_cast<DataType>(tensor.dtype())).ok()) {
      return Malformed(
          absl::StrCat("column ", c, " of a SampleBatch is not [", n, ", ...] of a numeric dtype"));
    }
    ColumnSpec spec{static_cast<DataType>(tensor.dtype()), {}};
    // Bytes of one row, then of the column, without overflow.
    int64_t bytes = *DataTypeSize(spec.dtype);
    for (int d = 1; d < dims.size(); ++d) {
      if (dims[d].size() < 0 || __builtin_mul_overflow(bytes, dims[d].size(), &bytes)) {
        return Malformed(absl::StrCat("column ", c, " of a SampleBatch has an implausible shape"));
      }
      spec.shape.push_back(dims[d].size());
    }
    if (__builtin_mul_overflow(bytes, int64_t{n}, &bytes)) {
      return Malformed(absl::StrCat("column ", c, " of a SampleBatch has an implausible shape"));
    }
    size_t size = 0;
    if (payloads[c].empty()) {
      block->copies[c] = std::move(*tensor.mutable_tensor_content());
      size = block->copies[c].size();
      block->columns.push_back({block->copies[c]});
    } else {
      for (absl::string_view piece : payloads[c]) size += piece.size();
      block->columns.push_back(std::move(payloads[c]));
    }
    if (size != static_cast<size_t>(bytes)) {
      return Malformed(absl::StrCat("column ", c, " of a SampleBatch holds ", size, " bytes"));
    }
    block->specs.push_back(std::move(spec));
    block->squeeze.push_back(batch.squeeze(static_cast<int>(c)));
  }
  out->reserve(out->size() + static_cast<size_t>(n));
  const bool has_versions = batch.policy_versions_size() > 0;
  for (int i = 0; i < n; ++i) {
    const SampleMeta meta{batch.keys(i),          batch.priorities(i),
                          batch.times_sampled(i), has_versions ? batch.policy_versions(i) : 0,
                          batch.probabilities(i), batch.table_sizes(i),
                          batch.rate_limited(i)};
    out->push_back(Sample::FromBlock(meta, block, i));
  }
  return absl::OkStatus();
}

}  // namespace

void SampleStreamParser::Reset() {
  in_sample_ = false;
  info_.Clear();
  chunks_.clear();
}

absl::Status SampleStreamParser::Parse(const grpc::ByteBuffer& message, std::vector<Sample>* out) {
  auto slices = std::make_shared<std::vector<grpc::Slice>>();
  if (grpc::Status s = message.Dump(slices.get()); !s.ok()) {
    return absl::InternalError(
        absl::StrCat("Reading a sample response failed: ", s.error_message()));
  }
  const Bytes bytes(std::move(slices));
  FieldReader reader(bytes, 0, bytes.size());
  Field entry;
  absl::Status status;
  while (reader.Next(&entry, &status)) {
    if (entry.number == kResponseBatch && entry.type == kLengthDelimited) {
      if (in_sample_) return Malformed("a SampleBatch inside a sample's entries");
      if (absl::Status s = ParseBatch(bytes, entry.data, entry.data + entry.length, out); !s.ok()) {
        return s;
      }
      continue;
    }
    if (entry.number != kResponseEntries || entry.type != kLengthDelimited) continue;
    std::string info;
    bool has_info = false, end_of_sequence = false;
    FieldReader fields(bytes, entry.data, entry.data + entry.length);
    Field field;
    while (fields.Next(&field, &status)) {
      if (field.number == kEntryInfo && field.type == kLengthDelimited) {
        // Occurrences of a message field merge: their bytes concatenate.
        bytes.Append(field.data, field.length, &info);
        has_info = true;
      } else if (field.number == kEntryData && field.type == kLengthDelimited) {
        SampleChunk chunk;
        if (!ViewChunk(bytes, field.data, field.data + field.length, &chunk)) {
          if (absl::Status s =
                  ParseChunkProto(bytes, field.data, field.data + field.length, &chunk);
              !s.ok()) {
            return s;
          }
        }
        chunks_.push_back(std::move(chunk));
      } else if (field.number == kEntryEndOfSequence && field.type == kVarint) {
        end_of_sequence = field.varint != 0;
      }
    }
    if (!status.ok()) return status;
    if (has_info) {
      info_.Clear();
      if (!info_.ParseFromString(info)) return Malformed("a SampleInfo does not parse");
    }
    in_sample_ = true;
    if (end_of_sequence) {
      out->push_back(Sample::FromChunks(std::move(info_), std::move(chunks_)));
      Reset();
    }
  }
  return status;
}

}  // namespace tf_reverb
