#include "server/testing/grpc_call_counter.h"

#include <string>

#include "absl/synchronization/mutex.h"
#include "grpcpp/support/client_interceptor.h"
#include "grpcpp/support/interceptor.h"

namespace tf_reverb {
namespace testing {
namespace {

// Counting happens when the call is created; the call itself goes on as is.
class PassThrough : public grpc::experimental::Interceptor {
 public:
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    methods->Proceed();
  }
};

}  // namespace

grpc::experimental::Interceptor* GrpcCallCounter::CreateClientInterceptor(
    grpc::experimental::ClientRpcInfo* info) {
  absl::MutexLock lock(&mu_);
  ++counts_[info->method()];
  return new PassThrough();  // gRPC does not accept nullptr from a global factory
}

int GrpcCallCounter::count(const std::string& method) {
  absl::MutexLock lock(&mu_);
  return counts_[method];
}

GrpcCallCounter& GrpcCalls() {
  static GrpcCallCounter* counter = [] {
    auto* c = new GrpcCallCounter();
    grpc::experimental::RegisterGlobalClientInterceptorFactory(c);
    return c;
  }();
  return *counter;
}

namespace {
// Registered before main(), i.e. before any gRPC activity.
[[maybe_unused]] const GrpcCallCounter* const kRegistered = &GrpcCalls();
}  // namespace

}  // namespace testing
}  // namespace tf_reverb
