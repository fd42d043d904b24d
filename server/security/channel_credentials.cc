#include "server/security/channel_credentials.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <utility>

#include "absl/base/const_init.h"
#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "grpc/grpc.h"
#include "grpc/grpc_security_constants.h"
#include "grpcpp/client_context.h"
#include "grpcpp/impl/client_unary_call.h"
#include "grpcpp/impl/codegen/client_unary_call.h"
#include "grpcpp/impl/rpc_method.h"
#include "grpcpp/security/auth_context.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"
#include "grpcpp/support/status.h"
#include "grpcpp/support/string_ref.h"
#include "server/error_kind.h"
#include "server/security/server_credentials.h"

namespace tf_reverb {
namespace {

absl::Mutex registry_mu(absl::kConstInit);
absl::flat_hash_map<std::string, ChannelSecurity>& Registry()
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(registry_mu) {
  static auto* registry = new absl::flat_hash_map<std::string, ChannelSecurity>();
  return *registry;
}

// Sends `authorization: Bearer <token>` with every call.
class BearerTokenPlugin : public grpc::MetadataCredentialsPlugin {
 public:
  explicit BearerTokenPlugin(std::string token) : header_(absl::StrCat("Bearer ", token)) {}
  bool IsBlocking() const override { return false; }
  const char* GetType() const override { return "tf_reverb_bearer_token"; }
  grpc::Status GetMetadata(grpc::string_ref /*service_url*/, grpc::string_ref /*method_name*/,
                           const grpc::AuthContext& /*channel_auth_context*/,
                           std::multimap<std::string, std::string>* metadata) override {
    metadata->insert(std::make_pair("authorization", header_));
    return grpc::Status::OK;
  }
  std::string DebugString() override { return "tf_reverb bearer token credentials"; }

 private:
  const std::string header_;
};

absl::StatusOr<std::string> ReadEnvironmentFile(const char* variable) {
  const char* path = std::getenv(variable);
  if (path == nullptr || *path == '\0') return std::string();
  std::ifstream in(path);
  if (!in) {
    return absl::InvalidArgumentError(absl::StrCat("Cannot read ", path, " (from ", variable, ")"));
  }
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// The host of a target: "host:port", "[v6]:port", "ipv4:host:port",
// "dns:///host:port"; "" when there is no single host.
std::string TargetHost(absl::string_view target) {
  absl::ConsumePrefix(&target, "dns:///");
  if (!absl::ConsumePrefix(&target, "ipv4:")) absl::ConsumePrefix(&target, "ipv6:");
  if (absl::StrContains(target, ',')) return "";
  if (absl::StartsWith(target, "[")) {
    const size_t end = target.find(']');
    return end == absl::string_view::npos ? "" : std::string(target.substr(1, end - 1));
  }
  const size_t colon = target.rfind(':');
  return std::string(colon == absl::string_view::npos ? target : target.substr(0, colon));
}

// How gRPC's report of a connection failure reads: a TLS failure for
// certain (handshake, certificate, peer name), one that may be TLS (the peer
// closed a connection it had accepted: what a plaintext client sees of a
// TLS server, but also of a server going away), or neither ("Connection
// refused": no server there yet). Only connection set-up failures count
// ("connections to all backends failing" / "failed to connect to all
// addresses"), never a stream that broke later.
enum class Handshake { kNotAFailure, kMaybe, kFailed };
Handshake ClassifyFailure(const absl::Status& status) {
  if (!absl::IsUnavailable(status)) return Handshake::kNotAFailure;
  const std::string lower = absl::AsciiStrToLower(status.message());
  if (!absl::StrContains(lower, "connections to all backends failing") &&
      !absl::StrContains(lower, "failed to connect to all addresses")) {
    return Handshake::kNotAFailure;
  }
  for (const char* marker : {"handshake", "ssl", "tls", "certificate", "peer name"}) {
    if (absl::StrContains(lower, marker)) return Handshake::kFailed;
  }
  for (const char* marker : {"socket closed", "connection reset", "end of file"}) {
    if (absl::StrContains(lower, marker)) return Handshake::kMaybe;
  }
  return Handshake::kNotAFailure;
}

absl::Status MismatchError(const absl::Status& status, std::optional<bool> tls,
                           const std::string& address) {
  return WithErrorKind(
      absl::FailedPreconditionError(absl::StrCat(
          kTransportSecurityMismatch, " with ", address.empty() ? "the server" : address,
          !tls.has_value()
              ? ""
              : (*tls ? ": this client uses TLS" : ": this client uses plaintext (no TLS)"),
          ", and setting up the connection failed. Check that client and server agree on TLS, "
          "that the client trusts the CA that signed the server's certificate (and the name "
          "it was issued for), and for mutual TLS that the client presents a certificate "
          "signed by the server's client CA. gRPC said: ",
          status.message())),
      ErrorKind::kTransportSecurityMismatch);
}

// A fail-fast call of the (unauthenticated) health service: in
// TRANSIENT_FAILURE it fails at once with the channel's last connection
// error.
absl::Status ProbeHealth(grpc::Channel* channel) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  grpc::Slice empty;
  grpc::ByteBuffer request(&empty, 1);  // an empty HealthCheckRequest
  grpc::ByteBuffer response;
  grpc::Status status = grpc::internal::BlockingUnaryCall<grpc::ByteBuffer, grpc::ByteBuffer>(
      channel,
      grpc::internal::RpcMethod("/grpc.health.v1.Health/Check",
                                grpc::internal::RpcMethod::NORMAL_RPC),
      &context, request, &response);
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

}  // namespace

std::string ChannelSecurity::DebugString() const {
  return absl::StrCat("tls=", !tls ? "off" : (certificate_chain.empty() ? "on" : "mutual"),
                      " token=", auth_token.empty() ? "no" : "yes");
}

void RegisterChannelSecurity(const std::string& address, const ChannelSecurity& security) {
  absl::MutexLock lock(&registry_mu);
  Registry()[address] = security;
}

void UnregisterChannelSecurity(const std::string& address) {
  absl::MutexLock lock(&registry_mu);
  Registry().erase(address);
}

absl::StatusOr<ChannelSecurity> ResolveChannelSecurity(const std::string& address) {
  {
    absl::MutexLock lock(&registry_mu);
    auto it = Registry().find(address);
    if (it != Registry().end()) return it->second;
  }
  return ChannelSecurityFromEnvironment();
}

absl::StatusOr<ChannelSecurity> ChannelSecurityFromEnvironment() {
  ChannelSecurity security;
  const char* root = std::getenv("TF_REVERB_TLS_ROOT_CA_FILE");
  security.tls = root != nullptr && *root != '\0';
  absl::StatusOr<std::string> roots = ReadEnvironmentFile("TF_REVERB_TLS_ROOT_CA_FILE");
  if (!roots.ok()) return roots.status();
  security.root_certificates = *std::move(roots);
  absl::StatusOr<std::string> cert = ReadEnvironmentFile("TF_REVERB_TLS_CLIENT_CERT_FILE");
  if (!cert.ok()) return cert.status();
  security.certificate_chain = *std::move(cert);
  absl::StatusOr<std::string> key = ReadEnvironmentFile("TF_REVERB_TLS_CLIENT_KEY_FILE");
  if (!key.ok()) return key.status();
  security.private_key = *std::move(key);
  if (const char* name = std::getenv("TF_REVERB_TLS_SERVER_NAME")) security.server_name = name;
  if (const char* token = std::getenv("TF_REVERB_AUTH_TOKEN")) {
    security.auth_token = std::string(absl::StripAsciiWhitespace(token));
  }
  if (!security.tls && !security.certificate_chain.empty()) {
    return absl::InvalidArgumentError(
        "TF_REVERB_TLS_CLIENT_CERT_FILE is set without TF_REVERB_TLS_ROOT_CA_FILE");
  }
  return security;
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> BuildChannelCredentials(
    const std::string& address, const ChannelSecurity& security, grpc::ChannelArguments* args) {
  if (security.certificate_chain.empty() != security.private_key.empty()) {
    return absl::InvalidArgumentError(
        "A TLS client certificate needs its private key and the reverse; only one was given.");
  }
  std::shared_ptr<grpc::ChannelCredentials> channel;
  if (security.tls) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = security.root_certificates;
    ssl.pem_private_key = security.private_key;
    ssl.pem_cert_chain = security.certificate_chain;
    channel = grpc::SslCredentials(ssl);
    if (!security.server_name.empty()) args->SetSslTargetNameOverride(security.server_name);
  } else if (!security.auth_token.empty()) {
    if (!IsLoopbackHost(TargetHost(address))) {
      return absl::InvalidArgumentError(absl::StrCat(
          "An auth token without TLS is only sent to a loopback address (got ", address,
          "): it would cross the network in clear text. Give TLS credentials."));
    }
    channel = grpc::experimental::LocalCredentials(LOCAL_TCP);
  } else {
    return grpc::InsecureChannelCredentials();
  }
  if (security.auth_token.empty()) return channel;
  return grpc::CompositeChannelCredentials(
      channel, grpc::experimental::MetadataCredentialsFromPlugin(
                   std::make_unique<BearerTokenPlugin>(security.auth_token), GRPC_SECURITY_NONE));
}

absl::Status TransportSecurityError(const absl::Status& status, std::optional<bool> tls,
                                    const std::string& address) {
  return ClassifyFailure(status) == Handshake::kFailed ? MismatchError(status, tls, address)
                                                       : status;
}

absl::Status CheckTransportFailure(grpc::Channel* channel, const absl::Status& status,
                                   std::optional<bool> tls, const std::string& address,
                                   const std::function<bool()>& cancelled) {
  switch (ClassifyFailure(status)) {
    case Handshake::kNotAFailure:
      return status;
    case Handshake::kFailed:
      return MismatchError(status, tls, address);
    case Handshake::kMaybe:
      break;
  }
  const absl::Status confirmed =
      AwaitTransport(channel, absl::Now() + kConfirmationTimeout, tls, address, cancelled);
  return confirmed.ok() ? status : confirmed;
}

absl::Status AwaitTransport(grpc::Channel* channel, absl::Time deadline, std::optional<bool> tls,
                            const std::string& address, const std::function<bool()>& cancelled) {
  int maybe_failures = 0;
  grpc_connectivity_state state = channel->GetState(/*try_to_connect=*/true);
  while (state != GRPC_CHANNEL_READY && state != GRPC_CHANNEL_SHUTDOWN) {
    if (cancelled != nullptr && cancelled()) return absl::OkStatus();
    if (state == GRPC_CHANNEL_TRANSIENT_FAILURE) {
      const absl::Status probe = ProbeHealth(channel);
      switch (ClassifyFailure(probe)) {
        case Handshake::kFailed:
          return MismatchError(probe, tls, address);
        case Handshake::kMaybe:
          // Twice in a row (separate connection attempts): not a server
          // that happened to go away while we connected.
          if (++maybe_failures >= 2) return MismatchError(probe, tls, address);
          break;
        case Handshake::kNotAFailure:
          if (!absl::IsUnavailable(probe)) return absl::OkStatus();  // it answered
          maybe_failures = 0;
          break;
      }
    }
    const absl::Time now = absl::Now();
    if (now >= deadline) return absl::OkStatus();
    channel->WaitForStateChange(state,
                                absl::ToChronoTime(std::min(deadline, now + absl::Seconds(1))));
    state = channel->GetState(/*try_to_connect=*/true);
  }
  return absl::OkStatus();
}

}  // namespace tf_reverb
