#include "server/writer/trajectory_writer.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "grpcpp/client_context.h"
#include "grpcpp/impl/call_op_set.h"
#include "reverb_service.pb.h"
#include "schema.pb.h"
#include "server/chunk_codec.h"
#include "server/error_kind.h"
#include "server/grpc_status.h"
#include "server/security/channel_credentials.h"
#include "server/tensor.h"
#include "server/writer/writer_chunk_codecs.h"

namespace tf_reverb {
namespace {

using ::deepmind::reverb::InsertStreamRequest;
using ::deepmind::reverb::InsertStreamResponse;

constexpr absl::Duration kMinBackoff = absl::Milliseconds(1);
constexpr absl::Duration kMaxBackoff = absl::Seconds(1);
// Streams that die sooner than this count as failing fast (backoff grows).
constexpr absl::Duration kFastFailure = absl::Seconds(2);

int64_t CellBytes(const CellSpec& spec) {
  int64_t bytes = DataTypeSize(spec.dtype).value_or(8);
  for (int64_t d : spec.shape) bytes *= d;
  return bytes;
}

bool IsRetryable(const absl::Status& status) {
  return status.ok() || absl::IsUnavailable(status) || absl::IsCancelled(status);
}

}  // namespace

bool TrajectoryWriter::Item::IsReady() const {
  for (const auto& cell : cells) {
    if (!cell->IsReady()) return false;
  }
  return true;
}

absl::StatusOr<std::unique_ptr<TrajectoryWriter>> TrajectoryWriter::Create(
    std::shared_ptr<grpc::Channel> channel, TrajectoryWriterOptions options) {
  if (absl::Status s = options.chunker_options.Validate(); !s.ok()) return s;
  if (options.max_queued_items < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_queued_items must be >= 1, got ", options.max_queued_items, "."));
  }
  std::unique_ptr<TrajectoryWriter> writer(
      new TrajectoryWriter(std::move(channel), std::move(options)));
  writer->worker_ = std::thread([w = writer.get()] { w->RunWorker(); });
  return writer;
}

TrajectoryWriter::TrajectoryWriter(std::shared_ptr<grpc::Channel> channel,
                                   TrajectoryWriterOptions options)
    : channel_(std::move(channel)),
      stub_(deepmind::reverb::ReverbService::NewStub(channel_)),
      options_(std::move(options)),
      episode_id_(NewRandomKey()) {}

TrajectoryWriter::~TrajectoryWriter() { Close(); }

absl::Status TrajectoryWriter::CheckUsable() const {
  if (closed_) return absl::FailedPreconditionError("TrajectoryWriter::Close has been called.");
  return error_;
}

absl::StatusOr<std::shared_ptr<Chunker>> TrajectoryWriter::GetOrCreateChunker(int column) {
  while (static_cast<int>(chunkers_.size()) <= column) {
    const int index = static_cast<int>(chunkers_.size());
    auto it = overrides_.find(index);
    absl::StatusOr<std::shared_ptr<Chunker>> chunker =
        Chunker::Create(index, it == overrides_.end() ? options_.chunker_options : it->second);
    if (!chunker.ok()) return chunker.status();
    (*chunker)->SetEncodeExecutor([this](int64_t raw_bytes, Chunker::EncodeJob* job) {
      return TakeEncodeJob(raw_bytes, job);
    });
    (*chunker)->SetCodec(chunk_codec_);
    chunkers_.push_back(*std::move(chunker));
  }
  return chunkers_[column];
}

absl::Status TrajectoryWriter::Append(std::vector<std::optional<Tensor>> data, StepRefs* refs) {
  return AppendInternal(std::move(data), /*partial=*/false, refs);
}

absl::Status TrajectoryWriter::AppendPartial(std::vector<std::optional<Tensor>> data,
                                             StepRefs* refs) {
  return AppendInternal(std::move(data), /*partial=*/true, refs);
}

absl::Status TrajectoryWriter::AppendInternal(std::vector<std::optional<Tensor>> data, bool partial,
                                              StepRefs* refs) {
  absl::MutexLock caller_lock(&caller_mu_);
  refs->clear();
  // Check every value before buffering any, so a failed append changes nothing.
  std::vector<std::shared_ptr<Chunker>> chunkers(data.size());
  uint64_t episode_id;
  int32_t episode_step;
  {
    absl::MutexLock lock(&mu_);
    if (absl::Status s = CheckUsable(); !s.ok()) return s;
    for (size_t i = 0; i < data.size(); ++i) {
      if (!data[i].has_value()) continue;
      const int column = static_cast<int>(i);
      if (open_step_columns_.contains(column)) {
        return absl::InvalidArgumentError(
            absl::StrCat("Column ", column,
                         " has already been set in the active step by a previous "
                         "(partial) append call and thus must be omitted or set to None."));
      }
      absl::StatusOr<std::shared_ptr<Chunker>> chunker = GetOrCreateChunker(column);
      if (!chunker.ok()) return chunker.status();
      if (absl::Status s = (*chunker)->CheckSpec(*data[i]); !s.ok()) return s;
      chunkers[i] = *std::move(chunker);
    }
    episode_id = episode_id_;
    episode_step = episode_step_;
  }
  // Buffering (and stacking/compressing full chunks) runs without mu_, so the
  // sending thread is not held up; caller_mu_ keeps the episode state fixed.
  refs->reserve(data.size());
  absl::Status status;
  for (size_t i = 0; i < data.size(); ++i) {
    if (!data[i].has_value() || !status.ok()) {
      refs->push_back(std::nullopt);
      continue;
    }
    absl::StatusOr<std::weak_ptr<CellRef>> ref =
        chunkers[i]->Append(*std::move(data[i]), episode_id, episode_step);
    if (!ref.ok()) {
      status = ref.status();
      refs->push_back(std::nullopt);
      continue;
    }
    refs->push_back(*std::move(ref));
  }
  absl::MutexLock lock(&mu_);
  for (size_t i = 0; i < refs->size(); ++i) {
    if ((*refs)[i].has_value()) open_step_columns_.insert(static_cast<int>(i));
  }
  if (!status.ok()) return status;
  if (!partial) {
    ++episode_step_;
    open_step_columns_.clear();
  }
  // Appends may finalize chunks the head item waits for.
  SignalIfHeadReady();
  return absl::OkStatus();
}

void TrajectoryWriter::SignalIfHeadReady() {
  if (coalescing_ && !SendNow()) return;  // it waits for the window's end
  if (!queue_.empty() && queue_.front()->IsReady()) worker_cv_.Signal();
}

void TrajectoryWriter::PushBack(ItemPtr item) {
  for (uint64_t key : item->chunk_keys) ++queued_chunk_refs_[key];
  queued_bytes_ += item->data_bytes;
  queue_.push_back(std::move(item));
}

void TrajectoryWriter::PushFront(ItemPtr item) {
  for (uint64_t key : item->chunk_keys) ++queued_chunk_refs_[key];
  queued_bytes_ += item->data_bytes;
  queue_.push_front(std::move(item));
}

TrajectoryWriter::ItemPtr TrajectoryWriter::PopFront() {
  ItemPtr item = std::move(queue_.front());
  queue_.pop_front();
  queued_bytes_ -= item->data_bytes;
  for (uint64_t key : item->chunk_keys) {
    auto it = queued_chunk_refs_.find(key);
    if (--it->second == 0) queued_chunk_refs_.erase(it);
  }
  return item;
}

absl::StatusOr<std::vector<ItemColumn>> TrajectoryWriter::BuildItem(
    const std::vector<TrajectoryColumn>& trajectory, Item* item) const {
  if (trajectory.empty()) {
    return absl::InvalidArgumentError("Items must reference at least one column.");
  }
  auto* flat = item->proto.mutable_flat_trajectory();
  flat->mutable_columns()->Reserve(static_cast<int>(trajectory.size()));
  // Column c's spec (of its first cell, which the item keeps alive).
  std::vector<const CellSpec*> specs;
  specs.reserve(trajectory.size());
  size_t num_refs = 0;
  for (const TrajectoryColumn& column : trajectory) num_refs += column.refs.size();
  absl::flat_hash_set<const CellRef*> seen;
  seen.reserve(num_refs);
  item->cells.reserve(num_refs);
  for (size_t c = 0; c < trajectory.size(); ++c) {
    const TrajectoryColumn& column = trajectory[c];
    if (column.refs.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("Error in column ", c, ": Column must reference at least one cell."));
    }
    if (column.squeeze && column.refs.size() != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("Error in column ", c,
                       ": Column must contain exactly one row when squeeze is set but got ",
                       column.refs.size(), "."));
    }
    auto* out = flat->add_columns();
    out->set_squeeze(column.squeeze);
    const CellSpec* spec = nullptr;
    for (const std::weak_ptr<CellRef>& weak : column.refs) {
      std::shared_ptr<CellRef> ref = weak.lock();
      if (ref == nullptr) {
        return absl::InvalidArgumentError(
            absl::StrCat("Error in column ", c,
                         ": Column contains expired CellRef (its data is no longer "
                         "kept alive; raise num_keep_alive_refs)."));
      }
      if (spec == nullptr) {
        spec = &ref->spec();
      } else if (!(ref->spec() == *spec)) {
        return absl::InvalidArgumentError(
            absl::StrCat("Error in column ", c, ": Column references cells of different specs: ",
                         spec->DebugString(), " and ", ref->spec().DebugString(), "."));
      }
      const int n = out->chunk_slices_size();
      auto* last = n > 0 ? out->mutable_chunk_slices(n - 1) : nullptr;
      if (last != nullptr && last->chunk_key() == ref->chunk_key() &&
          last->offset() + last->length() == ref->offset()) {
        last->set_length(last->length() + 1);
      } else {
        auto* slice = out->add_chunk_slices();
        slice->set_chunk_key(ref->chunk_key());
        slice->set_offset(ref->offset());
        slice->set_length(1);
        slice->set_index(0);
      }
      if (seen.insert(ref.get()).second) {
        item->data_bytes += CellBytes(ref->spec());
        if (std::find(item->chunk_keys.begin(), item->chunk_keys.end(), ref->chunk_key()) ==
            item->chunk_keys.end()) {
          item->chunk_keys.push_back(ref->chunk_key());
        }
        item->cells.push_back(std::move(ref));
      }
    }
    specs.push_back(spec);
  }
  std::vector<ItemColumn> columns(trajectory.size());
  for (size_t c = 0; c < trajectory.size(); ++c) {
    columns[c].dtype = specs[c]->dtype;
    columns[c].shape = specs[c]->shape;
    columns[c].squeeze = trajectory[c].squeeze;
    if (!trajectory[c].squeeze) {
      columns[c].shape.insert(columns[c].shape.begin(),
                              static_cast<int64_t>(trajectory[c].refs.size()));
    }
  }
  return columns;
}

absl::Status TrajectoryWriter::CheckItemSignature(const std::string& table,
                                                  const std::vector<ItemColumn>& columns) const {
  if (!options_.signatures.has_value()) return absl::OkStatus();
  auto it = options_.signatures->find(table);
  if (it == options_.signatures->end()) {
    std::vector<std::string> names;
    for (const auto& entry : *options_.signatures) names.push_back(entry.first);
    std::sort(names.begin(), names.end());
    return absl::InvalidArgumentError(
        absl::StrCat("Unable to create item in table '", table,
                     "' since the table could not be found. A total of ", names.size(),
                     " tables were found: ", absl::StrJoin(names, ", "), "."));
  }
  if (!it->second.has_value()) return absl::OkStatus();
  const std::vector<SignatureSpec>& signature = *it->second;
  const std::string prefix =
      absl::StrCat("Unable to create item in table '", table,
                   "' since the provided trajectory is inconsistent with the table signature. ");
  const std::optional<ItemMismatch> mismatch =
      FindItemMismatch(signature, columns, options_.accept_step_shape_signatures);
  if (!mismatch.has_value()) return absl::OkStatus();
  if (mismatch->column_count) {
    return absl::InvalidArgumentError(absl::StrCat(prefix, "The item has ", columns.size(),
                                                   " columns but the signature has ",
                                                   signature.size(), "."));
  }
  const size_t c = mismatch->column;
  return absl::InvalidArgumentError(
      absl::StrCat(prefix, "The table signature specifies column ", c, " as ",
                   SignatureSpecString(signature[c]), " but the item provides ",
                   DataTypeName(columns[c].dtype), ShapeString(columns[c].shape), "."));
}

absl::Status TrajectoryWriter::CreateItem(const std::string& table, double priority,
                                          const std::vector<TrajectoryColumn>& trajectory,
                                          std::optional<int64_t> policy_version) {
  if (std::isnan(priority)) return absl::InvalidArgumentError("Priority must not be NaN.");
  if (policy_version.has_value() && *policy_version < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("policy_version (", *policy_version, ") must be >= 0"));
  }
  auto item = std::make_shared<Item>();
  absl::StatusOr<std::vector<ItemColumn>> columns = BuildItem(trajectory, item.get());
  if (!columns.ok()) return columns.status();
  if (absl::Status s = CheckItemSignature(table, *columns); !s.ok()) return s;
  item->proto.set_key(NewRandomKey());
  item->proto.set_table(table);
  item->proto.set_priority(priority);
  item->proto.set_times_sampled(0);
  if (policy_version.has_value()) item->proto.set_policy_version(*policy_version);

  absl::MutexLock lock(&mu_);
  if (absl::Status s = CheckUsable(); !s.ok()) return s;
  // Bounded memory: wait for room, finalizing chunks so the queue can drain.
  auto has_room = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return static_cast<int>(queue_.size() + unconfirmed_.size()) < options_.max_queued_items ||
           closed_ || !error_.ok();
  };
  if (!has_room()) {
    if (absl::Status s = FinalizeChunksOfQueued(queue_.size()); !s.ok()) return s;
    SignalIfHeadReady();
    while (!has_room()) WaitAsUrgent(absl::InfiniteFuture());
    if (absl::Status s = CheckUsable(); !s.ok()) return s;
  }
  item->seq = next_seq_++;
  PushBack(std::move(item));
  if (queue_.size() == 1) FinalizeAutoTunedChunksIfIdle();
  // Only a new head (or a full coalescing batch) can unblock the worker;
  // otherwise it is busy sending, coalescing or waiting for the head's
  // chunks, and picks this item up with the head.
  if (queue_.size() == 1 || (coalescing_ && SendNow())) SignalIfHeadReady();
  return absl::OkStatus();
}

absl::Status TrajectoryWriter::FinalizeChunksOfQueued(size_t end) {
  end = std::min(end, queue_.size());
  for (size_t i = 0; i < end; ++i) {
    for (const auto& cell : queue_[i]->cells) {
      if (cell->IsReady()) continue;
      if (std::shared_ptr<Chunker> chunker = cell->chunker().lock()) {
        if (absl::Status s = chunker->FlushIfOpen(cell->chunk_key()); !s.ok()) return s;
      }
    }
  }
  return absl::OkStatus();
}

void TrajectoryWriter::FinalizeAutoTunedChunksIfIdle() {
  if (!unconfirmed_.empty() || queue_.empty() || !error_.ok()) return;
  for (const auto& cell : queue_.front()->cells) {
    if (cell->IsReady()) continue;
    std::shared_ptr<Chunker> chunker = cell->chunker().lock();
    if (chunker == nullptr || chunker->options().max_chunk_length != 0) continue;
    if (absl::Status s = chunker->FlushIfOpen(cell->chunk_key()); !s.ok()) {
      error_ = s;
      pending_cv_.SignalAll();
      return;
    }
  }
  SignalIfHeadReady();
}

bool TrajectoryWriter::WaitAsUrgent(absl::Time deadline) {
  ++urgent_waiters_;
  if (coalescing_) worker_cv_.Signal();  // it stops coalescing
  const bool timed_out = pending_cv_.WaitWithDeadline(&mu_, deadline);
  --urgent_waiters_;
  return timed_out;
}

bool TrajectoryWriter::SendNow() const {
  // Past half the max_queued_items bound, holding items back would soon
  // block CreateItem until they are confirmed: send them, so confirmations
  // come back while the caller goes on.
  const size_t pending = queue_.size() + unconfirmed_.size();
  return closed_ || stream_broken_ || urgent_waiters_ > 0 || !early_chunks_.empty() ||
         queue_.size() >= kCoalesceMaxItems || queued_bytes_ >= kCoalesceMaxBytes ||
         2 * pending >= static_cast<size_t>(options_.max_queued_items);
}

absl::Status TrajectoryWriter::WaitForPending(int max_pending, absl::Duration timeout,
                                              const char* what) {
  const absl::Time deadline =
      timeout == absl::InfiniteDuration() ? absl::InfiniteFuture() : absl::Now() + timeout;
  auto pending = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return static_cast<int>(queue_.size() + unconfirmed_.size()) > max_pending;
  };
  while (pending() && error_.ok() && !closed_) {
    if (WaitAsUrgent(deadline) && pending()) {
      return WithErrorKind(absl::DeadlineExceededError(absl::StrCat(
                               what, " call did not complete within provided timeout of ",
                               absl::FormatDuration(timeout))),
                           ErrorKind::kCallerTimeout);
    }
  }
  return CheckUsable();
}

absl::Status TrajectoryWriter::Flush(int block_until_num_items, absl::Duration timeout) {
  if (block_until_num_items < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("block_until_num_items must be >= 0, got ", block_until_num_items, "."));
  }
  absl::MutexLock lock(&mu_);
  if (absl::Status s = CheckUsable(); !s.ok()) return s;
  if (static_cast<int>(queue_.size()) > block_until_num_items) {
    if (absl::Status s = FinalizeChunksOfQueued(queue_.size() - block_until_num_items); !s.ok()) {
      return s;
    }
  }
  SignalIfHeadReady();
  return WaitForPending(block_until_num_items, timeout, "Flush");
}

absl::Status TrajectoryWriter::EndEpisode(bool clear_buffers, absl::Duration timeout) {
  absl::MutexLock caller_lock(&caller_mu_);
  absl::MutexLock lock(&mu_);
  if (absl::Status s = CheckUsable(); !s.ok()) return s;
  if (absl::Status s = FinalizeChunksOfQueued(queue_.size()); !s.ok()) return s;
  SignalIfHeadReady();
  if (absl::Status s = WaitForPending(0, timeout, "End episode"); !s.ok()) return s;
  for (const auto& chunker : chunkers_) {
    if (clear_buffers) {
      chunker->Reset();
    } else if (absl::Status s = chunker->Flush(); !s.ok()) {
      return s;
    }
  }
  episode_id_ = NewRandomKey();
  episode_step_ = 0;
  open_step_columns_.clear();
  return absl::OkStatus();
}

absl::Status TrajectoryWriter::ConfigureChunker(int column, ChunkerOptions options) {
  if (column < 0) {
    return absl::InvalidArgumentError(absl::StrCat("Invalid column index ", column, "."));
  }
  if (absl::Status s = options.Validate(); !s.ok()) return s;
  absl::MutexLock caller_lock(&caller_mu_);
  absl::MutexLock lock(&mu_);
  if (absl::Status s = CheckUsable(); !s.ok()) return s;
  if (column < static_cast<int>(chunkers_.size())) {
    if (absl::Status s = chunkers_[column]->ApplyConfig(options); !s.ok()) return s;
    chunkers_[column]->SetCodec(chunk_codec_);
  }
  overrides_[column] = options;
  return absl::OkStatus();
}

bool TrajectoryWriter::TakeEncodeJob(int64_t raw_bytes, Chunker::EncodeJob* job) {
  if (raw_bytes < kAsyncEncodeMinBytes) return false;
  absl::MutexLock lock(&encode_mu_);
  if (encoder_stopped_) return false;
  // Started by the first large chunk: writers of small steps never pay for it.
  if (!encoder_.joinable()) encoder_ = std::thread([this] { RunEncoder(); });
  encode_jobs_.push_back(std::move(*job));
  encode_cv_.Signal();
  return true;
}

void TrajectoryWriter::RunEncoder() {
  while (true) {
    Chunker::EncodeJob job;
    {
      absl::MutexLock lock(&encode_mu_);
      while (encode_jobs_.empty() && !encoder_stopped_) encode_cv_.Wait(&encode_mu_);
      if (encode_jobs_.empty()) return;
      job = std::move(encode_jobs_.front());
      encode_jobs_.pop_front();
    }
    absl::StatusOr<std::shared_ptr<const deepmind::reverb::ChunkData>> chunk = job();
    job = nullptr;
    absl::MutexLock lock(&mu_);
    if (!chunk.ok()) {
      if (error_.ok()) {
        error_ = chunk.status();
        pending_cv_.SignalAll();
      }
    } else if (queued_chunk_refs_.contains((*chunk)->chunk_key())) {
      // Queued items wait for it (and maybe for other chunks): its bytes can
      // go now. A chunk no queued item needs is only sent with an item, so
      // columns or steps that items skip are never uploaded.
      early_chunks_.push_back(*chunk);
      worker_cv_.Signal();
    }
    SignalIfHeadReady();
  }
}

void TrajectoryWriter::Close() {
  {
    absl::MutexLock lock(&mu_);
    if (!closed_) {
      closed_ = true;
      if (context_ != nullptr) context_->TryCancel();
      worker_cv_.SignalAll();
      pending_cv_.SignalAll();
    }
  }
  if (worker_.joinable() && worker_.get_id() != std::this_thread::get_id()) worker_.join();
  std::thread encoder;
  {
    absl::MutexLock lock(&encode_mu_);
    encoder_stopped_ = true;
    encode_cv_.Signal();
    encoder = std::move(encoder_);
  }
  if (encoder.joinable()) {
    if (encoder.get_id() != std::this_thread::get_id()) {
      encoder.join();
    } else {
      encoder.detach();
    }
  }
}

int TrajectoryWriter::episode_steps() const {
  absl::MutexLock lock(&mu_);
  return episode_step_;
}

int TrajectoryWriter::max_num_keep_alive_refs() const {
  absl::MutexLock lock(&mu_);
  int n = options_.chunker_options.num_keep_alive_refs;
  for (const auto& [column, options] : overrides_) n = std::max(n, options.num_keep_alive_refs);
  return n;
}

int TrajectoryWriter::num_pending_items() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(queue_.size() + unconfirmed_.size());
}

int TrajectoryWriter::num_streams_opened() const {
  absl::MutexLock lock(&mu_);
  return streams_opened_;
}

void TrajectoryWriter::RunWorker() {
  absl::Duration backoff = kMinBackoff;
  while (true) {
    const absl::Time started = absl::Now();
    absl::Status status = RunStream();
    absl::MutexLock lock(&mu_);
    if (closed_) return;
    // Unconfirmed items go back to the front of the queue, in creation order.
    std::vector<ItemPtr> requeue;
    requeue.reserve(unconfirmed_.size());
    for (auto& entry : unconfirmed_) requeue.push_back(std::move(entry.second));
    unconfirmed_.clear();
    std::sort(requeue.begin(), requeue.end(),
              [](const ItemPtr& a, const ItemPtr& b) { return a->seq < b->seq; });
    for (auto it = requeue.rbegin(); it != requeue.rend(); ++it) PushFront(std::move(*it));
    if (!IsRetryable(status)) {
      error_ = status;
      pending_cv_.SignalAll();
      return;
    }
    backoff =
        absl::Now() - started < kFastFailure ? std::min(2 * backoff, kMaxBackoff) : kMinBackoff;
    const absl::Time wake = absl::Now() + backoff;
    while (!closed_ && absl::Now() < wake) worker_cv_.WaitWithDeadline(&mu_, wake);
    if (closed_) return;
  }
}

absl::Status TrajectoryWriter::RunStream() {
  // A wait-for-ready stream waits forever on a channel whose TLS does not
  // match the server's: find that out first (channel_credentials.h).
  absl::Status transport =
      AwaitTransport(channel_.get(), absl::InfiniteFuture(), std::nullopt, "", [this] {
        absl::MutexLock lock(&mu_);
        return closed_;
      });
  if (!transport.ok()) return transport;
  grpc::ClientContext context;
  context.set_wait_for_ready(true);
  {
    absl::MutexLock lock(&mu_);
    if (closed_) return absl::CancelledError("closed");
    context_ = &context;
    stream_broken_ = false;
    ++streams_opened_;
  }
  std::unique_ptr<Stream> stream = stub_->InsertStream(&context);
  // Chunk codec negotiation (writer_chunk_codecs.h): new chunks use what
  // this stream's server announced; requests are made sendable before Write.
  WriterChunkCodecs codecs;
  std::thread reader([this, s = stream.get(), &context, &codecs] {
    const CodecPolicy codec = codecs.ReadAnnouncement(s, context);
    {
      absl::MutexLock lock(&mu_);
      chunk_codec_ = codec;
      for (const auto& chunker : chunkers_) chunker->SetCodec(codec);
    }
    RunReader(s);
  });
  absl::Status codec_error;
  absl::flat_hash_set<uint64_t> sent_chunks;
  absl::Time last_send = absl::InfinitePast();
  while (true) {
    Batch batch;
    {
      absl::MutexLock lock(&mu_);
      auto can_proceed = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return closed_ || stream_broken_ || !early_chunks_.empty() ||
               (!queue_.empty() && queue_.front()->IsReady());
      };
      while (!can_proceed()) worker_cv_.Wait(&mu_);
      if (closed_ || stream_broken_) break;
      // Under a steady stream of items, each request costs a send, a
      // confirmation and wake-ups on both ends: ready items right after a
      // send wait a moment for company (kCoalesceWindow), unless a caller
      // waits for them.
      if (!SendNow() && absl::Now() - last_send < kCoalesceAfter) {
        const absl::Time deadline = absl::Now() + kCoalesceWindow;
        coalescing_ = true;
        while (!SendNow() && !worker_cv_.WaitWithDeadline(&mu_, deadline)) {
        }
        coalescing_ = false;
        if (closed_ || stream_broken_) break;
      }
      if (!TakeBatch(&batch, &sent_chunks)) continue;
    }
    // The request is built without the lock. The items and chunks are
    // immutable and kept alive by `batch`, so the request borrows them
    // instead of copying them (serializing only reads them), unless zstd
    // chunks may have to be transcoded for this server.
    bool any_zstd = false;
    for (const auto& chunk : batch.chunks) any_zstd |= chunk->compression() != kSnappy;
    const bool borrow = !any_zstd || codecs.server_takes_zstd();
    InsertStreamRequest request;
    auto give_back = absl::MakeCleanup([&request, borrow] {
      if (!borrow) return;
      request.mutable_chunks()->UnsafeArenaExtractSubrange(0, request.chunks_size(), nullptr);
      request.mutable_items()->UnsafeArenaExtractSubrange(0, request.items_size(), nullptr);
    });
    request.mutable_chunks()->Reserve(static_cast<int>(batch.chunks.size()));
    for (const auto& chunk : batch.chunks) {
      if (borrow) {
        request.mutable_chunks()->AddAllocated(
            const_cast<deepmind::reverb::ChunkData*>(chunk.get()));
      } else {
        *request.add_chunks() = *chunk;
      }
    }
    request.mutable_items()->Reserve(static_cast<int>(batch.items.size()));
    for (const ItemPtr& item : batch.items) {
      if (borrow) {
        request.mutable_items()->AddAllocated(
            const_cast<deepmind::reverb::PrioritizedItem*>(&item->proto));
      } else {
        *request.add_items() = item->proto;
      }
    }
    request.mutable_keep_chunk_keys()->Add(batch.keep_chunk_keys.begin(),
                                           batch.keep_chunk_keys.end());
    if (!borrow) codec_error = codecs.PrepareRequest(&request);
    if (!codec_error.ok()) {
      context.TryCancel();
      break;
    }
    if (!stream->Write(request, grpc::WriteOptions().set_no_compression())) break;
    requests_sent_.fetch_add(1, std::memory_order_relaxed);
    last_send = absl::Now();
  }
  reader.join();
  absl::Status status = FromGrpcStatus(stream->Finish());
  if (!codec_error.ok()) status = codec_error;
  absl::MutexLock lock(&mu_);
  context_ = nullptr;
  return status;
}

void TrajectoryWriter::RunReader(Stream* stream) {
  InsertStreamResponse response;
  std::vector<ItemPtr> confirmed;
  while (stream->Read(&response)) {
    {
      absl::MutexLock lock(&mu_);
      for (uint64_t key : response.keys()) {
        auto it = unconfirmed_.find(key);
        if (it == unconfirmed_.end()) continue;
        confirmed.push_back(std::move(it->second));
        unconfirmed_.erase(it);
      }
      FinalizeAutoTunedChunksIfIdle();
      pending_cv_.SignalAll();
    }
    // Releasing the items may free their chunks: not under the lock.
    confirmed.clear();
  }
  absl::MutexLock lock(&mu_);
  stream_broken_ = true;
  worker_cv_.SignalAll();
}

bool TrajectoryWriter::TakeBatch(Batch* batch, absl::flat_hash_set<uint64_t>* sent_chunks) {
  int64_t bytes = 0;
  while (!early_chunks_.empty() && bytes < kMaxInsertRequestBytes) {
    std::shared_ptr<const deepmind::reverb::ChunkData> chunk = early_chunks_.front().lock();
    early_chunks_.pop_front();
    if (chunk == nullptr || !sent_chunks->insert(chunk->chunk_key()).second) continue;
    bytes += ChunkPayloadBytes(*chunk);
    batch->chunks.push_back(std::move(chunk));
  }
  while (!queue_.empty() && queue_.front()->IsReady() &&
         (batch->items.empty() || bytes < kMaxInsertRequestBytes)) {
    ItemPtr item = PopFront();
    for (const auto& cell : item->cells) {
      if (sent_chunks->insert(cell->chunk_key()).second) {
        std::shared_ptr<const deepmind::reverb::ChunkData> chunk = cell->GetChunk();
        bytes += ChunkPayloadBytes(*chunk);
        batch->chunks.push_back(std::move(chunk));
      }
    }
    unconfirmed_.insert_or_assign(item->proto.key(), item);
    batch->items.push_back(std::move(item));
  }
  // Chunk-only requests release nothing on the server (spec §4.3).
  if (batch->items.empty()) return !batch->chunks.empty();
  // The server keeps exactly the chunks named here: those later items may
  // still reference (live keep-alive cells, queued items) that it has.
  // A chunk wrongly dropped is merely sent again (it leaves sent_chunks).
  absl::flat_hash_set<uint64_t> keep_alive;
  for (const auto& chunker : chunkers_) {
    for (uint64_t key : chunker->KeepAliveChunkKeys()) keep_alive.insert(key);
  }
  for (auto it = sent_chunks->begin(); it != sent_chunks->end();) {
    const uint64_t key = *it;
    if (queued_chunk_refs_.contains(key) || keep_alive.contains(key)) {
      batch->keep_chunk_keys.push_back(key);
      ++it;
    } else {
      sent_chunks->erase(it++);
    }
  }
  return true;
}

}  // namespace tf_reverb
