// InProcessTables: the tables the servers of this process serve, by port, so
// that a client of the same process reads a table without a socket (the
// in-process shortcut, docs/architecture/wire-protocol.md). The server side
// registers its tables when it starts listening and unregisters them when it
// stops; the client side only looks them up, so neither names the other.
//
// Contract:
//  * Thread-safety: thread-safe; one process-wide mutex, held only for the
//    map operation itself (never while calling into a table).
//  * Ownership: a registration shares its tables (std::shared_ptr) until
//    Unregister; a table found stays valid for as long as the caller holds
//    it, also after its server stopped (its calls then fail with CANCELLED).
//  * Security: a server with TLS or bearer tokens registers as not readable
//    and Find returns null for its port, so every call of a client passes
//    the server's checks over gRPC.
//  * Errors: none; Find returns null for an unknown port or table name.
#ifndef TF_REVERB_SERVER_IN_PROCESS_TABLES_H_
#define TF_REVERB_SERVER_IN_PROCESS_TABLES_H_

#include <memory>
#include <string>
#include <vector>

#include "server/table.h"

namespace tf_reverb {

class InProcessTables {
 public:
  // Records `tables` as served on `port`, replacing an earlier registration
  // of that port. `readable` false (TLS or tokens) hides them from Find.
  static void Register(int port, const std::vector<std::shared_ptr<Table>>& tables, bool readable);
  // Forgets the tables of `port` (a no-op when none are registered).
  static void Unregister(int port);
  // The table `name` served on `port` by a readable server of this process,
  // or null.
  static std::shared_ptr<Table> Find(int port, const std::string& name);
};

}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_IN_PROCESS_TABLES_H_
