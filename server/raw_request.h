// ParseRequest: parses a request that arrived as raw bytes (the service
// registers every method with a grpc::ByteBuffer request, because gRPC's
// generated handlers cannot tell a message that does not parse from the end
// of a stream).
//
// Contract: a pure function template; INVALID_ARGUMENT naming the message
// type for bytes that are not one (garbage, a message cut short).
#ifndef TF_REVERB_SERVER_RAW_REQUEST_H_
#define TF_REVERB_SERVER_RAW_REQUEST_H_

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/proto_buffer_reader.h"

namespace tf_reverb {

template <typename Request>
absl::Status ParseRequest(const grpc::ByteBuffer& bytes, Request* request) {
  grpc::ByteBuffer buffer(bytes);  // shares the slices; the reader consumes its own copy
  grpc::ProtoBufferReader reader(&buffer);
  if (reader.status().ok() && request->ParseFromZeroCopyStream(&reader)) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("Could not parse the ", request->GetTypeName(), " (", bytes.Length(),
                   " bytes): not a valid serialized message."));
}

}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_RAW_REQUEST_H_
