#include "server/rate_limiter.h"

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "checkpoint.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "schema.pb.h"
#include "server/testing/table_testing.h"

namespace tf_reverb {
namespace {

using ::testing::HasSubstr;

using ::tf_reverb::testing::Limiter;
using ::tf_reverb::testing::MinSize;
using ::tf_reverb::testing::QueueLimiter;

TEST(RateLimiterTest, CreateValidates) {
  auto limiter = RateLimiter::Create(-1, 1, 0, 1);
  EXPECT_EQ(limiter.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(limiter.status().message(), "samples_per_insert must be > 0, got -1");
  EXPECT_EQ(RateLimiter::Create(0, 1, 0, 1).status().code(), absl::StatusCode::kInvalidArgument);
  limiter = RateLimiter::Create(std::nan(""), 1, 0, 1);
  EXPECT_EQ(limiter.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(limiter.status().message(), HasSubstr("samples_per_insert"));

  limiter = RateLimiter::Create(1, 0, 0, 1);
  EXPECT_EQ(limiter.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(limiter.status().message(), "min_size_to_sample must be >= 1, got 0");
  EXPECT_EQ(RateLimiter::Create(1, -5, 0, 1).status().code(), absl::StatusCode::kInvalidArgument);

  limiter = RateLimiter::Create(1, 1, 2, 1);
  EXPECT_EQ(limiter.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(limiter.status().message(),
            "min_diff must be <= max_diff, got min_diff=2 > max_diff=1");
  limiter = RateLimiter::Create(1, 1, std::nan(""), 1);
  EXPECT_EQ(limiter.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(limiter.status().message(), HasSubstr("NaN"));

  // min_diff == max_diff and infinite bounds are fine.
  EXPECT_TRUE(RateLimiter::Create(1, 1, 1, 1).ok());
  EXPECT_TRUE(RateLimiter::Create(0.5, 3, -INFINITY, INFINITY).ok());
}

TEST(RateLimiterTest, NonPositiveCountsAreRefused) {
  RateLimiter limiter = MinSize(1);
  limiter.RecordInsert();
  EXPECT_TRUE(limiter.CanSample(1));
  EXPECT_TRUE(limiter.CanInsert(1));
  EXPECT_FALSE(limiter.CanSample(0));
  EXPECT_FALSE(limiter.CanSample(-1));
  EXPECT_FALSE(limiter.CanInsert(0));
  EXPECT_FALSE(limiter.CanInsert(-3));
  // Absurd counts neither overflow nor abort.
  constexpr int64_t kHuge = std::numeric_limits<int64_t>::max();
  EXPECT_TRUE(limiter.CanInsert(kHuge));  // MinSize: max_diff = DBL_MAX.
  EXPECT_TRUE(limiter.CanSample(kHuge));  // MinSize: min_diff = -DBL_MAX.
  RateLimiter queue = QueueLimiter(2);
  queue.RecordInsert();
  EXPECT_FALSE(queue.CanInsert(kHuge));
  EXPECT_FALSE(queue.CanSample(kHuge));
  queue.RecordDelete();
  queue.RecordDelete();  // Inconsistent counters still do not misbehave.
  EXPECT_TRUE(queue.CanInsert(1));
}

TEST(RateLimiterTest, MinSizeNeverBlocksInsertsAndGatesSamplesOnSize) {
  RateLimiter limiter = MinSize(3);
  for (int i = 0; i < 2; ++i) {
    EXPECT_FALSE(limiter.CanSample(1));
    ASSERT_TRUE(limiter.CanInsert(1));
    limiter.RecordInsert();
  }
  EXPECT_FALSE(limiter.CanSample(1));
  limiter.RecordInsert();
  EXPECT_TRUE(limiter.CanSample(1));
  for (int i = 0; i < 10000; ++i) {
    ASSERT_TRUE(limiter.CanSample(1));
    limiter.RecordSample();
  }
  for (int i = 0; i < 10000; ++i) {
    ASSERT_TRUE(limiter.CanInsert(1));
    limiter.RecordInsert();
  }
  // Deletes bring the size below min_size_to_sample again.
  for (int i = 0; i < 10001; ++i) limiter.RecordDelete();
  EXPECT_EQ(limiter.inserts() - limiter.deletes(), 2);
  EXPECT_FALSE(limiter.CanSample(1));
  EXPECT_TRUE(limiter.CanInsert(1));
}

TEST(RateLimiterTest, QueueAllowsSampleIffUnsampledAndInsertIffNotFull) {
  constexpr int64_t kN = 2;
  RateLimiter limiter = QueueLimiter(kN);
  // Table.queue: Fifo, max_times_sampled = 1 -> every sample deletes.
  int64_t queued = 0;
  auto try_insert = [&] {
    if (!limiter.CanInsert(1)) return false;
    limiter.RecordInsert();
    ++queued;
    return true;
  };
  auto try_sample = [&] {
    if (!limiter.CanSample(1)) return false;
    limiter.RecordSample();
    limiter.RecordDelete();
    --queued;
    return true;
  };
  EXPECT_FALSE(try_sample());
  // Inserting 3 items into queue(2) confirms 2 and blocks the third.
  EXPECT_TRUE(try_insert());
  EXPECT_TRUE(try_insert());
  EXPECT_FALSE(try_insert());
  EXPECT_TRUE(try_sample());
  EXPECT_TRUE(try_insert());  // The blocked third goes through.
  EXPECT_FALSE(try_insert());
  EXPECT_TRUE(try_sample());
  EXPECT_TRUE(try_sample());
  EXPECT_FALSE(try_sample());
  EXPECT_EQ(queued, 0);

  // Generic invariant over a pseudo-random interleaving.
  uint64_t state = 12345;
  for (int step = 0; step < 5000; ++step) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    const int64_t unsampled = limiter.inserts() - limiter.samples();
    EXPECT_EQ(limiter.CanSample(1), unsampled > 0);
    EXPECT_EQ(limiter.CanInsert(1), limiter.inserts() + 1 - limiter.samples() <= kN);
    if ((state >> 33) % 2) {
      try_insert();
    } else {
      try_sample();
    }
    ASSERT_GE(queued, 0);
    ASSERT_LE(queued, kN);
  }
}

TEST(RateLimiterTest, SampleToInsertRatioWorkedExample) {
  // SampleToInsertRatio(1.0, 1, 2.0): min_diff = -1, max_diff = 3.
  RateLimiter limiter = Limiter(1.0, 1, -1.0, 3.0);
  EXPECT_FALSE(limiter.CanSample(1));
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(limiter.CanInsert(1)) << "insert " << i;
    limiter.RecordInsert();
  }
  EXPECT_FALSE(limiter.CanInsert(1));  // The 4th insert blocks.
  // With the 4th insert pending, 5 samples are served before sampling
  // blocks: the first sample unblocks the pending insert.
  bool pending_insert = true;
  int samples = 0;
  while (limiter.CanSample(1)) {
    limiter.RecordSample();
    ++samples;
    if (pending_insert && limiter.CanInsert(1)) {
      limiter.RecordInsert();
      pending_insert = false;
      EXPECT_EQ(samples, 1);
    }
    ASSERT_LT(samples, 100);
  }
  EXPECT_FALSE(pending_insert);
  EXPECT_EQ(samples, 5);
  EXPECT_EQ(limiter.inserts(), 4);
  // Now inserts flow again until the cursor reaches max_diff.
  EXPECT_TRUE(limiter.CanInsert(1));
  EXPECT_TRUE(limiter.CanInsert(4));   // (4+4)*1 - 5 = 3 <= 3.
  EXPECT_FALSE(limiter.CanInsert(5));  // 4 > 3.
}

TEST(RateLimiterTest, SampleBatchesUseTheCursor) {
  // SampleToInsertRatio(2.0, 2, 3.0): min_diff = 1, max_diff = 7.
  RateLimiter limiter = Limiter(2.0, 2, 1.0, 7.0);
  limiter.RecordInsert();
  EXPECT_FALSE(limiter.CanSample(1));  // size 1 < 2.
  limiter.RecordInsert();
  // cursor = 4: up to 3 samples keep it >= 1.
  EXPECT_TRUE(limiter.CanSample(3));
  EXPECT_FALSE(limiter.CanSample(4));
  // Inserts: (3)*2 - 0 = 6 <= 7, (4)*2 = 8 > 7.
  EXPECT_TRUE(limiter.CanInsert(1));
  EXPECT_FALSE(limiter.CanInsert(2));
}

TEST(RateLimiterTest, DeletesOnlyAffectTheSizeTest) {
  RateLimiter limiter = Limiter(1.0, 2, -1.0, 3.0);
  for (int i = 0; i < 3; ++i) limiter.RecordInsert();
  EXPECT_FALSE(limiter.CanInsert(1));
  // Deleting items shrinks the size below min_size_to_sample: inserts are
  // allowed again through the size test, samples are blocked by it.
  limiter.RecordDelete();
  limiter.RecordDelete();
  EXPECT_TRUE(limiter.CanInsert(1));   // 3 + 1 - 2 = 2 <= 2.
  EXPECT_FALSE(limiter.CanInsert(2));  // 3 > 2 and cursor 5 > 3.
  EXPECT_FALSE(limiter.CanSample(1));  // size 1 < 2.
}

TEST(RateLimiterTest, ResetZeroesCountersAndKeepsParameters) {
  RateLimiter limiter = Limiter(1.5, 2, -4.0, 6.0);
  limiter.RecordInsert();
  limiter.RecordInsert();
  limiter.RecordSample();
  limiter.RecordDelete();
  limiter.Reset();
  EXPECT_EQ(limiter.inserts(), 0);
  EXPECT_EQ(limiter.samples(), 0);
  EXPECT_EQ(limiter.deletes(), 0);
  EXPECT_EQ(limiter.samples_per_insert(), 1.5);
  EXPECT_EQ(limiter.min_size_to_sample(), 2);
  EXPECT_EQ(limiter.min_diff(), -4.0);
  EXPECT_EQ(limiter.max_diff(), 6.0);
  EXPECT_FALSE(limiter.CanSample(1));
}

TEST(RateLimiterTest, Info) {
  RateLimiter limiter = Limiter(1.5, 2, -4.0, 6.0);
  limiter.RecordInsert();
  limiter.RecordInsert();
  limiter.RecordInsert();
  limiter.RecordSample();
  limiter.RecordDelete();
  deepmind::reverb::RateLimiterInfo info = limiter.Info();
  EXPECT_EQ(info.samples_per_insert(), 1.5);
  EXPECT_EQ(info.min_size_to_sample(), 2);
  EXPECT_EQ(info.min_diff(), -4.0);
  EXPECT_EQ(info.max_diff(), 6.0);
  EXPECT_EQ(info.insert_stats().completed(), 3);
  EXPECT_EQ(info.sample_stats().completed(), 1);
}

TEST(RateLimiterTest, CheckpointRoundTrip) {
  RateLimiter limiter = Limiter(0.5, 3, -2.0, 9.0);
  for (int i = 0; i < 7; ++i) limiter.RecordInsert();
  for (int i = 0; i < 2; ++i) limiter.RecordSample();
  limiter.RecordDelete();
  deepmind::reverb::RateLimiterCheckpoint checkpoint = limiter.ToCheckpoint();
  EXPECT_EQ(checkpoint.samples_per_insert(), 0.5);
  EXPECT_EQ(checkpoint.min_size_to_sample(), 3);
  EXPECT_EQ(checkpoint.min_diff(), -2.0);
  EXPECT_EQ(checkpoint.max_diff(), 9.0);
  EXPECT_EQ(checkpoint.insert_count(), 7);
  EXPECT_EQ(checkpoint.sample_count(), 2);
  EXPECT_EQ(checkpoint.delete_count(), 1);

  absl::StatusOr<RateLimiter> restored = RateLimiter::FromCheckpoint(checkpoint);
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(restored->inserts(), 7);
  EXPECT_EQ(restored->samples(), 2);
  EXPECT_EQ(restored->deletes(), 1);
  EXPECT_EQ(restored->DebugString(), limiter.DebugString());
  EXPECT_EQ(restored->CanSample(1), limiter.CanSample(1));
  EXPECT_EQ(restored->CanInsert(3), limiter.CanInsert(3));
}

TEST(RateLimiterTest, FromCheckpointRejectsBadCheckpoints) {
  deepmind::reverb::RateLimiterCheckpoint checkpoint;  // spi = 0.
  checkpoint.set_min_size_to_sample(1);
  auto restored = RateLimiter::FromCheckpoint(checkpoint);
  EXPECT_EQ(restored.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(restored.status().message(), HasSubstr("samples_per_insert"));

  checkpoint.set_samples_per_insert(1.0);
  checkpoint.set_max_diff(1.0);
  checkpoint.set_insert_count(-1);
  restored = RateLimiter::FromCheckpoint(checkpoint);
  EXPECT_EQ(restored.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(restored.status().message(), HasSubstr("insert_count=-1"));

  checkpoint.set_insert_count(1);
  checkpoint.set_delete_count(2);
  EXPECT_EQ(RateLimiter::FromCheckpoint(checkpoint).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(RateLimiterTest, DebugStringUsesReverbFormat) {
  EXPECT_EQ(MinSize(1).DebugString(),
            "RateLimiter(samples_per_insert=1, min_diff_=-1.79769e+308, "
            "max_diff=1.79769e+308, min_size_to_sample=1)");
  EXPECT_EQ(Limiter(2.5, 10, 1, 7).DebugString(),
            "RateLimiter(samples_per_insert=2.5, min_diff_=1, max_diff=7, "
            "min_size_to_sample=10)");
}

}  // namespace
}  // namespace tf_reverb
