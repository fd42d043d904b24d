#include "server/table.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "server/metrics/atomic_histogram.h"
#include "server/table_chunk.h"

namespace tf_reverb {
namespace {

// Blocked calls re-check `cancelled` this often.
constexpr absl::Duration kCancellationPollInterval = absl::Milliseconds(100);

int64_t ChunkBytes(const TableItem& item) {
  int64_t bytes = 0;
  for (const auto& chunk : item.chunks) bytes += chunk->stored_bytes();
  return bytes;
}

double Seconds(absl::Duration duration) { return absl::ToDoubleSeconds(duration); }

}  // namespace

Table::WakeList::~WakeList() {
  for (const std::weak_ptr<Waker>& weak : wakers_) {
    if (std::shared_ptr<Waker> waker = weak.lock()) (*waker)();
  }
}

void Table::CollectWakersLocked(WakeList* wake) {
  const absl::Time now = absl::Now();
  auto take = [&](std::vector<Waiter>* waiters, int64_t* blocked_ms,
                  AtomicHistogram* blocked_seconds) {
    for (Waiter& waiter : *waiters) {
      *blocked_ms += absl::ToInt64Milliseconds(now - waiter.since);
      blocked_seconds->Observe(Seconds(now - waiter.since));
      wake->wakers_.push_back(std::move(waiter.waker));
    }
    waiters->clear();
  };
  if (!insert_waiters_.empty() && (closed_ || rate_limiter_.CanInsert(1))) {
    take(&insert_waiters_, &inserts_blocked_ms_, &metrics_.insert_blocked_seconds);
  }
  if (!sample_waiters_.empty() &&
      (closed_ || (HasSampleableLocked() && rate_limiter_.CanSample(1)))) {
    take(&sample_waiters_, &samples_blocked_ms_, &metrics_.sample_blocked_seconds);
  }
}

absl::StatusOr<std::shared_ptr<Table>> Table::Create(Config config) {
  if (config.name.empty()) return absl::InvalidArgumentError("name must be nonempty");
  if (config.max_size <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_size (", config.max_size, ") must be a positive integer"));
  }
  if (!config.sampler || !config.remover) {
    return absl::InvalidArgumentError("A table needs both a sampler and a remover.");
  }
  if (config.max_staleness.has_value() && *config.max_staleness < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_staleness (", *config.max_staleness, ") must be >= 0"));
  }
  if (config.evict_stale && !config.max_staleness.has_value()) {
    return absl::InvalidArgumentError("evict_stale needs max_staleness");
  }
  if (config.sampler == config.remover) {
    return absl::InvalidArgumentError(
        "The sampler and the remover must be different selector objects.");
  }
  absl::StatusOr<std::shared_ptr<const std::vector<SignatureSpec>>> columns =
      SignatureColumns(config.signature);
  if (!columns.ok()) return columns.status();
  if (config.seed.has_value()) {
    config.sampler->Seed(*config.seed);
    config.remover->Seed(*config.seed + 1);
  }
  return std::shared_ptr<Table>(new Table(std::move(config), *std::move(columns)));
}

absl::StatusOr<std::shared_ptr<const std::vector<SignatureSpec>>> Table::SignatureColumns(
    const std::string& signature) {
  if (signature.empty()) return nullptr;
  absl::StatusOr<std::vector<SignatureSpec>> columns = ParseSignature(signature);
  // Unimplemented: a valid nest of specs we cannot check (see table.h).
  if (absl::IsUnimplemented(columns.status())) return nullptr;
  if (!columns.ok()) return columns.status();
  return std::make_shared<const std::vector<SignatureSpec>>(*std::move(columns));
}

std::shared_ptr<const std::vector<SignatureSpec>> Table::signature_columns() const {
  absl::MutexLock lock(&mu_);
  return signature_columns_;
}

Table::Table(Config config, std::shared_ptr<const std::vector<SignatureSpec>> signature_columns)
    : name_(std::move(config.name)),
      extensions_(std::move(config.extensions)),
      created_at_(absl::Now()),
      check_item_signatures_(config.check_item_signatures),
      seed_(config.seed),
      max_size_(config.max_size),
      max_times_sampled_(config.max_times_sampled),
      signature_(std::move(config.signature)),
      signature_columns_(std::move(signature_columns)),
      max_staleness_(config.max_staleness),
      evict_stale_(config.evict_stale),
      sampler_(std::move(config.sampler)),
      remover_(std::move(config.remover)),
      rate_limiter_(config.rate_limiter) {
  TableMetrics::Set(metrics_.max_size, max_size_);
}

Table::~Table() { Close(); }

absl::Status Table::WaitFor(const std::function<bool()>& ready, absl::Duration timeout,
                            const std::function<bool()>& cancelled, int64_t* waited_ms,
                            int64_t* waiting_threads, AtomicHistogram* blocked_seconds) {
  if (closed_) return absl::CancelledError(kTableClosedMessage);
  if (ready()) return absl::OkStatus();
  const absl::Time start = absl::Now();
  const absl::Time deadline =
      timeout == absl::InfiniteDuration() ? absl::InfiniteFuture() : start + timeout;
  auto done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return closed_ || ready(); };
  absl::Status status = absl::OkStatus();
  ++*waiting_threads;
  while (true) {
    absl::Duration slice = deadline - absl::Now();
    if (cancelled) slice = std::min(slice, kCancellationPollInterval);
    if (mu_.AwaitWithTimeout(absl::Condition(&done), slice)) break;
    if (cancelled && cancelled()) {
      status = absl::CancelledError("The call was cancelled.");
      break;
    }
    if (absl::Now() >= deadline) {
      status = absl::DeadlineExceededError(kRateLimiterTimeoutMessage);
      break;
    }
  }
  --*waiting_threads;
  const absl::Duration waited = absl::Now() - start;
  *waited_ms += absl::ToInt64Milliseconds(waited);
  blocked_seconds->Observe(Seconds(waited));
  if (status.ok() && closed_) status = absl::CancelledError(kTableClosedMessage);
  return status;
}

absl::Status Table::ValidatePriority(double priority) const {
  if (absl::Status s = sampler_->ValidatePriority(priority); !s.ok()) return s;
  return remover_->ValidatePriority(priority);
}

absl::Status Table::CheckItem(const TableItem& item) const {
  // Validated (and, when the table checks signatures, checked against its
  // own) outside the lock: reading the item's chunk headers costs time that
  // samplers and other inserts need not wait for.
  const std::shared_ptr<const std::vector<SignatureSpec>> signature =
      check_item_signatures_ ? signature_columns() : nullptr;
  std::vector<ItemColumn> columns;
  if (absl::Status s = ValidateTableItem(item, signature != nullptr ? &columns : nullptr);
      !s.ok()) {
    return s;
  }
  if (item.item.has_policy_version() && item.item.policy_version() < 0) {
    return absl::InvalidArgumentError(absl::StrCat("Item ", item.item.key(), ": policy_version (",
                                                   item.item.policy_version(), ") must be >= 0"));
  }
  if (signature != nullptr) {
    if (absl::Status s = CheckItemColumns(name_, *signature, columns); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status Table::InsertOrAssign(TableItem item, absl::Duration timeout,
                                   const std::function<bool()>& cancelled) {
  if (absl::Status s = CheckItem(item); !s.ok()) return s;
  const uint64_t key = item.item.key();
  const double priority = item.item.priority();
  WakeList wake;
  absl::MutexLock lock(&mu_);
  if (closed_) return absl::CancelledError(kTableClosedMessage);
  if (absl::Status s = ValidatePriority(priority); !s.ok()) return s;
  if (items_.contains(key)) {
    return UpdateLocked(key, priority);
  }
  auto can_insert = [this]()
                        ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return rate_limiter_.CanInsert(1); };
  if (absl::Status s = WaitFor(can_insert, timeout, cancelled, &inserts_blocked_ms_,
                               &insert_waiting_threads_, &metrics_.insert_blocked_seconds);
      !s.ok()) {
    return s;
  }
  // Another caller may have inserted the same key while this one waited.
  if (items_.contains(key)) return UpdateLocked(key, priority);
  absl::Status status = InsertLocked(std::move(item));
  CollectWakersLocked(&wake);
  return status;
}

absl::StatusOr<bool> Table::TryInsertOrAssign(TableItem& item, const std::shared_ptr<Waker>& wake) {
  if (absl::Status s = CheckItem(item); !s.ok()) return s;
  const uint64_t key = item.item.key();
  const double priority = item.item.priority();
  WakeList wakers;
  absl::MutexLock lock(&mu_);
  if (closed_) return absl::CancelledError(kTableClosedMessage);
  if (absl::Status s = ValidatePriority(priority); !s.ok()) return s;
  if (items_.contains(key)) {
    if (absl::Status s = UpdateLocked(key, priority); !s.ok()) return s;
    return true;
  }
  if (!rate_limiter_.CanInsert(1)) {
    insert_waiters_.push_back(Waiter{wake, absl::Now()});
    return false;
  }
  absl::Status status = InsertLocked(std::move(item));
  CollectWakersLocked(&wakers);
  if (!status.ok()) return status;
  return true;
}

absl::Status Table::InsertLocked(TableItem item) {
  item.item = item.item.Inserted(absl::Now(), policy_version_);
  const uint64_t key = item.item.key();
  const double priority = item.item.priority();
  if (absl::Status s = AddLocked(std::make_shared<const TableItem>(std::move(item)), priority, 0,
                                 /*inserted=*/true);
      !s.ok()) {
    return s;
  }
  rate_limiter_.RecordInsert();
  TableMetrics::Add(metrics_.inserts, 1);
  const Entry& entry = items_.find(key)->second;
  Notify(&TableExtension::OnInsert, entry);
  if (entry.stale) {
    // Never sampleable: the rate limiter does not wait for its samples.
    rate_limiter_.RecordRetire();
    if (evict_stale_) return DeleteLocked(key);
  }
  if (static_cast<int64_t>(items_.size()) > max_size_) {
    absl::StatusOr<KeyWithProbability> victim = remover_->Sample();
    if (!victim.ok()) return victim.status();
    return DeleteLocked(victim->key);
  }
  return absl::OkStatus();
}

absl::Status Table::AddLocked(std::shared_ptr<const TableItem> item, double priority,
                              int32_t times_sampled, bool inserted) {
  const uint64_t key = item->item.key();
  if (item->item.has_policy_version() && item->item.policy_version() < 0) {
    return absl::InvalidArgumentError(absl::StrCat("Item ", key, ": policy_version (",
                                                   item->item.policy_version(), ") must be >= 0"));
  }
  // Items of checkpoints without versions (dm-reverb's) are of the current
  // one; the stored proto says so too (snapshots, samples and lookups read
  // the version from it).
  if (!item->item.has_policy_version()) {
    auto versioned = std::make_shared<TableItem>(*item);
    versioned->item = item->item.WithPolicyVersion(policy_version_);
    item = std::move(versioned);
  }
  const int64_t version = item->item.policy_version();
  const bool stale = IsStaleLocked(version);
  if (!stale) {
    if (absl::Status s = sampler_->Insert(key, priority); !s.ok()) return s;
  }
  if (absl::Status s = remover_->Insert(key, priority); !s.ok()) {
    if (!stale) sampler_->Delete(key).IgnoreError();
    return s;
  }
  if (stale) {
    ++num_stale_;
  } else if (max_staleness_.has_value()) {
    fresh_by_version_.emplace(version, key);
  }
  for (const auto& chunk : item->chunks) {
    ++episode_refs_[chunk->episode_id()];
    RefChunkLocked(chunk.get(), 1, inserted);
  }
  by_position_.emplace(next_insertion_order_, key);
  const int64_t bytes = ChunkBytes(*item);
  max_item_bytes_ = std::max(max_item_bytes_, bytes);
  items_.emplace(key, Entry{std::move(item), priority, times_sampled, next_insertion_order_++,
                            version, stale, bytes});
  UpdateLevelsLocked();
  return absl::OkStatus();
}

void Table::RefChunkLocked(const TableChunk* chunk, int delta, bool count_insert) {
  if (delta > 0) {
    int64_t& refs = chunk_refs_[chunk];
    if (refs++ > 0) return;
    const int64_t stored = chunk->stored_bytes();
    TableMetrics::Add(metrics_.chunks, 1);
    TableMetrics::Add(metrics_.chunk_compressed_bytes, stored);
    TableMetrics::Add(metrics_.chunk_uncompressed_bytes, chunk->uncompressed_bytes());
    if (count_insert) TableMetrics::Add(metrics_.inserted_bytes, stored);
    return;
  }
  auto it = chunk_refs_.find(chunk);
  if (it == chunk_refs_.end() || --it->second > 0) return;
  chunk_refs_.erase(it);
  TableMetrics::Add(metrics_.chunks, -1);
  TableMetrics::Add(metrics_.chunk_compressed_bytes, -chunk->stored_bytes());
  TableMetrics::Add(metrics_.chunk_uncompressed_bytes, -chunk->uncompressed_bytes());
}

void Table::UpdateLevelsLocked() {
  TableMetrics::Set(metrics_.items, static_cast<int64_t>(items_.size()));
  TableMetrics::Set(metrics_.episodes, static_cast<int64_t>(episode_refs_.size()));
}

absl::Status Table::UpdateLocked(uint64_t key, double priority) {
  Entry& entry = items_.find(key)->second;
  if (!entry.stale) {
    if (absl::Status s = sampler_->Update(key, priority); !s.ok()) return s;
  }
  if (absl::Status s = remover_->Update(key, priority); !s.ok()) return s;
  entry.priority = priority;
  TableMetrics::Add(metrics_.priority_updates, 1);
  Notify(&TableExtension::OnUpdate, entry);
  return absl::OkStatus();
}

void Table::Notify(void (TableExtension::*hook)(const ExtensionItem&), const Entry& entry) const {
  if (extensions_.empty()) return;
  const ExtensionItem item{*entry.data, entry.priority, entry.times_sampled};
  for (const auto& extension : extensions_) ((*extension).*hook)(item);
}

absl::Status Table::DeleteLocked(uint64_t key) {
  auto it = items_.find(key);
  if (it == items_.end()) return absl::OkStatus();
  if (it->second.stale) {
    --num_stale_;
  } else {
    if (absl::Status s = sampler_->Delete(key); !s.ok()) return s;
    fresh_by_version_.erase({it->second.policy_version, key});
  }
  if (absl::Status s = remover_->Delete(key); !s.ok()) return s;
  Notify(&TableExtension::OnDelete, it->second);
  for (const auto& chunk : it->second.data->chunks) {
    auto ref = episode_refs_.find(chunk->episode_id());
    if (ref != episode_refs_.end() && --ref->second == 0) {
      episode_refs_.erase(ref);
      ++num_deleted_episodes_;
    }
    RefChunkLocked(chunk.get(), -1, false);
  }
  by_position_.erase(it->second.insertion_order);
  items_.erase(it);
  rate_limiter_.RecordDelete();
  TableMetrics::Add(metrics_.deletes, 1);
  UpdateLevelsLocked();
  return absl::OkStatus();
}

absl::Status Table::SampleBatch(int64_t num_samples, absl::Duration timeout,
                                std::vector<SampledItem>* out,
                                const std::function<bool()>& cancelled) {
  if (num_samples < 1) {
    return absl::InvalidArgumentError(absl::StrCat("num_samples must be >= 1, got ", num_samples));
  }
  WakeList wake;
  absl::MutexLock lock(&mu_);
  auto can_sample = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return HasSampleableLocked() && rate_limiter_.CanSample(1);
  };
  const bool rate_limited = !closed_ && !can_sample();
  if (absl::Status s = WaitFor(can_sample, timeout, cancelled, &samples_blocked_ms_,
                               &sample_waiting_threads_, &metrics_.sample_blocked_seconds);
      !s.ok()) {
    return s;
  }
  absl::Status status = SampleLocked(num_samples, rate_limited, out);
  CollectWakersLocked(&wake);
  return status;
}

absl::StatusOr<bool> Table::TrySampleBatch(int64_t num_samples, std::vector<SampledItem>* out,
                                           const std::shared_ptr<Waker>& wake, bool rate_limited) {
  if (num_samples < 1) {
    return absl::InvalidArgumentError(absl::StrCat("num_samples must be >= 1, got ", num_samples));
  }
  WakeList wakers;
  absl::MutexLock lock(&mu_);
  if (closed_) return absl::CancelledError(kTableClosedMessage);
  if (!HasSampleableLocked() || !rate_limiter_.CanSample(1)) {
    sample_waiters_.push_back(Waiter{wake, absl::Now()});
    return false;
  }
  absl::Status status = SampleLocked(num_samples, rate_limited, out);
  CollectWakersLocked(&wakers);
  if (!status.ok()) return status;
  return true;
}

bool Table::HasSampleableLocked() const { return sampler_->size() > 0; }

bool Table::IsStaleLocked(int64_t version) const {
  // Versions are >= 0, so the difference cannot overflow.
  return max_staleness_.has_value() && policy_version_ - version > *max_staleness_;
}

absl::StatusOr<int64_t> Table::SetPolicyVersion(int64_t version) {
  if (version < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("Table ", name_, ": policy version (", version, ") must be >= 0"));
  }
  WakeList wake;
  absl::MutexLock lock(&mu_);
  if (closed_) return absl::CancelledError(kTableClosedMessage);
  if (version < policy_version_) {
    return absl::InvalidArgumentError(
        absl::StrCat("Table ", name_, ": policy versions only grow; the current one is ",
                     policy_version_, ", got ", version));
  }
  if (version == policy_version_) return 0;
  policy_version_ = version;
  for (const auto& extension : extensions_) extension->OnPolicyVersion(version);
  absl::StatusOr<int64_t> stale = MarkStaleLocked();
  CollectWakersLocked(&wake);
  return stale;
}

absl::StatusOr<int64_t> Table::MarkStaleLocked() {
  std::vector<uint64_t> evict;
  int64_t count = 0;
  while (!fresh_by_version_.empty() && IsStaleLocked(fresh_by_version_.begin()->first)) {
    const uint64_t key = fresh_by_version_.begin()->second;
    fresh_by_version_.erase(fresh_by_version_.begin());
    if (absl::Status s = sampler_->Delete(key); !s.ok()) return s;
    items_.find(key)->second.stale = true;
    ++num_stale_;
    ++count;
    rate_limiter_.RecordRetire();
    if (evict_stale_) evict.push_back(key);
  }
  for (uint64_t key : evict) {
    if (absl::Status s = DeleteLocked(key); !s.ok()) return s;
  }
  return count;
}

int64_t Table::SampleWindowLocked(int64_t wanted, int64_t bytes) const {
  // A sampled item may be deleted (max_times_sampled), which changes what
  // the next draw sees: one at a time then.
  if (max_times_sampled_ > 0) return 1;
  int64_t window = std::min(wanted, kSampleWindow);
  // No more than one-at-a-time sampling would take before the batch's
  // bytes reach the limit, were every item as large as the largest stored:
  // all but the last of the window leave the batch below the limit.
  if (max_item_bytes_ > 0) {
    window = std::min(window, (kMaxSampleBatchBytes - bytes - 1) / max_item_bytes_ + 1);
  }
  while (window > 1 && !rate_limiter_.CanSample(window)) window /= 2;
  return window;
}

absl::Status Table::SampleLocked(int64_t num_samples, bool rate_limited,
                                 std::vector<SampledItem>* out) {
  auto can_sample = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return HasSampleableLocked() && rate_limiter_.CanSample(1);
  };
  out->reserve(out->size() + static_cast<size_t>(std::min<int64_t>(num_samples, 1024)));
  int64_t bytes = 0, taken = 0;
  // Keys are drawn a window at a time and their entries looked up (hash
  // slots prefetched first) before any is handled, so the memory accesses
  // of a window's items overlap instead of following one another (the loop
  // is bound by cache misses on large tables). Every key drawn is taken, in
  // the order drawn, and a window holds no more keys than one-at-a-time
  // sampling would take (SampleWindowLocked): a batch holds the keys
  // one-at-a-time draws give. A selector fails a draw only when empty,
  // which a window cannot become (nothing is deleted within one), so no
  // drawn key is lost to an error.
  KeyWithProbability picked[kSampleWindow];
  Entry* entries[kSampleWindow];
  while (taken < num_samples && bytes < kMaxSampleBatchBytes && can_sample()) {
    const int64_t window = SampleWindowLocked(num_samples - taken, bytes);
    for (int64_t k = 0; k < window; ++k) {
      absl::StatusOr<KeyWithProbability> key = sampler_->Sample();
      if (!key.ok()) return key.status();
      picked[k] = *key;
    }
    for (int64_t k = 0; k < window; ++k) items_.prefetch(picked[k].key);
    for (int64_t k = 0; k < window; ++k) {
      entries[k] = &items_.find(picked[k].key)->second;
      __builtin_prefetch(entries[k]->data.get());
    }
    for (int64_t k = 0; k < window; ++k) {
      Entry& entry = *entries[k];
      if (entry.times_sampled == 0) ++num_unique_samples_;
      ++entry.times_sampled;
      rate_limiter_.RecordSample();
      Notify(&TableExtension::OnSample, entry);
      out->push_back(SampledItem{entry.data, entry.priority, entry.times_sampled,
                                 picked[k].probability, static_cast<int64_t>(items_.size()),
                                 rate_limited});
      bytes += entry.bytes;
      TableMetrics::Add(metrics_.samples, 1);
      TableMetrics::Add(metrics_.sampled_bytes, entry.bytes);
      if (max_times_sampled_ > 0 && entry.times_sampled >= max_times_sampled_) {
        if (absl::Status s = DeleteLocked(picked[k].key); !s.ok()) return s;
      }
    }
    taken += window;
  }
  return absl::OkStatus();
}

absl::Status Table::MutateItems(const std::vector<deepmind::reverb::KeyWithPriority>& updates,
                                const std::vector<uint64_t>& deletes) {
  WakeList wake;
  absl::MutexLock lock(&mu_);
  for (const auto& update : updates) {
    if (absl::Status s = ValidatePriority(update.priority()); !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(s.message(), " (key ", update.key(), ", priority ", update.priority(),
                       "; no update or delete of this request was applied)"));
    }
  }
  for (uint64_t key : deletes) {
    if (absl::Status s = DeleteLocked(key); !s.ok()) return s;
  }
  CollectWakersLocked(&wake);
  for (const auto& update : updates) {
    if (!items_.contains(update.key())) continue;
    if (absl::Status s = UpdateLocked(update.key(), update.priority()); !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

void Table::Reset() {
  WakeList wake;
  absl::MutexLock lock(&mu_);
  ClearLocked();
  rate_limiter_.Reset();
  for (const auto& extension : extensions_) extension->OnReset();
  CollectWakersLocked(&wake);
}

void Table::AddExtension(std::shared_ptr<TableExtension> extension) {
  absl::MutexLock lock(&mu_);
  extensions_.push_back(std::move(extension));
}

absl::Status Table::ReplayInsert(std::shared_ptr<const TableItem> item) {
  WakeList wake;
  absl::MutexLock lock(&mu_);
  const uint64_t key = item->item.key();
  const double priority = item->item.priority();
  if (absl::Status s = ValidatePriority(priority); !s.ok()) return s;
  if (items_.contains(key)) return UpdateLocked(key, priority);
  if (absl::Status s = AddLocked(std::move(item), priority, 0, /*inserted=*/true); !s.ok()) {
    return s;
  }
  rate_limiter_.RecordInsert();
  TableMetrics::Add(metrics_.inserts, 1);
  // As InsertLocked (a torn log may hold the insert without the eviction).
  if (items_.find(key)->second.stale) {
    rate_limiter_.RecordRetire();
    if (evict_stale_) {
      if (absl::Status s = DeleteLocked(key); !s.ok()) return s;
    }
  }
  CollectWakersLocked(&wake);
  return absl::OkStatus();
}

void Table::ReplaySample(uint64_t key) {
  WakeList wake;
  absl::MutexLock lock(&mu_);
  auto it = items_.find(key);
  if (it == items_.end()) return;
  if (it->second.times_sampled == 0) ++num_unique_samples_;
  ++it->second.times_sampled;
  rate_limiter_.RecordSample();
  TableMetrics::Add(metrics_.samples, 1);
  CollectWakersLocked(&wake);
}

void Table::ClearLocked() {
  sampler_->Clear();
  remover_->Clear();
  items_.clear();
  max_item_bytes_ = 0;
  by_position_.clear();
  fresh_by_version_.clear();
  num_stale_ = 0;
  episode_refs_.clear();
  chunk_refs_.clear();
  num_deleted_episodes_ = 0;
  num_unique_samples_ = 0;
  TableMetrics::Set(metrics_.chunks, 0);
  TableMetrics::Set(metrics_.chunk_compressed_bytes, 0);
  TableMetrics::Set(metrics_.chunk_uncompressed_bytes, 0);
  UpdateLevelsLocked();
}

Table::Snapshot Table::TakeSnapshot() const {
  Snapshot snapshot;
  auto& config = snapshot.config;
  absl::ReleasableMutexLock lock(&mu_);
  config.set_table_name(name_);
  config.set_max_size(max_size_);
  config.set_max_times_sampled(max_times_sampled_);
  *config.mutable_rate_limiter() = rate_limiter_.ToCheckpoint();
  *config.mutable_sampler() = sampler_->options();
  *config.mutable_remover() = remover_->options();
  config.set_num_deleted_episodes(num_deleted_episodes_);
  config.set_signature(signature_);
  config.set_num_unique_samples(num_unique_samples_);
  config.set_policy_version(policy_version_);
  if (max_staleness_.has_value()) config.set_max_staleness(*max_staleness_);
  config.set_evict_stale(evict_stale_);
  if (seed_.has_value()) {
    config.set_seed(*seed_);
    config.set_sampler_random_state(sampler_->RandomState());
    config.set_remover_random_state(remover_->RandomState());
  }
  for (const auto& extension : extensions_) extension->OnSnapshot(&config);
  // Only pointers are copied under the mutex; sorting happens after it.
  std::vector<std::pair<uint64_t, const Entry*>> order;
  order.reserve(items_.size());
  for (const auto& [key, entry] : items_) order.emplace_back(entry.insertion_order, &entry);
  std::vector<std::pair<uint64_t, CheckpointItem>> copied;
  copied.reserve(order.size());
  for (const auto& [position, entry] : order) {
    copied.emplace_back(position,
                        CheckpointItem{entry->data, entry->priority, entry->times_sampled});
  }
  lock.Release();
  std::sort(copied.begin(), copied.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  snapshot.items.reserve(copied.size());
  for (auto& [position, item] : copied) snapshot.items.push_back(std::move(item));
  return snapshot;
}

absl::StatusOr<std::vector<std::string>> Table::Restore(
    const deepmind::reverb::PriorityTableCheckpoint& checkpoint, std::vector<CheckpointItem> items,
    RestoreMode mode) {
  // Everything that can fail is built before the table is touched.
  absl::StatusOr<RateLimiter> limiter = RateLimiter::FromCheckpoint(checkpoint.rate_limiter());
  if (!limiter.ok()) return limiter.status();
  absl::StatusOr<std::unique_ptr<ItemSelector>> sampler = CreateSelector(checkpoint.sampler());
  if (!sampler.ok()) return sampler.status();
  absl::StatusOr<std::unique_ptr<ItemSelector>> remover = CreateSelector(checkpoint.remover());
  if (!remover.ok()) return remover.status();
  if (checkpoint.policy_version() < 0 ||
      (checkpoint.has_max_staleness() && checkpoint.max_staleness() < 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Table ", name_, ": the checkpoint's policy version and max_staleness must be >= 0"));
  }
  if (mode == RestoreMode::kCheckpointConfig && checkpoint.has_seed()) {
    // A seeded table goes on drawing where the checkpointed one stopped.
    for (auto [selector, state, offset] :
         {std::make_tuple(sampler->get(), &checkpoint.sampler_random_state(), 0),
          std::make_tuple(remover->get(), &checkpoint.remover_random_state(), 1)}) {
      if (state->empty()) {
        selector->Seed(checkpoint.seed() + offset);
      } else if (absl::Status s = selector->SetRandomState(*state); !s.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("Table ", name_, ": the checkpoint's selector state: ", s.message()));
      }
    }
  }
  std::shared_ptr<const std::vector<SignatureSpec>> signature_columns;
  if (mode == RestoreMode::kCheckpointConfig) {
    absl::StatusOr<std::shared_ptr<const std::vector<SignatureSpec>>> columns =
        SignatureColumns(checkpoint.signature());
    if (!columns.ok()) return columns.status();
    signature_columns = *std::move(columns);
  }

  WakeList wake;
  absl::MutexLock lock(&mu_);
  std::vector<std::string> differences;
  auto differs = [&differences](const std::string& what, const std::string& table,
                                const std::string& saved) {
    if (table != saved) {
      differences.push_back(absl::StrCat(what, ": table has ", table, ", checkpoint has ", saved));
    }
  };
  differs("sampler", sampler_->DebugString(), (*sampler)->DebugString());
  differs("remover", remover_->DebugString(), (*remover)->DebugString());
  differs("max_size", absl::StrCat(max_size_), absl::StrCat(checkpoint.max_size()));
  differs("max_times_sampled", absl::StrCat(max_times_sampled_),
          absl::StrCat(checkpoint.max_times_sampled()));
  differs("rate_limiter", rate_limiter_.DebugString(), limiter->DebugString());
  differs("seed", seed_.has_value() ? absl::StrCat(*seed_) : "none",
          checkpoint.has_seed() ? absl::StrCat(checkpoint.seed()) : "none");
  const auto staleness = [](const std::optional<int64_t>& limit, bool evict) {
    return limit.has_value() ? absl::StrCat(*limit, evict ? " (evicting)" : "") : "none";
  };
  differs(
      "max_staleness", staleness(max_staleness_, evict_stale_),
      staleness(checkpoint.has_max_staleness() ? std::optional<int64_t>(checkpoint.max_staleness())
                                               : std::nullopt,
                checkpoint.evict_stale()));
  differs("signature", signature_.empty() ? "none" : "a signature",
          checkpoint.signature().empty()                      ? "none"
          : SameSignature(checkpoint.signature(), signature_) ? "a signature"
                                                              : "another signature");

  ClearLocked();
  if (mode == RestoreMode::kCheckpointConfig) {
    sampler_ = *std::move(sampler);
    remover_ = *std::move(remover);
    max_size_ = checkpoint.max_size();
    TableMetrics::Set(metrics_.max_size, max_size_);
    max_times_sampled_ = checkpoint.max_times_sampled();
    signature_ = checkpoint.signature();
    signature_columns_ = std::move(signature_columns);
    rate_limiter_ = *limiter;
    seed_ = checkpoint.has_seed() ? std::optional<uint64_t>(checkpoint.seed()) : std::nullopt;
    max_staleness_ = checkpoint.has_max_staleness()
                         ? std::optional<int64_t>(checkpoint.max_staleness())
                         : std::nullopt;
    evict_stale_ = max_staleness_.has_value() && checkpoint.evict_stale();
  } else {
    rate_limiter_.RestoreCounters(*limiter);
  }
  // The restored items are stale or not by the checkpoint's version (a
  // dm-reverb checkpoint has none: 0).
  policy_version_ = checkpoint.policy_version();
  for (CheckpointItem& item : items) {
    if (absl::Status s = ValidateTableItem(*item.data); !s.ok()) {
      ClearLocked();
      return absl::InvalidArgumentError(
          absl::StrCat("Item ", item.data->item.key(), " of table ", name_, ": ", s.message()));
    }
    if (absl::Status s = AddLocked(std::move(item.data), item.priority, item.times_sampled);
        !s.ok()) {
      ClearLocked();
      return absl::InvalidArgumentError(absl::StrCat("Restoring table ", name_, ": ", s.message()));
    }
  }
  num_deleted_episodes_ = checkpoint.num_deleted_episodes();
  num_unique_samples_ = checkpoint.num_unique_samples();
  if (evict_stale_) {
    std::vector<uint64_t> stale;
    for (const auto& [key, entry] : items_) {
      if (entry.stale) stale.push_back(key);
    }
    for (uint64_t key : stale) {
      if (absl::Status s = DeleteLocked(key); !s.ok()) return s;
    }
  }
  // Only kTableConfig can shrink max_size below the restored item count.
  while (static_cast<int64_t>(items_.size()) > max_size_) {
    absl::StatusOr<KeyWithProbability> victim = remover_->Sample();
    if (!victim.ok()) return victim.status();
    if (absl::Status s = DeleteLocked(victim->key); !s.ok()) return s;
  }
  CollectWakersLocked(&wake);
  return differences;
}

void Table::Close() {
  WakeList wake;
  absl::MutexLock lock(&mu_);
  closed_ = true;
  CollectWakersLocked(&wake);
}

Table::BlockedCallers Table::blocked_callers() const {
  absl::MutexLock lock(&mu_);
  auto live = [](const std::vector<Waiter>& waiters) {
    return static_cast<int64_t>(std::count_if(waiters.begin(), waiters.end(),
                                              [](const Waiter& w) { return !w.waker.expired(); }));
  };
  return BlockedCallers{insert_waiting_threads_ + live(insert_waiters_),
                        sample_waiting_threads_ + live(sample_waiters_)};
}

int64_t Table::num_waiting() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(insert_waiters_.size() + sample_waiters_.size());
}

void Table::Lookup(const std::vector<uint64_t>& keys, std::vector<SampledItem>* found,
                   std::vector<uint64_t>* missing) const {
  absl::MutexLock lock(&mu_);
  const int64_t size = static_cast<int64_t>(items_.size());
  for (uint64_t key : keys) {
    auto it = items_.find(key);
    if (it == items_.end()) {
      missing->push_back(key);
      continue;
    }
    const Entry& entry = it->second;
    found->push_back(SampledItem{entry.data, entry.priority, entry.times_sampled, 0.0, size});
  }
}

uint64_t Table::Scan(uint64_t start, int64_t max_items, std::vector<SampledItem>* out,
                     bool* done) const {
  absl::MutexLock lock(&mu_);
  const int64_t size = static_cast<int64_t>(items_.size());
  auto it = by_position_.lower_bound(start);
  int64_t bytes = 0;
  uint64_t next = start;
  for (int64_t n = 0; it != by_position_.end() && n < std::max<int64_t>(max_items, 1) &&
                      (n == 0 || bytes < kMaxSampleBatchBytes);
       ++it, ++n) {
    const Entry& entry = items_.find(it->second)->second;
    out->push_back(SampledItem{entry.data, entry.priority, entry.times_sampled, 0.0, size});
    bytes += entry.bytes;
    next = it->first + 1;
  }
  *done = it == by_position_.end();
  return next;
}

deepmind::reverb::TableStatsResponse Table::Stats() const {
  static constexpr double kAgeBuckets[] = {1, 10, 60, 600, 3600, 86400};
  deepmind::reverb::TableStatsResponse stats;
  for (double bound : kAgeBuckets) stats.add_age_bucket_seconds(bound);
  std::vector<int64_t> ages(std::size(kAgeBuckets) + 1, 0);
  const absl::Time now = absl::Now();
  absl::MutexLock lock(&mu_);
  stats.set_size(static_cast<int64_t>(items_.size()));
  bool first = true;
  for (const auto& [key, entry] : items_) {
    stats.set_total_priority(stats.total_priority() + entry.priority);
    stats.set_min_priority(first ? entry.priority : std::min(stats.min_priority(), entry.priority));
    stats.set_max_priority(first ? entry.priority : std::max(stats.max_priority(), entry.priority));
    ++(*stats.mutable_times_sampled())[entry.times_sampled];
    const double age = absl::ToDoubleSeconds(now - entry.data->item.inserted_at());
    stats.set_min_age_seconds(first ? age : std::min(stats.min_age_seconds(), age));
    stats.set_max_age_seconds(first ? age : std::max(stats.max_age_seconds(), age));
    size_t bucket = 0;
    while (bucket < std::size(kAgeBuckets) && age > kAgeBuckets[bucket]) ++bucket;
    ++ages[bucket];
    first = false;
  }
  stats.set_policy_version(policy_version_);
  stats.set_stale_items(num_stale_);
  for (int64_t count : ages) stats.add_age_counts(count);
  return stats;
}

bool Table::CanSample(int64_t num_samples) const {
  absl::MutexLock lock(&mu_);
  return rate_limiter_.CanSample(num_samples);
}

bool Table::CanInsert(int64_t num_inserts) const {
  absl::MutexLock lock(&mu_);
  return rate_limiter_.CanInsert(num_inserts);
}

int64_t Table::num_stale() const {
  absl::MutexLock lock(&mu_);
  return num_stale_;
}

int64_t Table::size() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(items_.size());
}

deepmind::reverb::TableInfo Table::Info() const {
  absl::MutexLock lock(&mu_);
  deepmind::reverb::TableInfo info;
  info.set_name(name_);
  *info.mutable_sampler_options() = sampler_->options();
  *info.mutable_remover_options() = remover_->options();
  info.set_max_size(max_size_);
  info.set_max_times_sampled(max_times_sampled_);
  *info.mutable_rate_limiter_info() = rate_limiter_.Info();
  info.set_signature(signature_);
  info.set_current_size(static_cast<int64_t>(items_.size()));
  info.set_num_episodes(static_cast<int64_t>(episode_refs_.size()));
  info.set_num_deleted_episodes(num_deleted_episodes_);
  info.set_num_unique_samples(num_unique_samples_);
  info.set_sampler_total_weight(sampler_->TotalWeight());
  info.set_policy_version(policy_version_);
  if (max_staleness_.has_value()) info.set_max_staleness(*max_staleness_);
  info.set_evict_stale(evict_stale_);
  auto* times = info.mutable_table_worker_time();
  times->set_running_ms(absl::ToInt64Milliseconds(absl::Now() - created_at_));
  times->set_waiting_for_sampling_ms(inserts_blocked_ms_);
  times->set_waiting_for_inserts_ms(samples_blocked_ms_);
  return info;
}

std::string Table::DebugString() const {
  absl::MutexLock lock(&mu_);
  return absl::StrCat(
      "Table(sampler=", sampler_->DebugString(), ", remover=", remover_->DebugString(),
      ", max_size=", max_size_, ", max_times_sampled=", max_times_sampled_, ", name=", name_,
      max_staleness_.has_value() ? absl::StrCat(", max_staleness=", *max_staleness_,
                                                evict_stale_ ? ", evict_stale=True" : "")
                                 : "",
      ", rate_limiter=", rate_limiter_.DebugString(),
      ", signature=", signature_.empty() ? "nullptr" : "set", ")");
}

}  // namespace tf_reverb
