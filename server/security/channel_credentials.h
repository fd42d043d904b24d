// ChannelSecurity: what a client channel presents to a server — TLS (root
// CA, optionally a client certificate for mutual TLS) and a bearer token —
// and where a client that is only given an address finds it.
//
// Contract:
//  * Resolution (ResolveChannelSecurity): a client made with an address only
//    (the TF ops, the dataset ops, any C ABI client) uses the security
//    registered for exactly that address string in this process
//    (RegisterChannelSecurity; the Python API registers what a Client,
//    TFClient or dataset was given; UnregisterChannelSecurity forgets it),
//    else the environment:
//      TF_REVERB_TLS_ROOT_CA_FILE     PEM roots; setting it turns TLS on
//      TF_REVERB_TLS_CLIENT_CERT_FILE PEM client certificate (mutual TLS)
//      TF_REVERB_TLS_CLIENT_KEY_FILE  PEM key of that certificate
//      TF_REVERB_TLS_SERVER_NAME      name to verify instead of the host
//      TF_REVERB_AUTH_TOKEN           bearer token
//    Unreadable files are an error (a client with that error fails every
//    call with it).
//  * Credentials (BuildChannelCredentials): TLS channels verify the server
//    against the roots (the system's when none are given). A token is sent
//    on every call as `authorization: Bearer <token>`; without TLS gRPC's
//    local credentials carry it, which connect to loopback addresses only,
//    so a token never crosses a network in clear text (INVALID_ARGUMENT for
//    a token without TLS to another address).
//  * Fail fast (AwaitTransport, TransportSecurityError): gRPC reports a TLS
//    mismatch (plaintext against TLS or the reverse, an unknown CA, a
//    refused client certificate) as UNAVAILABLE and a wait-for-ready call
//    waits for it forever. AwaitTransport waits until the channel connects
//    or fails; when the failure is a TLS or handshake one it returns
//    FAILED_PRECONDITION "Transport security mismatch ..." which no caller
//    retries. A server that is merely not up yet is waited for as before.
//    A peer closing the connection it accepted (how a plaintext client sees
//    a TLS server) counts only when two connection attempts in a row end
//    that way (about a second, gRPC's first reconnect backoff), so a server
//    going away during a restart is not taken for a mismatch.
//  * Thread-safety: every function is thread-safe.
//  * Secrets: tokens and keys never appear in a status or DebugString().
#ifndef TF_REVERB_SERVER_SECURITY_CHANNEL_CREDENTIALS_H_
#define TF_REVERB_SERVER_SECURITY_CHANNEL_CREDENTIALS_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "grpcpp/channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"

namespace tf_reverb {

struct ChannelSecurity {
  bool tls = false;
  std::string root_certificates;  // PEM; empty with tls: the system's roots
  std::string certificate_chain;  // PEM client certificate (mutual TLS)
  std::string private_key;        // PEM key of certificate_chain
  std::string server_name;        // overrides the name verified (tests, IPs)
  std::string auth_token;         // bearer token; empty: none
  // "tls=on|off|mutual token=yes|no" (no secrets).
  std::string DebugString() const;
};

// Message prefix of the FAILED_PRECONDITION AwaitTransport returns; the
// status is marked ErrorKind::kTransportSecurityMismatch (server/error_kind.h),
// which is what callers test.
inline constexpr absl::string_view kTransportSecurityMismatch = "Transport security mismatch";

void RegisterChannelSecurity(const std::string& address, const ChannelSecurity& security);
// Forgets what was registered for `address` (nothing when nothing was);
// clients made from the address alone then use the environment again.
void UnregisterChannelSecurity(const std::string& address);
// The registered security of `address`, else the environment's.
absl::StatusOr<ChannelSecurity> ResolveChannelSecurity(const std::string& address);
// The environment's security (see the contract).
absl::StatusOr<ChannelSecurity> ChannelSecurityFromEnvironment();

// Channel credentials for `address`; may set channel arguments (the name
// override) in `args`.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> BuildChannelCredentials(
    const std::string& address, const ChannelSecurity& security, grpc::ChannelArguments* args);

// `status` rewritten as the clear FAILED_PRECONDITION when it is gRPC's
// report of a certainly failed TLS handshake; else `status`. `tls` (whether this
// client uses TLS; unset: unknown) and `address` ("": unknown) only word
// the message.
absl::Status TransportSecurityError(const absl::Status& status, std::optional<bool> tls,
                                    const std::string& address);

// TransportSecurityError, and for a failure that may be a mismatch, a
// confirmation by AwaitTransport (up to kConfirmationTimeout, or until
// `cancelled`); the mismatch, else `status`.
inline constexpr absl::Duration kConfirmationTimeout = absl::Seconds(10);
absl::Status CheckTransportFailure(grpc::Channel* channel, const absl::Status& status,
                                   std::optional<bool> tls, const std::string& address,
                                   const std::function<bool()>& cancelled = nullptr);

// Waits (up to `deadline`, or until `cancelled` returns true; it is polled
// at least every second) until `channel` is connected, or returns the
// transport security mismatch it fails with. OK when it is connected, when
// the deadline passes or it was cancelled, or when it fails for another
// reason (the caller's call then reports that failure itself).
absl::Status AwaitTransport(grpc::Channel* channel, absl::Time deadline, std::optional<bool> tls,
                            const std::string& address,
                            const std::function<bool()>& cancelled = nullptr);

}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_SECURITY_CHANNEL_CREDENTIALS_H_
