#include "server/metrics/exporter.h"

#include <exception>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "prometheus/exposer.h"

namespace tf_reverb {

absl::StatusOr<std::unique_ptr<MetricsExporter>> MetricsExporter::Start(
    const MetricsOptions& options, std::shared_ptr<prometheus::Collectable> collectable) {
  if (options.port < 0 || options.port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("Invalid metrics port ", options.port));
  }
  // civetweb's listening_ports syntax: "port" (all IPv4 interfaces) or
  // "address:port".
  const std::string address = options.host.empty() ? absl::StrCat(options.port)
                                                   : absl::StrCat(options.host, ":", options.port);
  std::unique_ptr<prometheus::Exposer> exposer;
  try {
    exposer = std::make_unique<prometheus::Exposer>(
        std::vector<std::string>{"listening_ports", address, "num_threads", "2"});
  } catch (const std::exception& error) {
    return absl::UnavailableError(
        absl::StrCat("Cannot serve metrics on ", address, ": ", error.what()));
  }
  const std::vector<int> ports = exposer->GetListeningPorts();
  if (ports.empty() || ports[0] <= 0) {
    return absl::UnavailableError(absl::StrCat("Cannot serve metrics on ", address));
  }
  exposer->RegisterCollectable(collectable);
  return std::unique_ptr<MetricsExporter>(
      new MetricsExporter(std::move(exposer), std::move(collectable), ports[0]));
}

MetricsExporter::MetricsExporter(std::unique_ptr<prometheus::Exposer> exposer,
                                 std::shared_ptr<prometheus::Collectable> collectable, int port)
    : collectable_(std::move(collectable)), exposer_(std::move(exposer)), port_(port) {}

MetricsExporter::~MetricsExporter() { exposer_.reset(); }

}  // namespace tf_reverb
