// ShardedSamplerWorker: samples a table that is sharded over several
// servers as one table would be sampled (docs/concepts/sharding.md).
//
// Each request of n samples is split over the shards at random in
// proportion to each shard's share of the whole table's sampling weight
// (ShardWeights: a prioritized sampler's sum of priority^exponent, else
// its item count), then each part is sampled from that shard's own stream.
// Every sample's SampleMeta (sample.h) is rewritten to the whole table:
// probability = (probability within its shard) * (its shard's share),
// table_size = the sum of the shards' sizes. So a prioritized learner's
// importance weights are right, whatever the shards hold. (Sample::info(),
// where there is one, keeps the values as its shard sent them.)
//
// Freshness: a shard's weight is updated from every sample it returns
// (weight = priority^exponent / probability, or the table size) and from
// ServerInfo (TableInfo.sampler_total_weight) of every shard when the
// weights are older than kShardWeightsMaxAge; a change on a shard that is
// not being sampled is seen within that time. A shard that fails is left
// out (weight 0) until the next refresh finds it again.
//
// Contract:
//  * Thread-safety: a worker runs on one sampler thread; Cancel from any
//    thread. The ShardWeights are shared by the sampler's workers and are
//    thread-safe.
//  * Ownership: owns one SamplerWorker per shard.
//  * Errors: a request fails only when no shard delivered a sample: then
//    with the first shard's error (UNAVAILABLE/CANCELLED are retried by the
//    sampler).
#ifndef TF_REVERB_SERVER_CLIENT_SHARDED_SAMPLER_WORKER_H_
#define TF_REVERB_SERVER_CLIENT_SHARDED_SAMPLER_WORKER_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/random/random.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "schema.pb.h"
#include "server/client/sample.h"
#include "server/client/sampler.h"

namespace tf_reverb {

inline constexpr absl::Duration kShardWeightsMaxAge = absl::Seconds(1);

// What a sharded sampler knows of each shard's part of one table.
class ShardWeights {
 public:
  explicit ShardWeights(size_t num_shards);

  // From a shard's TableInfo (its sampler's total weight when the server
  // reports it, else its size).
  void SetFromInfo(size_t shard, const deepmind::reverb::TableInfo& info);
  // From a sample the shard returned; returns the shard's share of the
  // whole weight after the update.
  double UpdateFromSample(size_t shard, const SampleMeta& meta);
  // The shard did not answer: left out until it answers a refresh.
  void MarkDown(size_t shard);
  // Whether the caller is to refresh the weights now (they are older than
  // kShardWeightsMaxAge and nobody refreshes them); then it must call
  // Refreshed() after. While the first refresh runs, other callers wait
  // for it.
  bool StartRefresh();
  void Refreshed();

  // How many of `n` samples each shard serves: a multinomial draw by
  // weight (by size when every weight is 0; evenly when every shard is
  // empty or down).
  std::vector<int64_t> Split(int64_t n);
  // Sum of the shards' sizes.
  int64_t TotalSize() const;

 private:
  struct Shard {
    double weight = 0;
    int64_t size = 0;
    std::optional<double> exponent;  // a prioritized sampler's
    bool uniform = false;            // a uniform sampler
    bool reports_weight = false;     // TableInfo.sampler_total_weight is set
    bool down = false;
  };
  double ShareLocked(size_t shard) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  std::vector<Shard> shards_ ABSL_GUARDED_BY(mu_);
  absl::Time refreshed_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  bool refreshing_ ABSL_GUARDED_BY(mu_) = false;
  bool known_ ABSL_GUARDED_BY(mu_) = false;  // a refresh finished
  absl::BitGen gen_ ABSL_GUARDED_BY(mu_);
};

class ShardedSamplerWorker : public SamplerWorker {
 public:
  // Fills `weights` from every shard's ServerInfo (called when stale; the
  // worker calls Refreshed() after it).
  using Refresh = std::function<void(ShardWeights& weights)>;

  ShardedSamplerWorker(std::vector<std::unique_ptr<SamplerWorker>> shards,
                       std::shared_ptr<ShardWeights> weights, Refresh refresh);

  absl::Status StreamSamples(int64_t num_samples, absl::Duration timeout, const Deliver& deliver,
                             const ClaimMore& claim_more) override;
  void Cancel() override;

 private:
  const std::vector<std::unique_ptr<SamplerWorker>> shards_;
  const std::shared_ptr<ShardWeights> weights_;
  const Refresh refresh_;
};

}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_CLIENT_SHARDED_SAMPLER_WORKER_H_
