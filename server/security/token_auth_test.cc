#include "server/security/token_auth.h"

#include <cstdio>
#include <fstream>
#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "grpcpp/support/status.h"
#include "grpcpp/support/string_ref.h"
#include "gtest/gtest.h"
#include "server/security/server_credentials.h"

namespace tf_reverb {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

std::string WriteFile(const std::string& name, const std::string& content) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path) << content;
  return path;
}

grpc::Status Call(TokenAuthenticator& auth, const std::string& path,
                  const std::string* authorization) {
  std::multimap<grpc::string_ref, grpc::string_ref> metadata;
  metadata.emplace(":path", path);
  if (authorization != nullptr) metadata.emplace("authorization", *authorization);
  std::multimap<std::string, std::string> consumed, response;
  return auth.Process(metadata, nullptr, &consumed, &response);
}

TEST(TokenFileTest, OneTokenPerLineSkippingBlanksAndComments) {
  EXPECT_THAT(ParseTokenFile("  alpha \n\n# comment\nbeta\r\n"), ElementsAre("alpha", "beta"));
}

TEST(TokenAuthenticatorTest, AcceptsListedTokensOnly) {
  auto auth = TokenAuthenticator::Create(WriteFile("tokens1", "alpha\nbeta\n"));
  ASSERT_TRUE(auth.ok()) << auth.status();
  const std::string good = "Bearer beta", bad = "Bearer gamma", bare = "beta";
  EXPECT_TRUE(Call(**auth, "/deepmind.reverb.ReverbService/ServerInfo", &good).ok());
  const grpc::Status wrong = Call(**auth, "/deepmind.reverb.ReverbService/ServerInfo", &bad);
  EXPECT_EQ(wrong.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_THAT(wrong.error_message(), Not(HasSubstr("gamma")));
  EXPECT_EQ(Call(**auth, "/deepmind.reverb.ReverbService/InsertStream", &bare).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Call(**auth, "/deepmind.reverb.ReverbService/InsertStream", nullptr).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  // Prefixes and extensions of a token are other tokens.
  EXPECT_FALSE((*auth)->Accepts("bet"));
  EXPECT_FALSE((*auth)->Accepts("betaa"));
}

TEST(TokenAuthenticatorTest, HealthChecksNeedNoToken) {
  auto auth = TokenAuthenticator::Create(WriteFile("tokens2", "alpha\n"));
  ASSERT_TRUE(auth.ok());
  EXPECT_TRUE(Call(**auth, "/grpc.health.v1.Health/Check", nullptr).ok());
}

TEST(TokenAuthenticatorTest, ReloadRotatesAndKeepsOldSetOnFailure) {
  const std::string path = WriteFile("tokens3", "old\n");
  auto auth = TokenAuthenticator::Create(path);
  ASSERT_TRUE(auth.ok());
  EXPECT_TRUE((*auth)->Accepts("old"));
  WriteFile("tokens3", "new\n");
  ASSERT_EQ(*(*auth)->Reload(), 1);
  EXPECT_FALSE((*auth)->Accepts("old"));
  EXPECT_TRUE((*auth)->Accepts("new"));
  WriteFile("tokens3", "# nothing\n");
  absl::StatusOr<int> empty = (*auth)->Reload();
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE((*auth)->Accepts("new"));
  std::remove(path.c_str());
  EXPECT_EQ((*auth)->Reload().status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE((*auth)->Accepts("new"));
}

TEST(TokenAuthenticatorTest, MissingFileIsAClearError) {
  auto auth = TokenAuthenticator::Create("/nonexistent/tokens");
  EXPECT_EQ(auth.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(auth.status().message(), HasSubstr("/nonexistent/tokens"));
}

TEST(ServerSecurityTest, TokensWithoutTlsOnlyOnLoopback) {
  ServerSecurityOptions options;
  options.auth_token_file = WriteFile("tokens4", "secret-value\n");
  auto exposed = ServerSecurity::Create(options);
  EXPECT_EQ(exposed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(exposed.status().message(), HasSubstr("loopback"));
  EXPECT_THAT(exposed.status().message(), Not(HasSubstr("secret-value")));
  options.host = "127.0.0.1";
  auto local = ServerSecurity::Create(options);
  ASSERT_TRUE(local.ok()) << local.status();
  EXPECT_EQ((*local)->ExposureWarning(), "");
  EXPECT_EQ((*local)->ListeningAddress(5), "127.0.0.1:5");
}

TEST(ServerSecurityTest, WarnsBeyondLoopbackWithoutProtection) {
  auto open = ServerSecurity::Create({});
  ASSERT_TRUE(open.ok());
  EXPECT_THAT((*open)->ExposureWarning(), HasSubstr("without TLS"));
  EXPECT_EQ((*open)->ListeningAddress(7), "[::]:7");
  ServerSecurityOptions v6;
  v6.host = "::1";
  EXPECT_EQ((*ServerSecurity::Create(v6))->ListeningAddress(7), "[::1]:7");
}

TEST(ServerSecurityTest, CertificateWithoutKeyAndNonPemAreClearErrors) {
  ServerSecurityOptions options;
  options.tls_certificate_chain = "-----BEGIN CERTIFICATE-----\n";
  EXPECT_THAT(ServerSecurity::Create(options).status().message(), HasSubstr("private key"));
  ServerSecurityOptions garbage;
  garbage.tls_cert_file = WriteFile("cert.pem", "not a certificate");
  garbage.tls_private_key = "-----BEGIN PRIVATE KEY-----\n";
  EXPECT_THAT(ServerSecurity::Create(garbage).status().message(), HasSubstr("PEM"));
}

}  // namespace
}  // namespace tf_reverb
