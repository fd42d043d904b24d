// GrpcCalls(): counts the client RPCs this process starts, per method, so a
// test can tell whether a call went over gRPC (a sampler's stream, a
// writer's InsertStream) or took the in-process shortcut.
//
// Contract: test-only. The counter is gRPC's global client interceptor
// factory, registered before main() (the library is linked with alwayslink)
// since gRPC takes one only before any channel exists; a test binary has one
// such factory at most. count() is thread-safe. Tests compare counts before
// and after what they do, as other tests of the process add to them.
#ifndef TF_REVERB_SERVER_TESTING_GRPC_CALL_COUNTER_H_
#define TF_REVERB_SERVER_TESTING_GRPC_CALL_COUNTER_H_

#include <map>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/support/client_interceptor.h"
#include "grpcpp/support/interceptor.h"

namespace tf_reverb {
namespace testing {

// Full names of the methods tests count.
inline constexpr char kInsertStreamMethod[] = "/deepmind.reverb.ReverbService/InsertStream";
inline constexpr char kSampleStreamMethod[] = "/deepmind.reverb.ReverbService/SampleStream";
inline constexpr char kServerInfoMethod[] = "/deepmind.reverb.ReverbService/ServerInfo";

class GrpcCallCounter : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo* info) override;

  // Calls of `method` (a full name, e.g. kSampleStreamMethod) started so far.
  int count(const std::string& method);

 private:
  absl::Mutex mu_;
  std::map<std::string, int> counts_ ABSL_GUARDED_BY(mu_);
};

// The process's counter.
GrpcCallCounter& GrpcCalls();

}  // namespace testing
}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_TESTING_GRPC_CALL_COUNTER_H_
