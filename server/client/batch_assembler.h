// BatchAssembler: the one batch pipeline of the NumPy iterator
// (tf_reverb/pybind_sampler.cc) and of TrajectoryDataset's fused batches
// (tf_reverb/kernels/dataset_ops.cc). `num_threads` threads each claim the
// rows of one batch up front (batch_size, or what is left of max_samples),
// fill it with the caller's Fill function (which pops samples and decodes
// them straight into the batch's buffers), and put it aside; up to
// `prefetch` batches are claimed or waiting at any time. Next() hands the
// batches out in the order they were claimed, whichever thread finished
// first, so with max_samples the one partial batch always comes last.
// Batches a Fill left empty (the source ended before its first row, or a
// partial batch the caller drops) are skipped.
//
// Header-only on the standard library (and abseil's annotation macros, which
// expand to attributes only), because the TensorFlow kernels include it and
// must not link the core's abseil (docs/architecture/index.md, symbol
// isolation). `Status` is the caller's status type (absl::Status,
// tensorflow::Status): default-constructed OK, with ok().
//
// Contract:
//  * Thread-safety: every method is thread-safe. Fill runs on the
//    assembler's threads, several at once; it must be safe to call
//    concurrently.
//  * Ownership: the assembler owns its threads; Stop() (also run by the
//    destructor) joins them, so Fill must return once the caller unblocks
//    it (Stop's `unblock` argument, e.g. closing the sampler).
//  * Errors: a Fill that returns a non-OK status ends assembly; the batches
//    claimed before it are still handed out, then Next() returns false and
//    status() is the first error. A Fill that sets `*ended` (the source
//    ended normally: max_samples reached, a rate-limiter timeout) ends it
//    the same way with status() OK.
#ifndef TF_REVERB_SERVER_CLIENT_BATCH_ASSEMBLER_H_
#define TF_REVERB_SERVER_CLIENT_BATCH_ASSEMBLER_H_

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"

namespace tf_reverb {

template <typename Batch, typename Status>
class BatchAssembler {
 public:
  // Fills `batch` with up to `rows` samples. Sets `*ended` when the source
  // ended before `rows` (normally); a batch may hold rows and still fail.
  using Fill = std::function<Status(int64_t rows, Batch* batch, bool* ended)>;
  // Whether a batch holds no row (such batches are skipped).
  using IsEmpty = std::function<bool(const Batch& batch)>;

  // `max_samples` < 0: unlimited. Starts the threads.
  BatchAssembler(int64_t batch_size, int64_t max_samples, int64_t num_threads, int64_t prefetch,
                 Fill fill, IsEmpty is_empty)
      : batch_size_(batch_size),
        prefetch_(std::max<int64_t>(1, prefetch)),
        fill_(std::move(fill)),
        is_empty_(std::move(is_empty)),
        budget_(max_samples),
        running_(std::max<int64_t>(1, num_threads)) {
    const int64_t threads = std::max<int64_t>(1, num_threads);
    for (int64_t i = 0; i < threads; ++i) threads_.emplace_back([this] { Run(); });
  }

  BatchAssembler(const BatchAssembler&) = delete;
  BatchAssembler& operator=(const BatchAssembler&) = delete;

  ~BatchAssembler() {
    Stop([] {});
  }

  // Moves the next batch in claim order into `*out` and returns true;
  // false at the end (every claimed batch handed out after assembly ended,
  // or Stop()), when status() tells whether it ended in an error.
  bool Next(Batch* out) ABSL_LOCKS_EXCLUDED(mu_) {
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      cv_.wait(lock, [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopped_ || done_.count(next_out_) > 0 ||
               (running_ == 0 && next_out_ >= next_claim_);
      });
      if (stopped_) return false;
      auto it = done_.find(next_out_);
      if (it == done_.end()) return false;
      Batch batch = std::move(it->second);
      done_.erase(it);
      ++next_out_;
      cv_.notify_all();  // a prefetch slot is free
      if (is_empty_(batch)) continue;
      *out = std::move(batch);
      return true;
    }
  }

  // The first error a Fill returned; OK while none did.
  Status status() const ABSL_LOCKS_EXCLUDED(mu_) {
    std::lock_guard<std::mutex> lock(mu_);
    return status_;
  }

  // Whether Stop() was called.
  bool stopped() const ABSL_LOCKS_EXCLUDED(mu_) {
    std::lock_guard<std::mutex> lock(mu_);
    return stopped_;
  }

  // Ends assembly: Next() returns false from now on, `unblock` is called
  // (it must make running Fills return), and the threads are joined.
  // Idempotent; only the first call runs `unblock`.
  void Stop(const std::function<void()>& unblock) ABSL_LOCKS_EXCLUDED(mu_) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopped_) return;
      stopped_ = true;
      cv_.notify_all();
    }
    unblock();
    for (std::thread& thread : threads_) thread.join();
  }

 private:
  void Run() ABSL_LOCKS_EXCLUDED(mu_) {
    while (true) {
      int64_t rows = 0;
      uint64_t sequence = 0;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return stopped_ || ended_ || static_cast<int64_t>(done_.size()) + assembling_ < prefetch_;
        });
        rows = budget_ < 0 ? batch_size_ : std::min(batch_size_, budget_);
        if (stopped_ || ended_ || rows == 0) break;
        if (budget_ >= 0) budget_ -= rows;
        sequence = next_claim_++;
        ++assembling_;
      }
      Batch batch;
      bool ended = false;
      Status status = fill_(rows, &batch, &ended);
      std::lock_guard<std::mutex> lock(mu_);
      --assembling_;
      // Every claimed batch is put aside, empty or not, so Next() can move
      // past its sequence number.
      done_.emplace(sequence, std::move(batch));
      if (!status.ok() && status_.ok()) status_ = std::move(status);
      if (!status_.ok() || ended) ended_ = true;
      cv_.notify_all();
      if (ended_) break;
    }
    std::lock_guard<std::mutex> lock(mu_);
    --running_;
    cv_.notify_all();
  }

  const int64_t batch_size_;
  const int64_t prefetch_;
  const Fill fill_;
  const IsEmpty is_empty_;
  std::vector<std::thread> threads_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  bool ended_ ABSL_GUARDED_BY(mu_) = false;  // a Fill ended or failed
  Status status_ ABSL_GUARDED_BY(mu_);
  // Assembled batches by claim sequence number; Next() hands out next_out_.
  std::map<uint64_t, Batch> done_ ABSL_GUARDED_BY(mu_);
  uint64_t next_claim_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t next_out_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t assembling_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t budget_ ABSL_GUARDED_BY(mu_);   // rows not yet claimed; -1: unlimited
  int64_t running_ ABSL_GUARDED_BY(mu_);  // threads not yet finished
};

}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_CLIENT_BATCH_ASSEMBLER_H_
