#include "server/client/in_process_sampler_worker.h"

#include <utility>

namespace tf_reverb {

absl::Status InProcessSamplerWorker::StreamSamples(int64_t num_samples, absl::Duration timeout,
                                                   const Deliver& deliver, const ClaimMore&) {
  if (cancelled_.load()) return absl::CancelledError("The sampler was closed.");
  if (table_ == nullptr) return absl::CancelledError(kTableClosedMessage);
  items_.clear();
  absl::Status status =
      table_->SampleBatch(num_samples, timeout, &items_, [this] { return cancelled_.load(); });
  std::vector<Sample> samples;
  samples.reserve(items_.size());
  for (const SampledItem& item : items_) samples.push_back(Sample::FromSampledItem(item));
  if (!samples.empty()) deliver(std::move(samples));
  items_.clear();
  if (absl::IsCancelled(status) && !cancelled_.load()) table_.reset();  // the server stopped
  return status;
}

bool InProcessSamplerWorker::ShouldRetry(const absl::Status& status) const {
  return table_ != nullptr && SamplerWorker::ShouldRetry(status);
}

}  // namespace tf_reverb
