// Conversions between absl::Status and grpc::Status. The numeric codes are
// the same in both (both follow google.rpc.Code).
//
// Contract: pure functions, thread-safe.
#ifndef TF_REVERB_SERVER_GRPC_STATUS_H_
#define TF_REVERB_SERVER_GRPC_STATUS_H_

#include <string>

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace tf_reverb {

inline grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

inline absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_GRPC_STATUS_H_
