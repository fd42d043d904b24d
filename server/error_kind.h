// Error kinds: what tells apart two errors that share an absl::StatusCode,
// carried as a payload of the status so that callers branch on the code and
// the kind, never on the message text.
//
//   kCallerTimeout: a DEADLINE_EXCEEDED that a local wait produced because
//     the caller's own timeout expired (a writer's flush or end_episode);
//     the stream is still usable. Without the kind, a DEADLINE_EXCEEDED is an
//     error the call cannot recover from (the server ended the insert stream
//     with it, a rate-limiter timeout, an RPC deadline).
//   kTransportSecurityMismatch: the FAILED_PRECONDITION of a client and a
//     server that disagree on TLS (server/security/channel_credentials.h).
//
// A kind lives only inside the process: gRPC carries a status's code and
// message, not its payloads, so a status received from a peer has no kind.
//
// Contract: pure functions, thread-safe.
#ifndef TF_REVERB_SERVER_ERROR_KIND_H_
#define TF_REVERB_SERVER_ERROR_KIND_H_

#include "absl/status/status.h"

namespace tf_reverb {

enum class ErrorKind {
  kNone,
  kCallerTimeout,
  kTransportSecurityMismatch,
};

// `status` marked with `kind`; an OK status stays OK (and unmarked).
absl::Status WithErrorKind(absl::Status status, ErrorKind kind);

// The kind `status` was marked with; kNone for OK and unmarked statuses.
ErrorKind ErrorKindOf(const absl::Status& status);

}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_ERROR_KIND_H_
