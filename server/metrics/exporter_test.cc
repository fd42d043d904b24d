#include "server/metrics/exporter.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "prometheus/client_metric.h"
#include "prometheus/metric_family.h"
#include "prometheus/metric_type.h"
#include "schema.pb.h"
#include "server/metrics/collector.h"
#include "server/metrics/rpc_observer.h"
#include "server/table.h"
#include "server/table_item.h"
#include "server/testing/table_testing.h"

namespace tf_reverb {
namespace {

using testing::Fifo;
using testing::Insert;
using testing::MakeChunk;
using testing::MakeItem;
using testing::MakeTable;
using testing::MinSize;
using testing::SampleOne;
using testing::Uniform;

// family name -> (label text "k=v,..." -> value); histograms by _count/_sum.
std::map<std::string, std::map<std::string, double>> Values(const MetricsCollector& collector) {
  std::map<std::string, std::map<std::string, double>> values;
  for (const prometheus::MetricFamily& family : collector.Collect()) {
    auto& out = values[family.name];
    for (const prometheus::ClientMetric& metric : family.metric) {
      std::string labels;
      for (const auto& label : metric.label) {
        absl::StrAppend(&labels, labels.empty() ? "" : ",", label.name, "=", label.value);
      }
      switch (family.type) {
        case prometheus::MetricType::Counter:
          out[labels] = metric.counter.value;
          break;
        case prometheus::MetricType::Gauge:
          out[labels] = metric.gauge.value;
          break;
        case prometheus::MetricType::Histogram:
          out[labels] = static_cast<double>(metric.histogram.sample_count);
          break;
        default:
          break;
      }
    }
  }
  return values;
}

TEST(MetricsCollectorTest, ReadsTheTablesCounters) {
  auto table = MakeTable(Uniform(), Fifo(), /*max_size=*/3, 0, MinSize(1), "replay");
  auto collector = std::make_shared<MetricsCollector>(std::vector<std::shared_ptr<Table>>{table},
                                                      std::make_shared<RpcObserver>(), nullptr);
  // Two items share one chunk; then three more on their own chunks (two
  // evictions, which also release the shared chunk).
  auto shared = MakeChunk(7, /*episode_id=*/1);
  ASSERT_TRUE(table->InsertOrAssign(MakeItem(1, 1.0, {shared}), testing::kNoWait).ok());
  ASSERT_TRUE(table->InsertOrAssign(MakeItem(2, 1.0, {shared}), testing::kNoWait).ok());
  auto values = Values(*collector);
  EXPECT_EQ(values["tf_reverb_table_items"]["table=replay"], 2);
  EXPECT_EQ(values["tf_reverb_table_chunks"]["table=replay"], 1);
  EXPECT_EQ(values["tf_reverb_table_episodes"]["table=replay"], 1);
  const double chunk_bytes = values["tf_reverb_table_chunk_stored_bytes"]["table=replay"];
  EXPECT_GT(chunk_bytes, 0);
  EXPECT_EQ(values["tf_reverb_table_inserted_bytes_total"]["table=replay"], chunk_bytes);
  EXPECT_EQ(values["tf_reverb_table_chunk_uncompressed_bytes"]["table=replay"],
            shared->uncompressed_bytes());

  for (uint64_t key : {3, 4, 5}) ASSERT_TRUE(Insert(*table, key).ok());
  ASSERT_TRUE(SampleOne(*table).ok());
  ASSERT_TRUE(table
                  ->MutateItems({[] {
                                  deepmind::reverb::KeyWithPriority update;
                                  update.set_key(5);
                                  update.set_priority(2);
                                  return update;
                                }()},
                                {})
                  .ok());
  values = Values(*collector);
  EXPECT_EQ(values["tf_reverb_table_inserts_total"]["table=replay"], 5);
  EXPECT_EQ(values["tf_reverb_table_deletes_total"]["table=replay"], 2);
  EXPECT_EQ(values["tf_reverb_table_items"]["table=replay"], 3);
  EXPECT_EQ(values["tf_reverb_table_chunks"]["table=replay"], 3);
  EXPECT_EQ(values["tf_reverb_table_samples_total"]["table=replay"], 1);
  EXPECT_EQ(values["tf_reverb_table_priority_updates_total"]["table=replay"], 1);
  EXPECT_EQ(values["tf_reverb_table_max_size"]["table=replay"], 3);
  EXPECT_EQ(values["tf_reverb_table_rate_limiter_blocked_callers"]["operation=insert,table=replay"],
            0);

  // Reset empties the levels but never rewinds a counter.
  table->Reset();
  values = Values(*collector);
  EXPECT_EQ(values["tf_reverb_table_items"]["table=replay"], 0);
  EXPECT_EQ(values["tf_reverb_table_chunks"]["table=replay"], 0);
  EXPECT_EQ(values["tf_reverb_table_chunk_stored_bytes"]["table=replay"], 0);
  EXPECT_EQ(values["tf_reverb_table_inserts_total"]["table=replay"], 5);
  // Without a checkpointer the checkpoint families are there, all zero.
  EXPECT_EQ(values["tf_reverb_checkpoint_duration_seconds"][""], 0);
  EXPECT_EQ(values["tf_reverb_checkpoint_save_failures_total"][""], 0);
  EXPECT_GT(values["process_threads"][""], 0);
  EXPECT_EQ(values["tf_reverb_rpc_calls_total"]["method=InsertStream"], 0);
}

TEST(MetricsCollectorTest, BlockedSamplesAreCountedWhileTheyWaitAndTimedAfter) {
  auto table = MakeTable(Uniform(), Fifo(), 10, 0, MinSize(1), "t");
  auto collector = std::make_shared<MetricsCollector>(std::vector<std::shared_ptr<Table>>{table},
                                                      nullptr, nullptr);
  auto waker = std::make_shared<Table::Waker>([] {});
  std::vector<SampledItem> out;
  ASSERT_FALSE(*table->TrySampleBatch(1, &out, waker));
  EXPECT_EQ(
      Values(
          *collector)["tf_reverb_table_rate_limiter_blocked_callers"]["operation=sample,table=t"],
      1);
  ASSERT_TRUE(Insert(*table, 1).ok());  // wakes the sampler
  auto values = Values(*collector);
  EXPECT_EQ(values["tf_reverb_table_rate_limiter_blocked_callers"]["operation=sample,table=t"], 0);
  EXPECT_EQ(values["tf_reverb_table_rate_limiter_blocked_seconds"]["operation=sample,table=t"], 1);
  // A withdrawn waiter is not a blocked caller.
  auto withdrawn = std::make_shared<Table::Waker>([] {});
  auto queue = MakeTable(Fifo(), Fifo(), 10, 0, testing::QueueLimiter(1), "q");
  ASSERT_TRUE(Insert(*queue, 1).ok());
  TableItem item = MakeItem(2);
  ASSERT_FALSE(*queue->TryInsertOrAssign(item, withdrawn));
  EXPECT_EQ(queue->blocked_callers().inserts, 1);
  withdrawn.reset();
  EXPECT_EQ(queue->blocked_callers().inserts, 0);
}

// GET `path` from 127.0.0.1:port over a plain socket; the whole response.
std::string HttpGet(int port, const std::string& path) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  const std::string request = absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
  EXPECT_EQ(write(fd, request.data(), request.size()), static_cast<ssize_t>(request.size()));
  std::string response;
  char buffer[4096];
  for (ssize_t n; (n = read(fd, buffer, sizeof(buffer))) > 0;) response.append(buffer, n);
  close(fd);
  return response;
}

TEST(MetricsExporterTest, ServesTheTextFormatOnTheBoundPort) {
  auto table = MakeTable(Uniform(), Fifo(), 10, 0, MinSize(1), "replay");
  ASSERT_TRUE(Insert(*table, 1).ok());
  auto collector = std::make_shared<MetricsCollector>(std::vector<std::shared_ptr<Table>>{table},
                                                      std::make_shared<RpcObserver>(), nullptr);
  MetricsOptions options;
  options.port = 0;
  options.host = "127.0.0.1";
  absl::StatusOr<std::unique_ptr<MetricsExporter>> exporter =
      MetricsExporter::Start(options, collector);
  ASSERT_TRUE(exporter.ok()) << exporter.status();
  const int port = (*exporter)->port();
  ASSERT_GT(port, 0);
  const std::string page = HttpGet(port, "/metrics");
  EXPECT_NE(page.find("200 OK"), std::string::npos) << page;
  EXPECT_NE(page.find("# TYPE tf_reverb_table_inserts_total counter\n"), std::string::npos);
  EXPECT_NE(page.find("tf_reverb_table_inserts_total{table=\"replay\"} 1\n"), std::string::npos)
      << page;
  EXPECT_NE(page.find("tf_reverb_rpc_duration_seconds_bucket{method=\"ServerInfo\",le=\"+Inf\"} 0"),
            std::string::npos);

  // The same port again is UNAVAILABLE, naming it; a bad port INVALID_ARGUMENT.
  options.port = port;
  absl::StatusOr<std::unique_ptr<MetricsExporter>> again =
      MetricsExporter::Start(options, collector);
  EXPECT_TRUE(absl::IsUnavailable(again.status())) << again.status();
  EXPECT_NE(again.status().message().find(absl::StrCat("127.0.0.1:", port)), std::string::npos);
  options.port = 70000;
  EXPECT_TRUE(absl::IsInvalidArgument(MetricsExporter::Start(options, collector).status()));
}

}  // namespace
}  // namespace tf_reverb
