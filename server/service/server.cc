#include "server/service/server.h"

#include <chrono>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "grpc/grpc.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"
#include "grpcpp/support/server_interceptor.h"
#include "server/checkpointing/checkpointer.h"
#include "server/in_process_tables.h"
#include "server/metrics/collector.h"

namespace tf_reverb {

absl::StatusOr<std::unique_ptr<Server>> Server::Start(std::vector<std::shared_ptr<Table>> tables,
                                                      int port,
                                                      std::shared_ptr<Checkpointer> checkpointer,
                                                      std::shared_ptr<ServerSecurity> security,
                                                      const MetricsOptions& metrics,
                                                      std::shared_ptr<WriteAheadLog> log) {
  if (tables.empty()) return absl::InvalidArgumentError("At least one table must be provided");
  absl::flat_hash_set<std::string> names;
  for (const auto& table : tables) {
    if (!names.insert(table->name()).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("Multiple tables named '", table->name(), "'"));
    }
  }
  if (port < 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("Invalid port ", port));
  }
  if (security == nullptr) {
    absl::StatusOr<std::shared_ptr<ServerSecurity>> plain = ServerSecurity::Create({});
    if (!plain.ok()) return plain.status();
    security = *std::move(plain);
  }
  if (log != nullptr && checkpointer == nullptr) {
    return absl::InvalidArgumentError(
        "A write-ahead log needs a checkpointer (checkpoints are where the log is truncated)");
  }
  if (checkpointer != nullptr) {
    if (absl::Status s = checkpointer->Recover(tables, std::move(log)); !s.ok()) return s;
  }
  auto rpc_observer = std::make_shared<RpcObserver>(metrics.client_summary_interval);
  std::shared_ptr<MetricsCollector> collector;
  if (metrics.port >= 0) {
    collector = std::make_shared<MetricsCollector>(tables, rpc_observer, checkpointer);
  }
  auto service = std::make_unique<ReverbServiceImpl>(std::move(tables), std::move(checkpointer));
  // The standard grpc.health.v1.Health service (must precede the builder).
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  int bound_port = 0;
  builder.AddListeningPort(security->ListeningAddress(port), security->credentials(), &bound_port);
  // gRPC sets SO_REUSEPORT by default, which lets a second server bind a
  // port that is already in use and silently receive some of its
  // connections (and take over its entry in the in-process registry).
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.SetMaxReceiveMessageSize(-1);
  builder.SetMaxSendMessageSize(-1);
  builder.RegisterService(service.get());
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> observers;
  observers.push_back(rpc_observer->NewInterceptorFactory());
  builder.experimental().SetInterceptorCreators(std::move(observers));
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || bound_port == 0) {
    return absl::UnavailableError(
        absl::StrCat("Failed to BuildAndStart gRPC server on ", security->ListeningAddress(port),
                     security->tls() ? " (check that the TLS certificate and key match)" : ""));
  }
  std::unique_ptr<Server> result(
      new Server(std::move(service), std::move(server), bound_port, std::move(security)));
  result->rpc_observer_ = std::move(rpc_observer);
  if (collector != nullptr) {
    absl::StatusOr<std::unique_ptr<MetricsExporter>> exporter =
        MetricsExporter::Start(metrics, std::move(collector));
    if (!exporter.ok()) return exporter.status();  // ~Server stops gRPC
    result->metrics_ = *std::move(exporter);
    result->metrics_port_ = result->metrics_->port();
  }
  const ServerSecurity& checks = *result->security_;
  InProcessTables::Register(bound_port, result->tables(),
                            /*readable=*/!checks.tls() && checks.authenticator() == nullptr);
  return result;
}

Server::Server(std::unique_ptr<ReverbServiceImpl> service, std::unique_ptr<grpc::Server> server,
               int port, std::shared_ptr<ServerSecurity> security)
    : service_(std::move(service)),
      server_(std::move(server)),
      port_(port),
      security_(std::move(security)) {}

Server::~Server() { Stop(); }

void Server::Drain(absl::Duration timeout) {
  {
    absl::MutexLock lock(&mu_);
    if (stopped_ || drained_) return;
    drained_ = true;
  }
  InProcessTables::Unregister(port_);
  server_->Shutdown(absl::ToChronoTime(absl::Now() + timeout));
  server_->Wait();
}

void Server::Stop() {
  bool drained;
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return;
    stopped_ = true;
    drained = drained_;
  }
  metrics_.reset();
  if (drained) {
    service_->Close();
    return;
  }
  InProcessTables::Unregister(port_);
  // Calls blocked in a table return CANCELLED once the tables close. An
  // immediate shutdown would race them and usually replace that status with
  // gRPC's UNAVAILABLE "Cancelling all calls", so when any call is inside a
  // table, give those calls a moment to finish before cancelling the rest
  // (idle streams). Without such calls the shutdown is immediate.
  const bool calls_in_tables = service_->calls_in_tables() > 0;
  service_->Close();
  server_->Shutdown(std::chrono::system_clock::now() + (calls_in_tables
                                                            ? std::chrono::milliseconds(500)
                                                            : std::chrono::milliseconds(0)));
  server_->Wait();
}

void Server::Wait() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(&stopped_));
}

std::string Server::DebugString() const {
  return absl::StrCat("Server(port=", port_, ", reverb_service=", service_->DebugString(), ")");
}

}  // namespace tf_reverb
