// Writes the seed corpora of the fuzz targets: a handful of small, valid
// inputs per target, made with the same code the product uses to produce
// them (BuildChunk, Checkpointer::Save, the config and signature messages).
//
//   bazel run //server/fuzz:make_seeds -- $PWD/server/fuzz/corpus
//
// writes <dir>/<target>/<seed name> (existing files of the same names are
// replaced; other files are left alone).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "patterns.pb.h"
#include "reverb_service.pb.h"
#include "schema.pb.h"
#include "server/checkpointing/checkpointer.h"
#include "server/chunk_codec.h"
#include "server/fuzz/fuzz_files.h"
#include "server/fuzz/fuzz_tables.h"
#include "server/item_record.h"
#include "server/table.h"
#include "server/table_chunk.h"
#include "server/table_item.h"
#include "server/tensor.h"
#include "struct.pb.h"
#include "tensor.pb.h"

namespace tf_reverb {
namespace {

namespace fs = std::filesystem;
namespace tfp = ::tf_reverb::tf;
using ::deepmind::reverb::StructuredWriterConfig;

void Die(const absl::Status& status, const std::string& what) {
  if (status.ok()) return;
  std::fprintf(stderr, "make_seeds: %s: %s\n", what.c_str(), status.ToString().c_str());
  std::exit(1);
}

class SeedWriter {
 public:
  explicit SeedWriter(std::string root) : root_(std::move(root)) {}
  void Write(const std::string& target, const std::string& name, const std::string& bytes) {
    const fs::path dir = fs::path(root_) / target;
    fs::create_directories(dir);
    fuzz::WriteFileOrDie((dir / name).string(), bytes);
    std::printf("%s/%s: %zu bytes\n", target.c_str(), name.c_str(), bytes.size());
  }

 private:
  const std::string root_;
};

// A numeric tensor whose bytes count up from `seed` (compressible, and
// different per row, so delta encoding and slicing are visible).
Tensor Counting(DataType dtype, std::vector<int64_t> shape, int seed) {
  Tensor t;
  t.dtype = dtype;
  t.shape = std::move(shape);
  const int64_t bytes = t.num_elements() * DataTypeSize(dtype).value();
  for (int64_t i = 0; i < bytes; ++i) t.data.push_back(static_cast<char>(seed + i / 3));
  return t;
}

// A uint8 tensor of bytes that do not compress (a linear congruential
// sequence from `seed`).
Tensor Noise(std::vector<int64_t> shape, uint32_t seed) {
  Tensor t;
  t.dtype = tfp::DT_UINT8;
  t.shape = std::move(shape);
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    seed = seed * 1664525u + 1013904223u;
    t.data.push_back(static_cast<char>(seed >> 24));
  }
  return t;
}

Tensor Strings(std::vector<std::string> values) {
  Tensor t;
  t.dtype = tfp::DT_STRING;
  t.shape = {static_cast<int64_t>(values.size())};
  t.strings = std::move(values);
  return t;
}

ChunkData Chunk(uint64_t key, std::vector<Tensor> columns, bool delta, CodecPolicy policy,
                int32_t start = 0) {
  const int64_t rows = columns.front().num_rows();
  absl::StatusOr<ChunkData> chunk =
      BuildChunk(key, columns, /*episode_id=*/key / 10, start,
                 start + static_cast<int32_t>(rows) - 1, delta, policy, /*zstd_level=*/1);
  Die(chunk.status(), "BuildChunk");
  return *std::move(chunk);
}

void ChunkSeeds(SeedWriter& out) {
  out.Write("chunk_codec_fuzzer", "snappy_int32",
            Chunk(1, {Counting(tfp::DT_INT32, {4, 3}, 1)}, false, CodecPolicy::kSnappy)
                .SerializeAsString());
  out.Write("chunk_codec_fuzzer", "snappy_delta_int64",
            Chunk(2, {Counting(tfp::DT_INT64, {5, 2}, 7)}, true, CodecPolicy::kSnappy, 3)
                .SerializeAsString());
  out.Write("chunk_codec_fuzzer", "zstd_float_and_uint8",
            Chunk(3, {Counting(tfp::DT_FLOAT, {6, 2}, 3), Counting(tfp::DT_UINT8, {6}, 9)}, false,
                  CodecPolicy::kZstd, 1)
                .SerializeAsString());
  out.Write("chunk_codec_fuzzer", "zstd_delta_int16",
            Chunk(4, {Counting(tfp::DT_INT16, {3, 4, 2}, 5)}, true, CodecPolicy::kZstd, 2)
                .SerializeAsString());
  out.Write("chunk_codec_fuzzer", "strings_and_double",
            Chunk(5, {Strings({"a", "", "hello"}), Counting(tfp::DT_DOUBLE, {3}, 2)}, false,
                  CodecPolicy::kSnappy)
                .SerializeAsString());
  out.Write("chunk_codec_fuzzer", "zstd_scalar_rows_bool",
            Chunk(6, {Counting(tfp::DT_BOOL, {8}, 0), Counting(tfp::DT_UINT64, {8, 1}, 4)}, true,
                  CodecPolicy::kZstd, 5)
                .SerializeAsString());
}

deepmind::reverb::PrioritizedItem ItemOver(uint64_t key, const std::string& table,
                                           const ChunkData& chunk, int32_t offset, int32_t length,
                                           double priority) {
  deepmind::reverb::PrioritizedItem item;
  item.set_key(key);
  item.set_table(table);
  item.set_priority(priority);
  for (int index = 0; index < chunk.data().tensors_size(); ++index) {
    auto* column = item.mutable_flat_trajectory()->add_columns();
    auto* slice = column->add_chunk_slices();
    slice->set_chunk_key(chunk.chunk_key());
    slice->set_offset(offset);
    slice->set_length(length);
    slice->set_index(index);
    column->set_squeeze(length == 1 && index == 0);
  }
  return item;
}

void CheckpointSeeds(SeedWriter& out) {
  const std::string scratch = fuzz::ScratchDirectory();
  struct Case {
    std::string name;
    int tables;
    int items;
    CodecPolicy policy;
  };
  for (const Case& c : std::vector<Case>{{"one_table_snappy", 1, 2, CodecPolicy::kSnappy},
                                         {"two_tables_zstd", 2, 2, CodecPolicy::kZstd},
                                         {"empty_tables", 2, 0, CodecPolicy::kSnappy}}) {
    std::vector<std::shared_ptr<Table>> tables;
    for (int t = 0; t < c.tables; ++t) {
      absl::StatusOr<std::shared_ptr<Table>> table = fuzz::MakeFuzzTable(t == 0 ? "t" : "u");
      Die(table.status(), "MakeFuzzTable");
      tables.push_back(*table);
    }
    for (int i = 0; i < c.items; ++i) {
      const ChunkData chunk =
          Chunk(100 + i, {Counting(tfp::DT_INT32, {3, 2}, i), Strings({"x", "yz", ""})}, i % 2 == 1,
                c.policy);
      std::shared_ptr<const TableChunk> stored = TableChunk::FromProto(chunk);
      for (size_t t = 0; t < tables.size(); ++t) {
        TableItem item;
        item.item = ItemRecord::FromProto(
            ItemOver(10 * i + t + 1, tables[t]->name(), chunk, i % 2, 2, 1.5 + i));
        item.chunks = {stored};
        Die(tables[t]->InsertOrAssign(std::move(item), absl::ZeroDuration()), "insert");
      }
    }
    Checkpointer checkpointer(scratch + "/" + c.name, CheckpointerOptions());
    absl::StatusOr<std::string> path = checkpointer.Save(tables);
    Die(path.status(), "Save");
    std::vector<std::string> files;
    for (const char* file : {"tables.tfrecord", "chunks.tfrecord", "items.tfrecord"}) {
      files.push_back(fuzz::ReadFileOrDie(*path + "/" + file));
    }
    out.Write("checkpoint_record_fuzzer", c.name, absl::StrJoin(files, fuzz::kFileSeparator));
    if (c.items > 0) {
      // A plain record file too (the chunks alone).
      out.Write("checkpoint_record_fuzzer", c.name + "_chunks_only", files[1]);
    }
  }
}

deepmind::reverb::PatternNode Node(int column, std::optional<int> start, std::optional<int> stop,
                                   std::optional<int> step = {}) {
  deepmind::reverb::PatternNode node;
  node.set_flat_source_index(column);
  if (start) node.set_start(*start);
  if (stop) node.set_stop(*stop);
  if (step) node.set_step(*step);
  return node;
}

// Field 1: a config, field 2: the step bytes (see the fuzz target).
std::string ConfigInput(const std::vector<StructuredWriterConfig>& configs,
                        const std::string& steps) {
  std::string out;
  auto put_field = [&out](int field, const std::string& bytes) {
    out.push_back(static_cast<char>(field << 3 | 2));
    uint64_t n = bytes.size();
    while (n >= 0x80) {
      out.push_back(static_cast<char>(n | 0x80));
      n >>= 7;
    }
    out.push_back(static_cast<char>(n));
    out += bytes;
  };
  for (const StructuredWriterConfig& config : configs) put_field(1, config.SerializeAsString());
  put_field(2, steps);
  return out;
}

void ConfigSeeds(SeedWriter& out) {
  const std::string steps("\x00\x04\x08\x0c\x10\x14\x19\x20\x24\x2a\x30", 11);
  {  // The last two steps of columns 0 and 1, every second step.
    StructuredWriterConfig config;
    *config.add_flat() = Node(0, -2, std::nullopt);
    *config.add_flat() = Node(1, -2, std::nullopt);
    config.set_table("t");
    config.mutable_priority()->mutable_constant_fn()->set_value(1.5);
    auto* every_other = config.add_conditions();
    every_other->set_step_index(true);
    every_other->mutable_mod_eq()->set_mod(2);
    every_other->mutable_mod_eq()->set_eq(0);
    out.Write("structured_writer_config_fuzzer", "last_two_steps", ConfigInput({config}, steps));
  }
  {  // A single step (squeezed), TD-error priority, on a data condition.
    StructuredWriterConfig config;
    *config.add_flat() = Node(0, std::nullopt, -1);
    *config.add_flat() = Node(2, std::nullopt, -1);
    config.set_table("t");
    config.mutable_priority()->mutable_td_error()->set_max_priority_weight(0.9);
    config.mutable_priority()->mutable_td_error()->set_flat_source_index(2);
    auto* data = config.add_conditions();
    data->set_flat_source_index(1);
    data->set_ge(1);
    out.Write("structured_writer_config_fuzzer", "td_error_and_data_condition",
              ConfigInput({config}, steps));
  }
  {  // Strided ranges, an end-of-episode config beside a periodic one.
    StructuredWriterConfig strided;
    *strided.add_flat() = Node(0, -6, -1, 2);
    strided.set_table("t");
    auto* since = strided.add_conditions();
    since->set_steps_since_applied(true);
    since->set_ge(3);
    StructuredWriterConfig at_end;
    *at_end.add_flat() = Node(1, -3, std::nullopt);
    at_end.set_table("u");
    auto* end = at_end.add_conditions();
    end->set_is_end_episode(true);
    end->set_eq(1);
    auto* length = at_end.add_conditions();
    length->set_buffer_length(true);
    length->set_ge(3);
    out.Write("structured_writer_config_fuzzer", "strided_and_end_of_episode",
              ConfigInput({strided, at_end}, steps + std::string("\x01\x05\x0b\x03", 4)));
  }
  {  // Invalid: start >= stop (validation errors are inputs too).
    StructuredWriterConfig config;
    *config.add_flat() = Node(0, -1, -2);
    config.set_table("t");
    out.Write("structured_writer_config_fuzzer", "invalid_range", ConfigInput({config}, steps));
  }
}

tfp::StructuredValue Spec(DataType dtype, std::vector<int64_t> shape, std::string name = "") {
  tfp::StructuredValue value;
  auto* spec = value.mutable_tensor_spec_value();
  spec->set_name(std::move(name));
  spec->set_dtype(dtype);
  for (int64_t d : shape) spec->mutable_shape()->add_dim()->set_size(d);
  return value;
}

void SignatureSeeds(SeedWriter& out) {
  {
    tfp::StructuredValue value;
    auto* fields = value.mutable_dict_value()->mutable_fields();
    (*fields)["observation"] = Spec(tfp::DT_FLOAT, {-1, 3}, "obs");
    (*fields)["action"] = Spec(tfp::DT_INT32, {});
    out.Write("signature_fuzzer", "dict_of_specs", value.SerializeAsString());
  }
  {
    tfp::StructuredValue value;
    auto* tuple = value.mutable_tuple_value();
    auto* bounded = tuple->add_values()->mutable_bounded_tensor_spec_value();
    bounded->set_dtype(tfp::DT_INT64);
    bounded->mutable_shape()->add_dim()->set_size(2);
    auto* list = tuple->add_values()->mutable_list_value();
    *list->add_values() = Spec(tfp::DT_UINT8, {84, 84, 4});
    tfp::StructuredValue unknown_rank = Spec(tfp::DT_DOUBLE, {});
    unknown_rank.mutable_tensor_spec_value()->mutable_shape()->set_unknown_rank(true);
    *list->add_values() = unknown_rank;
    out.Write("signature_fuzzer", "tuple_list_bounded", value.SerializeAsString());
  }
  {
    tfp::StructuredValue value;
    auto* named = value.mutable_named_tuple_value();
    named->set_name("Transition");
    auto* pair = named->add_values();
    pair->set_key("reward");
    *pair->mutable_value() = Spec(tfp::DT_FLOAT, {});
    auto* other = named->add_values();
    other->set_key("it's");
    *other->mutable_value() = Spec(tfp::DT_STRING, {-1});
    out.Write("signature_fuzzer", "named_tuple", value.SerializeAsString());
  }
  {  // A leaf that is not a spec: UNIMPLEMENTED.
    tfp::StructuredValue value;
    auto* list = value.mutable_list_value();
    *list->add_values() = Spec(tfp::DT_BOOL, {1});
    list->add_values()->mutable_none_value();
    out.Write("signature_fuzzer", "with_none_leaf", value.SerializeAsString());
  }
  out.Write("signature_fuzzer", "single_spec", Spec(tfp::DT_HALF, {5, -1}).SerializeAsString());
}

struct SliceSpec {
  uint64_t chunk_key;
  int32_t offset;
  int32_t length;
  int32_t index;
};

deepmind::reverb::PrioritizedItem Item(uint64_t key, const std::string& table,
                                       const std::vector<std::vector<SliceSpec>>& columns,
                                       const std::vector<bool>& squeeze = {}) {
  deepmind::reverb::PrioritizedItem item;
  item.set_key(key);
  item.set_table(table);
  item.set_priority(1.0);
  for (size_t c = 0; c < columns.size(); ++c) {
    auto* column = item.mutable_flat_trajectory()->add_columns();
    for (const SliceSpec& s : columns[c]) {
      auto* slice = column->add_chunk_slices();
      slice->set_chunk_key(s.chunk_key);
      slice->set_offset(s.offset);
      slice->set_length(s.length);
      slice->set_index(s.index);
    }
    column->set_squeeze(c < squeeze.size() && squeeze[c]);
  }
  return item;
}

// Field 1 per request (see the fuzz target).
std::string StreamInput(const std::vector<deepmind::reverb::InsertStreamRequest>& requests) {
  std::string out;
  for (const auto& request : requests) {
    const std::string bytes = request.SerializeAsString();
    out.push_back(static_cast<char>(1 << 3 | 2));
    uint64_t n = bytes.size();
    while (n >= 0x80) {
      out.push_back(static_cast<char>(n | 0x80));
      n >>= 7;
    }
    out.push_back(static_cast<char>(n));
    out += bytes;
  }
  return out;
}

void InsertStreamSeeds(SeedWriter& out) {
  using Request = deepmind::reverb::InsertStreamRequest;
  const ChunkData mixed = Chunk(11, {Counting(tfp::DT_INT32, {3, 2}, 1), Strings({"a", "bc", ""})},
                                false, CodecPolicy::kSnappy);
  {  // One chunk, an item in "t", then one in "typed" (int32[?], string[]).
    Request first;
    *first.add_chunks() = mixed;
    *first.add_items() = Item(1, "t", {{{11, 0, 2, 0}}, {{11, 0, 2, 1}}});
    first.add_keep_chunk_keys(11);
    Request second;
    *second.add_items() = Item(2, "typed", {{{11, 1, 2, 0}}, {{11, 2, 1, 1}}}, {false, true});
    out.Write("insert_stream_fuzzer", "snappy_two_tables", StreamInput({first, second}));
  }
  {  // zstd and delta chunks; a column spanning two chunks; chunks sent first.
    Request chunks;
    *chunks.add_chunks() =
        Chunk(21, {Counting(tfp::DT_INT64, {4, 2}, 3)}, true, CodecPolicy::kZstd);
    *chunks.add_chunks() =
        Chunk(22, {Counting(tfp::DT_INT64, {2, 2}, 9)}, true, CodecPolicy::kZstd, 4);
    Request items;
    *items.add_items() = Item(3, "u", {{{21, 1, 3, 0}, {22, 0, 2, 0}}});
    *items.add_items() = Item(4, "u", {{{22, 1, 1, 0}}}, {true});
    items.add_keep_chunk_keys(22);
    Request later;
    *later.add_chunks() =
        Chunk(23, {Counting(tfp::DT_INT64, {2, 2}, 5)}, false, CodecPolicy::kSnappy);
    *later.add_items() = Item(5, "u", {{{22, 0, 1, 0}, {23, 0, 2, 0}}});
    out.Write("insert_stream_fuzzer", "zstd_delta_multi_chunk",
              StreamInput({chunks, items, later}));
  }
  {  // Regression: a column joining int64 [2] and float32 [] rows must be
     // rejected (it was stored and could not be sampled).
    Request request;
    *request.add_chunks() =
        Chunk(41, {Counting(tfp::DT_INT64, {2, 2}, 9)}, true, CodecPolicy::kZstd);
    *request.add_chunks() =
        Chunk(42, {Counting(tfp::DT_FLOAT, {2}, 5)}, false, CodecPolicy::kSnappy);
    *request.add_items() = Item(7, "u", {{{41, 0, 1, 0}, {42, 0, 2, 0}}});
    out.Write("insert_stream_fuzzer", "regression_column_of_mixed_specs", StreamInput({request}));
  }
  {  // The same key twice (the second only updates the priority).
    Request request;
    *request.add_chunks() =
        Chunk(31, {Counting(tfp::DT_UINT8, {5, 3}, 0)}, false, CodecPolicy::kZstd);
    *request.add_items() = Item(6, "t", {{{31, 0, 5, 0}}});
    *request.add_items() = Item(6, "t", {{{31, 0, 5, 0}}});
    out.Write("insert_stream_fuzzer", "zstd_repeated_key", StreamInput({request}));
  }
}

// The slice size byte, then the request (see the fuzz target).
std::string SlicedRequest(int slice_size, const deepmind::reverb::InsertStreamRequest& request) {
  return std::string(1, static_cast<char>(slice_size - 1)) + request.SerializeAsString();
}

void InsertRequestSeeds(SeedWriter& out) {
  using Request = deepmind::reverb::InsertStreamRequest;
  {  // Two plain chunks (snappy with strings, zstd delta) and an item.
    Request request;
    *request.add_chunks() =
        Chunk(11, {Counting(tfp::DT_INT32, {3, 2}, 1), Strings({"a", "bc", ""})}, false,
              CodecPolicy::kSnappy);
    *request.add_chunks() =
        Chunk(12, {Counting(tfp::DT_INT64, {4, 2}, 3)}, true, CodecPolicy::kZstd);
    *request.add_items() = Item(1, "t", {{{11, 0, 2, 0}}, {{12, 0, 2, 0}}});
    request.add_keep_chunk_keys(12);
    out.Write("insert_request_fuzzer", "plain_chunks_in_7_byte_slices", SlicedRequest(7, request));
  }
  {  // A chunk protobuf would read differently (a named dimension).
    Request request;
    ChunkData chunk = Chunk(21, {Counting(tfp::DT_FLOAT, {2, 3}, 0)}, false, CodecPolicy::kSnappy);
    chunk.mutable_data()->mutable_tensors(0)->mutable_tensor_shape()->mutable_dim(0)->set_name("t");
    *request.add_chunks() = chunk;
    out.Write("insert_request_fuzzer", "named_dimension", SlicedRequest(3, request));
  }
  {  // An invalid chunk (no tensors) beside a valid one, whole.
    Request request;
    request.add_chunks()->set_chunk_key(31);
    *request.add_chunks() =
        Chunk(32, {Counting(tfp::DT_UINT8, {5, 3}, 0)}, false, CodecPolicy::kZstd);
    out.Write("insert_request_fuzzer", "empty_chunk", SlicedRequest(256, request));
  }
}

// The slice size byte, the first message's length, then the two responses
// (see the fuzz target).
std::string SlicedResponses(int slice_size, const deepmind::reverb::SampleStreamResponse& first,
                            const deepmind::reverb::SampleStreamResponse& second = {}) {
  const std::string bytes = first.SerializeAsString();
  if (bytes.size() > 0xffff) Die(absl::InternalError("too long"), "SlicedResponses");
  std::string out(1, static_cast<char>(slice_size - 1));
  out.push_back(static_cast<char>(bytes.size() & 0xff));
  out.push_back(static_cast<char>(bytes.size() >> 8));
  return out + bytes + second.SerializeAsString();
}

void SampleStreamParserSeeds(SeedWriter& out) {
  using Response = deepmind::reverb::SampleStreamResponse;
  auto info = [](deepmind::reverb::PrioritizedItem item) {
    deepmind::reverb::SampleInfo sample_info;
    *sample_info.mutable_item() = std::move(item);
    sample_info.set_probability(0.5);
    sample_info.set_table_size(3);
    return sample_info;
  };
  {  // Two samples: a Snappy chunk with strings (parsed by protobuf), plain
     // numeric chunks (zstd delta, Snappy) read as views, a squeezed column.
    Response response;
    auto* first = response.add_entries();
    *first->mutable_info() = info(Item(1, "t", {{{11, 0, 2, 0}}, {{12, 1, 3, 0}}}));
    *first->add_data() = Chunk(11, {Counting(tfp::DT_INT32, {3, 2}, 1), Strings({"a", "bc", ""})},
                               false, CodecPolicy::kSnappy);
    *first->add_data() = Chunk(12, {Counting(tfp::DT_INT64, {4, 2}, 3)}, true, CodecPolicy::kZstd);
    first->set_end_of_sequence(true);
    auto* second = response.add_entries();
    *second->mutable_info() = info(Item(2, "t", {{{13, 0, 1, 0}}}, {true}));
    *second->add_data() =
        Chunk(13, {Counting(tfp::DT_FLOAT, {2, 3}, 5)}, false, CodecPolicy::kSnappy);
    second->set_end_of_sequence(true);
    out.Write("sample_stream_parser_fuzzer", "plain_chunks_in_7_byte_slices",
              SlicedResponses(7, response));
  }
  {  // A payload kept in the message's slices (16 KiB or more), a chunk
     // with a named dimension (parsed by protobuf), the sample spread over
     // two entries of two responses.
    Response first;
    auto* start = first.add_entries();
    *start->mutable_info() = info(Item(3, "t", {{{21, 0, 2, 0}}, {{22, 0, 2, 0}}}));
    *start->add_data() = Chunk(21, {Noise({2, 100, 100}, 7)}, false, CodecPolicy::kSnappy);
    Response second;
    auto* end = second.add_entries();
    ChunkData named = Chunk(22, {Counting(tfp::DT_FLOAT, {2, 3}, 0)}, false, CodecPolicy::kSnappy);
    named.mutable_data()->mutable_tensors(0)->mutable_tensor_shape()->mutable_dim(0)->set_name("t");
    *end->add_data() = named;
    end->set_end_of_sequence(true);
    out.Write("sample_stream_parser_fuzzer", "large_payload_and_named_dimension",
              SlicedResponses(100, first, second));
  }
}

}  // namespace
}  // namespace tf_reverb

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
    return 2;
  }
  tf_reverb::SeedWriter out(argv[1]);
  tf_reverb::ChunkSeeds(out);
  tf_reverb::CheckpointSeeds(out);
  tf_reverb::ConfigSeeds(out);
  tf_reverb::SignatureSeeds(out);
  tf_reverb::InsertStreamSeeds(out);
  tf_reverb::InsertRequestSeeds(out);
  tf_reverb::SampleStreamParserSeeds(out);
  return 0;
}
