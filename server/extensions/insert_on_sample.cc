#include "server/extensions/insert_on_sample.h"

#include <cstdio>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "server/item_record.h"
#include "server/table_item.h"

namespace tf_reverb {

InsertOnSampleExtension::InsertOnSampleExtension(std::shared_ptr<Table> target,
                                                 absl::Duration timeout, int64_t max_pending)
    : target_(std::move(target)), timeout_(timeout), max_pending_(max_pending) {
  worker_ = std::thread([this] { Work(); });
}

InsertOnSampleExtension::~InsertOnSampleExtension() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  worker_.join();
}

void InsertOnSampleExtension::OnSample(const ExtensionItem& item) {
  if (item.times_sampled != 1) return;
  absl::MutexLock lock(&mu_);
  if (static_cast<int64_t>(pending_.size()) >= max_pending_) {
    ++dropped_;
    std::fprintf(stderr,
                 "InsertOnSampleExtension: dropped the copy of item %llu for table "
                 "%s (%lld copies already pending)\n",
                 static_cast<unsigned long long>(item.data.item.key()), target_->name().c_str(),
                 static_cast<long long>(pending_.size()));
    return;
  }
  PrioritizedItem copy = item.data.item.ToProto();
  copy.set_table(target_->name());
  copy.set_priority(item.priority);
  copy.clear_inserted_at();
  pending_.push_back(TableItem{ItemRecord::FromProto(copy), item.data.chunks});
}

void InsertOnSampleExtension::Work() {
  while (true) {
    TableItem item;
    {
      absl::MutexLock lock(&mu_);
      busy_ = false;
      mu_.Await(absl::Condition(
          +[](InsertOnSampleExtension* self) ABSL_EXCLUSIVE_LOCKS_REQUIRED(self->mu_) {
            return self->stopping_ || !self->pending_.empty();
          },
          this));
      if (stopping_) return;
      item = std::move(pending_.front());
      pending_.pop_front();
      busy_ = true;
    }
    const uint64_t key = item.item.key();
    const absl::Status status = target_->InsertOrAssign(std::move(item), timeout_);
    absl::MutexLock lock(&mu_);
    if (status.ok()) {
      ++inserted_;
    } else {
      ++failed_;
      std::fprintf(stderr, "InsertOnSampleExtension: copying item %llu into %s failed: %s\n",
                   static_cast<unsigned long long>(key), target_->name().c_str(),
                   status.ToString().c_str());
    }
  }
}

void InsertOnSampleExtension::WaitUntilIdle() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](InsertOnSampleExtension* self) ABSL_EXCLUSIVE_LOCKS_REQUIRED(self->mu_) {
        return self->pending_.empty() && !self->busy_;
      },
      this));
}

int64_t InsertOnSampleExtension::inserted() const {
  absl::MutexLock lock(&mu_);
  return inserted_;
}

int64_t InsertOnSampleExtension::failed() const {
  absl::MutexLock lock(&mu_);
  return failed_;
}

int64_t InsertOnSampleExtension::dropped() const {
  absl::MutexLock lock(&mu_);
  return dropped_;
}

std::string InsertOnSampleExtension::DebugString() const {
  return absl::StrCat("InsertOnSampleExtension(target=", target_->name(),
                      ", timeout=", absl::FormatDuration(timeout_), ")");
}

}  // namespace tf_reverb
