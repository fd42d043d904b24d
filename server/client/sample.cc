#include "server/client/sample.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/chunk_view.h"
#include "server/table_chunk.h"
#include "tensor.pb.h"

namespace tf_reverb {

void SampleBlock::CopyRows(int column, int64_t first, int64_t rows, char* dst) const {
  const int64_t row_bytes = ColumnBytes(specs[column]);
  size_t skip = static_cast<size_t>(first * row_bytes);
  size_t left = static_cast<size_t>(rows * row_bytes);
  for (const absl::string_view piece : columns[column]) {
    if (left == 0) break;
    if (skip >= piece.size()) {
      skip -= piece.size();
      continue;
    }
    const size_t n = std::min(left, piece.size() - skip);
    std::memcpy(dst, piece.data() + skip, n);
    dst += n;
    left -= n;
    skip = 0;
  }
}

SampleMeta SampleMeta::Of(const deepmind::reverb::SampleInfo& info) {
  const deepmind::reverb::PrioritizedItem& item = info.item();
  return SampleMeta{
      item.key(),         item.priority(),   item.times_sampled(), item.policy_version(),
      info.probability(), info.table_size(), info.rate_limited()};
}

Sample::Sample(deepmind::reverb::SampleInfo info,
               std::vector<std::shared_ptr<const ChunkData>> chunks) {
  std::vector<SampleChunk> received;
  received.reserve(chunks.size());
  for (auto& chunk : chunks) {
    received.push_back(SampleChunk{std::move(chunk), nullptr, {}, std::nullopt, nullptr});
  }
  *this = OfChunks(std::move(info), std::move(received));
}

Sample Sample::FromChunks(deepmind::reverb::SampleInfo info, std::vector<SampleChunk> chunks) {
  return OfChunks(std::move(info), std::move(chunks));
}

Sample Sample::FromSampledItem(const SampledItem& sampled) {
  std::vector<SampleChunk> chunks;
  chunks.reserve(sampled.data->chunks.size());
  for (const auto& chunk : sampled.data->chunks) {
    chunks.push_back(SampleChunk{nullptr, chunk, {}, std::nullopt, nullptr});
  }
  return OfChunks(SampleInfoOf(sampled), std::move(chunks));
}

Sample Sample::OfChunks(deepmind::reverb::SampleInfo info, std::vector<SampleChunk> chunks) {
  auto chunked = std::make_shared<Chunked>();
  chunked->info = std::move(info);
  chunked->chunks = std::move(chunks);
  chunked->views.Reserve(chunked->chunks.size());
  for (SampleChunk& chunk : chunked->chunks) {
    if (chunk.view.has_value()) {
      chunked->views.Add(*std::move(chunk.view));
      chunk.view.reset();
      continue;
    }
    if (chunk.data != nullptr) {
      chunked->views.Add(ChunkViewOf(*chunk.data, &chunk.payloads));
      continue;
    }
    if (chunk.stored == nullptr) {
      chunked->views_status = absl::InvalidArgumentError(
          "A sample chunk has neither a proto, a view nor a stored chunk (a viewed chunk of "
          "another sample's chunks()?).");
      break;
    }
    absl::StatusOr<ChunkView> view = chunk.stored->View();
    if (!view.ok()) {
      chunked->views_status = view.status();
      break;
    }
    chunked->views.Add(*std::move(view));
  }
  Sample sample;
  sample.meta_ = SampleMeta::Of(chunked->info);
  sample.chunked_ = std::move(chunked);
  return sample;
}

Sample Sample::FromBlock(const SampleMeta& meta, std::shared_ptr<const SampleBlock> block,
                         int64_t row) {
  Sample sample;
  sample.meta_ = meta;
  sample.block_ = std::move(block);
  sample.row_ = row;
  return sample;
}

const deepmind::reverb::SampleInfo& Sample::info() const {
  if (chunked_ == nullptr) return deepmind::reverb::SampleInfo::default_instance();
  return chunked_->info;
}

const std::vector<SampleChunk>& Sample::chunks() const {
  static const std::vector<SampleChunk>* const kNone = new std::vector<SampleChunk>();
  if (chunked_ == nullptr) return *kNone;
  return chunked_->chunks;
}

int Sample::num_columns() const {
  if (block_ != nullptr) return static_cast<int>(block_->specs.size());
  return trajectory().columns_size();
}

bool Sample::squeezed(int column) const {
  if (block_ != nullptr) return block_->squeeze[column];
  return trajectory().columns(column).squeeze();
}

absl::StatusOr<const ChunkView*> Sample::Chunk(uint64_t key) const {
  if (chunked_ == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("The sample has no chunk ", key, "."));
  }
  if (!chunked_->views_status.ok()) return chunked_->views_status;
  return chunked_->views.Find(key);
}

absl::StatusOr<std::vector<ColumnSpec>> Sample::ColumnSpecs() const {
  if (block_ != nullptr) return block_->specs;
  return TrajectoryColumnSpecs(trajectory(), [this](uint64_t key) { return Chunk(key); });
}

absl::Status Sample::UnpackColumnInto(int column, char* dst) const {
  if (block_ != nullptr) {
    block_->CopyRows(column, row_, 1, dst);
    return absl::OkStatus();
  }
  return UnpackTrajectoryColumnInto(
      trajectory(), column, [this](uint64_t key) { return Chunk(key); }, dst);
}

absl::StatusOr<Tensor> Sample::UnpackColumn(int column) const {
  absl::StatusOr<std::vector<ColumnSpec>> specs = ColumnSpecs();
  if (!specs.ok()) return specs.status();
  Tensor out;
  out.dtype = (*specs)[column].dtype;
  out.shape = (*specs)[column].shape;
  if (out.dtype != ::tf_reverb::tf::DT_STRING) {
    absl::StatusOr<int64_t> elem = DataTypeSize(out.dtype);
    if (!elem.ok()) return elem.status();
    out.data.resize(out.num_elements() * *elem);
    if (absl::Status s = UnpackColumnInto(column, out.data.data()); !s.ok()) return s;
    return out;
  }
  // Blocks hold numeric columns only (sample_stream_parser.h).
  if (absl::Status s = UnpackTrajectoryStrings(
          trajectory(), column, [this](uint64_t key) { return Chunk(key); }, &out.strings);
      !s.ok()) {
    return s;
  }
  return out;
}

}  // namespace tf_reverb
