#include "server/service/insert_stream_reactor.h"

#include <atomic>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/impl/codegen/proto_utils.h"
#include "grpcpp/impl/serialization_traits.h"
#include "grpcpp/support/status.h"
#include "reverb_service.pb.h"
#include "server/chunk_codec.h"
#include "server/grpc_status.h"
#include "server/service/insert_request.h"
#include "server/table.h"

namespace tf_reverb {

InsertStreamReactor* InsertStreamReactor::Create(grpc::CallbackServerContext* context,
                                                 ServerInsertStream::TableLookup tables,
                                                 WorkQueue* queue, std::atomic<int>* waiting,
                                                 bool announce_zstd,
                                                 std::shared_ptr<WriteAheadLog> log) {
  std::shared_ptr<InsertStreamReactor> reactor(
      new InsertStreamReactor(std::move(tables), queue, waiting, std::move(log)));
  reactor->Own(reactor);
  reactor->Begin(context, announce_zstd);
  return reactor.get();
}

InsertStreamReactor::InsertStreamReactor(ServerInsertStream::TableLookup tables, WorkQueue* queue,
                                         std::atomic<int>* waiting,
                                         std::shared_ptr<WriteAheadLog> log)
    : StreamReactor("InsertStream"),
      handler_(std::move(tables)),
      queue_(queue),
      waiting_(waiting),
      log_(std::move(log)) {}

void InsertStreamReactor::Begin(grpc::CallbackServerContext* context, bool announce_zstd) {
  // Sent at once (not with the first response) so that writers learn the
  // codecs before their first chunk; Reverb clients ignore it.
  if (announce_zstd) context->AddInitialMetadata(kChunkCodecsMetadataKey, kZstdCodecName);
  StartSendInitialMetadata();
  Locked([this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { StartReadLocked(); });
}

void InsertStreamReactor::StartReadLocked() {
  state_ = State::kReading;
  StartRead(&read_buffer_);
}

void InsertStreamReactor::WriteConfirmedLocked() {
  if (awaiting_log_) return;  // OnLogConfirmed writes what is confirmed then
  if (log_ != nullptr && !confirmed_.empty()) {
    // Every key in confirmed_ was logged before this point.
    const uint64_t sequence = log_->last_sequence();
    if (log_->options().durability == WalDurability::kAsync && !log_->Confirmed(sequence)) {
      // Written to the OS is all async waits for: do it here, rather than
      // wait for the log's thread (an error shows in Confirmed below).
      log_->WritePending().IgnoreError();
    }
    if (!log_->Confirmed(sequence)) {
      awaiting_log_ = true;
      // On the log's writer thread, which holds no lock then, the
      // confirmation is started at once (a write that does not block).
      // Called at once from WhenConfirmed (under mu_, on whatever thread),
      // or elsewhere (another call's WritePending, under its reactor's
      // lock), it goes through the queue.
      std::weak_ptr<InsertStreamReactor> weak = weak_from_this();
      WorkQueue* queue = queue_;
      WriteAheadLog* log = log_.get();
      auto registering = std::make_shared<std::atomic<bool>>(true);
      log_->WhenConfirmed(sequence, [weak, queue, log, registering](const absl::Status& status) {
        if (registering->load() || !log->OnWriterThread()) {
          queue->Schedule([weak, status]() {
            if (std::shared_ptr<InsertStreamReactor> self = weak.lock()) {
              self->OnLogConfirmed(status);
            }
          });
          return;
        }
        if (std::shared_ptr<InsertStreamReactor> self = weak.lock()) self->OnLogConfirmed(status);
      });
      registering->store(false);
      return;
    }
  }
  deepmind::reverb::InsertStreamResponse response;
  response.mutable_keys()->Add(confirmed_.begin(), confirmed_.end());
  confirmed_.clear();
  write_buffer_.Clear();
  bool own = false;
  grpc::Status s = grpc::SerializationTraits<deepmind::reverb::InsertStreamResponse>::Serialize(
      response, &write_buffer_, &own);
  if (!s.ok()) {
    FinishLocked(s);
    return;
  }
  StartWriteLocked(&write_buffer_);
}

void InsertStreamReactor::OnLogConfirmed(const absl::Status& status) {
  Locked([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    awaiting_log_ = false;
    if (state_ == State::kFinished) return;
    if (!status.ok()) {
      FinishLocked(ToGrpcStatus(status));
      return;
    }
    // Held while a blocked insert waits (kWaiting) or at the end of a
    // request (kConfirming, its write marked as started).
    if (!write_in_flight() && (state_ == State::kConfirming || !confirmed_.empty())) {
      WriteConfirmedLocked();
    }
  });
}

void InsertStreamReactor::FinishLocked(grpc::Status status) {
  if (!RequestFinishLocked(std::move(status))) return;
  StopWaitingLocked();
  state_ = State::kFinished;
}

void InsertStreamReactor::StopWaitingLocked() {
  if (state_ == State::kWaiting) --*waiting_;
  waker_.reset();  // withdraws it from the table
}

void InsertStreamReactor::ReleaseRequestLocked() {
  request_ = nullptr;
  arena_.Reset();
}

void InsertStreamReactor::OnReadDone(bool ok) {
  Locked([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (state_ == State::kFinished) return;
    if (!ok) {  // the client half-closed the stream (or went away)
      FinishLocked(grpc::Status::OK);
      return;
    }
    request_ =
        google::protobuf::Arena::CreateMessage<deepmind::reverb::InsertStreamRequest>(&arena_);
    std::vector<ServerInsertStream::WireChunk> wire_chunks;
    absl::Status parsed = ReadInsertRequest(read_buffer_, request_, &wire_chunks);
    read_buffer_.Clear();
    if (parsed.ok()) parsed = handler_.Start(request_, std::move(wire_chunks));
    if (!parsed.ok()) {
      ReleaseRequestLocked();
      FinishLocked(ToGrpcStatus(parsed));
      return;
    }
    request_has_items_ = request_->items_size() > 0;
    state_ = State::kInserting;
    Step();
  });
}

void InsertStreamReactor::Step() {
  std::weak_ptr<InsertStreamReactor> weak = weak_from_this();
  WorkQueue* queue = queue_;
  waker_ = std::make_shared<Table::Waker>([weak, queue]() {
    queue->Schedule([weak]() {
      if (std::shared_ptr<InsertStreamReactor> self = weak.lock()) self->Resume();
    });
  });
  absl::StatusOr<ServerInsertStream::Progress> progress = handler_.Continue(&confirmed_, waker_);
  if (!progress.ok() || *progress == ServerInsertStream::Progress::kDone) ReleaseRequestLocked();
  if (!progress.ok()) {
    FinishLocked(ToGrpcStatus(progress.status()));
    return;
  }
  if (*progress == ServerInsertStream::Progress::kBlocked) {
    state_ = State::kWaiting;
    ++*waiting_;
    // Confirm the items already inserted first, so a writer's flush is not
    // held up by later items.
    if (!confirmed_.empty() && !write_in_flight()) WriteConfirmedLocked();
    return;
  }
  waker_.reset();
  if (!request_has_items_) {  // chunks only: no response
    StartReadLocked();
    return;
  }
  state_ = State::kConfirming;
  confirmation_written_ = false;
  if (!write_in_flight()) {
    confirmation_written_ = true;
    WriteConfirmedLocked();
  }
}

void InsertStreamReactor::Resume() {
  Locked([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (state_ != State::kWaiting) return;
    --*waiting_;
    state_ = State::kInserting;
    Step();
  });
}

void InsertStreamReactor::OnWriteDone(bool ok) {
  Locked([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    WriteDoneLocked();
    if (state_ == State::kFinished) return;
    if (!ok) {  // the client went away
      FinishLocked(grpc::Status::OK);
      return;
    }
    if (state_ != State::kConfirming) return;  // a confirmation sent before waiting
    if (!confirmation_written_) {
      confirmation_written_ = true;
      WriteConfirmedLocked();
      return;
    }
    StartReadLocked();
  });
}

void InsertStreamReactor::OnCancel() {
  Locked([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (state_ == State::kWaiting) {
      FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "The call was cancelled."));
    }
  });
}

void InsertStreamReactor::OnDone() {
  std::shared_ptr<InsertStreamReactor> self;
  {
    absl::MutexLock lock(&mu_);
    StopWaitingLocked();
    state_ = State::kFinished;
    self = ReleaseSelfLocked();
  }
  // `self` may be the last reference: the reactor is deleted on return.
}

}  // namespace tf_reverb
