// TokenAuthenticator: the bearer-token check a server runs on every RPC, as a
// gRPC AuthMetadataProcessor attached to the server's credentials.
//
// Contract:
//  * Accepted tokens come from a file, one per line (surrounding whitespace
//    is stripped; empty lines and lines starting with '#' are skipped).
//    Reload() re-reads it (the server binary calls it on SIGHUP): on success
//    the new set replaces the old one at once, so a rotated-out token is
//    refused from the next call on; on failure (unreadable file, no token)
//    the previous set stays in force and the error is returned.
//  * Process() accepts a call whose metadata holds `authorization: Bearer
//    <accepted token>` and rejects every other call with UNAUTHENTICATED,
//    except calls of the standard health service (grpc.health.v1.Health),
//    which stay open to load balancers and probes. Tokens are compared in
//    constant time and never appear in a status message, a log line or
//    DebugString().
//  * Thread-safety: thread-safe; Process() runs on gRPC's threads while
//    Reload() may run on any other.
//  * Errors: Create() and Reload() return INVALID_ARGUMENT naming the file
//    (never its content) when it cannot be read or holds no token.
#ifndef TF_REVERB_SERVER_SECURITY_TOKEN_AUTH_H_
#define TF_REVERB_SERVER_SECURITY_TOKEN_AUTH_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/security/auth_context.h"
#include "grpcpp/security/auth_metadata_processor.h"
#include "grpcpp/support/status.h"

namespace tf_reverb {

class TokenAuthenticator : public grpc::AuthMetadataProcessor {
 public:
  static absl::StatusOr<std::shared_ptr<TokenAuthenticator>> Create(std::string token_file);

  // Re-reads the token file; returns the number of tokens now accepted.
  absl::StatusOr<int> Reload();
  // Whether `token` is accepted now (constant time in the token's content).
  bool Accepts(absl::string_view token) const;
  const std::string& token_file() const { return token_file_; }

  // Non-blocking: the check is an in-memory comparison.
  bool IsBlocking() const override { return false; }
  grpc::Status Process(const InputMetadata& auth_metadata, grpc::AuthContext* context,
                       OutputMetadata* consumed_auth_metadata,
                       OutputMetadata* response_metadata) override;

 private:
  explicit TokenAuthenticator(std::string token_file) : token_file_(std::move(token_file)) {}

  const std::string token_file_;
  mutable absl::Mutex mu_;
  std::shared_ptr<const std::vector<std::string>> tokens_ ABSL_GUARDED_BY(mu_);
};

// The tokens of a token file's content (see the contract above).
std::vector<std::string> ParseTokenFile(absl::string_view content);

}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_SECURITY_TOKEN_AUTH_H_
