// ServerSecurity: how a server listens — bind host, TLS (optionally mutual)
// and bearer-token authentication — turned into gRPC ServerCredentials.
//
// Contract:
//  * TLS: with a certificate chain and private key (PEM) the server speaks
//    TLS only. With a client CA as well it requires every client to present
//    a certificate signed by that CA (mutual TLS) and refuses the handshake
//    otherwise.
//  * Tokens: with an auth token file every RPC but the health service's must
//    carry an accepted bearer token (token_auth.h). gRPC attaches token
//    checks to secure credentials only and clients send tokens over secure
//    channels only, so a server with tokens and without TLS uses gRPC's
//    local (loopback-only) credentials: Create() refuses that combination on
//    a host other than a loopback one, rather than let tokens cross a
//    network in clear text. Local credentials are plaintext on the wire, so
//    plaintext clients (dm-reverb's too) still reach such a server; without
//    a valid token they get UNAUTHENTICATED.
//  * Ownership: immutable after Create() except for the token set
//    (Reload via authenticator()); shared by the Server.
//  * Thread-safety: thread-safe.
//  * Errors: INVALID_ARGUMENT naming the flag or file that is wrong (a key
//    without a certificate, an unreadable or non-PEM file, tokens without
//    TLS beyond loopback). File contents are never quoted.
#ifndef TF_REVERB_SERVER_SECURITY_SERVER_CREDENTIALS_H_
#define TF_REVERB_SERVER_SECURITY_SERVER_CREDENTIALS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/security/server_credentials.h"
#include "server/security/token_auth.h"

namespace tf_reverb {

struct ServerSecurityOptions {
  // Interface to bind: "" or "[::]" (all, the default), "0.0.0.0",
  // "127.0.0.1", "localhost", "::1", or any address of this host.
  std::string host;
  // PEM contents (the Python API passes these) ...
  std::string tls_certificate_chain;
  std::string tls_private_key;
  std::string tls_client_ca;
  // ... or PEM files (the server binary's flags); a file wins over content.
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string tls_client_ca_file;
  std::string auth_token_file;
};

class ServerSecurity {
 public:
  static absl::StatusOr<std::shared_ptr<ServerSecurity>> Create(ServerSecurityOptions options);

  // "host:port" for ServerBuilder::AddListeningPort.
  std::string ListeningAddress(int port) const;
  std::shared_ptr<grpc::ServerCredentials> credentials() const { return credentials_; }
  bool tls() const { return tls_; }
  bool mutual_tls() const { return mutual_tls_; }
  // Null without an auth token file.
  const std::shared_ptr<TokenAuthenticator>& authenticator() const { return authenticator_; }
  // Whether the host is a loopback one (only local processes can connect).
  bool loopback_only() const { return loopback_; }
  // The one warning an operator should see, or "" : listening beyond
  // loopback with neither TLS nor tokens.
  std::string ExposureWarning() const;
  // "host=... tls=on|off|mutual auth=token|none" (no secrets).
  std::string DebugString() const;

 private:
  ServerSecurity() = default;

  std::string host_;
  bool loopback_ = false;
  bool tls_ = false;
  bool mutual_tls_ = false;
  std::shared_ptr<TokenAuthenticator> authenticator_;
  std::shared_ptr<grpc::ServerCredentials> credentials_;
};

// Whether `host` names the loopback interface ("localhost", 127.x.y.z, ::1).
bool IsLoopbackHost(const std::string& host);

}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_SECURITY_SERVER_CREDENTIALS_H_
