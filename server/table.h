// Table: one replay table — items, their sampler and remover selectors, the
// rate limiter, eviction, max_times_sampled, policy-version limits and
// episode accounting (docs/concepts/tables.md).
//
// Contract:
//  * Thread-safety: every public method is thread-safe. One absl::Mutex guards
//    all state; blocking calls wait on it with a condition, so inserts and
//    samples from any number of threads interleave as one serialised state
//    machine.
//  * Ownership: held by std::shared_ptr (server, Python handles, in-process
//    samplers). Selectors and the rate limiter are owned by the table;
//    extensions (table_extension.h) are shared and called under the mutex.
//  * Blocking: InsertOrAssign and SampleBatch block while the rate limiter
//    forbids them, up to `timeout` (absl::InfiniteDuration() for none), and
//    return early when `cancelled` (if given) turns true or the table closes.
//  * Errors: DEADLINE_EXCEEDED with kRateLimiterTimeoutMessage on timeout;
//    CANCELLED "RateLimiter has been cancelled" once closed; INVALID_ARGUMENT
//    for a priority a selector rejects (nothing is changed), a malformed
//    item, or, with Config::check_item_signatures, an item inconsistent with
//    the table's signature (signature.h: then checked on every insert,
//    whoever sent it); FAILED_PRECONDITION never escapes as an abort.
//    Without that option (the default, as in Reverb, whose server never
//    checks) items are checked against the signature by the clients that
//    validate: Client.insert, TFClient.insert and writers with
//    validate_items, not by the table; a writer that does not validate may
//    insert items of other columns (TF-Agents writes policy_info so).
//  * Signatures: Create and Restore reject bytes that are not a
//    StructuredValue (INVALID_ARGUMENT). A well-formed signature with leaves
//    other than tensor specs (e.g. a RaggedTensorSpec) is stored and
//    reported, but items are not checked against it.
//  * Metrics: metrics() is updated under the table's own mutex with relaxed
//    atomics (no further lock) and may be read at any time without it.
#ifndef TF_REVERB_SERVER_TABLE_H_
#define TF_REVERB_SERVER_TABLE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/btree_map.h"
#include "absl/container/btree_set.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "checkpoint.pb.h"
#include "reverb_service.pb.h"
#include "schema.pb.h"
#include "server/metrics/atomic_histogram.h"
#include "server/metrics/table_metrics.h"
#include "server/rate_limiter.h"
#include "server/selectors/selector.h"
#include "server/signature.h"
#include "server/table_chunk.h"
#include "server/table_extension.h"
#include "server/table_item.h"

namespace tf_reverb {

inline constexpr char kRateLimiterTimeoutMessage[] =
    "Rate Limiter: Timeout exceeded before the right to insert was acquired.";
inline constexpr char kTableClosedMessage[] = "RateLimiter has been cancelled";
// A sample batch stops growing once its chunks reach this many bytes.
inline constexpr int64_t kMaxSampleBatchBytes = 1 << 20;
// Keys a sampling call draws ahead of handling them (Table::SampleLocked).
inline constexpr int64_t kSampleWindow = 16;

class Table {
 public:
  struct Config {
    std::string name;
    std::unique_ptr<ItemSelector> sampler;
    std::unique_ptr<ItemSelector> remover;
    int64_t max_size = 0;
    int32_t max_times_sampled = 0;  // < 1: unlimited
    RateLimiter rate_limiter;
    std::string signature;  // serialized tensorflow.StructuredValue or empty
    std::vector<std::shared_ptr<TableExtension>> extensions;
    // Refuse items inconsistent with the signature (stricter than Reverb).
    bool check_item_signatures = false;
    // Seeds the selectors (the sampler with `seed`, the remover with
    // `seed + 1`): with one consumer and the same calls in the same order, a
    // seeded table picks the same items, also after a checkpoint restore
    // (the selectors' generator states are checkpointed). Several concurrent
    // consumers interleave in an order no seed fixes. nullopt: seeded from
    // std::random_device, as Reverb's.
    std::optional<uint64_t> seed;
    // Policy-version limit (staleness): an item whose policy_version is more
    // than `max_staleness` below the table's current version (SetPolicyVersion)
    // is not sampled, and with `evict_stale` is deleted (counted as a
    // deletion by the rate limiter, as an eviction is). Its insert is
    // retired from the rate limiter (RateLimiter::RecordRetire), so that
    // queues and sample-to-insert ratios do not wait for samples it will
    // never get. nullopt: no limit.
    std::optional<int64_t> max_staleness;
    bool evict_stale = false;
  };

  // INVALID_ARGUMENT for an empty name, max_size < 1, missing selectors, an
  // unreadable signature, max_staleness < 0 or evict_stale without it.
  static absl::StatusOr<std::shared_ptr<Table>> Create(Config config);

  ~Table();

  // Inserts `item` (its chunks already attached), or, when its key exists,
  // only updates the priority (no rate-limiter charge). Blocks while the rate
  // limiter forbids a new insert.
  absl::Status InsertOrAssign(TableItem item, absl::Duration timeout,
                              const std::function<bool()>& cancelled = nullptr);

  // Samples between 1 and `num_samples` items (fewer when sampling would
  // block or the batch reached kMaxSampleBatchBytes), appending to `out`.
  absl::Status SampleBatch(int64_t num_samples, absl::Duration timeout,
                           std::vector<SampledItem>* out,
                           const std::function<bool()>& cancelled = nullptr);

  // Waiting without a thread (the gRPC service's reactors): TryInsertOrAssign
  // and TrySampleBatch never block. When the rate limiter forbids the call
  // now they return false, leave `item`/`out` as they are and register
  // `wake`; the table keeps only a weak reference to it (drop the shared_ptr
  // to withdraw) and calls it once, with no lock held, from the thread of the
  // call that changed the table, when the call may succeed now or the table
  // closed. The caller then tries again (and may be refused again). Errors as
  // InsertOrAssign / SampleBatch; CANCELLED once closed. A true
  // TryInsertOrAssign has moved `item` into the table.
  using Waker = std::function<void()>;
  absl::StatusOr<bool> TryInsertOrAssign(TableItem& item, const std::shared_ptr<Waker>& wake);
  // `rate_limited` is reported in the samples (SampleInfo.rate_limited):
  // whether the caller had to wait for them.
  absl::StatusOr<bool> TrySampleBatch(int64_t num_samples, std::vector<SampledItem>* out,
                                      const std::shared_ptr<Waker>& wake,
                                      bool rate_limited = false);
  // Wakers currently registered (callers waiting without a thread).
  int64_t num_waiting() const;
  // Callers blocked by the rate limiter now: threads in InsertOrAssign /
  // SampleBatch plus registered wakers not yet withdrawn.
  struct BlockedCallers {
    int64_t inserts = 0;
    int64_t samples = 0;
  };
  BlockedCallers blocked_callers() const;
  // Counters and levels for the metrics exporter (see TableMetrics).
  const TableMetrics& metrics() const { return metrics_; }

  // Deletes, then updates; missing keys are ignored. Every update is
  // validated first, so a rejected priority changes nothing.
  absl::Status MutateItems(const std::vector<deepmind::reverb::KeyWithPriority>& updates,
                           const std::vector<uint64_t>& deletes);

  // Removes every item and zeroes the rate limiter's counters (the policy
  // version stays).
  void Reset();

  // Sets the table's current policy version. Items inserted without one
  // carry it; with max_staleness, items more than max_staleness below it stop
  // being sampled (and are deleted with evict_stale). Returns how many items
  // this made stale. Versions only grow: INVALID_ARGUMENT for a negative one
  // or one below the current (setting the current again changes nothing);
  // CANCELLED once closed. Recovery replays it as logged.
  absl::StatusOr<int64_t> SetPolicyVersion(int64_t version);

  // Attaches one more extension; it sees the changes from now on (the
  // write-ahead log's journal is attached so, after recovery).
  void AddExtension(std::shared_ptr<TableExtension> extension);

  // Recovery from a write-ahead log (server/wal/): the changes it recorded,
  // applied as they happened, with no blocking and no eviction (the log
  // records deletions itself); updates, deletions and resets replay through
  // MutateItems and Reset. ReplayInsert adds `item`
  // (its proto as the table stored it, inserted_at included) and counts an
  // insert; an existing key only takes the priority. ReplaySample counts
  // one more sample of `key` (ignored when absent). INVALID_ARGUMENT for a
  // priority the selectors reject.
  absl::Status ReplayInsert(std::shared_ptr<const TableItem> item);
  void ReplaySample(uint64_t key);

  // Wakes and fails every blocked call; later calls fail with CANCELLED.
  void Close();

  // An item as checkpoints store it.
  struct CheckpointItem {
    std::shared_ptr<const TableItem> data;  // inserted_at: original insertion time
    double priority;
    int32_t times_sampled;
  };
  // A consistent copy of the table: its configuration and counters (every
  // field of PriorityTableCheckpoint but items) and its items in insertion
  // order. Holds the mutex only while copying pointers; chunks are shared.
  struct Snapshot {
    deepmind::reverb::PriorityTableCheckpoint config;
    std::vector<CheckpointItem> items;
  };
  Snapshot TakeSnapshot() const;

  enum class RestoreMode {
    // The checkpoint's selectors, max_size, max_times_sampled, rate limiter
    // parameters and signature replace the table's own.
    kCheckpointConfig,
    // The table keeps its configuration; items beyond max_size are evicted
    // by the remover after loading.
    kTableConfig,
  };
  // Replaces every item with `items` (in insertion order) and restores the
  // counters (rate limiter, num_deleted_episodes, num_unique_samples) of
  // `checkpoint`. Returns a description of each setting in which the
  // checkpoint differs from the table as configured (empty when none).
  // INVALID_ARGUMENT for an unusable checkpoint (the table is then empty).
  absl::StatusOr<std::vector<std::string>> Restore(
      const deepmind::reverb::PriorityTableCheckpoint& checkpoint,
      std::vector<CheckpointItem> items, RestoreMode mode);

  // Looking into the table without sampling it: neither counts as a sample
  // nor touches the rate limiter, and the mutex is held only to copy
  // pointers. Items come as SampledItems with their current priority and
  // times sampled, probability 0 and the table's size.
  //
  // The items of `keys` present now, in the order asked; the others are
  // appended to `missing`.
  void Lookup(const std::vector<uint64_t>& keys, std::vector<SampledItem>* found,
              std::vector<uint64_t>* missing) const;
  // The items at insertion positions >= `start` in insertion order: at most
  // `max_items`, and no more once their chunks reach kMaxSampleBatchBytes
  // (at least one). Returns the position after the last one returned (the
  // `start` of the next batch); `*done` when no item at or after it exists.
  // An item present from a scan's first call to its last is seen once;
  // items inserted meanwhile may be seen; deleted ones are not.
  uint64_t Scan(uint64_t start, int64_t max_items, std::vector<SampledItem>* out, bool* done) const;
  // Size, priorities, times sampled and ages of the items now. O(size).
  deepmind::reverb::TableStatsResponse Stats() const;

  bool CanSample(int64_t num_samples) const;
  bool CanInsert(int64_t num_inserts) const;
  // Items not sampled because their policy version is too old (kept since
  // the table does not evict them).
  int64_t num_stale() const;
  // Every TableInfo field. The table has no worker thread, so of
  // table_worker_time only running_ms (the table's age),
  // waiting_for_sampling_ms (time inserts were blocked by the limiter) and
  // waiting_for_inserts_ms (time samples were blocked) are measured.
  deepmind::reverb::TableInfo Info() const;
  int64_t size() const;
  const std::string& name() const { return name_; }
  // "Table(sampler=..., remover=..., max_size=..., ...)".
  std::string DebugString() const;

 private:
  // A registered waker and when it started waiting.
  struct Waiter {
    std::weak_ptr<Waker> waker;
    absl::Time since;
  };
  // Wakers taken from the waiter lists under the mutex, called when the list
  // is destroyed: declare it before the MutexLock so that happens unlocked.
  class WakeList {
   public:
    WakeList() = default;
    WakeList(const WakeList&) = delete;
    WakeList& operator=(const WakeList&) = delete;
    ~WakeList();

   private:
    friend class Table;
    std::vector<std::weak_ptr<Waker>> wakers_;
  };

  struct Entry {
    std::shared_ptr<const TableItem> data;  // shared with snapshots
    double priority;
    int32_t times_sampled;
    uint64_t insertion_order;  // ascending in insertion order
    int64_t policy_version;
    bool stale;     // too old to sample: in the remover, not in the sampler
    int64_t bytes;  // of the stored tensors of its chunks (ChunkBytes)
  };

  Table(Config config, std::shared_ptr<const std::vector<SignatureSpec>> signature_columns);

  // The columns of a signature to check items against (null for none or an
  // unchecked one); INVALID_ARGUMENT for unreadable bytes.
  static absl::StatusOr<std::shared_ptr<const std::vector<SignatureSpec>>> SignatureColumns(
      const std::string& signature);
  // A snapshot of signature_columns_ (Restore may replace it).
  std::shared_ptr<const std::vector<SignatureSpec>> signature_columns() const
      ABSL_LOCKS_EXCLUDED(mu_);

  // Waits until `ready` holds, the table closes, `timeout` passes or
  // `cancelled` turns true. Returns OK only when `ready` holds.
  absl::Status WaitFor(const std::function<bool()>& ready, absl::Duration timeout,
                       const std::function<bool()>& cancelled, int64_t* waited_ms,
                       int64_t* waiting_threads, AtomicHistogram* blocked_seconds)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Updates the levels of metrics_ after items were added or removed.
  void UpdateLevelsLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Counts `chunk` referenced by one more (`delta` = 1) or one fewer (-1) item.
  void RefChunkLocked(const TableChunk* chunk, int delta, bool count_insert)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status ValidatePriority(double priority) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // ValidateTableItem and the signature check, done without the lock.
  absl::Status CheckItem(const TableItem& item) const ABSL_LOCKS_EXCLUDED(mu_);
  // Whether an item may be sampled now, the rate limiter aside.
  bool HasSampleableLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether an item of policy version `version` is too old to sample now.
  bool IsStaleLocked(int64_t version) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Takes the items the current policy version made stale out of the
  // sampler (deleting them with evict_stale); returns how many.
  absl::StatusOr<int64_t> MarkStaleLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // How many keys SampleLocked may draw before handling them, the batch
  // holding `bytes` so far: at most kSampleWindow and `wanted`, and no more
  // than one-at-a-time sampling would take (all of them allowed by the rate
  // limiter; the batch's bytes below kMaxSampleBatchBytes before each, by
  // max_item_bytes_); one when sampling may delete items.
  int64_t SampleWindowLocked(int64_t wanted, int64_t bytes) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Samples up to `num_samples` items while the rate limiter allows.
  absl::Status SampleLocked(int64_t num_samples, bool rate_limited, std::vector<SampledItem>* out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Moves the waiters whose call may now succeed (all of them once closed)
  // into `wake`, adding their waiting time to the blocked-time counters.
  void CollectWakersLocked(WakeList* wake) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status InsertLocked(TableItem item) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status DeleteLocked(uint64_t key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Adds an item to the selectors and the maps without any limiter charge.
  // `inserted`: a new item (its new chunks count as inserted bytes), not a
  // restored one.
  absl::Status AddLocked(std::shared_ptr<const TableItem> item, double priority,
                         int32_t times_sampled, bool inserted = false)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ClearLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sets a present item's priority (already validated).
  absl::Status UpdateLocked(uint64_t key, double priority) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Calls `hook` of every extension with `entry`.
  void Notify(void (TableExtension::*hook)(const ExtensionItem&), const Entry& entry) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string name_;
  // Config::extensions, then those AddExtension attached.
  std::vector<std::shared_ptr<TableExtension>> extensions_ ABSL_GUARDED_BY(mu_);
  const absl::Time created_at_;
  const bool check_item_signatures_;
  // Config::seed; replaced only by Restore (kCheckpointConfig).
  std::optional<uint64_t> seed_ ABSL_GUARDED_BY(mu_);

  mutable absl::Mutex mu_;
  // Configuration; replaced only by Restore.
  int64_t max_size_ ABSL_GUARDED_BY(mu_);
  int32_t max_times_sampled_ ABSL_GUARDED_BY(mu_);
  std::string signature_ ABSL_GUARDED_BY(mu_);
  // The columns of signature_ items are checked against; null when there is
  // no signature or it cannot be checked.
  std::shared_ptr<const std::vector<SignatureSpec>> signature_columns_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t next_insertion_order_ ABSL_GUARDED_BY(mu_) = 0;
  std::optional<int64_t> max_staleness_ ABSL_GUARDED_BY(mu_);
  bool evict_stale_ ABSL_GUARDED_BY(mu_);
  int64_t policy_version_ ABSL_GUARDED_BY(mu_) = 0;
  // With max_staleness_: the sampleable items by (policy version, key), the
  // oldest first; empty without a limit.
  absl::btree_set<std::pair<int64_t, uint64_t>> fresh_by_version_ ABSL_GUARDED_BY(mu_);
  int64_t num_stale_ ABSL_GUARDED_BY(mu_) = 0;
  std::unique_ptr<ItemSelector> sampler_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<ItemSelector> remover_ ABSL_GUARDED_BY(mu_);
  RateLimiter rate_limiter_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, Entry> items_ ABSL_GUARDED_BY(mu_);
  // The largest Entry::bytes inserted since the table was last cleared (a
  // bound for SampleWindowLocked; deletions leave it).
  int64_t max_item_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  // Insertion position -> key, for Scan.
  absl::btree_map<uint64_t, uint64_t> by_position_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, int64_t> episode_refs_ ABSL_GUARDED_BY(mu_);
  int64_t num_deleted_episodes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t num_unique_samples_ ABSL_GUARDED_BY(mu_) = 0;
  // Time callers spent blocked by the rate limiter.
  int64_t inserts_blocked_ms_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t samples_blocked_ms_ ABSL_GUARDED_BY(mu_) = 0;
  // Threads waiting in WaitFor.
  int64_t insert_waiting_threads_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t sample_waiting_threads_ ABSL_GUARDED_BY(mu_) = 0;
  // Items referencing each held chunk.
  absl::flat_hash_map<const TableChunk*, int64_t> chunk_refs_ ABSL_GUARDED_BY(mu_);
  TableMetrics metrics_;
  std::vector<Waiter> insert_waiters_ ABSL_GUARDED_BY(mu_);
  std::vector<Waiter> sample_waiters_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_TABLE_H_
