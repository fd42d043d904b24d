#include "server/item_rows_cache.h"

#include <atomic>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "gtest/gtest.h"

namespace tf_reverb {
namespace {

using Decoded = absl::StatusOr<std::optional<std::string>>;

TEST(ItemRowsCacheTest, DecodesOnceThenServesTheBytes) {
  ItemRowsCache cache;
  EXPECT_TRUE(cache.Peek().empty());
  int calls = 0;
  auto decode = [&calls]() -> Decoded {
    ++calls;
    return std::optional<std::string>(std::string("rows\0bytes", 10));
  };
  absl::StatusOr<absl::string_view> first = cache.Get(decode);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(*first, absl::string_view("rows\0bytes", 10));
  absl::StatusOr<absl::string_view> second = cache.Get(decode);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->data(), first->data());  // the same bytes, not a copy
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(cache.Peek().data(), first->data());
}

TEST(ItemRowsCacheTest, RemembersThatAnItemIsNotCached) {
  ItemRowsCache cache;
  int calls = 0;
  auto decode = [&calls]() -> Decoded {
    ++calls;
    return std::optional<std::string>();
  };
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<absl::string_view> rows = cache.Get(decode);
    ASSERT_TRUE(rows.ok());
    EXPECT_TRUE(rows->empty());
  }
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(cache.Peek().empty());
}

TEST(ItemRowsCacheTest, ErrorsAreReturnedAndNotCached) {
  ItemRowsCache cache;
  absl::StatusOr<absl::string_view> failed =
      cache.Get([]() -> Decoded { return absl::DataLossError("corrupt chunk"); });
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kDataLoss);
  absl::StatusOr<absl::string_view> rows =
      cache.Get([]() -> Decoded { return std::optional<std::string>("ok"); });
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ(*rows, "ok");
}

TEST(ItemRowsCacheTest, CopiesAndAssignmentsStartEmpty) {
  ItemRowsCache cache;
  ASSERT_TRUE(cache.Get([]() -> Decoded { return std::optional<std::string>("a"); }).ok());
  ItemRowsCache copy(cache);
  EXPECT_TRUE(copy.Peek().empty());
  EXPECT_EQ(*copy.Get([]() -> Decoded { return std::optional<std::string>("b"); }), "b");
  EXPECT_EQ(cache.Peek(), "a");
  cache = copy;
  EXPECT_TRUE(cache.Peek().empty());
  EXPECT_EQ(copy.Peek(), "b");
}

TEST(ItemRowsCacheTest, ConcurrentReadersAllGetTheOneInstalledValue) {
  constexpr int kThreads = 8;
  for (int round = 0; round < 50; ++round) {
    ItemRowsCache cache;
    std::atomic<int> calls{0};
    std::vector<const char*> seen(kThreads, nullptr);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&cache, &calls, &seen, t] {
        absl::StatusOr<absl::string_view> rows = cache.Get([&calls]() -> Decoded {
          calls.fetch_add(1);
          return std::optional<std::string>(std::string(100, 'x'));
        });
        if (rows.ok() && *rows == std::string(100, 'x')) seen[t] = rows->data();
      });
    }
    for (std::thread& thread : threads) thread.join();
    EXPECT_GE(calls.load(), 1);
    for (const char* data : seen) EXPECT_EQ(data, cache.Peek().data());
  }
}

}  // namespace
}  // namespace tf_reverb
