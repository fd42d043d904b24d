#include "server/writer/chunker.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "schema.pb.h"
#include "server/chunk_codec.h"
#include "server/tensor.h"
#include "tensor.pb.h"

namespace tf_reverb {

absl::Status ChunkerOptions::Validate() const {
  if (num_keep_alive_refs < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_keep_alive_refs must be >= 1, got ", num_keep_alive_refs, "."));
  }
  if (max_chunk_length < 0 || max_chunk_length > num_keep_alive_refs) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_chunk_length must be in [1, num_keep_alive_refs=", num_keep_alive_refs,
                     "] (or auto-tuned), got ", max_chunk_length, "."));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<Chunker>> Chunker::Create(int column, ChunkerOptions options) {
  if (absl::Status s = options.Validate(); !s.ok()) return s;
  return std::shared_ptr<Chunker>(new Chunker(column, options));
}

Chunker::Chunker(int column, ChunkerOptions options)
    : column_(column), options_(options), chunk_key_(NewRandomKey()) {}

absl::Status Chunker::CheckSpec(const Tensor& value) const {
  absl::ReaderMutexLock lock(&mu_);
  return CheckSpecLocked(value);
}

absl::Status Chunker::CheckSpecLocked(const Tensor& value) const {
  if (absl::Status s = ValidateTensor(value); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("Invalid tensor for column ", column_, ": ", s.message()));
  }
  if (!spec_.has_value()) return absl::OkStatus();
  if (value.dtype != spec_->dtype) {
    return absl::InvalidArgumentError(
        absl::StrCat("Tensor of wrong dtype provided for column ", column_, ". Got ",
                     DataTypeName(value.dtype), " but expected ", DataTypeName(spec_->dtype), "."));
  }
  if (value.shape != spec_->shape) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Tensor of incompatible shape provided for column ", column_, ". Got ",
        ShapeString(value.shape), " which is incompatible with ", ShapeString(spec_->shape), "."));
  }
  return absl::OkStatus();
}

int Chunker::ChunkLengthLocked() const {
  if (options_.max_chunk_length > 0) return options_.max_chunk_length;
  int64_t row_bytes = 1;
  if (spec_.has_value()) {
    int64_t elements = 1;
    for (int64_t d : spec_->shape) elements *= d;
    absl::StatusOr<int64_t> size = DataTypeSize(spec_->dtype);
    row_bytes = std::max<int64_t>(1, elements * (size.ok() ? *size : 16));
  }
  const int64_t rows = std::max<int64_t>(1, kAutoChunkTargetBytes / row_bytes);
  return static_cast<int>(std::min<int64_t>(rows, options_.num_keep_alive_refs));
}

int Chunker::chunk_length() const {
  absl::ReaderMutexLock lock(&mu_);
  return ChunkLengthLocked();
}

absl::StatusOr<std::weak_ptr<CellRef>> Chunker::Append(Tensor value, uint64_t episode_id,
                                                       int32_t episode_step) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = CheckSpecLocked(value); !s.ok()) return s;
  if (last_step_.has_value() && last_step_->first == episode_id &&
      episode_step <= last_step_->second) {
    return absl::FailedPreconditionError(
        absl::StrCat("Column ", column_, " already has a value for step ", last_step_->second,
                     " of this episode; steps must strictly increase (got ", episode_step, ")."));
  }
  if (!spec_.has_value()) spec_ = CellSpec{value.dtype, value.shape};
  // A chunk never spans two episodes.
  if (!buffer_.empty() && buffer_episode_id_ != episode_id) {
    if (absl::Status s = FinalizeLocked(); !s.ok()) return s;
  }
  if (buffer_.empty()) {
    buffer_episode_id_ = episode_id;
    buffer_first_step_ = episode_step;
    buffer_sparse_ = false;
  } else if (episode_step != buffer_last_step_ + 1) {
    buffer_sparse_ = true;
  }
  buffer_last_step_ = episode_step;
  last_step_ = {episode_id, episode_step};

  auto ref =
      std::make_shared<CellRef>(weak_from_this(), chunk_key_, static_cast<int32_t>(buffer_.size()),
                                episode_id, episode_step, *spec_);
  buffer_.push_back(std::move(value));
  buffer_refs_.push_back(ref);
  keep_alive_.push_back(ref);
  while (static_cast<int>(keep_alive_.size()) > options_.num_keep_alive_refs) {
    keep_alive_.pop_front();
  }
  std::weak_ptr<CellRef> weak = ref;
  if (static_cast<int>(buffer_.size()) >= ChunkLengthLocked()) {
    if (absl::Status s = FinalizeLocked(); !s.ok()) return s;
  }
  return weak;
}

absl::Status Chunker::FinalizeLocked() {
  if (buffer_.empty()) return absl::OkStatus();
  auto rows = std::make_shared<const std::vector<Tensor>>(std::move(buffer_));
  int64_t raw_bytes = 0;
  for (const Tensor& row : *rows) raw_bytes += static_cast<int64_t>(row.data.size());
  // Stacks (one allocation), compresses and hands the chunk to the cells; may
  // run on another thread (SetEncodeExecutor), so it captures what it needs.
  auto encode = std::make_shared<EncodeJob>(
      [rows, refs = std::move(buffer_refs_), key = chunk_key_, episode_id = buffer_episode_id_,
       first = buffer_first_step_, last = buffer_last_step_, sparse = buffer_sparse_, raw_bytes,
       delta_encode = options_.delta_encode, codec = options_.codec,
       zstd_level = options_.zstd_level]()
          -> absl::StatusOr<std::shared_ptr<const deepmind::reverb::ChunkData>> {
        absl::StatusOr<Tensor> stacked;
        if (rows->front().dtype == ::tf_reverb::tf::DT_STRING) {
          std::vector<const Tensor*> parts;
          parts.reserve(rows->size());
          for (const Tensor& t : *rows) parts.push_back(&t);
          stacked = StackTensors(parts);
        } else {
          Tensor out;
          out.dtype = rows->front().dtype;
          out.shape.push_back(static_cast<int64_t>(rows->size()));
          out.shape.insert(out.shape.end(), rows->front().shape.begin(), rows->front().shape.end());
          out.data.reserve(raw_bytes);
          for (const Tensor& t : *rows) out.data.append(t.data);
          stacked = std::move(out);
        }
        if (!stacked.ok()) return stacked.status();
        absl::StatusOr<deepmind::reverb::ChunkData> chunk = BuildChunk(
            key, {*std::move(stacked)}, episode_id, first, last, delta_encode, codec, zstd_level);
        if (!chunk.ok()) return chunk.status();
        chunk->mutable_sequence_range()->set_sparse(sparse);
        auto shared = std::make_shared<const deepmind::reverb::ChunkData>(*std::move(chunk));
        for (const std::weak_ptr<CellRef>& weak : refs) {
          if (std::shared_ptr<CellRef> ref = weak.lock()) ref->SetChunk(shared);
        }
        return shared;
      });
  buffer_.clear();
  buffer_refs_.clear();
  const uint64_t key = chunk_key_;
  chunk_key_ = NewRandomKey();
  if (executor_ != nullptr) {
    // Elsewhere: the rows stay readable (BufferedRow) until encoded.
    EncodeJob job = [self = weak_from_this(), key, encode]() {
      auto chunk = (*encode)();
      if (std::shared_ptr<Chunker> chunker = self.lock()) {
        absl::MutexLock lock(&chunker->mu_);
        chunker->encoding_.erase(key);
      }
      return chunk;
    };
    if (executor_(raw_bytes, &job)) {
      encoding_.emplace(key, std::move(rows));
      return absl::OkStatus();
    }
  }
  return (*encode)().status();
}

void Chunker::SetEncodeExecutor(EncodeExecutor executor) {
  absl::MutexLock lock(&mu_);
  executor_ = std::move(executor);
}

absl::Status Chunker::Flush() {
  absl::MutexLock lock(&mu_);
  return FinalizeLocked();
}

absl::Status Chunker::FlushIfOpen(uint64_t chunk_key) {
  absl::MutexLock lock(&mu_);
  if (chunk_key != chunk_key_) return absl::OkStatus();
  return FinalizeLocked();
}

void Chunker::Reset() {
  absl::MutexLock lock(&mu_);
  buffer_.clear();
  buffer_refs_.clear();
  keep_alive_.clear();
  last_step_.reset();
  chunk_key_ = NewRandomKey();
}

absl::Status Chunker::ApplyConfig(ChunkerOptions options) {
  if (absl::Status s = options.Validate(); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  if (!buffer_.empty()) {
    return absl::FailedPreconditionError("Flush must be called before ApplyConfig.");
  }
  options_ = options;
  while (static_cast<int>(keep_alive_.size()) > options_.num_keep_alive_refs) {
    keep_alive_.pop_front();
  }
  return absl::OkStatus();
}

void Chunker::SetCodec(CodecPolicy codec) {
  absl::MutexLock lock(&mu_);
  options_.codec = codec;
}

std::vector<uint64_t> Chunker::KeepAliveChunkKeys() const {
  absl::ReaderMutexLock lock(&mu_);
  std::vector<uint64_t> keys;
  for (const auto& ref : keep_alive_) {
    if (keys.empty() || keys.back() != ref->chunk_key()) keys.push_back(ref->chunk_key());
  }
  return keys;
}

absl::StatusOr<Tensor> Chunker::BufferedRow(uint64_t chunk_key, int32_t offset) const {
  absl::ReaderMutexLock lock(&mu_);
  if (chunk_key != chunk_key_) {
    // A finalized chunk still being encoded elsewhere.
    auto it = encoding_.find(chunk_key);
    if (it == encoding_.end() || offset < 0 || offset >= static_cast<int32_t>(it->second->size())) {
      return absl::NotFoundError("The cell is not in the open chunk.");
    }
    return (*it->second)[offset];
  }
  if (offset < 0 || offset >= static_cast<int32_t>(buffer_.size())) {
    return absl::NotFoundError("The cell is not in the open chunk.");
  }
  return buffer_[offset];
}

ChunkerOptions Chunker::options() const {
  absl::ReaderMutexLock lock(&mu_);
  return options_;
}

std::optional<CellSpec> Chunker::spec() const {
  absl::ReaderMutexLock lock(&mu_);
  return spec_;
}

int Chunker::num_buffered() const {
  absl::ReaderMutexLock lock(&mu_);
  return static_cast<int>(buffer_.size());
}

}  // namespace tf_reverb
