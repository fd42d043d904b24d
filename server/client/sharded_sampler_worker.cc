#include "server/client/sharded_sampler_worker.h"

#include <cmath>
#include <cstddef>
#include <utility>

#include "absl/random/discrete_distribution.h"
#include "absl/time/clock.h"

namespace tf_reverb {

ShardWeights::ShardWeights(size_t num_shards) : shards_(num_shards) {}

void ShardWeights::SetFromInfo(size_t shard, const deepmind::reverb::TableInfo& info) {
  absl::MutexLock lock(&mu_);
  Shard& s = shards_[shard];
  s.down = false;
  s.size = info.current_size();
  if (info.sampler_options().has_prioritized()) {
    s.exponent = info.sampler_options().prioritized().priority_exponent();
  } else {
    s.exponent.reset();
  }
  s.uniform = info.sampler_options().uniform();
  s.reports_weight = info.has_sampler_total_weight();
  // A server that does not report its total weight (dm-reverb): its size,
  // until its samples tell the weight.
  s.weight =
      info.has_sampler_total_weight() ? info.sampler_total_weight() : static_cast<double>(s.size);
}

double ShardWeights::UpdateFromSample(size_t shard, const SampleMeta& meta) {
  absl::MutexLock lock(&mu_);
  Shard& s = shards_[shard];
  s.down = false;
  s.size = meta.table_size;
  const double probability = meta.probability;
  if (!s.exponent.has_value()) {
    // The items that can be sampled: for a uniform sampler 1 / probability
    // (table_size also counts items too stale to sample); others keep the
    // weight their server reports, or (dm-reverb) the size.
    if (s.uniform && probability > 0) {
      s.weight = 1.0 / probability;
    } else if (!s.reports_weight) {
      s.weight = static_cast<double>(s.size);
    }
  } else if (probability > 0) {
    const double weight = std::pow(meta.priority, *s.exponent) / probability;
    if (std::isfinite(weight)) s.weight = weight;
  }
  return ShareLocked(shard);
}

void ShardWeights::MarkDown(size_t shard) {
  absl::MutexLock lock(&mu_);
  shards_[shard].down = true;
}

bool ShardWeights::StartRefresh() {
  absl::MutexLock lock(&mu_);
  if (refreshing_) {
    // Another worker refreshes; before the first refresh there are no
    // weights to split by yet.
    mu_.Await(absl::Condition(&known_));
    return false;
  }
  if (absl::Now() - refreshed_ <= kShardWeightsMaxAge) return false;
  refreshing_ = true;
  return true;
}

void ShardWeights::Refreshed() {
  absl::MutexLock lock(&mu_);
  refreshed_ = absl::Now();
  refreshing_ = false;
  known_ = true;
}

double ShardWeights::ShareLocked(size_t shard) const {
  double weights = 0;
  double sizes = 0;
  size_t up = 0;
  for (const Shard& s : shards_) {
    if (s.down) continue;
    ++up;
    weights += s.weight;
    sizes += static_cast<double>(s.size);
  }
  if (up == 0) return 1.0 / static_cast<double>(shards_.size());  // try them all
  const Shard& s = shards_[shard];
  if (s.down) return 0;
  if (weights > 0) return s.weight / weights;
  if (sizes > 0) return static_cast<double>(s.size) / sizes;
  return 1.0 / static_cast<double>(up);
}

std::vector<int64_t> ShardWeights::Split(int64_t n) {
  absl::MutexLock lock(&mu_);
  std::vector<double> shares(shards_.size());
  for (size_t i = 0; i < shards_.size(); ++i) shares[i] = ShareLocked(i);
  std::vector<int64_t> counts(shards_.size(), 0);
  absl::discrete_distribution<size_t> pick(shares.begin(), shares.end());
  for (int64_t i = 0; i < n; ++i) ++counts[pick(gen_)];
  return counts;
}

int64_t ShardWeights::TotalSize() const {
  absl::MutexLock lock(&mu_);
  int64_t total = 0;
  for (const Shard& s : shards_) {
    if (!s.down) total += s.size;
  }
  return total;
}

ShardedSamplerWorker::ShardedSamplerWorker(std::vector<std::unique_ptr<SamplerWorker>> shards,
                                           std::shared_ptr<ShardWeights> weights, Refresh refresh)
    : shards_(std::move(shards)), weights_(std::move(weights)), refresh_(std::move(refresh)) {}

absl::Status ShardedSamplerWorker::StreamSamples(int64_t num_samples, absl::Duration timeout,
                                                 const Deliver& deliver,
                                                 const ClaimMore& claim_more) {
  if (weights_->StartRefresh()) {
    refresh_(*weights_);
    weights_->Refreshed();
  }
  const std::vector<int64_t> counts = weights_->Split(num_samples);
  int64_t delivered = 0;
  absl::Status first_error;
  for (size_t shard = 0; shard < shards_.size(); ++shard) {
    if (counts[shard] == 0) continue;
    absl::Status status = shards_[shard]->StreamSamples(
        counts[shard], timeout,
        [&](std::vector<Sample> samples) {
          for (Sample& sample : samples) {
            const double share = weights_->UpdateFromSample(shard, sample.meta());
            SampleMeta* meta = sample.mutable_meta();
            meta->probability *= share;
            meta->table_size = weights_->TotalSize();
          }
          delivered += static_cast<int64_t>(samples.size());
          deliver(std::move(samples));
        },
        // The split was drawn for this request: no growing it.
        /*claim_more=*/[](int64_t) { return int64_t{0}; });
    if (!status.ok()) {
      if (shards_[shard]->ShouldRetry(status)) weights_->MarkDown(shard);
      if (first_error.ok()) first_error = status;
    }
  }
  return delivered > 0 ? absl::OkStatus() : first_error;
}

void ShardedSamplerWorker::Cancel() {
  for (const auto& shard : shards_) shard->Cancel();
}

}  // namespace tf_reverb
