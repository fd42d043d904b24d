#include "server/writer/writer_chunk_codecs.h"

#include "absl/strings/string_view.h"

namespace tf_reverb {

CodecPolicy WriterChunkCodecs::ReadAnnouncement(Stream* stream,
                                                const grpc::ClientContext& context) {
  stream->WaitForInitialMetadata();
  bool zstd = false;
  if (ZstdEnabledByEnvironment()) {
    auto range = context.GetServerInitialMetadata().equal_range(kChunkCodecsMetadataKey);
    for (auto it = range.first; it != range.second && !zstd; ++it) {
      zstd = CodecsListZstd(absl::string_view(it->second.data(), it->second.size()));
    }
  }
  takes_zstd_.store(zstd);
  announced_.Notify();
  return zstd ? CodecPolicyFromEnvironment() : CodecPolicy::kSnappy;
}

absl::Status WriterChunkCodecs::PrepareRequest(deepmind::reverb::InsertStreamRequest* request,
                                               absl::Duration wait) {
  if (takes_zstd_.load()) return absl::OkStatus();
  bool any_zstd = false;
  for (const auto& chunk : request->chunks()) any_zstd |= chunk.compression() != kSnappy;
  if (!any_zstd) return absl::OkStatus();
  if (announced_.WaitForNotificationWithTimeout(wait) && takes_zstd_.load()) {
    return absl::OkStatus();
  }
  for (auto& chunk : *request->mutable_chunks()) {
    if (absl::Status s = TranscodeChunk(&chunk, kSnappy); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace tf_reverb
