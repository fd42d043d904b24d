// ParseRequest: parses a request that arrived as raw bytes (the service
// registers every method with a grpc::ByteBuffer request, because gRPC's
// generated handlers cannot tell a message that does not parse from the end
// of a stream).
//
// Contract: thread-safe; INVALID_ARGUMENT naming the message type for bytes
// that are not one (garbage, a message cut short, a string that is not
// UTF-8). protobuf's own log lines about such bytes are silenced while
// parsing (LogSilencer is process-wide: other threads' protobuf warnings in
// that instant are dropped too).
#ifndef TF_REVERB_SERVER_SERVICE_RAW_REQUEST_H_
#define TF_REVERB_SERVER_SERVICE_RAW_REQUEST_H_

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/stubs/logging.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/proto_buffer_reader.h"

namespace tf_reverb {

template <typename Request>
absl::Status ParseRequest(const grpc::ByteBuffer& bytes, Request* request) {
  grpc::ByteBuffer buffer(bytes);  // shares the slices; the reader consumes its own copy
  grpc::ProtoBufferReader reader(&buffer);
  bool parsed = false;
  if (reader.status().ok()) {
    // protobuf logs an error line for every string field that is not UTF-8;
    // the client gets the status instead (a bad client must not flood the
    // server's log).
    google::protobuf::LogSilencer quiet;
    parsed = request->ParseFromZeroCopyStream(&reader);
  }
  if (parsed) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("Could not parse the ", request->GetTypeName(), " (", bytes.Length(),
                   " bytes): not a valid serialized message, or a string field is not "
                   "valid UTF-8."));
}

}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_SERVICE_RAW_REQUEST_H_
