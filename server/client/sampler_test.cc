// Tests of Sampler: flow control, errors and cancellation with scripted
// workers, then the real workers of Client::NewSampler against real servers
// (gRPC and the in-process shortcut), including a server stopping or
// restarting under a running sampler (run under --config=asan too).
#include "server/client/sampler.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "schema.pb.h"
#include "server/client/client.h"
#include "server/client/sample.h"
#include "server/service/server.h"
#include "server/table.h"
#include "server/tensor.h"
#include "server/testing/grpc_call_counter.h"
#include "server/testing/server_testing.h"
#include "server/testing/table_testing.h"
#include "server/testing/tensor_testing.h"

namespace tf_reverb {
namespace {

using ::tf_reverb::tensor_testing::Int32Scalar;
using ::tf_reverb::testing::Fifo;
using ::tf_reverb::testing::GrpcCalls;
using ::tf_reverb::testing::kSampleStreamMethod;
using ::tf_reverb::testing::MakeTable;
using ::tf_reverb::testing::MinSize;
using ::tf_reverb::testing::ServedTable;
using ::tf_reverb::testing::Uniform;

// Deadline of waits that must end: only a hung test reaches it, however
// loaded the machine.
constexpr absl::Duration kLong = absl::Seconds(120);
// How long a check that nothing more happens looks (a busy machine can only
// make it miss a bug, never fail a correct sampler).
constexpr absl::Duration kQuiet = absl::Milliseconds(200);

std::vector<std::shared_ptr<Table>> Tables(std::shared_ptr<Table> table) {
  return {std::move(table)};
}

// ---------------------------------------------------------------------------
// Scripted workers

Sample FakeSample(uint64_t key) {
  deepmind::reverb::SampleInfo info;
  info.mutable_item()->set_key(key);
  return Sample(std::move(info), {});
}

// Shared state of every ScriptedWorker of one test.
struct Script {
  absl::Mutex mu;
  // Statuses returned by successive calls (then OK forever).
  std::vector<absl::Status> failures ABSL_GUARDED_BY(mu);
  int64_t requested ABSL_GUARDED_BY(mu) = 0;
  int64_t max_request ABSL_GUARDED_BY(mu) = 0;
  int calls ABSL_GUARDED_BY(mu) = 0;
  uint64_t next_key ABSL_GUARDED_BY(mu) = 1;
  std::vector<absl::Duration> timeouts ABSL_GUARDED_BY(mu);
  // Samples returned per successful call (0: as many as asked).
  int64_t batch ABSL_GUARDED_BY(mu) = 0;
};

class ScriptedWorker : public SamplerWorker {
 public:
  explicit ScriptedWorker(Script* script) : script_(script) {}

  absl::Status StreamSamples(int64_t num_samples, absl::Duration timeout, const Deliver& deliver,
                             const ClaimMore&) override {
    std::vector<Sample> samples;
    {
      absl::MutexLock lock(&script_->mu);
      ++script_->calls;
      script_->timeouts.push_back(timeout);
      if (!script_->failures.empty()) {
        absl::Status status = script_->failures.front();
        script_->failures.erase(script_->failures.begin());
        return status;
      }
      script_->requested += num_samples;
      script_->max_request = std::max(script_->max_request, num_samples);
      const int64_t n = script_->batch > 0 ? std::min(script_->batch, num_samples) : num_samples;
      for (int64_t i = 0; i < n; ++i) samples.push_back(FakeSample(script_->next_key++));
    }
    deliver(std::move(samples));
    return absl::OkStatus();
  }
  void Cancel() override {}

 private:
  Script* script_;
};

// Waits until `done(script)` holds (under script->mu); false after kLong.
bool AwaitScript(Script* script, bool (*done)(Script*)) {
  absl::MutexLock lock(&script->mu);
  return script->mu.AwaitWithTimeout(absl::Condition(done, script), kLong);
}

std::unique_ptr<Sampler> ScriptedSampler(Script* script, SamplerOptions options) {
  absl::StatusOr<std::unique_ptr<Sampler>> sampler =
      Sampler::Create([script] { return std::make_unique<ScriptedWorker>(script); }, options);
  EXPECT_TRUE(sampler.ok()) << sampler.status();
  return *std::move(sampler);
}

TEST(SamplerOptionsTest, ValidatesEveryOption) {
  auto invalid = [](auto mutate) {
    SamplerOptions options;
    mutate(options);
    return absl::IsInvalidArgument(options.Validate());
  };
  EXPECT_TRUE(SamplerOptions().Validate().ok());
  EXPECT_TRUE(invalid([](SamplerOptions& o) { o.max_samples = 0; }));
  EXPECT_TRUE(invalid([](SamplerOptions& o) { o.max_samples = -2; }));
  EXPECT_TRUE(invalid([](SamplerOptions& o) { o.max_in_flight_samples_per_worker = 0; }));
  EXPECT_TRUE(invalid([](SamplerOptions& o) { o.num_workers = 0; }));
  EXPECT_TRUE(invalid([](SamplerOptions& o) { o.max_samples_per_stream = 0; }));
  EXPECT_TRUE(invalid([](SamplerOptions& o) { o.rate_limiter_timeout = -absl::Seconds(1); }));

  Script script;
  SamplerOptions bad;
  bad.max_in_flight_samples_per_worker = 0;
  EXPECT_TRUE(absl::IsInvalidArgument(
      Sampler::Create([&] { return std::make_unique<ScriptedWorker>(&script); }, bad).status()));
}

TEST(SamplerOptionsTest, DefaultsAndEffectiveWorkers) {
  SamplerOptions options;
  EXPECT_EQ(options.EffectiveNumWorkers(), 1);
  EXPECT_EQ(options.EffectiveMaxSamplesPerStream(), kDefaultMaxSamplesPerStream);
  options.num_workers = 4;
  EXPECT_EQ(options.EffectiveNumWorkers(), 4);
  options.max_samples = 250;
  options.max_in_flight_samples_per_worker = 100;
  EXPECT_EQ(options.EffectiveNumWorkers(), 2);  // min(4, 250 / 100)
  options.max_samples = 10;
  EXPECT_EQ(options.EffectiveNumWorkers(), 1);
}

// Worker 0 fails once worker 1 is in its request; worker 1 delivers one
// sample once released.
class LateWorker : public SamplerWorker {
 public:
  LateWorker(int index, absl::Notification* started, absl::Notification* release,
             absl::Notification* delivered)
      : index_(index), started_(started), release_(release), delivered_(delivered) {}

  absl::Status StreamSamples(int64_t, absl::Duration, const Deliver& deliver,
                             const ClaimMore&) override {
    if (index_ == 0) {
      started_->WaitForNotification();
      return absl::InvalidArgumentError("worker 0 fails");
    }
    if (!started_->HasBeenNotified()) started_->Notify();
    release_->WaitForNotification();
    if (!delivered_->HasBeenNotified()) {
      std::vector<Sample> samples;
      samples.push_back(FakeSample(1));
      deliver(std::move(samples));
      delivered_->Notify();
    }
    return absl::OkStatus();
  }
  void Cancel() override {
    if (!release_->HasBeenNotified()) release_->Notify();
  }

 private:
  const int index_;
  absl::Notification* started_;
  absl::Notification* release_;
  absl::Notification* delivered_;
};

TEST(SamplerTest, NoSampleIsHandedOutAfterTheErrorWasReported) {
  absl::Notification started, release, delivered;
  int next_index = 0;
  SamplerOptions options;
  options.num_workers = 2;
  options.max_in_flight_samples_per_worker = 1;
  absl::StatusOr<std::unique_ptr<Sampler>> sampler = Sampler::Create(
      [&] { return std::make_unique<LateWorker>(next_index++, &started, &release, &delivered); },
      options);
  ASSERT_TRUE(sampler.ok()) << sampler.status();
  EXPECT_TRUE(absl::IsInvalidArgument((*sampler)->Next(kLong).status()));
  release.Notify();
  ASSERT_TRUE(delivered.WaitForNotificationWithTimeout(kLong));
  // Worker 1's sample arrived after the error: dropped, the error stays.
  EXPECT_TRUE(absl::IsInvalidArgument((*sampler)->Next(kLong).status()));
}

TEST(SamplerTest, ReturnsExactlyMaxSamplesThenOutOfRange) {
  Script script;
  SamplerOptions options;
  options.max_samples = 7;
  options.max_in_flight_samples_per_worker = 3;
  options.num_workers = 2;
  auto sampler = ScriptedSampler(&script, options);
  for (int i = 0; i < 7; ++i) ASSERT_TRUE(sampler->Next(kLong).ok());
  absl::Status done = sampler->Next().status();
  EXPECT_EQ(done.code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(done.message(), "`max_samples` already returned.");
  sampler->Close();
  absl::MutexLock lock(&script.mu);
  EXPECT_EQ(script.requested, 7);  // never more than max_samples from the table
  EXPECT_LE(script.max_request, 3);
}

TEST(SamplerTest, NextBatchTakesWhatIsQueuedWithinMaxSamples) {
  Script script;
  SamplerOptions options;
  options.max_samples = 10;
  options.max_in_flight_samples_per_worker = 4;
  auto sampler = ScriptedSampler(&script, options);
  std::vector<Sample> out;
  uint64_t next_key = 1;
  // Batches of up to 3 (never more than asked, at least 1), keys in order.
  while (out.size() < 9) {
    const size_t before = out.size();
    ASSERT_TRUE(sampler->NextBatch(3, &out, kLong).ok());
    ASSERT_GE(out.size(), before + 1);
    ASSERT_LE(out.size(), before + 3);
  }
  for (const Sample& sample : out) EXPECT_EQ(sample.meta().key, next_key++);
  // 9 or 10 taken: the rest is one sample, and never beyond max_samples.
  const size_t taken = out.size();
  if (taken < 10) {
    ASSERT_TRUE(sampler->NextBatch(5, &out, kLong).ok());
    EXPECT_EQ(out.size(), 10u);
  }
  EXPECT_EQ(sampler->NextBatch(5, &out).code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(out.size(), 10u);
}

TEST(SamplerTest, PrefetchIsBoundedByInFlightTimesWorkers) {
  Script script;
  SamplerOptions options;
  options.max_in_flight_samples_per_worker = 5;
  options.num_workers = 3;
  auto sampler = ScriptedSampler(&script, options);
  // The workers fill the queue, then request nothing more.
  ASSERT_TRUE(AwaitScript(&script, [](Script* s) {
    s->mu.AssertHeld();
    return s->requested >= 15;
  }));
  absl::SleepFor(kQuiet);
  {
    absl::MutexLock lock(&script.mu);
    EXPECT_EQ(script.requested, 15);
  }
  // Four slots free are not a whole request: nothing is asked for.
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(sampler->Next(kLong).ok());
  absl::SleepFor(kQuiet);
  {
    absl::MutexLock lock(&script.mu);
    EXPECT_EQ(script.requested, 15);
  }
  // The fifth makes one: exactly one request of five follows.
  ASSERT_TRUE(sampler->Next(kLong).ok());
  ASSERT_TRUE(AwaitScript(&script, [](Script* s) {
    s->mu.AssertHeld();
    return s->requested >= 20;
  }));
  absl::SleepFor(kQuiet);
  absl::MutexLock lock(&script.mu);
  EXPECT_EQ(script.requested, 20);
}

// A worker that streams the first sample of every request, then holds the
// rest until released.
class StreamingWorker : public SamplerWorker {
 public:
  explicit StreamingWorker(absl::Notification* release) : release_(release) {}
  absl::Status StreamSamples(int64_t num_samples, absl::Duration, const Deliver& deliver,
                             const ClaimMore&) override {
    deliver({FakeSample(next_key_++)});
    if (!release_->WaitForNotificationWithTimeout(kLong)) {
      return absl::DeadlineExceededError("not released");
    }
    for (int64_t i = 1; i < num_samples; ++i) deliver({FakeSample(next_key_++)});
    return absl::OkStatus();
  }
  // Called by the destructor, on the test thread, like the Notify() below.
  void Cancel() override {
    if (!release_->HasBeenNotified()) release_->Notify();
  }

 private:
  absl::Notification* release_;
  uint64_t next_key_ = 1;
};

TEST(SamplerTest, SamplesAreQueuedAsTheyArriveNotPerRequest) {
  absl::Notification release;
  SamplerOptions options;
  options.max_in_flight_samples_per_worker = 4;
  options.max_samples = 4;
  absl::StatusOr<std::unique_ptr<Sampler>> sampler =
      Sampler::Create([&release] { return std::make_unique<StreamingWorker>(&release); }, options);
  ASSERT_TRUE(sampler.ok()) << sampler.status();
  // The request for 4 is still being served: its first sample is there.
  absl::StatusOr<Sample> first = (*sampler)->Next(kLong);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->meta().key, 1u);
  EXPECT_FALSE(release.HasBeenNotified());
  release.Notify();
  for (uint64_t key = 2; key <= 4; ++key) {
    absl::StatusOr<Sample> sample = (*sampler)->Next(kLong);
    ASSERT_TRUE(sample.ok()) << sample.status();
    EXPECT_EQ(sample->meta().key, key);
  }
  EXPECT_EQ((*sampler)->Next(kLong).status().code(), absl::StatusCode::kOutOfRange);
}

// The steps of a ClaimingWorker and the test driving it, in order.
struct ClaimSteps {
  absl::Notification freed_one;    // the test took a sample
  absl::Notification asked_again;  // the worker claimed with one slot free
  absl::Notification freed_two;    // the test took another
  absl::Notification asked_tail;   // the worker claimed with two free
  absl::Notification freed_all;    // the test emptied the queue
  std::vector<int64_t> grants;     // what each claim got, in order
};

// A worker whose first request fills the queue, then asks for more as the
// test frees slots: what ClaimMore grants, claim by claim.
class ClaimingWorker : public SamplerWorker {
 public:
  explicit ClaimingWorker(ClaimSteps* steps) : steps_(steps) {}
  absl::Status StreamSamples(int64_t num_samples, absl::Duration, const Deliver& deliver,
                             const ClaimMore& claim_more) override {
    if (next_key_ > 1) return absl::CancelledError("nothing more to give");
    for (int64_t i = 0; i < num_samples; ++i) deliver({FakeSample(next_key_++)});
    // The queue is full: nothing to claim.
    steps_->grants.push_back(claim_more(100));
    if (!steps_->freed_one.WaitForNotificationWithTimeout(kLong)) {
      return absl::DeadlineExceededError("not released");
    }
    // One slot free: not a whole request (4).
    steps_->grants.push_back(claim_more(100));
    steps_->asked_again.Notify();
    if (!steps_->freed_two.WaitForNotificationWithTimeout(kLong)) {
      return absl::DeadlineExceededError("not released");
    }
    // Two free: still not a whole request.
    steps_->grants.push_back(claim_more(100));
    // But the stream allows one more sample only: its last request is that.
    const int64_t tail = claim_more(1);
    steps_->grants.push_back(tail);
    for (int64_t i = 0; i < tail; ++i) deliver({FakeSample(next_key_++)});
    steps_->asked_tail.Notify();
    if (!steps_->freed_all.WaitForNotificationWithTimeout(kLong)) {
      return absl::DeadlineExceededError("not released");
    }
    // All four free: a whole request.
    const int64_t granted = claim_more(100);
    steps_->grants.push_back(granted);
    for (int64_t i = 0; i < granted; ++i) deliver({FakeSample(next_key_++)});
    return absl::OkStatus();
  }
  void Cancel() override {
    for (absl::Notification* n : {&steps_->freed_one, &steps_->freed_two, &steps_->freed_all}) {
      if (!n->HasBeenNotified()) n->Notify();
    }
  }

 private:
  ClaimSteps* steps_;
  uint64_t next_key_ = 1;
};

TEST(SamplerTest, RequestsAheadAreWholeRequestsWithinThePrefetchBound) {
  ClaimSteps steps;
  SamplerOptions options;
  options.max_in_flight_samples_per_worker = 4;
  absl::StatusOr<std::unique_ptr<Sampler>> sampler =
      Sampler::Create([&steps] { return std::make_unique<ClaimingWorker>(&steps); }, options);
  ASSERT_TRUE(sampler.ok()) << sampler.status();
  std::vector<uint64_t> keys;
  auto take = [&] {
    absl::StatusOr<Sample> sample = (*sampler)->Next(kLong);
    ASSERT_TRUE(sample.ok()) << sample.status();
    keys.push_back(sample->meta().key);
  };
  take();
  steps.freed_one.Notify();
  ASSERT_TRUE(steps.asked_again.WaitForNotificationWithTimeout(kLong));
  take();
  steps.freed_two.Notify();
  ASSERT_TRUE(steps.asked_tail.WaitForNotificationWithTimeout(kLong));
  for (int i = 0; i < 3; ++i) take();  // keys 3, 4 and the tail's 5
  steps.freed_all.Notify();
  for (int i = 0; i < 4; ++i) take();
  (*sampler)->Close();
  EXPECT_EQ(steps.grants, (std::vector<int64_t>{0, 0, 0, 1, 4}));
  EXPECT_EQ(keys, (std::vector<uint64_t>{1, 2, 3, 4, 5, 6, 7, 8, 9}));
}

// A worker that records the size of every request it is asked for.
class RecordingWorker : public SamplerWorker {
 public:
  explicit RecordingWorker(std::vector<int64_t>* requests, absl::Mutex* mu)
      : requests_(requests), mu_(mu) {}
  absl::Status StreamSamples(int64_t num_samples, absl::Duration, const Deliver& deliver,
                             const ClaimMore&) override {
    {
      absl::MutexLock lock(mu_);
      requests_->push_back(num_samples);
    }
    for (int64_t i = 0; i < num_samples; ++i) deliver({FakeSample(++next_key_)});
    return absl::OkStatus();
  }
  void Cancel() override {}

 private:
  std::vector<int64_t>* requests_;
  absl::Mutex* mu_;
  uint64_t next_key_ = 0;
};

TEST(SamplerTest, EveryRequestIsAWholeUnitOrTheRestOfMaxSamples) {
  for (int64_t unit : {3, 7}) {
    absl::Mutex mu;
    std::vector<int64_t> requests;
    SamplerOptions options;
    options.max_in_flight_samples_per_worker = unit;
    options.max_samples = 20;
    options.num_workers = 2;
    absl::StatusOr<std::unique_ptr<Sampler>> sampler =
        Sampler::Create([&] { return std::make_unique<RecordingWorker>(&requests, &mu); }, options);
    ASSERT_TRUE(sampler.ok()) << sampler.status();
    // Taken one at a time, so consumers free single slots again and again.
    for (int i = 0; i < 20; ++i) ASSERT_TRUE((*sampler)->Next(kLong).ok()) << unit;
    EXPECT_EQ((*sampler)->Next(kLong).status().code(), absl::StatusCode::kOutOfRange);
    (*sampler)->Close();
    absl::MutexLock lock(&mu);
    // Whole units, and one request of what was left of max_samples (two
    // workers may record their requests in either order).
    int64_t total = 0;
    std::vector<int64_t> partial;
    for (int64_t request : requests) {
      total += request;
      if (request != unit) partial.push_back(request);
    }
    EXPECT_EQ(total, 20) << unit;
    EXPECT_EQ(partial, (std::vector<int64_t>{20 % unit})) << unit;
  }
}

TEST(SamplerTest, FlexibleBatchesAreTopedUp) {
  Script script;
  {
    absl::MutexLock lock(&script.mu);
    script.batch = 2;  // the table returns fewer than asked
  }
  SamplerOptions options;
  options.max_samples = 9;
  options.max_in_flight_samples_per_worker = 5;
  auto sampler = ScriptedSampler(&script, options);
  std::vector<uint64_t> keys;
  for (int i = 0; i < 9; ++i) {
    absl::StatusOr<Sample> sample = sampler->Next(kLong);
    ASSERT_TRUE(sample.ok()) << sample.status();
    keys.push_back(sample->meta().key);
  }
  EXPECT_EQ(keys, (std::vector<uint64_t>{1, 2, 3, 4, 5, 6, 7, 8, 9}));
  EXPECT_EQ(sampler->Next().status().code(), absl::StatusCode::kOutOfRange);
}

TEST(SamplerTest, RetriesUnavailableAndCancelled) {
  Script script;
  {
    absl::MutexLock lock(&script.mu);
    script.failures = {absl::UnavailableError("down"), absl::CancelledError("gone"),
                       absl::UnavailableError("down"), absl::UnavailableError("down")};
  }
  SamplerOptions options;
  options.max_in_flight_samples_per_worker = 1;
  auto sampler = ScriptedSampler(&script, options);
  absl::StatusOr<Sample> sample = sampler->Next(kLong);
  ASSERT_TRUE(sample.ok()) << sample.status();
  absl::MutexLock lock(&script.mu);
  EXPECT_GE(script.calls, 5);
}

TEST(SamplerTest, FatalErrorsReachTheConsumerAfterQueuedSamples) {
  Script script;
  SamplerOptions options;
  options.max_in_flight_samples_per_worker = 2;
  auto sampler = ScriptedSampler(&script, options);
  ASSERT_TRUE(sampler->Next(kLong).ok());
  {
    absl::MutexLock lock(&script.mu);
    script.failures = {absl::InvalidArgumentError("bad")};
  }
  // Two more samples were prefetched or are on their way; then the error.
  absl::Status status;
  int ok = 0;
  while ((status = sampler->Next(kLong).status()).ok()) ++ok;
  EXPECT_GE(ok, 1);
  EXPECT_EQ(status, absl::InvalidArgumentError("bad"));
  EXPECT_EQ(sampler->Next(kLong).status(), absl::InvalidArgumentError("bad"));
}

TEST(SamplerTest, RateLimiterTimeoutOnlyCountsWhileAConsumerWaits) {
  Script script;
  {
    absl::MutexLock lock(&script.mu);
    script.failures = {absl::DeadlineExceededError(kRateLimiterTimeoutMessage)};
  }
  SamplerOptions options;
  options.rate_limiter_timeout = absl::Milliseconds(5);
  auto sampler = ScriptedSampler(&script, options);
  // The timeout fires while nobody waits (the worker then parks until a
  // consumer waits, and asks again). Waits for the event, not for a fixed
  // time; only the few instructions between the worker's call returning and
  // its look at the waiting consumers are covered by a pause.
  ASSERT_TRUE(AwaitScript(&script, [](Script* s) {
    s->mu.AssertHeld();
    return s->calls >= 1 && s->failures.empty();
  }));
  absl::SleepFor(kQuiet);
  absl::StatusOr<Sample> sample = sampler->Next(kLong);
  ASSERT_TRUE(sample.ok()) << sample.status();
  absl::MutexLock lock(&script.mu);
  EXPECT_EQ(script.timeouts.front(), absl::Milliseconds(5));
}

TEST(SamplerTest, RateLimiterTimeoutWhileWaitingIsFatal) {
  // An empty in-process table and a 0 ms timeout: immediate, not infinite.
  auto table = MakeTable(Uniform(), Fifo(), 10, 0, MinSize(1));
  auto server = Server::Start(Tables(table), 0).value();
  for (const char* host : {"localhost:", "ipv4:127.0.0.1:"}) {
    Client client(absl::StrCat(host, server->port()));
    SamplerOptions options;
    options.rate_limiter_timeout = absl::ZeroDuration();
    auto sampler = client.NewSampler("t", options);
    absl::Status status = sampler->Next(kLong).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << host << status;
    EXPECT_EQ(status.message(), kRateLimiterTimeoutMessage) << host;
  }
}

TEST(SamplerTest, NextTimeoutAndCloseUnblockConsumers) {
  Script script;
  {
    absl::MutexLock lock(&script.mu);
    // Keeps failing: the consumer waits.
    script.failures.assign(1000000, absl::UnavailableError("down"));
  }
  auto sampler = ScriptedSampler(&script, SamplerOptions());
  absl::Status timed_out = sampler->Next(absl::Milliseconds(50)).status();
  EXPECT_EQ(timed_out.code(), absl::StatusCode::kDeadlineExceeded);
  absl::Notification done;
  absl::Status result;
  std::thread consumer([&] {
    result = sampler->Next().status();
    done.Notify();
  });
  EXPECT_FALSE(done.WaitForNotificationWithTimeout(absl::Milliseconds(100)));
  sampler->Close();
  EXPECT_TRUE(done.WaitForNotificationWithTimeout(kLong));
  consumer.join();
  EXPECT_EQ(result.code(), absl::StatusCode::kCancelled);
  sampler->Close();  // idempotent
  EXPECT_EQ(sampler->Next().status().code(), absl::StatusCode::kCancelled);
}

TEST(SamplerTest, ConcurrentClosesAreSafe) {
  Script script;
  SamplerOptions options;
  options.num_workers = 3;
  auto sampler = ScriptedSampler(&script, options);
  ASSERT_TRUE(sampler->Next(kLong).ok());
  std::vector<std::thread> closers;
  for (int i = 0; i < 4; ++i) closers.emplace_back([&] { sampler->Close(); });
  for (auto& closer : closers) closer.join();
  EXPECT_EQ(sampler->Next().status().code(), absl::StatusCode::kCancelled);
}

TEST(SamplerTest, FailedSamplerReturnsItsStatus) {
  auto sampler = Sampler::Failed(absl::NotFoundError("nope"));
  EXPECT_EQ(sampler->Next().status(), absl::NotFoundError("nope"));
}

// ---------------------------------------------------------------------------
// Real workers against real servers

int32_t ValueOf(const Sample& sample) {
  absl::StatusOr<Tensor> column = sample.UnpackColumn(0);
  EXPECT_TRUE(column.ok()) << column.status();
  return column.ok() ? *reinterpret_cast<const int32_t*>(column->data.data()) : -1;
}

TEST(ClientSamplerTest, GrpcWorkersReopenStreamsAfterMaxSamplesPerStream) {
  auto server = Server::Start(Tables(ServedTable("t")), 0).value();
  Client client(absl::StrCat("ipv4:127.0.0.1:", server->port()));
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(client.InsertStep({Int32Scalar(i)}, {{"t", 1.0}}).ok());
  const int before = GrpcCalls().count(kSampleStreamMethod);
  SamplerOptions options;
  options.max_samples = 40;
  options.max_in_flight_samples_per_worker = 4;
  options.num_workers = 2;
  options.max_samples_per_stream = 10;
  auto sampler = client.NewSampler("t", options);
  for (int i = 0; i < 40; ++i) {
    absl::StatusOr<Sample> sample = sampler->Next(kLong);
    ASSERT_TRUE(sample.ok()) << sample.status();
    EXPECT_LT(ValueOf(*sample), 5);
  }
  EXPECT_EQ(sampler->Next().status().code(), absl::StatusCode::kOutOfRange);
  sampler->Close();
  EXPECT_GE(GrpcCalls().count(kSampleStreamMethod) - before, 4);  // 40 samples, <= 10 per stream
  EXPECT_EQ(server->service()
                ->GetTable("t")
                .value()
                ->Info()
                .rate_limiter_info()
                .sample_stats()
                .completed(),
            40);
}

TEST(ClientSamplerTest, InProcessWorkersUseNoGrpc) {
  auto server = Server::Start(Tables(ServedTable("t")), 0).value();
  Client client(absl::StrCat("localhost:", server->port()));
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(client.InsertStep({Int32Scalar(i)}, {{"t", 1.0}}).ok());
  const int before = GrpcCalls().count(kSampleStreamMethod);
  SamplerOptions options;
  options.max_samples = 100;
  options.max_in_flight_samples_per_worker = 8;
  options.num_workers = 3;
  auto sampler = client.NewSampler("t", options);
  for (int i = 0; i < 100; ++i) {
    absl::StatusOr<Sample> sample = sampler->Next(kLong);
    ASSERT_TRUE(sample.ok()) << sample.status();
    EXPECT_LT(ValueOf(*sample), 5);
  }
  EXPECT_EQ(GrpcCalls().count(kSampleStreamMethod), before);
}

TEST(ClientSamplerTest, ServerStoppingUnderAnInProcessSamplerIsSafe) {
  auto table = ServedTable("t");
  auto server = Server::Start(Tables(table), 0).value();
  Client client(absl::StrCat("localhost:", server->port()));
  ASSERT_TRUE(client.InsertStep({Int32Scalar(3)}, {{"t", 1.0}}).ok());
  SamplerOptions options;
  options.max_in_flight_samples_per_worker = 2;
  options.num_workers = 2;
  auto busy = client.NewSampler("t", options);  // keeps sampling
  ASSERT_TRUE(busy->Next(kLong).ok());
  std::thread consumer([&] {
    while (true) {
      absl::StatusOr<Sample> sample = busy->Next(kLong);
      if (!sample.ok()) {
        EXPECT_EQ(sample.status().code(), absl::StatusCode::kCancelled) << sample.status();
        break;
      }
      EXPECT_EQ(ValueOf(*sample), 3);  // data stays valid after the stop
    }
  });
  absl::SleepFor(absl::Milliseconds(50));
  server->Stop();
  server.reset();
  table.reset();  // the samplers hold the last references now
  consumer.join();
  absl::Status status = busy->Next().status();
  EXPECT_EQ(status.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(status.message(), kTableClosedMessage);
}

TEST(ClientSamplerTest, GrpcSamplerSurvivesAServerRestart) {
  auto server = Server::Start(Tables(ServedTable("t")), 0).value();
  const int port = server->port();
  Client client(absl::StrCat("ipv4:127.0.0.1:", port));
  ASSERT_TRUE(client.InsertStep({Int32Scalar(1)}, {{"t", 1.0}}).ok());
  SamplerOptions options;
  options.max_in_flight_samples_per_worker = 1;
  auto sampler = client.NewSampler("t", options);
  absl::StatusOr<Sample> first = sampler->Next(kLong);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(ValueOf(*first), 1);
  server->Stop();
  server.reset();
  // Whatever was prefetched from the old server may still come out; then the
  // worker retries (UNAVAILABLE / CANCELLED) until the new server answers.
  auto restarted = Server::Start(Tables(ServedTable("t")), port);
  ASSERT_TRUE(restarted.ok()) << restarted.status();
  ASSERT_TRUE(client.InsertStep({Int32Scalar(2)}, {{"t", 1.0}}).ok());
  bool saw_new = false;
  for (int i = 0; i < 5 && !saw_new; ++i) {
    absl::StatusOr<Sample> sample = sampler->Next(kLong);
    ASSERT_TRUE(sample.ok()) << sample.status();
    saw_new = ValueOf(*sample) == 2;
  }
  EXPECT_TRUE(saw_new);
}

TEST(ClientSamplerTest, CloseCancelsBlockedGrpcAndLocalRequests) {
  auto server = Server::Start(Tables(ServedTable("t")), 0).value();  // empty table
  for (const char* host : {"localhost:", "ipv4:127.0.0.1:"}) {
    Client client(absl::StrCat(host, server->port()));
    auto sampler = client.NewSampler("t", SamplerOptions());
    absl::Notification done;
    std::thread consumer([&] {
      EXPECT_EQ(sampler->Next().status().code(), absl::StatusCode::kCancelled);
      done.Notify();
    });
    EXPECT_FALSE(done.WaitForNotificationWithTimeout(absl::Milliseconds(100)));
    sampler->Close();
    EXPECT_TRUE(done.WaitForNotificationWithTimeout(kLong)) << host;
    consumer.join();
  }
}

TEST(ClientSamplerTest, UnknownTableIsFatal) {
  auto server = Server::Start(Tables(ServedTable("t")), 0).value();
  for (const char* host : {"localhost:", "ipv4:127.0.0.1:"}) {
    Client client(absl::StrCat(host, server->port()));
    absl::Status status = client.NewSampler("nope", SamplerOptions())->Next(kLong).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kNotFound) << host;
    EXPECT_EQ(status.message(), "Priority table nope was not found");
  }
}

}  // namespace
}  // namespace tf_reverb
