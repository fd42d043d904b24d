#include "server/in_process_tables.h"

#include <memory>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "server/table.h"
#include "server/testing/table_testing.h"

namespace tf_reverb {
namespace {

using namespace ::tf_reverb::testing;  // NOLINT: test builders

TEST(InProcessTablesTest, FindsRegisteredTablesByPortAndNameUntilUnregistered) {
  auto a = MakeTable(Fifo(), Fifo(), 10, 0, MinSize(1), "a");
  auto b = MakeTable(Fifo(), Fifo(), 10, 0, MinSize(1), "b");
  InProcessTables::Register(40001, {a, b}, /*readable=*/true);
  EXPECT_EQ(InProcessTables::Find(40001, "a"), a);
  EXPECT_EQ(InProcessTables::Find(40001, "b"), b);
  EXPECT_EQ(InProcessTables::Find(40001, "c"), nullptr);
  EXPECT_EQ(InProcessTables::Find(40002, "a"), nullptr);
  InProcessTables::Unregister(40001);
  EXPECT_EQ(InProcessTables::Find(40001, "a"), nullptr);
  InProcessTables::Unregister(40001);  // a no-op
}

TEST(InProcessTablesTest, UnreadableServersAreNeverFound) {
  auto a = MakeTable(Fifo(), Fifo(), 10, 0, MinSize(1), "a");
  InProcessTables::Register(40003, {a}, /*readable=*/false);
  EXPECT_EQ(InProcessTables::Find(40003, "a"), nullptr);
  // A new server on the port replaces the registration.
  InProcessTables::Register(40003, {a}, /*readable=*/true);
  EXPECT_EQ(InProcessTables::Find(40003, "a"), a);
  InProcessTables::Unregister(40003);
}

TEST(InProcessTablesTest, AFoundTableOutlivesItsRegistration) {
  std::shared_ptr<Table> found;
  {
    auto a = MakeTable(Fifo(), Fifo(), 10, 0, MinSize(1), "a");
    InProcessTables::Register(40004, {a}, /*readable=*/true);
    found = InProcessTables::Find(40004, "a");
    InProcessTables::Unregister(40004);
  }
  ASSERT_NE(found, nullptr);
  EXPECT_EQ(found->name(), "a");
}

TEST(InProcessTablesTest, ConcurrentRegistrationsAndLookups) {
  auto a = MakeTable(Fifo(), Fifo(), 10, 0, MinSize(1), "a");
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t, &a] {
      const int port = 41000 + t;
      for (int i = 0; i < 1000; ++i) {
        InProcessTables::Register(port, {a}, /*readable=*/true);
        EXPECT_EQ(InProcessTables::Find(port, "a"), a);
        InProcessTables::Unregister(port);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(InProcessTables::Find(41000 + t, "a"), nullptr);
}

}  // namespace
}  // namespace tf_reverb
