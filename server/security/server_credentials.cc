#include "server/security/server_credentials.h"

#include <fstream>
#include <sstream>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "grpc/grpc_security_constants.h"

namespace tf_reverb {
namespace {

// The PEM in `file` (when given) or `content`; INVALID_ARGUMENT naming
// `what` when unreadable or not PEM.
absl::StatusOr<std::string> ReadPem(const std::string& file, std::string content,
                                    const std::string& what) {
  if (!file.empty()) {
    std::ifstream in(file);
    if (!in) return absl::InvalidArgumentError(absl::StrCat("Cannot read ", what, " ", file));
    std::stringstream buffer;
    buffer << in.rdbuf();
    content = buffer.str();
  }
  if (!content.empty() && !absl::StrContains(content, "-----BEGIN ")) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, file.empty() ? "" : absl::StrCat(" ", file), " is not in PEM format"));
  }
  return content;
}

}  // namespace

bool IsLoopbackHost(const std::string& host) {
  absl::string_view h = host;
  if (absl::ConsumePrefix(&h, "[")) absl::ConsumeSuffix(&h, "]");
  return h == "localhost" || h == "::1" || absl::StartsWith(h, "127.");
}

absl::StatusOr<std::shared_ptr<ServerSecurity>> ServerSecurity::Create(
    ServerSecurityOptions options) {
  std::shared_ptr<ServerSecurity> security(new ServerSecurity());
  security->host_ = options.host.empty() ? "[::]" : options.host;
  security->loopback_ = IsLoopbackHost(security->host_);
  absl::StatusOr<std::string> cert =
      ReadPem(options.tls_cert_file, options.tls_certificate_chain, "the TLS certificate");
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key =
      ReadPem(options.tls_key_file, options.tls_private_key, "the TLS private key");
  if (!key.ok()) return key.status();
  absl::StatusOr<std::string> client_ca =
      ReadPem(options.tls_client_ca_file, options.tls_client_ca, "the TLS client CA");
  if (!client_ca.ok()) return client_ca.status();
  if (cert->empty() != key->empty()) {
    return absl::InvalidArgumentError(
        "TLS needs both a certificate (--tls_cert_file) and its private key "
        "(--tls_key_file); only one was given.");
  }
  if (!client_ca->empty() && cert->empty()) {
    return absl::InvalidArgumentError(
        "A TLS client CA (--tls_client_ca_file, mutual TLS) needs the server's own "
        "certificate and key (--tls_cert_file, --tls_key_file).");
  }
  security->tls_ = !cert->empty();
  security->mutual_tls_ = !client_ca->empty();
  if (!options.auth_token_file.empty()) {
    absl::StatusOr<std::shared_ptr<TokenAuthenticator>> authenticator =
        TokenAuthenticator::Create(options.auth_token_file);
    if (!authenticator.ok()) return authenticator.status();
    security->authenticator_ = *std::move(authenticator);
    if (!security->tls_ && !security->loopback_) {
      return absl::InvalidArgumentError(
          absl::StrCat("Auth tokens without TLS are only accepted on a loopback host (got host ",
                       security->host_,
                       "): tokens would cross the network in clear text. Give --tls_cert_file and "
                       "--tls_key_file, or listen on 127.0.0.1."));
    }
  }
  if (security->tls_) {
    grpc::SslServerCredentialsOptions ssl(
        security->mutual_tls_ ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                              : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
    ssl.pem_root_certs = *client_ca;
    ssl.pem_key_cert_pairs.push_back({*key, *cert});
    security->credentials_ = grpc::SslServerCredentials(ssl);
  } else if (security->authenticator_ != nullptr) {
    security->credentials_ = grpc::experimental::LocalServerCredentials(LOCAL_TCP);
  } else {
    security->credentials_ = grpc::InsecureServerCredentials();
  }
  if (security->authenticator_ != nullptr) {
    security->credentials_->SetAuthMetadataProcessor(security->authenticator_);
  }
  return security;
}

std::string ServerSecurity::ListeningAddress(int port) const {
  const bool ipv6 = absl::StrContains(host_, ':') && !absl::StartsWith(host_, "[");
  return ipv6 ? absl::StrCat("[", host_, "]:", port) : absl::StrCat(host_, ":", port);
}

std::string ServerSecurity::ExposureWarning() const {
  if (loopback_ || tls_ || authenticator_ != nullptr) return "";
  return absl::StrCat(
      "Listening on ", host_,
      " (beyond loopback) without TLS and without auth tokens: anyone who can reach "
      "the port can read and write every table. Set --tls_cert_file/--tls_key_file "
      "and --auth_token_file, or --host=127.0.0.1.");
}

std::string ServerSecurity::DebugString() const {
  return absl::StrCat("host=", host_, " tls=", mutual_tls_ ? "mutual" : (tls_ ? "on" : "off"),
                      " auth=", authenticator_ != nullptr ? "token" : "none");
}

}  // namespace tf_reverb
