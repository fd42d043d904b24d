// WriterChunkCodecs: the writer's side of chunk codec negotiation on ONE
// InsertStream (chunk_codec.h). The server says in its initial metadata
// whether it decodes zstd; Reverb's servers say nothing and must only ever
// receive Snappy chunks.
//
// Usage: the stream's reader thread calls ReadAnnouncement() once, before its
// first Read(); the sending thread passes every request through
// PrepareRequest() before Write().
//
// Contract:
//  * Thread-safety: ReadAnnouncement and PrepareRequest may run concurrently
//    (one thread each); the object lives as long as the stream.
//  * PrepareRequest guarantees the request holds only Snappy chunks unless
//    the server announced zstd (and TF_REVERB_ZSTD does not disable it). When
//    a request holds zstd chunks (made for an earlier stream) before the
//    announcement arrived it waits up to `wait` for it, then transcodes.
//  * Errors: PrepareRequest returns DATA_LOSS/INTERNAL when a chunk cannot be
//    transcoded (a corrupt chunk of our own making).
#ifndef TF_REVERB_SERVER_WRITER_WRITER_CHUNK_CODECS_H_
#define TF_REVERB_SERVER_WRITER_WRITER_CHUNK_CODECS_H_

#include <atomic>

#include "absl/status/status.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/sync_stream.h"
#include "reverb_service.pb.h"
#include "server/chunk_codec.h"

namespace tf_reverb {

class WriterChunkCodecs {
 public:
  using Stream = grpc::ClientReaderWriter<deepmind::reverb::InsertStreamRequest,
                                          deepmind::reverb::InsertStreamResponse>;

  // Blocks until the server's initial metadata arrived (our servers send it
  // when the stream opens, Reverb's with the first response) or the stream
  // failed; returns the codec policy for new chunks: kSnappy unless the
  // server announced zstd, else CodecPolicyFromEnvironment().
  CodecPolicy ReadAnnouncement(Stream* stream, const grpc::ClientContext& context);

  absl::Status PrepareRequest(deepmind::reverb::InsertStreamRequest* request,
                              absl::Duration wait = absl::Seconds(1));

  bool server_takes_zstd() const { return takes_zstd_.load(); }

 private:
  absl::Notification announced_;
  std::atomic<bool> takes_zstd_{false};
};

}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_WRITER_WRITER_CHUNK_CODECS_H_
