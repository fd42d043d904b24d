// GrpcSamplerWorker: a sampler worker that reads one table over a
// SampleStream call, reopened after max_samples_per_stream samples or a
// failure. While one request is received the next is already sent, so the
// stream does not drain between requests.
//
// Contract:
//  * Thread-safety: StreamSamples runs on one worker thread at a time;
//    Cancel may be called from any thread (it cancels the call in flight,
//    and the shard warm-up's calls).
//  * Ownership: shares the channel (and the warm-up state) with its client.
//  * Errors: the stream's status (UNAVAILABLE when the server closed it
//    without one; the sampler retries UNAVAILABLE and CANCELLED), a response
//    that does not parse (the stream is cancelled), a TLS mismatch as
//    FAILED_PRECONDITION (server/security/channel_credentials.h, not
//    retried); CANCELLED after Cancel().
#ifndef TF_REVERB_SERVER_CLIENT_GRPC_SAMPLER_WORKER_H_
#define TF_REVERB_SERVER_CLIENT_GRPC_SAMPLER_WORKER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/sync_stream.h"
#include "reverb_service.pb.h"
#include "server/client/sample.h"
#include "server/client/sample_stream_parser.h"
#include "server/client/sampler.h"
#include "server/client/shard_warm_up.h"

namespace tf_reverb {

class GrpcSamplerWorker : public SamplerWorker {
 public:
  // `warm_up`: the sharded client's (nullptr when not sharded). `tls` and
  // `address` word a TLS mismatch.
  GrpcSamplerWorker(std::shared_ptr<grpc::Channel> channel, std::string table,
                    int64_t max_samples_per_stream, std::shared_ptr<ShardWarmUp> warm_up, bool tls,
                    std::string address);
  ~GrpcSamplerWorker() override;

  absl::Status StreamSamples(int64_t num_samples, absl::Duration timeout, const Deliver& deliver,
                             const ClaimMore& claim_more) override;
  void Cancel() override;

 private:
  // SampleStream with the responses as raw byte buffers, which
  // SampleStreamParser reads without copying the chunks' payloads.
  using RawSampleStream =
      grpc::ClientReaderWriter<deepmind::reverb::SampleStreamRequest, grpc::ByteBuffer>;

  // Opens the stream (after the shard warm-up); CANCELLED after Cancel().
  absl::Status OpenStream();
  // Ends the stream after a failed read or write and returns why it ended.
  absl::Status FinishStream();
  void CloseStream(bool cancel);
  void ResetStream();

  const std::shared_ptr<grpc::Channel> channel_;
  const bool tls_;
  const std::string address_;
  const std::string table_;
  const int64_t max_samples_per_stream_;
  std::atomic<bool> cancelled_{false};

  // Used by the worker thread only.
  std::shared_ptr<ShardWarmUp> warm_up_;
  std::unique_ptr<RawSampleStream> stream_;
  SampleStreamParser parser_;
  int64_t on_stream_ = 0;

  // Guards the context against Cancel() from other threads.
  absl::Mutex mu_;
  std::unique_ptr<grpc::ClientContext> context_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_CLIENT_GRPC_SAMPLER_WORKER_H_
