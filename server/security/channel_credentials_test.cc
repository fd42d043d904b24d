#include "server/security/channel_credentials.h"

#include <cstdlib>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "grpcpp/support/channel_arguments.h"
#include "gtest/gtest.h"
#include "server/error_kind.h"

namespace tf_reverb {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(ChannelCredentialsTest, TokenWithoutTlsOnlyToLoopback) {
  ChannelSecurity security;
  security.auth_token = "secret-value";
  grpc::ChannelArguments args;
  for (const char* address : {"localhost:1", "127.0.0.1:1", "[::1]:1", "ipv4:127.0.0.1:1"}) {
    EXPECT_TRUE(BuildChannelCredentials(address, security, &args).ok()) << address;
  }
  auto remote = BuildChannelCredentials("example.com:1", security, &args);
  EXPECT_EQ(remote.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(remote.status().message(), Not(HasSubstr("secret-value")));
  security.tls = true;
  EXPECT_TRUE(BuildChannelCredentials("example.com:1", security, &args).ok());
}

TEST(ChannelCredentialsTest, ClientCertificateNeedsItsKey) {
  ChannelSecurity security;
  security.tls = true;
  security.certificate_chain = "-----BEGIN CERTIFICATE-----";
  grpc::ChannelArguments args;
  EXPECT_EQ(BuildChannelCredentials("localhost:1", security, &args).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ChannelCredentialsTest, RegistryBeatsEnvironment) {
  setenv("TF_REVERB_AUTH_TOKEN", " from-env \n", 1);
  absl::StatusOr<ChannelSecurity> env = ResolveChannelSecurity("localhost:2");
  ASSERT_TRUE(env.ok());
  EXPECT_EQ(env->auth_token, "from-env");
  EXPECT_FALSE(env->tls);
  ChannelSecurity registered;
  registered.auth_token = "registered";
  RegisterChannelSecurity("localhost:2", registered);
  EXPECT_EQ(ResolveChannelSecurity("localhost:2")->auth_token, "registered");
  EXPECT_EQ(ResolveChannelSecurity("localhost:3")->auth_token, "from-env");
  EXPECT_THAT(registered.DebugString(), Not(HasSubstr("registered")));
  // Unregistering gives the address back to the environment.
  UnregisterChannelSecurity("localhost:2");
  EXPECT_EQ(ResolveChannelSecurity("localhost:2")->auth_token, "from-env");
  UnregisterChannelSecurity("localhost:2");  // nothing registered: no-op
  unsetenv("TF_REVERB_AUTH_TOKEN");
}

TEST(ChannelCredentialsTest, UnreadableEnvironmentFileIsAnError) {
  setenv("TF_REVERB_TLS_ROOT_CA_FILE", "/nonexistent/ca.pem", 1);
  absl::StatusOr<ChannelSecurity> env = ChannelSecurityFromEnvironment();
  EXPECT_EQ(env.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(env.status().message(), HasSubstr("TF_REVERB_TLS_ROOT_CA_FILE"));
  unsetenv("TF_REVERB_TLS_ROOT_CA_FILE");
}

TEST(ChannelCredentialsTest, HandshakeFailuresBecomeClearErrors) {
  const absl::Status handshake = absl::UnavailableError(
      "failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:5: "
      "Ssl handshake failed: SSL_ERROR_SSL: CERTIFICATE_VERIFY_FAILED");
  const absl::Status converted = TransportSecurityError(handshake, true, "localhost:5");
  EXPECT_EQ(converted.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(converted.message(), HasSubstr(kTransportSecurityMismatch));
  EXPECT_EQ(ErrorKindOf(converted), ErrorKind::kTransportSecurityMismatch);
  EXPECT_THAT(converted.message(), HasSubstr("this client uses TLS"));
  const absl::Status refused = absl::UnavailableError(
      "failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:5: "
      "Failed to connect to remote host: Connection refused");
  EXPECT_EQ(TransportSecurityError(refused, false, "localhost:5"), refused);
  // A peer closing the connection may be a server going away: only
  // AwaitTransport's two attempts in a row make it a mismatch.
  const absl::Status closed = absl::UnavailableError(
      "connections to all backends failing; last error: UNAVAILABLE: "
      "ipv4:127.0.0.1:5: Socket closed");
  EXPECT_EQ(TransportSecurityError(closed, false, "localhost:5"), closed);
  // A stream that broke after it was set up is never a mismatch.
  const absl::Status broken = absl::UnavailableError("Socket closed (ssl)");
  EXPECT_EQ(TransportSecurityError(broken, true, "localhost:5"), broken);
  const absl::Status other = absl::NotFoundError("Ssl in a table name");
  EXPECT_EQ(TransportSecurityError(other, false, "localhost:5"), other);
}

}  // namespace
}  // namespace tf_reverb
