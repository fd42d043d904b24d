// InsertOnSampleExtension: the first time an item of the source table is
// sampled, a copy of it (same key, same chunks) is inserted into a target
// table — e.g. to promote sampled experience into an evaluation table.
//
// Contract:
//  * Thread-safety: thread-safe. OnSample runs under the source table's mutex
//    and only queues the copy; a worker thread of the extension performs the
//    (possibly blocking) insert into the target, with `timeout`.
//  * Ownership: holds the target table by std::shared_ptr; the worker stops
//    and joins in the destructor, dropping copies not yet inserted.
//  * Errors: a failed insert (timeout, target closed, invalid priority) is
//    logged and counted in failed(); when more than `max_pending` copies wait,
//    new ones are dropped, logged and counted in dropped(). Nothing is lost
//    without a trace.
#ifndef TF_REVERB_SERVER_EXTENSIONS_INSERT_ON_SAMPLE_H_
#define TF_REVERB_SERVER_EXTENSIONS_INSERT_ON_SAMPLE_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/table.h"
#include "server/table_extension.h"
#include "server/table_item.h"

namespace tf_reverb {

class InsertOnSampleExtension : public TableExtension {
 public:
  InsertOnSampleExtension(std::shared_ptr<Table> target, absl::Duration timeout,
                          int64_t max_pending = 10000);
  ~InsertOnSampleExtension() override;

  void OnSample(const ExtensionItem& item) override;
  std::string DebugString() const override;

  // Blocks until every queued copy was handled (inserted or failed).
  void WaitUntilIdle();
  int64_t inserted() const;
  int64_t failed() const;
  int64_t dropped() const;

 private:
  void Work();

  const std::shared_ptr<Table> target_;
  const absl::Duration timeout_;
  const int64_t max_pending_;

  mutable absl::Mutex mu_;
  std::deque<TableItem> pending_ ABSL_GUARDED_BY(mu_);
  bool busy_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int64_t inserted_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t failed_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t dropped_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread worker_;
};

}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_EXTENSIONS_INSERT_ON_SAMPLE_H_
