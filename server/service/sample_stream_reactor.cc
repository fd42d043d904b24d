#include "server/service/sample_stream_reactor.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "grpcpp/support/status.h"
#include "reverb_service.pb.h"
#include "server/chunk_codec.h"
#include "server/grpc_status.h"
#include "server/service/raw_request.h"
#include "server/service/sample_batch.h"
#include "server/service/sample_response.h"
#include "server/table_item.h"

namespace tf_reverb {
namespace {

// Whether the client's request metadata announced that it decodes zstd.
bool ClientAcceptsZstd(const grpc::CallbackServerContext& context) {
  auto range = context.client_metadata().equal_range(kChunkCodecsMetadataKey);
  for (auto it = range.first; it != range.second; ++it) {
    if (CodecsListZstd(absl::string_view(it->second.data(), it->second.size()))) {
      return true;
    }
  }
  return false;
}

// The first batch of a request; later ones double while the table keeps up.
constexpr int64_t kFirstBatch = 128;

}  // namespace

SampleStreamReactor* SampleStreamReactor::Create(grpc::CallbackServerContext* context,
                                                 TableLookup tables, WorkQueue* queue,
                                                 std::atomic<int>* waiting) {
  std::shared_ptr<SampleStreamReactor> reactor(
      new SampleStreamReactor(std::move(tables), queue, waiting, ClientAcceptsZstd(*context)));
  reactor->Own(reactor);
  reactor->Locked([&]()
                      ABSL_EXCLUSIVE_LOCKS_REQUIRED(reactor->mu_) { reactor->StartReadLocked(); });
  return reactor.get();
}

SampleStreamReactor::SampleStreamReactor(TableLookup tables, WorkQueue* queue,
                                         std::atomic<int>* waiting, bool client_accepts_zstd)
    : StreamReactor("SampleStream"),
      tables_(std::move(tables)),
      queue_(queue),
      waiting_(waiting),
      client_accepts_zstd_(client_accepts_zstd) {}

void SampleStreamReactor::StartReadLocked() {
  state_ = State::kReading;
  table_.reset();
  StartRead(&read_buffer_);
}

void SampleStreamReactor::FinishLocked(grpc::Status status) {
  if (!RequestFinishLocked(std::move(status))) return;
  StopWaitingLocked();
  state_ = State::kFinished;
  to_write_.clear();
}

void SampleStreamReactor::StopWaitingLocked() {
  if (state_ == State::kWaiting) --*waiting_;
  waker_.reset();  // withdraws it from the table
}

void SampleStreamReactor::OnReadDone(bool ok) {
  Locked([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (state_ == State::kFinished) return;
    if (!ok) {  // the client half-closed the stream (or went away)
      FinishLocked(grpc::Status::OK);
      return;
    }
    deepmind::reverb::SampleStreamRequest request;
    absl::Status parsed = ParseRequest(read_buffer_, &request);
    read_buffer_.Clear();
    if (!parsed.ok()) {
      FinishLocked(ToGrpcStatus(parsed));
      return;
    }
    if (request.num_samples() <= 0) {
      FinishLocked(
          grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                       absl::StrCat("num_samples must be > 0, got ", request.num_samples())));
      return;
    }
    absl::StatusOr<std::shared_ptr<Table>> table = tables_(request.table());
    if (!table.ok()) {
      FinishLocked(ToGrpcStatus(table.status()));
      return;
    }
    table_ = *std::move(table);
    // Reverb clients send 0 or -1 for "no timeout"; only > 0 is a timeout.
    const int64_t timeout_ms = request.rate_limiter_timeout().milliseconds();
    timeout_ = timeout_ms > 0 ? absl::Milliseconds(timeout_ms) : absl::InfiniteDuration();
    remaining_ = request.num_samples();
    accept_batches_ = request.accept_batches();
    last_batch_ = kFirstBatch / 2;
    rate_limited_ = false;
    Step();
  });
}

void SampleStreamReactor::Step() {
  std::weak_ptr<SampleStreamReactor> weak = weak_from_this();
  WorkQueue* queue = queue_;
  waker_ = std::make_shared<Table::Waker>([weak, queue]() {
    queue->Schedule([weak]() {
      if (std::shared_ptr<SampleStreamReactor> self = weak.lock()) self->Resume();
    });
  });
  std::vector<SampledItem> batch;
  absl::StatusOr<bool> sampled =
      table_->TrySampleBatch(std::min(2 * last_batch_, remaining_), &batch, waker_, rate_limited_);
  if (!sampled.ok()) {
    FinishLocked(ToGrpcStatus(sampled.status()));
    return;
  }
  if (!*sampled) {
    state_ = State::kWaiting;
    ++*waiting_;
    rate_limited_ = true;
    const uint64_t wait = ++wait_;
    if (timeout_ != absl::InfiniteDuration()) {
      queue_->ScheduleAt(absl::Now() + timeout_, [weak, wait]() {
        if (std::shared_ptr<SampleStreamReactor> self = weak.lock()) self->TimedOut(wait);
      });
    }
    return;
  }
  waker_.reset();
  rate_limited_ = false;
  last_batch_ = static_cast<int64_t>(batch.size());
  remaining_ -= last_batch_;
  absl::StatusOr<std::vector<grpc::ByteBuffer>> responses =
      accept_batches_ ? EncodeSampleBatches(batch) : std::vector<grpc::ByteBuffer>();
  if (responses.ok() && responses->empty()) {
    responses = EncodeSampleResponses(batch, client_accepts_zstd_);
  }
  if (!responses.ok()) {
    FinishLocked(ToGrpcStatus(responses.status()));
    return;
  }
  for (grpc::ByteBuffer& response : *responses) to_write_.push_back(std::move(response));
  state_ = State::kWriting;
  WriteNextLocked();
}

void SampleStreamReactor::WriteNextLocked() {
  write_buffer_ = std::move(to_write_.front());
  to_write_.pop_front();
  StartWriteLocked(&write_buffer_);
}

void SampleStreamReactor::Resume() {
  Locked([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (state_ != State::kWaiting) return;
    --*waiting_;
    state_ = State::kWriting;  // neither waiting nor reading while Step runs
    Step();
  });
}

void SampleStreamReactor::TimedOut(uint64_t wait) {
  Locked([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (state_ != State::kWaiting || wait != wait_) return;
    FinishLocked(grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, kRateLimiterTimeoutMessage));
  });
}

void SampleStreamReactor::OnWriteDone(bool ok) {
  Locked([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    WriteDoneLocked();
    write_buffer_.Clear();
    if (state_ == State::kFinished) return;
    if (!ok) {  // the client went away
      FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "The client went away."));
      return;
    }
    if (!to_write_.empty()) {
      WriteNextLocked();
    } else if (remaining_ > 0) {
      Step();
    } else {
      StartReadLocked();
    }
  });
}

void SampleStreamReactor::OnCancel() {
  Locked([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (state_ == State::kWaiting) {
      FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "The call was cancelled."));
    }
  });
}

void SampleStreamReactor::OnDone() {
  std::shared_ptr<SampleStreamReactor> self;
  {
    absl::MutexLock lock(&mu_);
    StopWaitingLocked();
    state_ = State::kFinished;
    self = ReleaseSelfLocked();
  }
}

}  // namespace tf_reverb
