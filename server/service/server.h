// Server: a gRPC server hosting a fixed set of tables on one port.
//
// Contract:
//  * Thread-safety: thread-safe. Stop() is idempotent and may race with
//    Wait() from other threads.
//  * Ownership: shares the tables (std::shared_ptr) with callers; owns the
//    gRPC server and the service.
//  * Errors: Start() returns INVALID_ARGUMENT for no tables or duplicate table
//    names, UNAVAILABLE when the port cannot be bound, and checkpoint load
//    errors (a missing checkpoint is not an error). port() is always the
//    port actually bound (also when 0 asked gRPC to pick one).
//  * Security: `security` (security/server_credentials.h) sets the bind host,
//    TLS and token checks; null means all interfaces, plaintext, no tokens.
//    Its tables are registered in InProcessTables (in_process_tables.h) while
//    it listens, as not readable when it has TLS or tokens, so that every
//    call of a client passes its checks.
//  * Observability: every RPC passes an RpcObserver (server/metrics/), which
//    logs failed calls and client summaries; with metrics.port >= 0 the
//    server also serves Prometheus metrics (server/metrics/exporter.h) until
//    Stop(), and Start fails with the exporter's errors.
#ifndef TF_REVERB_SERVER_SERVICE_SERVER_H_
#define TF_REVERB_SERVER_SERVICE_SERVER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/server.h"
#include "server/checkpointing/checkpointer.h"
#include "server/metrics/exporter.h"
#include "server/metrics/rpc_observer.h"
#include "server/security/server_credentials.h"
#include "server/service/reverb_service.h"
#include "server/table.h"
#include "server/wal/write_ahead_log.h"

namespace tf_reverb {

class Server {
 public:
  // With a checkpointer, the newest checkpoint (if any) is restored into
  // `tables` before serving, and the Checkpoint RPC saves through it. With
  // a write-ahead log (opened, not started; needs a checkpointer) its
  // records after that checkpoint are replayed too, every later change is
  // logged, and inserts are confirmed once logged
  // (Checkpointer::Recover).
  static absl::StatusOr<std::unique_ptr<Server>> Start(
      std::vector<std::shared_ptr<Table>> tables, int port,
      std::shared_ptr<Checkpointer> checkpointer = nullptr,
      std::shared_ptr<ServerSecurity> security = nullptr,
      const MetricsOptions& metrics = MetricsOptions(),
      std::shared_ptr<WriteAheadLog> log = nullptr);
  ~Server();

  int port() const { return port_; }
  // The port /metrics is served on; -1 without metrics.
  int metrics_port() const { return metrics_port_; }
  // Closes the tables (cancelling blocked calls) and shuts gRPC down.
  void Stop();
  // Stops accepting calls and gives running ones up to `timeout` to finish
  // (then cancels them), leaving the tables open and intact, e.g. for a final
  // checkpoint. Stop() must still be called.
  void Drain(absl::Duration timeout);
  // Every table of this server, in configuration order.
  const std::vector<std::shared_ptr<Table>>& tables() const { return service_->tables(); }
  // Blocks until Stop() has completed.
  void Wait();
  ReverbServiceImpl* service() { return service_.get(); }
  std::string DebugString() const;
  // Never null (Start fills in the default).
  const std::shared_ptr<ServerSecurity>& security() const { return security_; }

 private:
  Server(std::unique_ptr<ReverbServiceImpl> service, std::unique_ptr<grpc::Server> server, int port,
         std::shared_ptr<ServerSecurity> security);

  std::unique_ptr<ReverbServiceImpl> service_;
  std::unique_ptr<grpc::Server> server_;
  const int port_;
  const std::shared_ptr<ServerSecurity> security_;
  std::shared_ptr<RpcObserver> rpc_observer_;
  std::unique_ptr<MetricsExporter> metrics_;  // reset by Stop()
  int metrics_port_ = -1;
  absl::Mutex mu_;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  bool drained_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_SERVICE_SERVER_H_
