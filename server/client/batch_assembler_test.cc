#include "server/client/batch_assembler.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace tf_reverb {
namespace {

// A batch: the row numbers a Fill gave it (rows count from 0 per batch).
using Rows = std::vector<int64_t>;
using Assembler = BatchAssembler<Rows, absl::Status>;

bool IsEmpty(const Rows& rows) { return rows.empty(); }

// Drains `assembler`, returning the sizes of the batches in the order
// Next() handed them out.
std::vector<size_t> Sizes(Assembler& assembler) {
  std::vector<size_t> sizes;
  Rows batch;
  while (assembler.Next(&batch)) sizes.push_back(batch.size());
  return sizes;
}

TEST(BatchAssemblerTest, ThePartialBatchComesLastEvenWhenItFinishesFirst) {
  // max_samples 6, batch 4: the claims are 4 then 2. The full batch's Fill
  // waits until the partial one has been put aside, so the partial batch
  // finishes first; it must still be handed out last.
  absl::Notification partial_done;
  Assembler assembler(
      /*batch_size=*/4, /*max_samples=*/6, /*num_threads=*/2, /*prefetch=*/2,
      [&](int64_t rows, Rows* batch, bool*) {
        if (rows == 4) partial_done.WaitForNotification();
        for (int64_t i = 0; i < rows; ++i) batch->push_back(i);
        if (rows == 2) partial_done.Notify();
        return absl::OkStatus();
      },
      IsEmpty);
  EXPECT_EQ(Sizes(assembler), (std::vector<size_t>{4, 2}));
  EXPECT_TRUE(assembler.status().ok());
}

TEST(BatchAssemblerTest, RowsAreClaimedUpToMaxSamples) {
  absl::Mutex mu;
  int64_t filled = 0;
  Assembler assembler(
      3, 10, 2, 2,
      [&](int64_t rows, Rows* batch, bool*) {
        absl::MutexLock lock(&mu);
        filled += rows;
        batch->assign(rows, 0);
        return absl::OkStatus();
      },
      IsEmpty);
  EXPECT_EQ(Sizes(assembler), (std::vector<size_t>{3, 3, 3, 1}));
  absl::MutexLock lock(&mu);
  EXPECT_EQ(filled, 10);
}

TEST(BatchAssemblerTest, AnEndedSourceEndsAfterTheBatchesBeforeIt) {
  // The third claim finds the source ended after one row; empty batches
  // claimed after it (if any) are skipped.
  absl::Mutex mu;
  int calls = 0;
  Assembler assembler(
      2, -1, 1, 1,
      [&](int64_t rows, Rows* batch, bool* ended) {
        absl::MutexLock lock(&mu);
        if (++calls == 3) {
          batch->push_back(0);
          *ended = true;
        } else {
          batch->assign(rows, 0);
        }
        return absl::OkStatus();
      },
      IsEmpty);
  EXPECT_EQ(Sizes(assembler), (std::vector<size_t>{2, 2, 1}));
  EXPECT_TRUE(assembler.status().ok());
}

TEST(BatchAssemblerTest, AnErrorIsReportedAfterTheBatchesClaimedBeforeIt) {
  absl::Mutex mu;
  int calls = 0;
  Assembler assembler(
      2, -1, 1, 1,
      [&](int64_t rows, Rows* batch, bool*) {
        absl::MutexLock lock(&mu);
        if (++calls == 2) return absl::InternalError("the sampler broke");
        batch->assign(rows, 0);
        return absl::OkStatus();
      },
      IsEmpty);
  EXPECT_EQ(Sizes(assembler), (std::vector<size_t>{2}));
  EXPECT_EQ(assembler.status(), absl::InternalError("the sampler broke"));
}

TEST(BatchAssemblerTest, NoMoreThanPrefetchBatchesAreClaimedAhead) {
  absl::Mutex mu;
  int64_t claims = 0;
  Assembler assembler(
      1, -1, 4, 2,
      [&](int64_t rows, Rows* batch, bool*) {
        absl::MutexLock lock(&mu);
        ++claims;
        batch->assign(rows, 0);
        return absl::OkStatus();
      },
      IsEmpty);
  // Nothing consumed: two claims at most, whatever the four threads do.
  {
    absl::MutexLock lock(&mu);
    auto two = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return claims >= 2; };
    mu.Await(absl::Condition(&two));
  }
  Rows batch;
  ASSERT_TRUE(assembler.Next(&batch));
  {
    absl::MutexLock lock(&mu);
    auto three = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return claims >= 3; };
    mu.Await(absl::Condition(&three));
    EXPECT_LE(claims, 3);
  }
  assembler.Stop([] {});
}

TEST(BatchAssemblerTest, StopUnblocksFillsAndNext) {
  auto release = std::make_shared<absl::Notification>();
  Assembler assembler(
      2, -1, 2, 2,
      [release](int64_t, Rows*, bool*) {
        release->WaitForNotification();
        return absl::CancelledError("closed");
      },
      IsEmpty);
  assembler.Stop([release] { release->Notify(); });
  Rows batch;
  EXPECT_FALSE(assembler.Next(&batch));
  EXPECT_TRUE(assembler.stopped());
}

}  // namespace
}  // namespace tf_reverb
