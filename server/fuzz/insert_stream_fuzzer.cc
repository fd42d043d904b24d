// Fuzz target: the server side of InsertStream (server/service/server_insert_stream.h,
// server/chunk_validation.h) into real in-memory tables, and the reading of
// everything it accepted.
//
// Input: protobuf wire format of a message with `repeated
// InsertStreamRequest requests = 1;` (at most 16 requests; other fields
// ignored): one stream, handled request by request by an
// ServerInsertStream over three tables with a uniform sampler and a rate
// limiter that never blocks: "t" and "u" without a signature, "typed" with
// the signature (int32[?], string[]) (see fuzz_tables.h and make_seeds.cc).
// The stream stops at the first error, as the service ends it.
//
// Properties: never crashes; errors are statuses; and whatever a table
// accepted is readable: every stored item (all of them, from a snapshot, and
// a sampled batch) has readable column specs and every column unpacks
// (Sample::ColumnSpecs, UnpackColumn, UnpackColumnInto: what a client does
// with a sample), every slice decodes, and every tensor of every chunk it
// holds decodes whole. Any failure there aborts: the server stored data a
// sampler cannot decode. Every stored key was confirmed to the client. The
// sampled batch encodes as batched responses (EncodeSampleBatches) without
// an error, and to the same bytes when encoded again from the items' row
// caches.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/wire_format_lite.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"
#include "reverb_service.pb.h"
#include "server/chunk_codec.h"
#include "server/chunk_view.h"
#include "server/client/sample.h"
#include "server/fuzz/fuzz_check.h"
#include "server/fuzz/fuzz_tables.h"
#include "server/fuzz/item_decoder.h"
#include "server/service/sample_batch.h"
#include "server/service/server_insert_stream.h"
#include "server/table.h"
#include "server/table_item.h"
#include "server/tensor.h"
#include "server/trajectory_columns.h"
#include "tensor.pb.h"

namespace tf_reverb {
namespace {

using ::deepmind::reverb::InsertStreamRequest;
using ::google::protobuf::internal::WireFormatLite;

constexpr int kMaxRequests = 16;
// Accepted chunks may legitimately decode to this much (zstd compresses
// runs ~30000-fold); beyond it the target skips a slice rather than exceed
// the fuzzer's memory limit itself.
constexpr int64_t kMaxSliceBytes = int64_t{256} << 20;

bool ParseRequests(const uint8_t* data, size_t size, std::vector<InsertStreamRequest>* out) {
  google::protobuf::io::CodedInputStream in(data, static_cast<int>(size));
  while (uint32_t tag = in.ReadTag()) {
    if (WireFormatLite::GetTagWireType(tag) != WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
      if (!WireFormatLite::SkipField(&in, tag)) return false;
      continue;
    }
    uint32_t length;
    std::string bytes;
    if (!in.ReadVarint32(&length) || !in.ReadString(&bytes, static_cast<int>(length))) {
      return false;
    }
    if (WireFormatLite::GetTagFieldNumber(tag) != 1) continue;
    if (static_cast<int>(out->size()) == kMaxRequests) return false;
    out->emplace_back();
    if (!out->back().ParseFromString(bytes)) return false;
  }
  return in.ConsumedEntireMessage();
}

// The bytes of `buffer` (server/testing's helper of the same name links
// gtest, which the fuzz targets do not).
std::string BufferBytes(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  std::string bytes;
  if (!buffer.Dump(&slices).ok()) return bytes;
  for (const grpc::Slice& slice : slices) {
    bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  return bytes;
}

// Reads `item` back as a client would; aborts on any failure.
void CheckReadable(const std::string& table, const SampledItem& sampled) {
  const uint64_t key = sampled.data->item.key();
  const std::string where = absl::StrCat("accepted item ", key, " of table ", table);
  FUZZ_CHECK_OK(ValidateTableItem(*sampled.data));
  for (const auto& chunk : sampled.data->chunks) {
    absl::StatusOr<ChunkView> view = chunk->View();
    FUZZ_CHECK(view.ok(),
               absl::StrCat(where, ": chunk ", chunk->key(), ": View: ", view.status().ToString()));
    for (int i = 0; i < static_cast<int>(view->tensors.size()); ++i) {
      absl::StatusOr<Tensor> tensor = DecompressChunkTensor(*view, i);
      FUZZ_CHECK(tensor.ok(), absl::StrCat(where, ": chunk ", chunk->key(), " tensor ", i, ": ",
                                           tensor.status().ToString()));
    }
  }
  const absl::Status slices = fuzz::DecodeItem(*sampled.data, kMaxSliceBytes);
  if (absl::IsResourceExhausted(slices)) return;  // too big for the target, not a finding
  FUZZ_CHECK(slices.ok(), absl::StrCat(where, ": ", slices.ToString()));

  const Sample sample = Sample::FromSampledItem(sampled);
  absl::StatusOr<std::vector<ColumnSpec>> specs = sample.ColumnSpecs();
  FUZZ_CHECK(specs.ok(), absl::StrCat(where, ": ColumnSpecs: ", specs.status().ToString()));
  FUZZ_CHECK(
      static_cast<int>(specs->size()) == sample.num_columns(),
      absl::StrCat(where, ": ", specs->size(), " specs for ", sample.num_columns(), " columns"));
  for (int c = 0; c < sample.num_columns(); ++c) {
    const ColumnSpec& spec = (*specs)[c];
    absl::StatusOr<Tensor> column = sample.UnpackColumn(c);
    FUZZ_CHECK(column.ok(),
               absl::StrCat(where, ": UnpackColumn(", c, "): ", column.status().ToString()));
    FUZZ_CHECK(column->dtype == spec.dtype && column->shape == spec.shape,
               absl::StrCat(where, ": column ", c, " unpacks to ", DataTypeName(column->dtype),
                            ShapeString(column->shape), " but its spec is ",
                            DataTypeName(spec.dtype), ShapeString(spec.shape)));
    if (column->dtype == ::tf_reverb::tf::DT_STRING) continue;
    FUZZ_CHECK_OK(ValidateTensor(*column));
    std::string dst(column->data.size(), '\0');
    FUZZ_CHECK_OK(sample.UnpackColumnInto(c, dst.data()));
    FUZZ_CHECK(dst == column->data,
               absl::StrCat(where, ": UnpackColumnInto(", c, ") differs from UnpackColumn"));
  }
}

}  // namespace
}  // namespace tf_reverb

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ::tf_reverb;  // NOLINT(build/namespaces): a fuzz entry point
  std::vector<InsertStreamRequest> requests;
  if (!ParseRequests(data, size, &requests)) return 0;

  absl::flat_hash_map<std::string, std::shared_ptr<Table>> tables;
  for (const auto& [name, signature] : fuzz::FuzzTableSignatures()) {
    absl::StatusOr<std::shared_ptr<Table>> table = fuzz::MakeFuzzTable(name, 1000, signature);
    FUZZ_CHECK_OK(table.status());
    tables[name] = *std::move(table);
  }
  ServerInsertStream handler(
      [&tables](const std::string& name) -> absl::StatusOr<std::shared_ptr<Table>> {
        auto it = tables.find(name);
        if (it == tables.end()) return absl::NotFoundError(absl::StrCat("no table ", name));
        return it->second;
      });

  absl::flat_hash_set<uint64_t> confirmed_keys;
  std::vector<uint64_t> confirmed;
  const ServerInsertStream::Flush flush = [&confirmed_keys](std::vector<uint64_t>* keys) {
    confirmed_keys.insert(keys->begin(), keys->end());
    keys->clear();
    return true;
  };
  // TF_REVERB_FUZZ_VERBOSE=1 prints what happens to each request (for
  // reading a reproducer or checking that seeds are accepted).
  static const bool verbose = std::getenv("TF_REVERB_FUZZ_VERBOSE") != nullptr;
  for (size_t i = 0; i < requests.size(); ++i) {
    const absl::Status status = handler.Handle(std::move(requests[i]), &confirmed, flush);
    if (verbose) {
      std::fprintf(stderr, "request %zu: %s, %zu items confirmed\n", i, status.ToString().c_str(),
                   confirmed.size());
    }
    confirmed_keys.insert(confirmed.begin(), confirmed.end());
    confirmed.clear();
    if (!status.ok()) break;
  }

  for (const auto& [name, table] : tables) {
    const Table::Snapshot snapshot = table->TakeSnapshot();
    if (verbose) std::fprintf(stderr, "table %s: %zu items\n", name.c_str(), snapshot.items.size());
    for (const Table::CheckpointItem& item : snapshot.items) {
      FUZZ_CHECK(confirmed_keys.contains(item.data->item.key()),
                 absl::StrCat("table ", name, " holds item ", item.data->item.key(),
                              " that was never confirmed"));
      SampledItem sampled;
      sampled.data = item.data;
      sampled.priority = item.priority;
      sampled.times_sampled = item.times_sampled;
      CheckReadable(name, sampled);
    }
    if (snapshot.items.empty()) continue;
    std::vector<SampledItem> batch;
    FUZZ_CHECK_OK(table->SampleBatch(4, absl::ZeroDuration(), &batch));
    for (const SampledItem& sampled : batch) CheckReadable(name, sampled);
    // What a batching client receives: the same bytes whether the small
    // items' rows are decoded now or read from their caches
    // (server/item_rows_cache.h), filled by the first call.
    absl::StatusOr<std::vector<grpc::ByteBuffer>> fresh = EncodeSampleBatches(batch);
    FUZZ_CHECK_OK(fresh.status());
    absl::StatusOr<std::vector<grpc::ByteBuffer>> cached = EncodeSampleBatches(batch);
    FUZZ_CHECK_OK(cached.status());
    FUZZ_CHECK(fresh->size() == cached->size(),
               absl::StrCat("table ", name, ": ", fresh->size(), " batch responses, then ",
                            cached->size(), " from the caches"));
    for (size_t i = 0; i < fresh->size(); ++i) {
      FUZZ_CHECK(BufferBytes((*fresh)[i]) == BufferBytes((*cached)[i]),
                 absl::StrCat("table ", name, ": batch response ", i, " differs from the caches"));
    }
  }
  return 0;
}
