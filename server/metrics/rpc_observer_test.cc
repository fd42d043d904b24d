#include "server/metrics/rpc_observer.h"

#include <cstddef>
#include <ctime>
#include <memory>

#include "absl/time/time.h"
#include "grpcpp/support/status.h"
#include "gtest/gtest.h"

namespace tf_reverb {
namespace {

TEST(RpcObserverTest, CountsCallsByMethodAndCode) {
  auto observer = std::make_shared<RpcObserver>(absl::InfiniteDuration());
  RpcObserver::MethodStats* insert = observer->Stats("/deepmind.reverb.ReverbService/InsertStream");
  EXPECT_EQ(insert->name, "InsertStream");
  EXPECT_EQ(observer->Stats("/deepmind.reverb.ReverbService/InsertStream"), insert);
  observer->CallStarted(insert);
  observer->CallPeer("ipv4:127.0.0.1:5000");
  EXPECT_EQ(insert->active.load(), 1);
  observer->CallFinished(insert, grpc::Status(grpc::StatusCode::NOT_FOUND, "no table"),
                         absl::Milliseconds(3), "ipv4:127.0.0.1:5000");
  observer->CallEnded(insert, "ipv4:127.0.0.1:5000");
  EXPECT_EQ(insert->started.load(), 1);
  EXPECT_EQ(insert->active.load(), 0);
  EXPECT_EQ(insert->finished[static_cast<int>(grpc::StatusCode::NOT_FOUND)].load(), 1);
  EXPECT_EQ(insert->seconds.Read().count, 1u);
  EXPECT_STREQ(RpcObserver::CodeName(5), "NOT_FOUND");
  EXPECT_STREQ(RpcObserver::CodeName(99), "UNKNOWN");
}

TEST(RpcObserverTest, OtherServicesGetTheirFullPath) {
  auto observer = std::make_shared<RpcObserver>(absl::InfiniteDuration());
  const size_t known = observer->methods().size();
  RpcObserver::MethodStats* health = observer->Stats("/grpc.health.v1.Health/Check");
  EXPECT_EQ(health->name, "/grpc.health.v1.Health/Check");
  EXPECT_EQ(observer->Stats("/grpc.health.v1.Health/Check"), health);
  EXPECT_EQ(observer->Stats("/deepmind.reverb.ReverbService/Bogus")->name,
            "/deepmind.reverb.ReverbService/Bogus");
  EXPECT_EQ(observer->methods().size(), known + 2);
}

}  // namespace
}  // namespace tf_reverb
