// StructuredWriter: a TrajectoryWriter driven by StructuredWriterConfigs
// (docs/concepts/writers-and-patterns.md). Every append feeds the PatternEngine, and each item
// it produces is created on the wrapped TrajectoryWriter with the config's
// table and priority.
//
// The wrapped writer uses auto-tuned chunking with num_keep_alive_refs = the
// largest age of any config, and no signature validation. Columns that no
// node or data condition reads are dropped before writing (never chunked or
// sent).
//
// Contract:
//  * Thread-safety: thread-safe (one mutex around the engine and the writer
//    calls that feed it); like the TrajectoryWriter it models one actor.
//  * Ownership: owns the TrajectoryWriter and the engine; shares the channel.
//  * Errors: INVALID_ARGUMENT for invalid configs ("Invalid configuration at
//    position i: ..."), a flattened length differing from the first append's,
//    and dtype/shape changes of a column (from the TrajectoryWriter);
//    DEADLINE_EXCEEDED from Flush/EndEpisode timeouts; stream errors as the
//    TrajectoryWriter reports them.
#ifndef TF_REVERB_SERVER_PATTERNS_STRUCTURED_WRITER_H_
#define TF_REVERB_SERVER_PATTERNS_STRUCTURED_WRITER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/channel.h"
#include "patterns.pb.h"
#include "server/patterns/pattern_engine.h"
#include "server/tensor.h"
#include "server/writer/trajectory_writer.h"

namespace tf_reverb {

class StructuredWriter {
 public:
  static absl::StatusOr<std::unique_ptr<StructuredWriter>> Create(
      std::shared_ptr<grpc::Channel> channel,
      std::vector<deepmind::reverb::StructuredWriterConfig> configs);

  // Appends one step (or, with `partial`, part of the open step) and creates
  // the items of every config that applies. nullopt values are missing.
  absl::Status Append(std::vector<std::optional<Tensor>> data, bool partial);

  // TrajectoryWriter::Flush.
  absl::Status Flush(int block_until_num_items, absl::Duration timeout);

  // Creates the items of the configs that apply at the end of an episode,
  // then TrajectoryWriter::EndEpisode; only if that succeeds, the pattern
  // buffers are cleared (clear_buffers) and a new episode starts.
  absl::Status EndEpisode(bool clear_buffers, absl::Duration timeout);

  bool step_is_open() const;
  // Items created so far.
  int64_t num_items_created() const;

 private:
  StructuredWriter(std::unique_ptr<PatternEngine> engine, std::unique_ptr<TrajectoryWriter> writer);
  absl::Status CreateItems(const std::vector<PatternItem>& items)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  const std::unique_ptr<PatternEngine> engine_ ABSL_PT_GUARDED_BY(mu_);
  const std::unique_ptr<TrajectoryWriter> writer_;
  int64_t num_items_created_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_PATTERNS_STRUCTURED_WRITER_H_
