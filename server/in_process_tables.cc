#include "server/in_process_tables.h"

#include <utility>

#include "absl/base/const_init.h"
#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"

namespace tf_reverb {
namespace {

// Port -> table name -> table; only readable servers' tables are kept.
using TablesByName = absl::flat_hash_map<std::string, std::shared_ptr<Table>>;

absl::Mutex registry_mu(absl::kConstInit);

absl::flat_hash_map<int, TablesByName>& Registry() ABSL_EXCLUSIVE_LOCKS_REQUIRED(registry_mu) {
  static auto* registry = new absl::flat_hash_map<int, TablesByName>();
  return *registry;
}

}  // namespace

void InProcessTables::Register(int port, const std::vector<std::shared_ptr<Table>>& tables,
                               bool readable) {
  TablesByName by_name;
  if (readable) {
    for (const auto& table : tables) by_name[table->name()] = table;
  }
  absl::MutexLock lock(&registry_mu);
  Registry()[port] = std::move(by_name);
}

void InProcessTables::Unregister(int port) {
  absl::MutexLock lock(&registry_mu);
  Registry().erase(port);
}

std::shared_ptr<Table> InProcessTables::Find(int port, const std::string& name) {
  absl::MutexLock lock(&registry_mu);
  auto server = Registry().find(port);
  if (server == Registry().end()) return nullptr;
  auto table = server->second.find(name);
  return table == server->second.end() ? nullptr : table->second;
}

}  // namespace tf_reverb
