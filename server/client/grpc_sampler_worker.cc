#include "server/client/grpc_sampler_worker.h"

#include <algorithm>
#include <deque>
#include <utility>
#include <vector>

#include "grpcpp/impl/codegen/proto_utils.h"
#include "grpcpp/impl/codegen/sync_stream.h"
#include "grpcpp/impl/rpc_method.h"
#include "grpcpp/support/status.h"
#include "server/chunk_codec.h"
#include "server/grpc_status.h"
#include "server/security/channel_credentials.h"

namespace tf_reverb {
namespace {

using ::deepmind::reverb::SampleStreamRequest;

constexpr char kSampleStreamMethod[] = "/deepmind.reverb.ReverbService/SampleStream";

}  // namespace

GrpcSamplerWorker::GrpcSamplerWorker(std::shared_ptr<grpc::Channel> channel, std::string table,
                                     int64_t max_samples_per_stream,
                                     std::shared_ptr<ShardWarmUp> warm_up, bool tls,
                                     std::string address)
    : channel_(std::move(channel)),
      tls_(tls),
      address_(std::move(address)),
      table_(std::move(table)),
      max_samples_per_stream_(max_samples_per_stream),
      warm_up_(std::move(warm_up)) {}

GrpcSamplerWorker::~GrpcSamplerWorker() { CloseStream(/*cancel=*/true); }

void GrpcSamplerWorker::Cancel() {
  cancelled_.store(true);
  absl::MutexLock lock(&mu_);
  if (context_ != nullptr) context_->TryCancel();
}

absl::Status GrpcSamplerWorker::OpenStream() {
  if (warm_up_ != nullptr) {
    // Cancel() cancels the warm-up's calls like the stream's.
    AwaitShardConnections(
        *warm_up_,
        [this]() -> grpc::ClientContext* {
          absl::MutexLock lock(&mu_);
          if (cancelled_.load()) return nullptr;
          context_ = std::make_unique<grpc::ClientContext>();
          return context_.get();
        },
        [this] {
          absl::MutexLock lock(&mu_);
          context_.reset();
        });
    warm_up_.reset();
  }
  grpc::ClientContext* context;
  {
    absl::MutexLock lock(&mu_);
    if (cancelled_.load()) return absl::CancelledError("The sampler was closed.");
    context_ = std::make_unique<grpc::ClientContext>();
    // We decode zstd chunks: ask the server not to transcode them.
    if (ZstdEnabledByEnvironment()) {
      context_->AddMetadata(kChunkCodecsMetadataKey, kZstdCodecName);
    }
    context = context_.get();
  }
  // Not under mu_: opening waits until the connection is up or fails, and
  // Cancel() must be able to cancel the context meanwhile (gRPC records a
  // cancellation that comes before the call exists and applies it then).
  stream_.reset(
      grpc::internal::ClientReaderWriterFactory<SampleStreamRequest, grpc::ByteBuffer>::Create(
          channel_.get(),
          grpc::internal::RpcMethod(kSampleStreamMethod, grpc::internal::RpcMethod::BIDI_STREAMING),
          context));
  on_stream_ = 0;
  parser_.Reset();
  return absl::OkStatus();
}

// Samples reach `deliver` as each response arrives. While a request is
// received, the next one (what `claim_more` grants) is already sent: the
// server starts on it as soon as it finished this one, and the stream does
// not drain in between (a round trip and the server's start, ~2 ms per 33 MB
// request of 282 KB items on the benchmark's machine).
absl::Status GrpcSamplerWorker::StreamSamples(int64_t num_samples, absl::Duration timeout,
                                              const Deliver& deliver, const ClaimMore& claim_more) {
  if (cancelled_.load()) return absl::CancelledError("The sampler was closed.");
  if (stream_ == nullptr) {
    absl::Status opened = OpenStream();
    if (!opened.ok()) return opened;
  }
  SampleStreamRequest request;
  request.set_table(table_);
  request.set_accept_batches(true);
  // Servers read <= 0 as "no timeout": an immediate timeout is sent as 1 ms.
  request.mutable_rate_limiter_timeout()->set_milliseconds(
      timeout == absl::InfiniteDuration()
          ? -1
          : std::max<int64_t>(1, absl::ToInt64Milliseconds(timeout)));
  // Samples asked for on this call, and where each request sent and not yet
  // served ends (at most this one and the one ahead).
  int64_t wanted = std::min(num_samples, max_samples_per_stream_ - on_stream_);
  std::deque<int64_t> request_ends = {wanted};
  request.set_num_samples(wanted);
  if (!stream_->Write(request)) return FinishStream();
  int64_t received = 0;
  grpc::ByteBuffer response;
  std::vector<Sample> parsed_samples;
  while (received < wanted) {
    if (!stream_->Read(&response)) return FinishStream();
    parsed_samples.clear();
    absl::Status parsed = parser_.Parse(response, &parsed_samples);
    response.Clear();  // the samples hold what they need of it
    received += static_cast<int64_t>(parsed_samples.size());
    if (!parsed_samples.empty()) deliver(std::move(parsed_samples));
    if (!parsed.ok()) {
      CloseStream(/*cancel=*/true);
      return parsed;
    }
    while (!request_ends.empty() && received >= request_ends.front()) request_ends.pop_front();
    if (request_ends.size() == 1) {
      const int64_t more = claim_more(max_samples_per_stream_ - on_stream_ - wanted);
      if (more > 0) {
        wanted += more;
        request_ends.push_back(wanted);
        request.set_num_samples(more);
        if (!stream_->Write(request)) return FinishStream();
      }
    }
  }
  on_stream_ += received;
  if (on_stream_ >= max_samples_per_stream_) CloseStream(/*cancel=*/false);
  return absl::OkStatus();
}

absl::Status GrpcSamplerWorker::FinishStream() {
  // A TLS mismatch is reported as such (and not retried).
  absl::Status status = CheckTransportFailure(channel_.get(), FromGrpcStatus(stream_->Finish()),
                                              tls_, address_, [this] { return cancelled_.load(); });
  ResetStream();
  if (status.ok()) status = absl::UnavailableError("Sample stream closed by the server.");
  return status;
}

void GrpcSamplerWorker::CloseStream(bool cancel) {
  if (stream_ == nullptr) return;
  if (cancel) {
    absl::MutexLock lock(&mu_);
    context_->TryCancel();
  } else {
    stream_->WritesDone();
  }
  stream_->Finish().IgnoreError();
  ResetStream();
}

void GrpcSamplerWorker::ResetStream() {
  stream_.reset();
  absl::MutexLock lock(&mu_);
  context_.reset();
}

}  // namespace tf_reverb
