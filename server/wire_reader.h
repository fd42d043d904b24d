// WireReader: reads the fields of a serialized protocol-buffer message off
// its front, without parsing it into a message, for the few messages the
// server keeps as bytes (TableChunk, ItemRecord).
//
// Contract: a plain value over borrowed bytes, which must outlive it; not
// synchronised. Malformed bytes (a truncated varint or field, a tag of field
// 0, a group) make the reading call return false and ok() false, and stop
// the reader (done() turns true); nothing is read past the end.
#ifndef TF_REVERB_SERVER_WIRE_READER_H_
#define TF_REVERB_SERVER_WIRE_READER_H_

#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"

namespace tf_reverb {

class WireReader {
 public:
  // Protocol-buffer wire types.
  static constexpr int kVarint = 0;
  static constexpr int kFixed64 = 1;
  static constexpr int kLengthDelimited = 2;
  static constexpr int kStartGroup = 3;
  static constexpr int kEndGroup = 4;
  static constexpr int kFixed32 = 5;
  static constexpr int kMaxGroupDepth = 64;
  // What protobuf's parser takes: tags and length prefixes of at most 5
  // bytes, lengths below 2 GiB - 16.
  static constexpr size_t kMaxPrefixBytes = 5;
  static constexpr uint64_t kMaxProtobufLength = (uint64_t{1} << 31) - 16;

  explicit WireReader(absl::string_view bytes) : rest_(bytes) {}

  bool done() const { return rest_.empty(); }
  bool ok() const { return ok_; }
  // Whether a tag or a length prefix was read that protobuf's parser refuses
  // though this reader takes it: one of more than the 5 bytes protobuf reads
  // there (zero-padded), or a length of 2 GiB - 16 or more.
  bool beyond_protobuf() const { return beyond_protobuf_; }
  // The bytes not read yet.
  absl::string_view rest() const { return rest_; }

  // The next field's number and wire type.
  bool NextTag(int* field, int* wire_type) {
    uint64_t tag = 0;
    const size_t before = rest_.size();
    if (!Varint(&tag) || (tag >> 3) == 0 || (tag >> 3) > (uint64_t{1} << 29)) return Fail();
    if (before - rest_.size() > kMaxPrefixBytes) beyond_protobuf_ = true;
    *field = static_cast<int>(tag >> 3);
    *wire_type = static_cast<int>(tag & 7);
    return true;
  }
  bool Varint(uint64_t* value) {
    uint64_t result = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (rest_.empty()) return Fail();
      const uint8_t byte = static_cast<uint8_t>(rest_.front());
      rest_.remove_prefix(1);
      result |= uint64_t{byte & 0x7fu} << shift;
      if ((byte & 0x80u) == 0) {
        *value = result;
        return true;
      }
    }
    return Fail();
  }
  bool Bytes(absl::string_view* out) {
    uint64_t size = 0;
    const size_t before = rest_.size();
    if (!Varint(&size) || size > rest_.size()) return Fail();
    if (before - rest_.size() > kMaxPrefixBytes || size >= kMaxProtobufLength) {
      beyond_protobuf_ = true;
    }
    *out = rest_.substr(0, size);
    rest_.remove_prefix(size);
    return true;
  }
  // Skips a field of `wire_type` whose tag was just read (a group: up to
  // and including its end, nested at most kMaxGroupDepth deep, as protobuf
  // keeps unknown groups; a stray end-group tag is malformed).
  bool Skip(int wire_type, int depth = 0) {
    uint64_t ignored = 0;
    absl::string_view skipped;
    switch (wire_type) {
      case kVarint:
        return Varint(&ignored);
      case kFixed64:
        return Advance(8);
      case kLengthDelimited:
        return Bytes(&skipped);
      case kFixed32:
        return Advance(4);
      case kStartGroup: {
        if (depth >= kMaxGroupDepth) return Fail();
        int field = 0, type = 0;
        while (NextTag(&field, &type)) {
          if (type == kEndGroup) return true;
          if (!Skip(type, depth + 1)) return false;
        }
        return Fail();
      }
      default:
        return Fail();
    }
  }

 private:
  bool Advance(size_t n) {
    if (n > rest_.size()) return Fail();
    rest_.remove_prefix(n);
    return true;
  }
  bool Fail() {
    ok_ = false;
    rest_ = {};
    return false;
  }

  absl::string_view rest_;
  bool ok_ = true;
  bool beyond_protobuf_ = false;
};

}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_WIRE_READER_H_
