// concurrent_load: many paced writer streams and a few sampler streams
// against one Reverb server (ours or dm-reverb's: it speaks the wire protocol
// of docs/architecture/wire-protocol.md directly), from one process with a handful of threads.
//
// Each writer is one InsertStream that behaves like an actor calling
// create_item + flush once per step: it sends one request holding a fresh
// one-step chunk and a one-step item over it, waits for the item's
// confirmation, and sends the next item at its next scheduled time
// (`--rate` items/s from a random phase; a writer that falls behind sends at
// once, so offered minus sent is the backlog). An item holds one step of
// --step_floats float32 values (a ramp, or incompressible random bits with
// --random_payload). The latency of an item is the
// time from its request going out to its key coming back. With
// --warmup_items each writer first inserts that many items back to back; the
// clock starts once every writer has seen them confirmed. Samplers are
// SampleStreams asking for `--sample_batch` items at a time, paced at
// `--sample_rate` samples/s each (0: back to back); they start before the
// warm-up, since a rate limiter may need samples before every warm-up item
// can go in.
//
// Several tables: --table (and --sample_table) may name a comma-separated
// list; writer i inserts into the list's (i mod n)-th table, sampler i reads
// the (i mod n)-th (to spread one load over several driver processes, give
// each the list rotated by the index of its first writer).
//
// Bounds: with --items each writer sends exactly that many items (a test's
// bound); otherwise writers send until --seconds have passed. Samplers stop
// after --sample_total samples each (0: when the writers are done; one
// waiting on a table nobody fills any more is then cancelled). A run that
// has not ended after --deadline_seconds is cancelled and reported as hung
// (a hang guard, not a bound).
//
// Output (stdout): `{"event":"open",...}` once every stream has started,
// `{"event":"warm",...}` after the warm-up, `{"event":"first_sent"}` once
// every writer has sent its first measured item, then one JSON object with
// the counts (sent includes warm-up items, confirmed does not), the samples
// (all, and those received after the warm-up), this process's CPU time,
// every measured item's latency in microseconds (--timeline: and when it was
// sent), and the non-OK statuses the streams ended with. For the samplers:
// once every sampler has had its first request answered (its stream and
// connection up), the sample clock starts; `samples_windowed` are the
// samples received from then on, `sample_window_seconds` the time from then
// to the last sample, and `sample_latencies_us` the time of each later
// request (request sent -> its last sample received).
//
// Uses gRPC's callback client API: no thread per stream. Writers spread over
// --connections channels, each its own TCP connection (a local subchannel
// pool), as actors in separate processes would be.
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <queue>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/random/random.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/support/client_callback.h"
#include "reverb_service.grpc.pb.h"
#include "reverb_service.pb.h"
#include "schema.pb.h"
#include "server/chunk_codec.h"
#include "server/tensor.h"
#include "tensor.pb.h"

ABSL_FLAG(std::string, target, "localhost:8000", "Server address.");
ABSL_FLAG(int, writers, 10, "Writer streams.");
ABSL_FLAG(double, rate, 5.0, "Items per second per writer (0: back to back).");
ABSL_FLAG(int64_t, items, 0, "Items per writer (0: until --seconds).");
ABSL_FLAG(double, seconds, 10.0, "Sending time when --items is 0.");
ABSL_FLAG(std::string, table, "items",
          "Table the writers insert into (a comma-separated list: writer i "
          "inserts into the (i mod n)-th).");
ABSL_FLAG(int, connections, 0, "TCP connections the writers share (0: one per writer).");
ABSL_FLAG(int, step_floats, 16, "float32 values per step (the item's payload).");
ABSL_FLAG(bool, random_payload, false,
          "Fill the step with random bits (incompressible) instead of a ramp "
          "(0, 0.5, 1, ...), which the chunk codec compresses.");
ABSL_FLAG(int, samplers, 0, "Sampler streams.");
ABSL_FLAG(std::string, sample_table, "",
          "Table the samplers read (default --table; a comma-separated list: "
          "sampler i reads the (i mod n)-th).");
ABSL_FLAG(int, sampler_connections, 1, "TCP connections the samplers share (0: one per sampler).");
ABSL_FLAG(int, sample_batch, 32, "Samples per SampleStream request.");
ABSL_FLAG(double, sample_rate, 0.0, "Samples per second per sampler (0: back to back).");
ABSL_FLAG(int64_t, sample_timeout_ms, -1,
          "rate_limiter_timeout of each SampleStream request (-1: none).");
ABSL_FLAG(int64_t, sample_total, 0, "Samples per sampler in all (0: until the writers are done).");
ABSL_FLAG(int, warmup_items, 0,
          "Items each writer inserts (and sees confirmed) before the clock starts: "
          "the streams and connections are up when measuring begins. Counted in "
          "sent/confirmed, not in the latencies.");
ABSL_FLAG(bool, timeline, false,
          "Also print when each measured item was sent (ms since the start), "
          "in the order of latencies_us.");
ABSL_FLAG(double, deadline_seconds, 600.0, "Cancel everything after this long (hang guard).");

namespace {

using deepmind::reverb::InsertStreamRequest;
using deepmind::reverb::InsertStreamResponse;
using deepmind::reverb::ReverbService;
using deepmind::reverb::SampleStreamRequest;
using deepmind::reverb::SampleStreamResponse;

int64_t Micros(absl::Duration d) { return absl::ToInt64Microseconds(d); }

void Emit(const std::string& json) {
  std::fwrite(json.data(), 1, json.size(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

// Something the scheduler runs at a given time.
class Paced {
 public:
  virtual ~Paced() = default;
  virtual void Fire() = 0;
};

// One thread running Paced::Fire at the scheduled times.
class Scheduler {
 public:
  Scheduler() : thread_([this] { Run(); }) {}
  ~Scheduler() { Stop(); }
  // Runs nothing more (returns once a Fire in progress is over). Idempotent.
  void Stop() {
    {
      absl::MutexLock lock(&mu_);
      stop_ = true;
    }
    if (thread_.joinable()) thread_.join();
  }
  void At(absl::Time when, Paced* what) {
    absl::MutexLock lock(&mu_);
    heap_.push(Entry{when, order_++, what});
  }

 private:
  struct Entry {
    absl::Time when;
    uint64_t order;
    Paced* what;
    bool operator>(const Entry& o) const {
      return when != o.when ? when > o.when : order > o.order;
    }
  };
  void Run() {
    while (true) {
      Paced* what = nullptr;
      {
        absl::MutexLock lock(&mu_);
        while (true) {
          if (stop_) return;
          if (!heap_.empty() && heap_.top().when <= absl::Now()) break;
          const absl::Time deadline =
              heap_.empty() ? absl::Now() + absl::Milliseconds(50) : heap_.top().when;
          auto changed = [this, deadline]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
            return stop_ || (!heap_.empty() && heap_.top().when < deadline);
          };
          mu_.AwaitWithDeadline(absl::Condition(&changed), deadline);
        }
        what = heap_.top().what;
        heap_.pop();
      }
      what->Fire();
    }
  }
  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t order_ ABSL_GUARDED_BY(mu_) = 0;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

// Counts streams still running; Wait() returns when none is.
class Latch {
 public:
  void Add() {
    absl::MutexLock lock(&mu_);
    ++n_;
  }
  void Done() {
    absl::MutexLock lock(&mu_);
    --n_;
  }
  bool WaitUntil(absl::Time deadline) {
    absl::MutexLock lock(&mu_);
    auto zero = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return n_ == 0; };
    return mu_.AwaitWithDeadline(absl::Condition(&zero), deadline);
  }
  int count() {
    absl::MutexLock lock(&mu_);
    return n_;
  }

 private:
  absl::Mutex mu_;
  int n_ ABSL_GUARDED_BY(mu_) = 0;
};

struct Shared {
  Scheduler scheduler;
  Latch writers_running;
  Latch samplers_running;
  std::atomic<int> writers_first_sent{0};
  std::atomic<int> writers_warm{0};
  int warmup_items = 0;
  std::atomic<bool> writers_done{false};
  std::atomic<bool> measuring{false};  // the clock started (warm-up over)
  absl::Time start;                    // sending starts
  absl::Time stop_time;                // writers send no item scheduled after it (--seconds)
  int64_t items_per_writer = 0;
  double rate = 0;
  deepmind::reverb::ChunkData chunk_template;
  int num_samplers = 0;
  std::atomic<int> samplers_warm{0};  // samplers whose first request is answered

  absl::Mutex mu;
  std::vector<int64_t> latencies_us ABSL_GUARDED_BY(mu);
  std::vector<int64_t> sent_at_ms ABSL_GUARDED_BY(mu);
  std::map<std::string, int> errors ABSL_GUARDED_BY(mu);  // "CODE: message" -> streams
  int64_t sent ABSL_GUARDED_BY(mu) = 0;
  int64_t confirmed ABSL_GUARDED_BY(mu) = 0;
  int64_t warmup_confirmed ABSL_GUARDED_BY(mu) = 0;
  int64_t unexpected_keys ABSL_GUARDED_BY(mu) = 0;
  int64_t samples ABSL_GUARDED_BY(mu) = 0;
  int64_t samples_measured ABSL_GUARDED_BY(mu) = 0;  // received once measuring
  int64_t sample_requests ABSL_GUARDED_BY(mu) = 0;
  absl::Time last_confirm ABSL_GUARDED_BY(mu);
  // The sample clock: starts once every sampler is warm.
  bool sample_clock ABSL_GUARDED_BY(mu) = false;
  absl::Time sample_start ABSL_GUARDED_BY(mu);
  absl::Time last_sample ABSL_GUARDED_BY(mu);
  int64_t samples_windowed ABSL_GUARDED_BY(mu) = 0;
  std::vector<int64_t> sample_latencies_us ABSL_GUARDED_BY(mu);

  void Error(const grpc::Status& status) {
    absl::MutexLock lock(&mu);
    ++errors[absl::StrCat(status.error_code(), ": ", status.error_message().substr(0, 200))];
  }
};

class Writer : public grpc::ClientBidiReactor<InsertStreamRequest, InsertStreamResponse>,
               public Paced {
 public:
  Writer(Shared* shared, ReverbService::Stub* stub, std::string table, uint64_t seed)
      : shared_(shared), table_(std::move(table)), rng_(std::seed_seq{seed}) {
    episode_id_ = absl::Uniform<uint64_t>(rng_);
    shared_->writers_running.Add();
    context_.set_wait_for_ready(true);
    stub->async()->InsertStream(&context_, this);
    StartRead(&response_);
    StartCall();
    if (shared_->warmup_items > 0) {
      absl::MutexLock lock(&mu_);
      SendLocked();
    } else {
      ++shared_->writers_warm;
    }
  }

  // Schedules the first measured item.
  void Begin() {
    absl::MutexLock lock(&mu_);
    begun_ = true;
    const double phase = shared_->rate > 0 ? absl::Uniform(rng_, 0.0, 1.0 / shared_->rate) : 0;
    first_ = shared_->start + absl::Seconds(phase);
    if (!awaiting_ && !write_in_flight_ && !ended_) shared_->scheduler.At(first_, this);
  }

  void Cancel() { context_.TryCancel(); }

  // The scheduler's call: the next item's time has come.
  void Fire() override {
    absl::MutexLock lock(&mu_);
    if (ended_ || awaiting_ || write_in_flight_ || writes_done_) return;
    if (Finished()) {
      WritesDoneLocked();
      return;
    }
    SendLocked();
  }

  void SendLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    InsertStreamRequest request;
    auto* chunk = request.add_chunks();
    *chunk = shared_->chunk_template;
    const uint64_t chunk_key = absl::Uniform<uint64_t>(rng_);
    chunk->set_chunk_key(chunk_key);
    chunk->mutable_sequence_range()->set_episode_id(episode_id_);
    chunk->mutable_sequence_range()->set_start(static_cast<int32_t>(sent_));
    chunk->mutable_sequence_range()->set_end(static_cast<int32_t>(sent_));
    auto* item = request.add_items();
    outstanding_key_ = absl::Uniform<uint64_t>(rng_);
    item->set_key(outstanding_key_);
    item->set_table(table_);
    item->set_priority(1.0);
    auto* column = item->mutable_flat_trajectory()->add_columns();
    column->set_squeeze(true);
    auto* slice = column->add_chunk_slices();
    slice->set_chunk_key(chunk_key);
    slice->set_offset(0);
    slice->set_length(1);
    slice->set_index(0);
    request_ = std::move(request);
    ++sent_;
    warmup_item_ = sent_ <= shared_->warmup_items;
    awaiting_ = true;
    write_in_flight_ = true;
    sent_at_ = absl::Now();
    if (sent_ == shared_->warmup_items + 1) ++shared_->writers_first_sent;
    {
      absl::MutexLock shared_lock(&shared_->mu);
      ++shared_->sent;
    }
    grpc::WriteOptions options;
    options.set_no_compression();
    StartWrite(&request_, options);
  }

  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    write_in_flight_ = false;
    if (!ok) return;  // the stream broke; OnDone has the status
    MaybeNextLocked();
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;  // the server finished the stream
    const absl::Time now = absl::Now();
    absl::MutexLock lock(&mu_);
    int64_t unexpected = 0;
    bool confirmed = false;
    for (uint64_t key : response_.keys()) {
      if (awaiting_ && key == outstanding_key_) {
        confirmed = true;
      } else {
        ++unexpected;
      }
    }
    {
      absl::MutexLock shared_lock(&shared_->mu);
      shared_->unexpected_keys += unexpected;
      if (confirmed && warmup_item_) {
        ++shared_->warmup_confirmed;
      } else if (confirmed) {
        ++shared_->confirmed;
        shared_->latencies_us.push_back(Micros(now - sent_at_));
        shared_->sent_at_ms.push_back(absl::ToInt64Milliseconds(sent_at_ - shared_->start));
        shared_->last_confirm = std::max(shared_->last_confirm, now);
      }
    }
    if (confirmed) {
      awaiting_ = false;
      if (warmup_item_ && sent_ == shared_->warmup_items) ++shared_->writers_warm;
      MaybeNextLocked();
    }
    StartRead(&response_);
  }

  void OnDone(const grpc::Status& status) override {
    if (!status.ok()) shared_->Error(status);
    {
      absl::MutexLock lock(&mu_);
      ended_ = true;
    }
    shared_->writers_running.Done();
  }

 private:
  bool Finished() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (shared_->items_per_writer > 0) {
      return sent_ >= shared_->items_per_writer + shared_->warmup_items;
    }
    return NextTime() > shared_->stop_time;
  }
  absl::Time NextTime() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (shared_->rate <= 0) return absl::Now();
    return first_ +
           absl::Seconds(static_cast<double>(sent_ - shared_->warmup_items) / shared_->rate);
  }
  // Once the item is confirmed and its write completed: the next item at its
  // time, or the half-close.
  void MaybeNextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (ended_ || awaiting_ || write_in_flight_ || writes_done_) return;
    if (sent_ < shared_->warmup_items) {
      SendLocked();
      return;
    }
    if (!begun_) return;  // warm; Begin() schedules the first measured item
    if (Finished()) {
      WritesDoneLocked();
      return;
    }
    shared_->scheduler.At(std::max(NextTime(), absl::Now()), this);
  }
  void WritesDoneLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (writes_done_) return;
    writes_done_ = true;
    StartWritesDone();
  }

  Shared* const shared_;
  const std::string table_;
  absl::BitGen rng_;
  uint64_t episode_id_ = 0;
  grpc::ClientContext context_;
  InsertStreamResponse response_;
  absl::Mutex mu_;
  InsertStreamRequest request_ ABSL_GUARDED_BY(mu_);
  absl::Time first_ ABSL_GUARDED_BY(mu_);
  bool begun_ ABSL_GUARDED_BY(mu_) = false;
  bool warmup_item_ ABSL_GUARDED_BY(mu_) = false;
  int64_t sent_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t outstanding_key_ ABSL_GUARDED_BY(mu_) = 0;
  bool awaiting_ ABSL_GUARDED_BY(mu_) = false;
  bool write_in_flight_ ABSL_GUARDED_BY(mu_) = false;
  bool writes_done_ ABSL_GUARDED_BY(mu_) = false;
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time sent_at_ ABSL_GUARDED_BY(mu_);
};

class Sampler : public grpc::ClientBidiReactor<SampleStreamRequest, SampleStreamResponse>,
                public Paced {
 public:
  Sampler(Shared* shared, ReverbService::Stub* stub, std::string table, int batch, double rate,
          int64_t total)
      : shared_(shared), table_(std::move(table)), batch_(batch), rate_(rate), total_(total) {
    shared_->samplers_running.Add();
    context_.set_wait_for_ready(true);
    stub->async()->SampleStream(&context_, this);
    StartRead(&response_);
    StartCall();
  }
  // Starts sampling at once (before the writers' warm-up: a rate limiter may
  // need samples before every writer's warm-up item goes in).
  void Begin() {
    {
      absl::MutexLock lock(&mu_);
      begin_ = absl::Now();
    }
    shared_->scheduler.At(absl::Now(), this);
  }
  void Cancel() { context_.TryCancel(); }

  void Fire() override {
    absl::MutexLock lock(&mu_);
    if (ended_ || writes_done_) return;
    if (Done()) {
      writes_done_ = true;
      StartWritesDone();
      return;
    }
    const int64_t n = total_ > 0 ? std::min<int64_t>(batch_, total_ - received_) : batch_;
    request_.Clear();
    request_.set_table(table_);
    request_.set_num_samples(n);
    request_.mutable_rate_limiter_timeout()->set_milliseconds(
        absl::GetFlag(FLAGS_sample_timeout_ms));
    asked_ += n;
    write_in_flight_ = true;
    request_sent_at_ = absl::Now();
    {
      absl::MutexLock shared_lock(&shared_->mu);
      ++shared_->sample_requests;
    }
    StartWrite(&request_);
  }

  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    write_in_flight_ = false;
    if (ok) MaybeNextLocked();
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;
    absl::MutexLock lock(&mu_);
    int64_t ends = 0;
    for (const auto& entry : response_.entries()) ends += entry.end_of_sequence() ? 1 : 0;
    received_ += ends;
    const bool answered = ends > 0 && received_ >= asked_;
    const bool first_answer = answered && !warm_;
    if (answered) warm_ = true;
    {
      const absl::Time now = absl::Now();
      absl::MutexLock shared_lock(&shared_->mu);
      shared_->samples += ends;
      if (shared_->measuring.load()) shared_->samples_measured += ends;
      if (shared_->sample_clock && ends > 0) {
        shared_->samples_windowed += ends;
        shared_->last_sample = now;
        if (answered && !first_answer) {
          shared_->sample_latencies_us.push_back(Micros(now - request_sent_at_));
        }
      }
      if (first_answer && ++shared_->samplers_warm == shared_->num_samplers) {
        shared_->sample_clock = true;
        shared_->sample_start = now;
        shared_->last_sample = now;
      }
    }
    MaybeNextLocked();
    StartRead(&response_);
  }

  void OnDone(const grpc::Status& status) override {
    // A sampler cancelled at the end (its table empty, the writers done) is
    // not an error.
    bool cancelled_by_us;
    {
      absl::MutexLock lock(&mu_);
      ended_ = true;
      cancelled_by_us = cancelled_;
    }
    if (!status.ok() && !(cancelled_by_us && status.error_code() == grpc::StatusCode::CANCELLED)) {
      shared_->Error(status);
    }
    shared_->samplers_running.Done();
  }

  // Ends the stream after the request in progress (or cancels it when
  // `cancel`, for a request that may never complete).
  void Stop(bool cancel) {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    if (cancel && !ended_) {
      cancelled_ = true;
      context_.TryCancel();
      return;
    }
    MaybeNextLocked();
  }

 private:
  bool Done() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (total_ > 0) return received_ >= total_;
    return stopping_ || shared_->writers_done.load();
  }
  // Never after OnDone: no operation may start on a finished call.
  void MaybeNextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (ended_ || write_in_flight_ || writes_done_ || received_ < asked_) return;
    if (Done()) {
      writes_done_ = true;
      StartWritesDone();
      return;
    }
    absl::Time next = absl::Now();
    if (rate_ > 0) next = begin_ + absl::Seconds(static_cast<double>(asked_) / rate_);
    shared_->scheduler.At(std::max(next, absl::Now()), this);
  }

  Shared* const shared_;
  const std::string table_;
  const int batch_;
  const double rate_;
  const int64_t total_;
  grpc::ClientContext context_;
  SampleStreamResponse response_;
  absl::Mutex mu_;
  SampleStreamRequest request_ ABSL_GUARDED_BY(mu_);
  absl::Time begin_ ABSL_GUARDED_BY(mu_);
  int64_t asked_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t received_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time request_sent_at_ ABSL_GUARDED_BY(mu_);
  bool warm_ ABSL_GUARDED_BY(mu_) = false;  // its first request was answered
  bool write_in_flight_ ABSL_GUARDED_BY(mu_) = false;
  bool writes_done_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
};

std::shared_ptr<grpc::Channel> NewConnection(const std::string& target) {
  grpc::ChannelArguments args;
  // Its own subchannel, hence its own TCP connection.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  return grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::string target = absl::GetFlag(FLAGS_target);
  const int num_writers = absl::GetFlag(FLAGS_writers);
  const int num_samplers = absl::GetFlag(FLAGS_samplers);
  int connections = absl::GetFlag(FLAGS_connections);
  if (connections <= 0) connections = std::max(1, num_writers);

  auto shared = std::make_unique<Shared>();
  shared->items_per_writer = absl::GetFlag(FLAGS_items);
  shared->rate = absl::GetFlag(FLAGS_rate);
  const std::vector<std::string> tables =
      absl::StrSplit(absl::GetFlag(FLAGS_table), ',', absl::SkipEmpty());
  if (tables.empty()) {
    std::fprintf(stderr, "--table names no table\n");
    return 1;
  }
  shared->num_samplers = num_samplers;
  shared->warmup_items = absl::GetFlag(FLAGS_warmup_items);
  {
    tf_reverb::Tensor step;
    step.dtype = ::tf_reverb::tf::DT_FLOAT;
    const int floats = absl::GetFlag(FLAGS_step_floats);
    step.shape = {1, floats};
    std::vector<float> values(floats);
    if (absl::GetFlag(FLAGS_random_payload)) {
      std::mt19937 bits(std::random_device{}());
      std::vector<uint32_t> words(floats);
      for (uint32_t& word : words) word = static_cast<uint32_t>(bits());
      std::memcpy(values.data(), words.data(), words.size() * sizeof(uint32_t));
    } else {
      for (int i = 0; i < floats; ++i) values[i] = static_cast<float>(i) * 0.5f;
    }
    step.data.assign(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
    absl::StatusOr<deepmind::reverb::ChunkData> chunk =
        tf_reverb::BuildChunk(0, {step}, 0, 0, 0, /*delta_encode=*/false);
    if (!chunk.ok()) {
      std::fprintf(stderr, "BuildChunk: %s\n", chunk.status().ToString().c_str());
      return 1;
    }
    shared->chunk_template = *std::move(chunk);
  }

  const absl::Time deadline = absl::Now() + absl::Seconds(absl::GetFlag(FLAGS_deadline_seconds));
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  std::vector<std::unique_ptr<ReverbService::Stub>> stubs;
  for (int i = 0; i < connections; ++i) {
    channels.push_back(NewConnection(target));
    stubs.push_back(ReverbService::NewStub(channels.back()));
  }
  absl::BitGen seeds;
  std::vector<std::unique_ptr<Writer>> writers;
  for (int i = 0; i < num_writers; ++i) {
    writers.push_back(std::make_unique<Writer>(shared.get(), stubs[i % connections].get(),
                                               tables[i % tables.size()],
                                               absl::Uniform<uint64_t>(seeds)));
  }
  std::vector<std::unique_ptr<Sampler>> samplers;
  {
    int sampler_connections = absl::GetFlag(FLAGS_sampler_connections);
    if (sampler_connections <= 0) sampler_connections = std::max(1, num_samplers);
    const size_t first_sampler_stub = stubs.size();
    for (int i = 0; i < sampler_connections; ++i) {
      channels.push_back(NewConnection(target));
      stubs.push_back(ReverbService::NewStub(channels.back()));
    }
    std::vector<std::string> sample_tables =
        absl::StrSplit(absl::GetFlag(FLAGS_sample_table), ',', absl::SkipEmpty());
    if (sample_tables.empty()) sample_tables = tables;
    for (int i = 0; i < num_samplers; ++i) {
      samplers.push_back(std::make_unique<Sampler>(
          shared.get(), stubs[first_sampler_stub + i % sampler_connections].get(),
          sample_tables[i % sample_tables.size()], absl::GetFlag(FLAGS_sample_batch),
          absl::GetFlag(FLAGS_sample_rate), absl::GetFlag(FLAGS_sample_total)));
    }
  }
  Emit(absl::StrCat("{\"event\":\"open\",\"writers\":", num_writers, ",\"samplers\":", num_samplers,
                    ",\"connections\":", connections, "}"));
  for (auto& sampler : samplers) sampler->Begin();
  // Warm-up: every stream up and one round trip done before the clock starts.
  const absl::Time warm_start = absl::Now();
  bool hung = false;
  while (shared->writers_warm.load() < num_writers && shared->writers_running.count() > 0) {
    if (absl::Now() >= deadline) {
      hung = true;
      break;
    }
    absl::SleepFor(absl::Milliseconds(5));
  }
  if (shared->warmup_items > 0) {
    Emit(absl::StrCat(
        "{\"event\":\"warm\",\"seconds\":", absl::ToDoubleSeconds(absl::Now() - warm_start), "}"));
  }

  shared->start = absl::Now() + absl::Milliseconds(100);
  shared->stop_time = shared->start + absl::Seconds(absl::GetFlag(FLAGS_seconds));
  shared->measuring = true;
  for (auto& writer : writers) writer->Begin();

  bool announced_first = num_writers == 0;
  while (!hung && !shared->writers_running.WaitUntil(
                      std::min(deadline, absl::Now() + absl::Milliseconds(20)))) {
    if (!announced_first && shared->writers_first_sent.load() == num_writers) {
      announced_first = true;
      Emit("{\"event\":\"first_sent\"}");
    }
    if (absl::Now() >= deadline) {
      hung = true;
      break;
    }
  }
  if (!announced_first && shared->writers_first_sent.load() == num_writers) {
    Emit("{\"event\":\"first_sent\"}");
  }
  const absl::Time writers_end = absl::Now();
  shared->writers_done = true;
  if (hung) {
    for (auto& writer : writers) writer->Cancel();
    shared->writers_running.WaitUntil(absl::Now() + absl::Seconds(30));
  }
  // Samplers with a total of their own run to it; the others end after their
  // request in progress, or are cancelled if that never completes (a table
  // the writers no longer fill).
  for (auto& sampler : samplers) {
    if (absl::GetFlag(FLAGS_sample_total) == 0) sampler->Stop(false);
  }
  if (!shared->samplers_running.WaitUntil(
          absl::GetFlag(FLAGS_sample_total) > 0 ? deadline : absl::Now() + absl::Seconds(10))) {
    if (absl::GetFlag(FLAGS_sample_total) > 0) hung = true;
    for (auto& sampler : samplers) sampler->Stop(true);
    shared->samplers_running.WaitUntil(absl::Now() + absl::Seconds(30));
  }
  const absl::Time end = absl::Now();
  // Nothing may fire on a stream once the streams are destroyed.
  shared->scheduler.Stop();

  absl::MutexLock lock(&shared->mu);
  std::vector<std::string> errors;
  for (const auto& [message, count] : shared->errors) {
    std::string escaped;
    for (char c : message) {
      if (c == '"' || c == '\\') escaped.push_back('\\');
      if (static_cast<unsigned char>(c) >= 0x20) escaped.push_back(c);
    }
    errors.push_back(absl::StrCat("{\"status\":\"", escaped, "\",\"streams\":", count, "}"));
  }
  const double send_seconds = absl::ToDoubleSeconds(writers_end - shared->start);
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const double cpu_seconds = usage.ru_utime.tv_sec + usage.ru_stime.tv_sec +
                             (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
  Emit(absl::StrCat(
      "{\"event\":\"result\",\"writers\":", num_writers, ",\"samplers\":", num_samplers,
      ",\"connections\":", connections, ",\"rate\":", shared->rate, ",\"sent\":", shared->sent,
      ",\"confirmed\":", shared->confirmed, ",\"warmup_confirmed\":", shared->warmup_confirmed,
      ",\"unexpected_keys\":", shared->unexpected_keys, ",\"samples\":", shared->samples,
      ",\"samples_measured\":", shared->samples_measured,
      ",\"sample_requests\":", shared->sample_requests,
      ",\"samples_windowed\":", shared->samples_windowed, ",\"sample_window_seconds\":",
      shared->sample_clock ? absl::ToDoubleSeconds(shared->last_sample - shared->sample_start)
                           : 0.0,
      ",\"send_seconds\":", send_seconds,
      ",\"seconds\":", absl::ToDoubleSeconds(end - shared->start), ",\"cpu_seconds\":", cpu_seconds,
      ",\"writers_unfinished\":", shared->writers_running.count(), ",\"samplers_unfinished\":",
      shared->samplers_running.count(), ",\"hung\":", hung ? "true" : "false", ",\"errors\":[",
      absl::StrJoin(errors, ","), "],\"latencies_us\":[", absl::StrJoin(shared->latencies_us, ","),
      "]", ",\"sample_latencies_us\":[", absl::StrJoin(shared->sample_latencies_us, ","), "]",
      absl::GetFlag(FLAGS_timeline)
          ? absl::StrCat(",\"sent_at_ms\":[", absl::StrJoin(shared->sent_at_ms, ","), "]")
          : "",
      "}"));
  // Streams the hang guard could not end keep their reactors alive: leave
  // without destroying them.
  if (shared->writers_running.count() > 0 || shared->samplers_running.count() > 0) {
    std::fflush(stdout);
    std::_Exit(hung ? 2 : 0);
  }
  return hung ? 2 : 0;
}
