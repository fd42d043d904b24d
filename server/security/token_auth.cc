#include "server/security/token_auth.h"

#include <algorithm>
#include <cstddef>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "grpcpp/security/auth_context.h"
#include "grpcpp/support/status.h"

namespace tf_reverb {
namespace {

constexpr absl::string_view kBearerPrefix = "Bearer ";
constexpr absl::string_view kHealthPathPrefix = "/grpc.health.v1.Health/";

// Equal length and content, in time independent of where they differ.
bool ConstantTimeEquals(absl::string_view a, absl::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const size_t n = std::min(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace

std::vector<std::string> ParseTokenFile(absl::string_view content) {
  std::vector<std::string> tokens;
  for (absl::string_view line : absl::StrSplit(content, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || absl::StartsWith(line, "#")) continue;
    tokens.emplace_back(line);
  }
  return tokens;
}

absl::StatusOr<std::shared_ptr<TokenAuthenticator>> TokenAuthenticator::Create(
    std::string token_file) {
  std::shared_ptr<TokenAuthenticator> authenticator(new TokenAuthenticator(std::move(token_file)));
  absl::StatusOr<int> loaded = authenticator->Reload();
  if (!loaded.ok()) return loaded.status();
  return authenticator;
}

absl::StatusOr<int> TokenAuthenticator::Reload() {
  std::ifstream file(token_file_);
  if (!file) {
    return absl::InvalidArgumentError(
        absl::StrCat("Cannot read the auth token file ", token_file_));
  }
  std::stringstream content;
  content << file.rdbuf();
  auto tokens = std::make_shared<const std::vector<std::string>>(ParseTokenFile(content.str()));
  if (tokens->empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("The auth token file ", token_file_, " holds no token"));
  }
  const int count = static_cast<int>(tokens->size());
  absl::MutexLock lock(&mu_);
  tokens_ = std::move(tokens);
  return count;
}

bool TokenAuthenticator::Accepts(absl::string_view token) const {
  std::shared_ptr<const std::vector<std::string>> tokens;
  {
    absl::MutexLock lock(&mu_);
    tokens = tokens_;
  }
  bool accepted = false;
  for (const std::string& candidate : *tokens) accepted |= ConstantTimeEquals(candidate, token);
  return accepted;
}

grpc::Status TokenAuthenticator::Process(const InputMetadata& auth_metadata,
                                         grpc::AuthContext* /*context*/,
                                         OutputMetadata* consumed_auth_metadata,
                                         OutputMetadata* /*response_metadata*/) {
  auto path = auth_metadata.find(":path");
  if (path != auth_metadata.end() &&
      absl::StartsWith(absl::string_view(path->second.data(), path->second.size()),
                       kHealthPathPrefix)) {
    return grpc::Status::OK;
  }
  auto header = auth_metadata.find("authorization");
  if (header == auth_metadata.end()) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "This server requires a bearer token (authorization metadata) and "
                        "the call carried none.");
  }
  absl::string_view value(header->second.data(), header->second.size());
  if (!absl::StartsWith(value, kBearerPrefix) || !Accepts(value.substr(kBearerPrefix.size()))) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "The call's bearer token was not accepted by this server.");
  }
  // The token stays out of the handlers' view of the metadata.
  consumed_auth_metadata->insert(
      std::make_pair(std::string(header->first.data(), header->first.size()), std::string(value)));
  return grpc::Status::OK;
}

}  // namespace tf_reverb
