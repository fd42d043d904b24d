// InProcessSamplerWorker: a sampler worker that takes its samples straight
// from a table of a server in this process (server/in_process_tables.h),
// without gRPC: no serialization, no copy of the chunks.
//
// Contract:
//  * Thread-safety: StreamSamples runs on one worker thread at a time;
//    Cancel may be called from any thread (the table's wait polls it).
//  * Ownership: shares the table with its server.
//  * Errors: the table's (DEADLINE_EXCEEDED for a rate-limiter timeout);
//    CANCELLED after Cancel(). When the server stops, its tables close and
//    never reopen: the CANCELLED that reports it (kTableClosedMessage) is
//    not retried, and every later call returns it.
#ifndef TF_REVERB_SERVER_CLIENT_IN_PROCESS_SAMPLER_WORKER_H_
#define TF_REVERB_SERVER_CLIENT_IN_PROCESS_SAMPLER_WORKER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "server/client/sample.h"
#include "server/client/sampler.h"
#include "server/table.h"
#include "server/table_item.h"

namespace tf_reverb {

class InProcessSamplerWorker : public SamplerWorker {
 public:
  explicit InProcessSamplerWorker(std::shared_ptr<Table> table) : table_(std::move(table)) {}

  absl::Status StreamSamples(int64_t num_samples, absl::Duration timeout, const Deliver& deliver,
                             const ClaimMore& claim_more) override;
  void Cancel() override { cancelled_.store(true); }
  bool ShouldRetry(const absl::Status& status) const override;

 private:
  std::atomic<bool> cancelled_{false};
  // Used by the worker thread only.
  std::shared_ptr<Table> table_;  // nullptr once the table closed
  std::vector<SampledItem> items_;
};

}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_CLIENT_IN_PROCESS_SAMPLER_WORKER_H_
