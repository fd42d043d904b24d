// reverb_server: the standalone replay server.
//
//   reverb_server [--config=<text proto or JSON>|--config_file=<path>] [--port=N]
//                 [--checkpoint_dir=DIR [--checkpoint_interval_seconds=S]
//                  [--checkpoint_on_exit] [--keep_table_config]
//                  [--wal_dir=DIR [--wal_durability=sync|async]]]
//                 [--metrics_port=N [--metrics_host=IP]] [--log_format=text|json]
//
// Serves the tables of a ReverbServerConfig (docs/reference/config-format.md); with no
// config it serves kDefaultServerConfig. --port overrides the config's port
// (0 picks a free one); the bound port is always logged. With
// --checkpoint_dir the newest checkpoint there is restored at start,
// Client.checkpoint() saves there, and so does a background thread every
// --checkpoint_interval_seconds. SIGTERM and SIGINT stop it gracefully: no
// new calls are accepted, running ones get --drain_seconds to finish, a final
// checkpoint is written (--checkpoint_on_exit), then the tables close. With
// --wal_dir every change is also logged there (server/wal/) and replayed
// after the checkpoint at start, and inserts are confirmed once logged:
// --wal_durability=sync (fdatasync'ed, the default) or async (written to
// the OS; fdatasync every --wal_fsync_interval_ms). The
// standard gRPC health service (grpc.health.v1.Health) answers SERVING.
// Security (server/security/server_credentials.h): --host binds one
// interface (default all); --tls_cert_file/--tls_key_file serve TLS,
// --tls_client_ca_file requires client certificates (mutual TLS);
// --auth_token_file requires a bearer token on every RPC but health checks,
// and SIGHUP re-reads that file (rotation without restart).
//
// Operations: --metrics_port=N serves Prometheus metrics at /metrics
// (server/metrics/collector.h lists them; --metrics_host narrows the
// interface). The log (stderr) has one line per event that matters: each
// table and the start with its flags, checkpoints saved and restored, a
// client summary at most once a minute, failed calls with their peer, the
// stop; --log_format=json writes each as one JSON object instead of
// `key=value` text.
#include <signal.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <initializer_list>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "checkpoint.pb.h"
#include "server/checkpointing/checkpointer.h"
#include "server/logging/event_log.h"
#include "server/metrics/exporter.h"
#include "server/security/server_credentials.h"
#include "server/service/server.h"
#include "server/service/server_config.h"
#include "server/table.h"
#include "server/wal/write_ahead_log.h"

ABSL_FLAG(std::string, config, "", "ReverbServerConfig in text format or JSON.");
ABSL_FLAG(std::string, config_file, "", "File holding a ReverbServerConfig.");
ABSL_FLAG(int, port, -1, "Port to listen on; overrides the config (0 = any free port).");
ABSL_FLAG(std::string, checkpoint_dir, "", "Directory of checkpoints (restored at start).");
ABSL_FLAG(int, checkpoint_interval_seconds, 0, "Checkpoint this often (0 = never).");
ABSL_FLAG(bool, checkpoint_on_exit, true, "Checkpoint once more on SIGTERM/SIGINT.");
ABSL_FLAG(int, keep_checkpoints, 1, "Complete checkpoints to keep.");
ABSL_FLAG(std::string, wal_dir, "",
          "Write-ahead log directory (needs --checkpoint_dir): a crash loses no confirmed insert.");
ABSL_FLAG(std::string, wal_durability, "sync",
          "sync: confirm inserts once fdatasync'ed (survives a host crash); async: once written "
          "(survives a process crash).");
ABSL_FLAG(int, wal_fsync_interval_ms, 100, "With --wal_durability=async: fdatasync this often.");
ABSL_FLAG(bool, incremental_checkpoints, true,
          "Write only the chunks earlier checkpoints do not hold (false: every checkpoint is "
          "self-contained, as dm-reverb writes and restores them).");
ABSL_FLAG(bool, keep_table_config, false,
          "On restore, keep the config's table settings instead of the checkpoint's.");
ABSL_FLAG(bool, check_item_signatures, false,
          "Refuse items inconsistent with their table's signature (stricter than Reverb,\n"
          "    whose server accepts them; clients that validate check them anyway).");
ABSL_FLAG(double, drain_seconds, 2.0, "Grace period for running calls on shutdown.");
ABSL_FLAG(std::string, host, "", "Interface to listen on (default: all, [::]).");
ABSL_FLAG(std::string, tls_cert_file, "", "PEM certificate chain: serve TLS only.");
ABSL_FLAG(std::string, tls_key_file, "", "PEM private key of --tls_cert_file.");
ABSL_FLAG(std::string, tls_client_ca_file, "",
          "PEM CA: require client certificates it signed (mutual TLS).");
ABSL_FLAG(std::string, auth_token_file, "",
          "Accepted bearer tokens, one per line; re-read on SIGHUP.");
ABSL_FLAG(int, metrics_port, -1,
          "Serve Prometheus metrics at http://<host>:N/metrics (0 = any free port; -1 = off).");
ABSL_FLAG(std::string, metrics_host, "",
          "IPv4 address the metrics endpoint listens on (empty = all interfaces).");
ABSL_FLAG(double, client_summary_seconds, 60,
          "Log a summary of clients and streams at most this often (when calls come and go).");
ABSL_FLAG(std::string, log_format, "text",
          "Log lines as `text` (key=value) or `json` (one object per line).");

namespace {

// One event line (server/logging/event_log.h).
void Log(absl::string_view event, std::initializer_list<tf_reverb::LogField> fields) {
  tf_reverb::LogEvent("reverb_server", event, fields);
}

int Fail(const std::string& message) {
  Log("error", {{"message", message}});
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  // Debian's absl leaves mutex deadlock detection on (a global lock-order
  // graph updated on every lock); the tests keep it, the server does not.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  absl::SetProgramUsageMessage(
      "the standalone tf_reverb replay server (Reverb's gRPC protocol).\n"
      "  reverb_server [--config=TEXT|--config_file=PATH] [--port=N] [--checkpoint_dir=DIR ...]\n"
      "                [--host=H] [--tls_cert_file=F --tls_key_file=F [--tls_client_ca_file=F]]\n"
      "                [--auth_token_file=F] [--metrics_port=N] [--log_format=text|json]");
  absl::ParseCommandLine(argc, argv);
  tf_reverb::LogFormat log_format;
  if (!tf_reverb::ParseLogFormat(absl::GetFlag(FLAGS_log_format), &log_format)) {
    return Fail(absl::StrCat("--log_format must be text or json, not '",
                             absl::GetFlag(FLAGS_log_format), "'"));
  }
  tf_reverb::SetLogFormat(log_format);
  std::string text = absl::GetFlag(FLAGS_config);
  const std::string path = absl::GetFlag(FLAGS_config_file);
  if (!text.empty() && !path.empty()) return Fail("Give --config or --config_file, not both.");
  if (!path.empty()) {
    std::ifstream file(path);
    if (!file) return Fail(absl::StrCat("Cannot read config file ", path));
    std::stringstream buffer;
    buffer << file.rdbuf();
    text = buffer.str();
  }
  if (text.empty()) text = tf_reverb::kDefaultServerConfig;

  absl::StatusOr<deepmind::reverb::ReverbServerConfig> config = tf_reverb::ParseServerConfig(text);
  if (!config.ok()) return Fail(std::string(config.status().message()));
  absl::StatusOr<std::vector<std::shared_ptr<tf_reverb::Table>>> tables =
      tf_reverb::TablesFromConfig(*config, absl::GetFlag(FLAGS_check_item_signatures));
  if (!tables.ok()) return Fail(std::string(tables.status().message()));
  std::vector<std::string> names;
  for (const auto& table : *tables) names.push_back(table->name());
  for (const auto& table : *tables) {
    Log("table", {{"name", table->name()}, {"config", table->DebugString()}});
  }
  const int port = absl::GetFlag(FLAGS_port) >= 0 ? absl::GetFlag(FLAGS_port) : config->port();

  // Block the stop signals before gRPC starts threads, so that only sigwait
  // below receives them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGHUP);  // reloads the auth tokens
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  tf_reverb::ServerSecurityOptions security_options;
  security_options.host = absl::GetFlag(FLAGS_host);
  security_options.tls_cert_file = absl::GetFlag(FLAGS_tls_cert_file);
  security_options.tls_key_file = absl::GetFlag(FLAGS_tls_key_file);
  security_options.tls_client_ca_file = absl::GetFlag(FLAGS_tls_client_ca_file);
  security_options.auth_token_file = absl::GetFlag(FLAGS_auth_token_file);
  absl::StatusOr<std::shared_ptr<tf_reverb::ServerSecurity>> security =
      tf_reverb::ServerSecurity::Create(std::move(security_options));
  if (!security.ok()) return Fail(std::string(security.status().message()));

  std::shared_ptr<tf_reverb::Checkpointer> checkpointer;
  const std::string checkpoint_dir = absl::GetFlag(FLAGS_checkpoint_dir);
  if (!checkpoint_dir.empty()) {
    tf_reverb::CheckpointerOptions options;
    options.keep_latest = absl::GetFlag(FLAGS_keep_checkpoints);
    options.incremental = absl::GetFlag(FLAGS_incremental_checkpoints);
    options.restore_mode = absl::GetFlag(FLAGS_keep_table_config)
                               ? tf_reverb::Table::RestoreMode::kTableConfig
                               : tf_reverb::Table::RestoreMode::kCheckpointConfig;
    checkpointer = std::make_shared<tf_reverb::Checkpointer>(checkpoint_dir, options);
  }
  std::shared_ptr<tf_reverb::WriteAheadLog> log;
  const std::string wal_dir = absl::GetFlag(FLAGS_wal_dir);
  if (!wal_dir.empty()) {
    if (checkpointer == nullptr) {
      return Fail("--wal_dir needs --checkpoint_dir (checkpoints are where the log is truncated)");
    }
    absl::StatusOr<tf_reverb::WalDurability> durability =
        tf_reverb::ParseWalDurability(absl::GetFlag(FLAGS_wal_durability));
    if (!durability.ok()) return Fail(std::string(durability.status().message()));
    tf_reverb::WalOptions options;
    options.durability = *durability;
    options.fsync_interval = absl::Milliseconds(absl::GetFlag(FLAGS_wal_fsync_interval_ms));
    absl::StatusOr<std::unique_ptr<tf_reverb::WriteAheadLog>> opened =
        tf_reverb::WriteAheadLog::Open(wal_dir, options);
    if (!opened.ok()) return Fail(std::string(opened.status().message()));
    log = *std::move(opened);
  }
  tf_reverb::MetricsOptions metrics;
  metrics.port = absl::GetFlag(FLAGS_metrics_port);
  metrics.host = absl::GetFlag(FLAGS_metrics_host);
  metrics.client_summary_interval = absl::Seconds(absl::GetFlag(FLAGS_client_summary_seconds));
  absl::StatusOr<std::unique_ptr<tf_reverb::Server>> server =
      tf_reverb::Server::Start(*std::move(tables), port, checkpointer, *security, metrics, log);
  if (!server.ok()) return Fail(std::string(server.status().message()));
  Log("started", {{"port", (*server)->port()},
                  {"tables", absl::StrJoin(names, ",")},
                  {"checkpoint_dir", checkpoint_dir.empty() ? "none" : checkpoint_dir},
                  {"checkpoint_interval_seconds", absl::GetFlag(FLAGS_checkpoint_interval_seconds)},
                  {"checkpoint_on_exit", absl::GetFlag(FLAGS_checkpoint_on_exit)},
                  {"wal_dir", wal_dir.empty() ? "none" : wal_dir},
                  {"wal_durability", absl::GetFlag(FLAGS_wal_durability)},
                  {"metrics_port", (*server)->metrics_port()},
                  {"log_format", absl::GetFlag(FLAGS_log_format)},
                  {"security", (*security)->DebugString()}});
  if (std::string warning = (*security)->ExposureWarning(); !warning.empty()) {
    Log("warning", {{"message", warning}});
  }

  auto checkpoint = [&](const char* reason) {
    absl::StatusOr<std::string> path = checkpointer->Save((*server)->tables());
    if (path.ok()) {
      Log("checkpointed", {{"reason", reason}, {"path", *path}});
    } else {
      Log("checkpoint_failed", {{"reason", reason}, {"message", path.status().message()}});
    }
  };
  absl::Notification stopping;
  std::thread periodic;
  const int interval = absl::GetFlag(FLAGS_checkpoint_interval_seconds);
  if (checkpointer != nullptr && interval > 0) {
    periodic = std::thread([&] {
      while (!stopping.WaitForNotificationWithTimeout(absl::Seconds(interval))) {
        checkpoint("periodic");
      }
    });
  }

  int signal_number = 0;
  while (sigwait(&stop_signals, &signal_number) == 0 && signal_number == SIGHUP) {
    const auto& authenticator = (*security)->authenticator();
    if (authenticator == nullptr) {
      Log("sighup_ignored", {{"reason", "no --auth_token_file"}});
      continue;
    }
    absl::StatusOr<int> reloaded = authenticator->Reload();
    if (reloaded.ok()) {
      Log("auth_tokens_reloaded", {{"tokens", *reloaded}});
    } else {
      Log("auth_tokens_reload_failed",
          {{"message", reloaded.status().message()}, {"kept", "previous"}});
    }
  }
  Log("stopping", {{"signal", signal_number == SIGTERM ? "SIGTERM" : "SIGINT"}});
  stopping.Notify();
  if (periodic.joinable()) periodic.join();
  (*server)->Drain(absl::Seconds(absl::GetFlag(FLAGS_drain_seconds)));
  if (checkpointer != nullptr && absl::GetFlag(FLAGS_checkpoint_on_exit)) checkpoint("exit");
  (*server)->Stop();
  Log("stopped", {{"port", (*server)->port()}});
  return 0;
}
