// tf_reverb.pybind: the Python extension, which *is* the core library of the
// process (the server, tables, client and the C ABI the TF kernels dlopen).
//
// Python must import it with RTLD_DEEPBIND (tf_reverb/__init__.py does) so
// its Debian gRPC/protobuf never bind to the copies TensorFlow exports.
//
// Errors map as pybind_common.h says. The GIL is released in every call that
// can block or do real work.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "pybind11/pybind11.h"
#include "pybind11/stl.h"
#include "server/checkpointing/checkpointer.h"
#include "server/client/client.h"
#include "server/rate_limiter.h"
#include "server/selectors/selector.h"
#include "server/service/server.h"
#include "server/table.h"
#include "server/wal/write_ahead_log.h"
#include "tf_reverb/pybind_common.h"

namespace py = pybind11;

namespace tf_reverb {
namespace {

deepmind::reverb::KeyDistributionOptions ParseOptions(const py::bytes& serialized) {
  deepmind::reverb::KeyDistributionOptions options;
  if (!options.ParseFromString(std::string(serialized))) {
    throw py::value_error("Invalid serialized KeyDistributionOptions.");
  }
  return options;
}

std::shared_ptr<Table> MakeTable(const std::string& name, const py::bytes& sampler,
                                 const py::bytes& remover, int64_t max_size,
                                 int32_t max_times_sampled, double samples_per_insert,
                                 int64_t min_size_to_sample, double min_diff, double max_diff,
                                 const py::bytes& signature, bool check_item_signatures,
                                 std::optional<uint64_t> seed, std::optional<int64_t> max_staleness,
                                 bool evict_stale) {
  return ValueOrRaise(Table::Create(Table::Config{
      name,
      ValueOrRaise(CreateSelector(ParseOptions(sampler))),
      ValueOrRaise(CreateSelector(ParseOptions(remover))),
      max_size,
      max_times_sampled,
      ValueOrRaise(RateLimiter::Create(samples_per_insert, min_size_to_sample, min_diff, max_diff)),
      std::string(signature),
      {},
      check_item_signatures,
      seed,
      max_staleness,
      evict_stale}));
}

}  // namespace

PYBIND11_MODULE(pybind, m) {
  m.doc() = "tf_reverb's C++ core (private API).";
  // Debian builds absl without NDEBUG, which leaves mutex deadlock detection
  // on: every lock then updates one global lock-order graph. The C++ tests
  // keep it; production code turns it off.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);

  py::class_<Table, std::shared_ptr<Table>>(m, "Table")
      .def(py::init(&MakeTable), py::arg("name"), py::arg("sampler"), py::arg("remover"),
           py::arg("max_size"), py::arg("max_times_sampled"), py::arg("samples_per_insert"),
           py::arg("min_size_to_sample"), py::arg("min_diff"), py::arg("max_diff"),
           py::arg("signature"), py::arg("check_item_signatures") = false,
           py::arg("seed") = std::nullopt, py::arg("max_staleness") = std::nullopt,
           py::arg("evict_stale") = false)
      .def("name", &Table::name)
      .def("info", [](const Table& table) { return py::bytes(table.Info().SerializeAsString()); })
      .def("can_sample", &Table::CanSample)
      .def("can_insert", &Table::CanInsert)
      .def("size", &Table::size)
      .def("debug_string", &Table::DebugString);

  py::class_<Checkpointer, std::shared_ptr<Checkpointer>>(m, "Checkpointer")
      .def(py::init([](std::string root, int keep_latest, std::string fallback_checkpoint_path,
                       bool fall_back_to_older, bool keep_table_config, bool incremental) {
             CheckpointerOptions options;
             options.incremental = incremental;
             options.keep_latest = keep_latest;
             options.fallback_checkpoint_path = std::move(fallback_checkpoint_path);
             options.fall_back_to_older = fall_back_to_older;
             options.restore_mode = keep_table_config ? Table::RestoreMode::kTableConfig
                                                      : Table::RestoreMode::kCheckpointConfig;
             return std::make_shared<Checkpointer>(std::move(root), options);
           }),
           py::arg("root"), py::arg("keep_latest"), py::arg("fallback_checkpoint_path"),
           py::arg("fall_back_to_older"), py::arg("keep_table_config"),
           py::arg("incremental") = true)
      .def("root", &Checkpointer::root)
      .def("debug_string", &Checkpointer::DebugString);

  RegisterSecurityBindings(m);
  py::class_<Server>(m, "Server")
      .def(py::init([](std::vector<std::shared_ptr<Table>> tables, int port,
                       std::shared_ptr<Checkpointer> checkpointer,
                       std::shared_ptr<ServerSecurity> security, int metrics_port,
                       std::string metrics_host, std::string wal_dir,
                       const std::string& wal_durability, double wal_fsync_interval_seconds) {
             py::gil_scoped_release release;
             MetricsOptions metrics;
             metrics.port = metrics_port;
             metrics.host = std::move(metrics_host);
             std::shared_ptr<WriteAheadLog> log;
             if (!wal_dir.empty()) {
               WalOptions options;
               options.durability = ValueOrRaise(ParseWalDurability(wal_durability));
               options.fsync_interval = absl::Seconds(wal_fsync_interval_seconds);
               log = ValueOrRaise(WriteAheadLog::Open(std::move(wal_dir), options));
             }
             return ValueOrRaise(Server::Start(std::move(tables), port, std::move(checkpointer),
                                               std::move(security), metrics, std::move(log)));
           }),
           py::arg("tables"), py::arg("port"), py::arg("checkpointer") = nullptr,
           py::arg("security") = nullptr, py::arg("metrics_port") = -1,
           py::arg("metrics_host") = "", py::arg("wal_dir") = "",
           py::arg("wal_durability") = "sync", py::arg("wal_fsync_interval_seconds") = 0.1)
      .def_property_readonly("port", &Server::port)
      .def_property_readonly("metrics_port", &Server::metrics_port)
      .def("stop", &Server::Stop, py::call_guard<py::gil_scoped_release>())
      .def("debug_string", &Server::DebugString);

  // Raises ValueError for a malformed sharded target (server/client/shard_target.h);
  // returns whether the target names several servers.
  m.def("check_target", [](const std::string& target) {
    absl::StatusOr<ShardTarget> parsed = ParseShardTarget(target);
    MaybeRaise(parsed.status());
    return parsed->sharded();
  });

  py::class_<Client>(m, "Client")
      .def(py::init<std::string>(), py::arg("server_address"))
      .def("setup_error", [](const Client& client) { MaybeRaise(client.setup_status()); })
      .def("server_info",
           [](Client& client, int64_t timeout_ms) {
             absl::StatusOr<deepmind::reverb::ServerInfoResponse> info;
             {
               py::gil_scoped_release release;
               info = client.ServerInfo(TimeoutFromMs(timeout_ms));
             }
             return py::bytes(ValueOrRaise(std::move(info)).SerializeAsString());
           })
      .def("mutate_priorities",
           [](Client& client, const std::string& table,
              const std::vector<std::pair<uint64_t, double>>& updates,
              const std::vector<uint64_t>& deletes) {
             std::vector<deepmind::reverb::KeyWithPriority> protos(updates.size());
             for (size_t i = 0; i < updates.size(); ++i) {
               protos[i].set_key(updates[i].first);
               protos[i].set_priority(updates[i].second);
             }
             py::gil_scoped_release release;
             absl::Status status = client.MutatePriorities(table, protos, deletes);
             py::gil_scoped_acquire acquire;
             MaybeRaise(status);
           })
      .def("reset",
           [](Client& client, const std::string& table) {
             absl::Status status;
             {
               py::gil_scoped_release release;
               status = client.Reset(table);
             }
             MaybeRaise(status);
           })
      .def(
          "checkpoint",
          [](Client& client, bool full) {
            absl::StatusOr<std::vector<std::string>> paths;
            {
              py::gil_scoped_release release;
              paths = client.Checkpoint(full);
            }
            return ValueOrRaise(std::move(paths));
          },
          py::arg("full") = false)
      .def("lookup",
           [](Client& client, const std::string& table, const std::vector<uint64_t>& keys,
              int64_t timeout_ms) {
             absl::StatusOr<Client::LookupResult> result;
             {
               py::gil_scoped_release release;
               result = client.Lookup(table, keys, TimeoutFromMs(timeout_ms));
             }
             Client::LookupResult found = ValueOrRaise(std::move(result));
             // ([(info tuple, columns)], missing keys)
             py::list items;
             for (const Sample& sample : found.found) {
               items.append(py::make_tuple(InfoTuple(sample), SampleColumns(sample)));
             }
             return py::make_tuple(items, found.missing);
           })
      .def("set_policy_version",
           [](Client& client, const std::string& table, int64_t version, int64_t timeout_ms) {
             absl::StatusOr<int64_t> stale;
             {
               py::gil_scoped_release release;
               stale = client.SetPolicyVersion(table, version, TimeoutFromMs(timeout_ms));
             }
             return ValueOrRaise(std::move(stale));
           })
      .def("table_stats",
           [](Client& client, const std::string& table, int64_t timeout_ms) {
             absl::StatusOr<deepmind::reverb::TableStatsResponse> stats;
             {
               py::gil_scoped_release release;
               stats = client.TableStats(table, TimeoutFromMs(timeout_ms));
             }
             return py::bytes(ValueOrRaise(std::move(stats)).SerializeAsString());
           })
      .def("scan",
           [](Client& client, const std::string& table, size_t server, uint64_t start,
              int64_t max_items, int64_t timeout_ms) {
             absl::StatusOr<Client::ScanBatch> batch;
             {
               py::gil_scoped_release release;
               batch = client.Scan(table, server, start, max_items, TimeoutFromMs(timeout_ms));
             }
             Client::ScanBatch got = ValueOrRaise(std::move(batch));
             // ([(info tuple, columns)], next start, done)
             py::list items;
             for (const Sample& sample : got.items) {
               items.append(py::make_tuple(InfoTuple(sample), SampleColumns(sample)));
             }
             return py::make_tuple(items, got.next, got.done);
           })
      .def_property_readonly("sharded", &Client::sharded)
      .def("shard_addresses",
           [](Client& client) {
             absl::StatusOr<std::vector<std::string>> addresses;
             {
               py::gil_scoped_release release;
               addresses = client.ShardAddresses();
             }
             return ValueOrRaise(std::move(addresses));
           })
      .def("shard_server_info",
           [](Client& client, int64_t timeout_ms) {
             absl::StatusOr<std::vector<Client::ShardInfo>> infos;
             {
               py::gil_scoped_release release;
               infos = client.ShardServerInfo(TimeoutFromMs(timeout_ms));
             }
             // [(address, serialized ServerInfoResponse or None, error text)]
             py::list result;
             for (const Client::ShardInfo& info : ValueOrRaise(std::move(infos))) {
               if (info.status.ok()) {
                 result.append(py::make_tuple(
                     info.address, py::bytes(info.response.SerializeAsString()), py::none()));
               } else {
                 result.append(py::make_tuple(info.address, py::none(), info.status.ToString()));
               }
             }
             return result;
           })
      .def(
          "insert",
          [](Client& client, const py::list& columns,
             const std::vector<std::pair<std::string, double>>& priorities,
             std::optional<int64_t> policy_version) {
            std::vector<Tensor> step;
            for (const py::handle& column : columns) {
              py::tuple parts = column.cast<py::tuple>();
              step.push_back(TensorFromPython(parts[0].cast<int>(),
                                              parts[1].cast<std::vector<int64_t>>(),
                                              py::reinterpret_borrow<py::object>(parts[2])));
            }
            absl::Status status;
            {
              py::gil_scoped_release release;
              status = client.InsertStep(step, priorities, policy_version);
            }
            MaybeRaise(status);
          },
          py::arg("columns"), py::arg("priorities"), py::arg("policy_version") = std::nullopt);

  RegisterSelectorBindings(m);
  RegisterSamplerBindings(m);
  RegisterWriterBindings(m);
  RegisterStructuredBindings(m);
}

}  // namespace tf_reverb
