// MetricsExporter: serves a Collectable's metric families in Prometheus'
// text format at http://<host>:<port>/metrics, through prometheus-cpp's
// Exposer (its own small HTTP server and threads, beside gRPC's).
//
// Contract:
//  * Thread-safety: Start and the destructor from one thread; scrapes are
//    served on the Exposer's threads and call Collect() concurrently with
//    the server's work.
//  * Ownership: shares the collectable; the destructor stops serving (a
//    scrape in progress finishes first).
//  * Errors: Start returns INVALID_ARGUMENT for a port outside 0..65535 and
//    UNAVAILABLE naming the address when it cannot be bound (in use, bad
//    host). Port 0 picks a free port; port() is the one bound.
#ifndef TF_REVERB_SERVER_METRICS_EXPORTER_H_
#define TF_REVERB_SERVER_METRICS_EXPORTER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "prometheus/collectable.h"

namespace prometheus {
class Exposer;
}  // namespace prometheus

namespace tf_reverb {

// Where a server serves its metrics (port < 0: not at all), and how often
// at most its RpcObserver logs a client summary.
struct MetricsOptions {
  int port = -1;
  // Interface to listen on (an IPv4 address); empty: all interfaces.
  std::string host;
  absl::Duration client_summary_interval = absl::Minutes(1);
};

class MetricsExporter {
 public:
  static absl::StatusOr<std::unique_ptr<MetricsExporter>> Start(
      const MetricsOptions& options, std::shared_ptr<prometheus::Collectable> collectable);
  ~MetricsExporter();

  int port() const { return port_; }

 private:
  MetricsExporter(std::unique_ptr<prometheus::Exposer> exposer,
                  std::shared_ptr<prometheus::Collectable> collectable, int port);

  // The exposer holds only a weak reference to it.
  std::shared_ptr<prometheus::Collectable> collectable_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  const int port_;
};

}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_METRICS_EXPORTER_H_
