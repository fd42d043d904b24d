// Guarded: runs a gRPC handler body so that no C++ exception escapes into
// gRPC (which would answer UNKNOWN "Unexpected error in RPC handling"):
// std::bad_alloc becomes RESOURCE_EXHAUSTED, any other exception INTERNAL
// with its what() (a bug of ours), both naming the method.
//
// Contract: a pure function template; thread-safe as `body` is.
#ifndef TF_REVERB_SERVER_SERVICE_HANDLER_GUARD_H_
#define TF_REVERB_SERVER_SERVICE_HANDLER_GUARD_H_

#include <exception>
#include <new>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "grpcpp/support/status.h"

namespace tf_reverb {

template <typename Body>
grpc::Status Guarded(absl::string_view method, Body&& body) {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                        absl::StrCat(method, ": the server ran out of memory."));
  } catch (const std::exception& e) {
    return grpc::Status(grpc::StatusCode::INTERNAL,
                        absl::StrCat(method, ": unexpected error: ", e.what()));
  } catch (...) {
    return grpc::Status(grpc::StatusCode::INTERNAL, absl::StrCat(method, ": unexpected error."));
  }
}

}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_SERVICE_HANDLER_GUARD_H_
