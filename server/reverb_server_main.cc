// reverb_server: the standalone replay server.
//
//   reverb_server [--config=<text proto or JSON>|--config_file=<path>] [--port=N]
//
// Serves the tables of a ReverbServerConfig (reverb-spec.md §6); with no
// config it serves kDefaultServerConfig. --port overrides the config's port
// (0 picks a free one); the bound port is always logged. SIGTERM and SIGINT
// stop it gracefully: tables are closed (blocked calls cancelled), then gRPC
// drains and shuts down.
#include <signal.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "server.h"
#include "server_config.h"

ABSL_FLAG(std::string, config, "", "ReverbServerConfig in text format or JSON.");
ABSL_FLAG(std::string, config_file, "", "File holding a ReverbServerConfig.");
ABSL_FLAG(int, port, -1, "Port to listen on; overrides the config (0 = any free port).");

namespace {

// One structured log line: `ts=... event=... key=value ...`.
void Log(const std::string& event, const std::string& fields) {
  std::fprintf(stderr, "ts=%s component=reverb_server event=%s %s\n",
               absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::Now(), absl::UTCTimeZone()).c_str(),
               event.c_str(), fields.c_str());
  std::fflush(stderr);
}

int Fail(const std::string& message) {
  Log("error", absl::StrCat("message=\"", message, "\""));
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
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

  absl::StatusOr<deepmind::reverb::ReverbServerConfig> config =
      tf_reverb::ParseServerConfig(text);
  if (!config.ok()) return Fail(std::string(config.status().message()));
  absl::StatusOr<std::vector<std::shared_ptr<tf_reverb::Table>>> tables =
      tf_reverb::TablesFromConfig(*config);
  if (!tables.ok()) return Fail(std::string(tables.status().message()));
  std::vector<std::string> names;
  for (const auto& table : *tables) names.push_back(table->name());
  const int port = absl::GetFlag(FLAGS_port) >= 0 ? absl::GetFlag(FLAGS_port) : config->port();

  // Block the stop signals before gRPC starts threads, so that only sigwait
  // below receives them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  absl::StatusOr<std::unique_ptr<tf_reverb::Server>> server =
      tf_reverb::Server::Start(*std::move(tables), port);
  if (!server.ok()) return Fail(std::string(server.status().message()));
  Log("started", absl::StrCat("port=", (*server)->port(), " tables=",
                              absl::StrJoin(names, ",")));

  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  Log("stopping", absl::StrCat("signal=", signal_number == SIGTERM ? "SIGTERM" : "SIGINT"));
  (*server)->Stop();
  Log("stopped", absl::StrCat("port=", (*server)->port()));
  return 0;
}
