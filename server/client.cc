#include "client.h"

#include <algorithm>
#include <utility>

#include "absl/random/random.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "chunk_codec.h"
#include "grpc_status.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "server.h"

namespace tf_reverb {
namespace {

using ::deepmind::reverb::SampleStreamRequest;
using ::deepmind::reverb::SampleStreamResponse;

uint64_t NewKey() {
  thread_local absl::BitGen gen;
  return absl::Uniform<uint64_t>(gen);
}

bool ReachedLimit(const SamplerOptions& options, int64_t returned) {
  return options.max_samples > 0 && returned >= options.max_samples;
}

int64_t NextRequestSize(const SamplerOptions& options, int64_t returned) {
  int64_t n = std::max<int64_t>(1, options.max_in_flight_samples_per_worker);
  if (options.max_samples > 0) n = std::min(n, options.max_samples - returned);
  return n;
}

absl::Status MaxSamplesReturned() {
  return absl::OutOfRangeError("`max_samples` already returned.");
}

// Samples straight from a table of this process.
class LocalSampler : public Sampler {
 public:
  LocalSampler(std::shared_ptr<Table> table, SamplerOptions options)
      : table_(std::move(table)), options_(options) {}

  absl::StatusOr<Sample> Next() override {
    if (ReachedLimit(options_, returned_)) return MaxSamplesReturned();
    if (queue_.empty()) {
      std::vector<SampledItem> batch;
      absl::Status status = table_->SampleBatch(NextRequestSize(options_, returned_),
                                                options_.rate_limiter_timeout, &batch);
      if (!status.ok()) return status;
      for (const SampledItem& item : batch) queue_.push_back(Sample::FromSampledItem(item));
    }
    Sample sample = std::move(queue_.front());
    queue_.pop_front();
    ++returned_;
    return sample;
  }

 private:
  std::shared_ptr<Table> table_;
  const SamplerOptions options_;
  std::deque<Sample> queue_;
  int64_t returned_ = 0;
};

// Samples over one SampleStream, one request of up to
// max_in_flight_samples_per_worker samples at a time.
class GrpcSampler : public Sampler {
 public:
  GrpcSampler(std::shared_ptr<grpc::Channel> channel, std::string table,
              SamplerOptions options)
      : stub_(deepmind::reverb::ReverbService::NewStub(channel)),
        table_(std::move(table)),
        options_(options) {}

  ~GrpcSampler() override {
    if (stream_ != nullptr) {
      context_->TryCancel();
      stream_->Finish().IgnoreError();
    }
  }

  absl::StatusOr<Sample> Next() override {
    if (!status_.ok()) return status_;
    if (ReachedLimit(options_, returned_)) return MaxSamplesReturned();
    if (queue_.empty()) status_ = Fetch();
    if (!status_.ok()) return status_;
    Sample sample = std::move(queue_.front());
    queue_.pop_front();
    ++returned_;
    return sample;
  }

 private:
  absl::Status Fetch() {
    if (stream_ == nullptr) {
      context_ = std::make_unique<grpc::ClientContext>();
      stream_ = stub_->SampleStream(context_.get());
    }
    SampleStreamRequest request;
    request.set_table(table_);
    const int64_t wanted = NextRequestSize(options_, returned_);
    request.set_num_samples(wanted);
    request.mutable_rate_limiter_timeout()->set_milliseconds(
        options_.rate_limiter_timeout == absl::InfiniteDuration()
            ? -1
            : std::max<int64_t>(1, absl::ToInt64Milliseconds(options_.rate_limiter_timeout)));
    if (!stream_->Write(request)) return Finish();
    int64_t received = 0;
    SampleStreamResponse response;
    deepmind::reverb::SampleInfo info;
    std::vector<std::shared_ptr<const ChunkData>> chunks;
    while (received < wanted) {
      if (!stream_->Read(&response)) return Finish();
      for (auto& entry : *response.mutable_entries()) {
        if (entry.has_info()) info = std::move(*entry.mutable_info());
        for (auto& chunk : *entry.mutable_data()) {
          chunks.push_back(std::make_shared<const ChunkData>(std::move(chunk)));
        }
        if (entry.end_of_sequence()) {
          queue_.emplace_back(std::move(info), std::move(chunks));
          info.Clear();
          chunks.clear();
          ++received;
        }
      }
    }
    return absl::OkStatus();
  }

  absl::Status Finish() {
    absl::Status status = FromGrpcStatus(stream_->Finish());
    stream_.reset();
    if (status.ok()) status = absl::UnavailableError("Sample stream closed by the server.");
    return status;
  }

  std::unique_ptr<deepmind::reverb::ReverbService::Stub> stub_;
  const std::string table_;
  const SamplerOptions options_;
  std::unique_ptr<grpc::ClientContext> context_;
  std::unique_ptr<grpc::ClientReaderWriter<SampleStreamRequest, SampleStreamResponse>> stream_;
  std::deque<Sample> queue_;
  int64_t returned_ = 0;
  absl::Status status_;
};

}  // namespace

Client::Client(std::string server_address)
    : server_address_(std::move(server_address)) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 30000);
  args.SetLoadBalancingPolicyName("round_robin");
  channel_ = grpc::CreateCustomChannel(server_address_, grpc::InsecureChannelCredentials(), args);
  stub_ = deepmind::reverb::ReverbService::NewStub(channel_);
}

absl::StatusOr<deepmind::reverb::ServerInfoResponse> Client::ServerInfo(
    absl::Duration timeout) {
  grpc::ClientContext context;
  context.set_wait_for_ready(true);
  if (timeout != absl::InfiniteDuration()) context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  deepmind::reverb::ServerInfoResponse response;
  absl::Status status = FromGrpcStatus(
      stub_->ServerInfo(&context, deepmind::reverb::ServerInfoRequest(), &response));
  if (!status.ok()) return status;
  return response;
}

absl::Status Client::MutatePriorities(
    const std::string& table, const std::vector<deepmind::reverb::KeyWithPriority>& updates,
    const std::vector<uint64_t>& deletes) {
  grpc::ClientContext context;
  context.set_wait_for_ready(true);
  deepmind::reverb::MutatePrioritiesRequest request;
  request.set_table(table);
  for (const auto& update : updates) *request.add_updates() = update;
  for (uint64_t key : deletes) request.add_delete_keys(key);
  deepmind::reverb::MutatePrioritiesResponse response;
  return FromGrpcStatus(stub_->MutatePriorities(&context, request, &response));
}

absl::Status Client::Reset(const std::string& table) {
  grpc::ClientContext context;
  context.set_wait_for_ready(true);
  deepmind::reverb::ResetRequest request;
  request.set_table(table);
  deepmind::reverb::ResetResponse response;
  return FromGrpcStatus(stub_->Reset(&context, request, &response));
}

absl::StatusOr<std::string> Client::Checkpoint() {
  grpc::ClientContext context;
  deepmind::reverb::CheckpointResponse response;
  absl::Status status = FromGrpcStatus(
      stub_->Checkpoint(&context, deepmind::reverb::CheckpointRequest(), &response));
  if (!status.ok()) return status;
  return response.checkpoint_path();
}

absl::Status Client::InsertStep(
    const std::vector<Tensor>& step,
    const std::vector<std::pair<std::string, double>>& priorities) {
  if (step.empty()) return absl::InvalidArgumentError("Cannot insert a step without data.");
  if (priorities.empty()) return absl::InvalidArgumentError("priorities must not be empty");
  std::vector<Tensor> columns;
  columns.reserve(step.size());
  for (const Tensor& tensor : step) {
    absl::StatusOr<Tensor> stacked = StackTensors({&tensor});
    if (!stacked.ok()) return stacked.status();
    columns.push_back(std::move(*stacked));
  }
  const uint64_t chunk_key = NewKey();
  absl::StatusOr<ChunkData> chunk = BuildChunk(chunk_key, columns, NewKey(), 0, 0, false);
  if (!chunk.ok()) return chunk.status();

  deepmind::reverb::InsertStreamRequest request;
  *request.add_chunks() = std::move(*chunk);
  std::vector<uint64_t> keys;
  for (const auto& [table, priority] : priorities) {
    auto* item = request.add_items();
    item->set_key(NewKey());
    item->set_table(table);
    item->set_priority(priority);
    for (size_t c = 0; c < columns.size(); ++c) {
      auto* slice = item->mutable_flat_trajectory()->add_columns()->add_chunk_slices();
      slice->set_chunk_key(chunk_key);
      slice->set_offset(0);
      slice->set_length(1);
      slice->set_index(static_cast<int32_t>(c));
    }
    keys.push_back(item->key());
  }
  grpc::ClientContext context;
  context.set_wait_for_ready(true);
  auto stream = stub_->InsertStream(&context);
  if (stream->Write(request)) {
    stream->WritesDone();
    deepmind::reverb::InsertStreamResponse response;
    size_t confirmed = 0;
    while (confirmed < keys.size() && stream->Read(&response)) {
      confirmed += response.keys_size();
    }
  }
  return FromGrpcStatus(stream->Finish());
}

int Client::LoopbackPort() const {
  // Only the plain forms: "ipv4:127.0.0.1:P" and other URIs always use gRPC.
  for (const char* prefix : {"localhost:", "127.0.0.1:", "[::1]:"}) {
    if (absl::StartsWith(server_address_, prefix)) {
      int port = -1;
      if (absl::SimpleAtoi(server_address_.substr(strlen(prefix)), &port)) return port;
    }
  }
  return -1;
}

std::unique_ptr<Sampler> Client::NewSampler(const std::string& table,
                                            SamplerOptions options) {
  const int port = LoopbackPort();
  if (port > 0) {
    if (std::shared_ptr<Table> local = Server::FindInProcessTable(port, table)) {
      return std::make_unique<LocalSampler>(std::move(local), options);
    }
  }
  return std::make_unique<GrpcSampler>(channel_, table, options);
}

}  // namespace tf_reverb
