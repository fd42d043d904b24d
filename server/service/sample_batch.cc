#include "server/service/sample_batch.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "reverb_service.pb.h"
#include "schema.pb.h"
#include "server/chunk_view.h"
#include "server/service/sample_response.h"
#include "server/tensor.h"
#include "server/trajectory_columns.h"
#include "tensor.pb.h"

namespace tf_reverb {
namespace {

using deepmind::reverb::FlatTrajectory;
using deepmind::reverb::SampleBatch;
using deepmind::reverb::SampleStreamResponse;

// Samples decoded after one Touch (what it brings in stays in the cache).
constexpr size_t kTouchWindow = 64;

bool SameSqueeze(const FlatTrajectory& a, const FlatTrajectory& b) {
  for (int c = 0; c < a.columns_size(); ++c) {
    if (a.columns(c).squeeze() != b.columns(c).squeeze()) return false;
  }
  return true;
}

// Prefetches the cache lines of `bytes`, up to four (what a small item's
// cached rows or a small chunk's wire bytes span).
void PrefetchLines(absl::string_view bytes) {
  constexpr uintptr_t kLine = 64;
  const uintptr_t first = reinterpret_cast<uintptr_t>(bytes.data()) & ~(kLine - 1);
  const uintptr_t end = reinterpret_cast<uintptr_t>(bytes.data()) + bytes.size();
  for (uintptr_t line = first; line < end && line < first + 4 * kLine; line += kLine) {
    __builtin_prefetch(reinterpret_cast<const void*>(line));
  }
}

// Reads what decoding samples [begin, end) reads of their items and chunks
// (the cached rows, else the records and chunks) before decoding, in short
// loops whose loads of different samples are independent: the CPU overlaps
// their cache misses, where decoding the samples one after another waits
// for each miss in turn (a table's items are spread over memory: these
// misses are most of the cost of sampling small items).
void Touch(const std::vector<SampledItem>& samples, size_t begin, size_t end) {
  uintptr_t sink = 0;
  for (size_t i = begin; i < end; ++i) {
    const TableItem& item = *samples[i].data;
    absl::string_view rows = item.rows.Peek();
    PrefetchLines(rows.empty() ? item.item.wire() : rows);
    sink += rows.size();
  }
  for (size_t i = begin; i < end; ++i) {
    const TableItem& item = *samples[i].data;
    if (!item.rows.Peek().empty()) continue;
    for (const auto& chunk : item.chunks) {
      sink += chunk->wire().size();
      PrefetchLines(chunk->wire());
    }
  }
  asm volatile("" : : "r"(sink));  // keeps the loads
}

// The layout of an item's columns in its cached rows: the number of
// columns, then per column its dtype, squeeze, rank and dims, as varints.
// Self-delimiting, so two items whose layouts start alike have the same
// layout: the items stack.
std::string RowsLayout(const std::vector<ColumnSpec>& specs, const FlatTrajectory& trajectory) {
  std::string layout;
  {
    google::protobuf::io::StringOutputStream stream(&layout);
    google::protobuf::io::CodedOutputStream out(&stream);
    out.WriteVarint64(specs.size());
    for (size_t c = 0; c < specs.size(); ++c) {
      out.WriteVarint64(static_cast<uint64_t>(specs[c].dtype));
      out.WriteVarint64(trajectory.columns(static_cast<int>(c)).squeeze() ? 1 : 0);
      out.WriteVarint64(specs[c].shape.size());
      for (int64_t dim : specs[c].shape) out.WriteVarint64(static_cast<uint64_t>(dim));
    }
  }  // the stream trims `layout` to what was written
  return layout;
}

// Bytes of one sample of `specs`; nullopt when a column is not numeric
// (such samples are neither batched nor cached).
std::optional<int64_t> NumericSampleBytes(const std::vector<ColumnSpec>& specs) {
  int64_t bytes = 0;
  for (const ColumnSpec& spec : specs) {
    if (spec.dtype == tf::DT_STRING || !DataTypeSize(spec.dtype).ok()) return std::nullopt;
    bytes += ColumnBytes(spec);
  }
  return bytes;
}

// What an item's ItemRowsCache keeps: RowsLayout, then every column's bytes
// in column order; nullopt (not cached) for items with a non-numeric column
// or more than kMaxCachedRowBytes of column bytes.
absl::StatusOr<std::optional<std::string>> DecodeRows(const TableItem& item) {
  FlatTrajectory trajectory;
  if (absl::Status s = item.item.Trajectory(&trajectory); !s.ok()) return s;
  ChunkViews views;
  if (absl::Status s = views.Reset(item.chunks); !s.ok()) return s;
  auto find = [&views](uint64_t key) { return views.Find(key); };
  absl::StatusOr<std::vector<ColumnSpec>> specs = TrajectoryColumnSpecs(trajectory, find);
  if (!specs.ok()) return specs.status();
  const std::optional<int64_t> bytes = NumericSampleBytes(*specs);
  if (!bytes.has_value() || *bytes > kMaxCachedRowBytes) return std::nullopt;
  std::string rows = RowsLayout(*specs, trajectory);
  size_t at = rows.size();
  rows.resize(at + static_cast<size_t>(*bytes));
  for (size_t c = 0; c < specs->size(); ++c) {
    if (absl::Status s =
            UnpackTrajectoryColumnInto(trajectory, static_cast<int>(c), find, &rows[at]);
        !s.ok()) {
      return s;
    }
    at += static_cast<size_t>(ColumnBytes((*specs)[c]));
  }
  return rows;
}

// Samples [begin, end) as one response; none when a sample does not stack
// with the others: its columns are not `specs` (dtype, shape, squeeze), or it
// has a policy version and `versions` is false, or the other way round.
// `sample_bytes` is NumericSampleBytes(specs).
absl::StatusOr<std::optional<grpc::ByteBuffer>> EncodeGroup(const std::vector<SampledItem>& samples,
                                                            size_t begin, size_t end,
                                                            const std::vector<ColumnSpec>& specs,
                                                            int64_t sample_bytes, bool versions) {
  auto response = std::make_shared<SampleStreamResponse>();
  SampleBatch* batch = response->mutable_batch();
  const int n = static_cast<int>(end - begin);
  batch->mutable_keys()->Reserve(n);
  batch->mutable_priorities()->Reserve(n);
  batch->mutable_times_sampled()->Reserve(n);
  batch->mutable_probabilities()->Reserve(n);
  batch->mutable_table_sizes()->Reserve(n);
  batch->mutable_rate_limited()->Reserve(n);
  for (size_t i = begin; i < end; ++i) {
    const SampledItem& sample = samples[i];
    batch->add_keys(sample.data->item.key());
    batch->add_priorities(sample.priority);
    batch->add_times_sampled(sample.times_sampled);
    batch->add_probabilities(sample.probability);
    batch->add_table_sizes(sample.table_size);
    batch->add_rate_limited(sample.rate_limited);
    if (versions) batch->add_policy_versions(sample.data->item.policy_version());
  }
  FlatTrajectory first;
  if (absl::Status s = samples[begin].data->item.Trajectory(&first); !s.ok()) return s;
  std::vector<char*> columns(specs.size());
  std::vector<int64_t> row_bytes(specs.size());
  for (size_t c = 0; c < specs.size(); ++c) {
    batch->add_squeeze(first.columns(static_cast<int>(c)).squeeze());
    tf::TensorProto* column = batch->add_columns();
    column->set_dtype(static_cast<tf::DataType>(specs[c].dtype));
    column->mutable_tensor_shape()->add_dim()->set_size(n);
    for (int64_t dim : specs[c].shape) column->mutable_tensor_shape()->add_dim()->set_size(dim);
    row_bytes[c] = ColumnBytes(specs[c]);
    column->mutable_tensor_content()->resize(static_cast<size_t>(row_bytes[c] * n));
    columns[c] = column->mutable_tensor_content()->data();
  }
  const std::string layout = RowsLayout(specs, first);
  ChunkViews views;
  FlatTrajectory trajectory;
  for (size_t window = begin; window < end; window += kTouchWindow) {
    const size_t window_end = std::min(end, window + kTouchWindow);
    Touch(samples, window, window_end);
    for (size_t i = window; i < window_end; ++i) {
      const TableItem& item = *samples[i].data;
      if (sample_bytes <= kMaxCachedRowBytes) {
        // Small items: decoded once (DecodeRows), copied from then on.
        absl::StatusOr<absl::string_view> rows =
            item.rows.Get([&item] { return DecodeRows(item); });
        if (!rows.ok()) return rows.status();
        if (!rows->empty()) {
          if (item.item.has_policy_version() != versions ||
              rows->size() != layout.size() + static_cast<size_t>(sample_bytes) ||
              !absl::StartsWith(*rows, layout)) {
            return std::nullopt;
          }
          const char* src = rows->data() + layout.size();
          for (size_t c = 0; c < specs.size(); ++c) {
            std::memcpy(columns[c] + row_bytes[c] * static_cast<int64_t>(i - begin), src,
                        static_cast<size_t>(row_bytes[c]));
            src += row_bytes[c];
          }
          continue;
        }
      }
      if (absl::Status s = item.item.Trajectory(&trajectory); !s.ok()) return s;
      if (item.item.has_policy_version() != versions ||
          trajectory.columns_size() != static_cast<int>(specs.size()) ||
          !SameSqueeze(trajectory, first)) {
        return std::nullopt;
      }
      if (absl::Status s = views.Reset(item.chunks); !s.ok()) return s;
      for (size_t c = 0; c < specs.size(); ++c) {
        absl::StatusOr<bool> same = UnpackTrajectoryColumnIfSpec(
            trajectory, static_cast<int>(c), [&views](uint64_t key) { return views.Find(key); },
            specs[c], columns[c] + row_bytes[c] * static_cast<int64_t>(i - begin));
        if (!same.ok()) return same.status();
        if (!*same) return std::nullopt;
      }
    }
  }
  absl::StatusOr<grpc::ByteBuffer> buffer = SerializeAliasingLargeFields(*response, response);
  if (!buffer.ok()) {
    return absl::InternalError(
        absl::StrCat("Serializing a SampleBatch failed: ", buffer.status().message()));
  }
  return buffer;
}

}  // namespace

absl::StatusOr<std::vector<grpc::ByteBuffer>> EncodeSampleBatches(
    const std::vector<SampledItem>& samples) {
  std::vector<grpc::ByteBuffer> out;
  if (samples.empty()) return out;
  const TableItem& first = *samples.front().data;
  ChunkViews views;
  if (absl::Status s = views.Reset(first.chunks); !s.ok()) return s;
  FlatTrajectory trajectory;
  if (absl::Status s = first.item.Trajectory(&trajectory); !s.ok()) return s;
  absl::StatusOr<std::vector<ColumnSpec>> specs =
      TrajectoryColumnSpecs(trajectory, [&views](uint64_t key) { return views.Find(key); });
  if (!specs.ok()) return specs.status();
  const std::optional<int64_t> numeric_bytes = NumericSampleBytes(*specs);
  if (!numeric_bytes.has_value()) return out;
  const int64_t sample_bytes = *numeric_bytes;
  if (sample_bytes > kMaxBatchedSampleBytes) {
    int64_t stored = 0;
    for (const auto& chunk : first.chunks) stored += chunk->stored_bytes();
    // Never more than one response's worth per sample: entries split those.
    if (sample_bytes > kMaxSampleResponseBytes ||
        stored * 100 < kMinChunkToSamplePercent * sample_bytes) {
      return out;
    }
  }
  const bool versions = first.item.has_policy_version();
  const size_t per_response = static_cast<size_t>(
      std::max<int64_t>(1, kMaxSampleResponseBytes / std::max<int64_t>(1, sample_bytes)));
  for (size_t begin = 0; begin < samples.size(); begin += per_response) {
    absl::StatusOr<std::optional<grpc::ByteBuffer>> response =
        EncodeGroup(samples, begin, std::min(samples.size(), begin + per_response), *specs,
                    sample_bytes, versions);
    if (!response.ok()) return response.status();
    if (!response->has_value()) return std::vector<grpc::ByteBuffer>();
    out.push_back(**std::move(response));
  }
  return out;
}

}  // namespace tf_reverb
