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
               std::vector<std::shared_ptr<const ChunkData>> chunks)
    : meta_(SampleMeta::Of(info)), info_(std::move(info)) {
  chunks_.reserve(chunks.size());
  for (auto& chunk : chunks) chunks_.push_back(SampleChunk{std::move(chunk), nullptr, {}, nullptr});
  ViewChunks();
}

Sample Sample::FromChunks(deepmind::reverb::SampleInfo info, std::vector<SampleChunk> chunks) {
  Sample sample;
  sample.meta_ = SampleMeta::Of(info);
  sample.info_ = std::move(info);
  sample.chunks_ = std::move(chunks);
  sample.ViewChunks();
  return sample;
}

Sample Sample::FromSampledItem(const SampledItem& sampled) {
  Sample sample;
  sample.info_ = SampleInfoOf(sampled);
  sample.meta_ = SampleMeta::Of(sample.info_);
  sample.chunks_.reserve(sampled.data->chunks.size());
  for (const auto& chunk : sampled.data->chunks) {
    sample.chunks_.push_back(SampleChunk{nullptr, chunk, {}, nullptr});
  }
  sample.ViewChunks();
  return sample;
}

void Sample::ViewChunks() {
  for (const SampleChunk& chunk : chunks_) {
    if (chunk.data != nullptr) {
      views_.Add(ChunkViewOf(*chunk.data, &chunk.payloads));
      continue;
    }
    absl::StatusOr<ChunkView> view = chunk.stored->View();
    if (!view.ok()) {
      views_status_ = view.status();
      return;
    }
    views_.Add(*std::move(view));
  }
}

Sample Sample::FromBlock(const SampleMeta& meta, std::shared_ptr<const SampleBlock> block,
                         int64_t row) {
  Sample sample;
  sample.meta_ = meta;
  sample.block_ = std::move(block);
  sample.row_ = row;
  return sample;
}

int Sample::num_columns() const {
  if (block_ != nullptr) return static_cast<int>(block_->specs.size());
  return info_.item().flat_trajectory().columns_size();
}

bool Sample::squeezed(int column) const {
  if (block_ != nullptr) return block_->squeeze[column];
  return info_.item().flat_trajectory().columns(column).squeeze();
}

absl::StatusOr<const ChunkView*> Sample::Chunk(uint64_t key) const {
  if (!views_status_.ok()) return views_status_;
  return views_.Find(key);
}

absl::StatusOr<std::vector<ColumnSpec>> Sample::ColumnSpecs() const {
  if (block_ != nullptr) return block_->specs;
  return TrajectoryColumnSpecs(info_.item().flat_trajectory(),
                               [this](uint64_t key) { return Chunk(key); });
}

absl::Status Sample::UnpackColumnInto(int column, char* dst) const {
  if (block_ != nullptr) {
    block_->CopyRows(column, row_, 1, dst);
    return absl::OkStatus();
  }
  return UnpackTrajectoryColumnInto(
      info_.item().flat_trajectory(), column, [this](uint64_t key) { return Chunk(key); }, dst);
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
          info_.item().flat_trajectory(), column, [this](uint64_t key) { return Chunk(key); },
          &out.strings);
      !s.ok()) {
    return s;
  }
  return out;
}

}  // namespace tf_reverb
