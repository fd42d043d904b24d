#include "server/table_extension.h"

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "schema.pb.h"
#include "server/table.h"
#include "server/testing/table_testing.h"

namespace tf_reverb {
namespace {

using namespace ::tf_reverb::testing;  // NOLINT: test builders
using ::deepmind::reverb::KeyWithPriority;
using ::testing::ElementsAre;

// Records every hook as "hook:key:priority:times_sampled".
class RecordingExtension : public TableExtension {
 public:
  void OnInsert(const ExtensionItem& item) override { Record("insert", item); }
  void OnSample(const ExtensionItem& item) override { Record("sample", item); }
  void OnUpdate(const ExtensionItem& item) override { Record("update", item); }
  void OnDelete(const ExtensionItem& item) override { Record("delete", item); }
  void OnReset() override { events.push_back("reset"); }
  std::string DebugString() const override { return "RecordingExtension"; }

  std::vector<std::string> events;

 private:
  void Record(const char* hook, const ExtensionItem& item) {
    events.push_back(
        absl::StrCat(hook, ":", item.data.item.key(), ":", item.priority, ":", item.times_sampled));
  }
};

TEST(TableExtensionTest, HooksSeeEveryChangeInOrder) {
  auto extension = std::make_shared<RecordingExtension>();
  auto table = MakeTable(Fifo(), Fifo(), /*max_size=*/2, /*max_times_sampled=*/2, MinSize(1), "t",
                         {extension});
  ASSERT_TRUE(Insert(*table, 1, 1.0).ok());
  ASSERT_TRUE(Insert(*table, 2, 2.0).ok());
  ASSERT_TRUE(Insert(*table, 2, 5.0).ok());  // existing key: an update
  ASSERT_TRUE(Insert(*table, 3, 3.0).ok());  // evicts key 1 (FIFO remover)
  ASSERT_TRUE(SampleOne(*table).ok());       // key 2, first sample
  ASSERT_TRUE(SampleOne(*table).ok());       // key 2 again: reaches max_times_sampled
  ASSERT_TRUE(table->MutateItems({}, {3}).ok());
  table->Reset();
  EXPECT_THAT(
      extension->events,
      ElementsAre("insert:1:1:0", "insert:2:2:0", "update:2:5:0", "insert:3:3:0", "delete:1:1:0",
                  "sample:2:5:1", "sample:2:5:2", "delete:2:5:2", "delete:3:3:0", "reset"));
}

TEST(TableExtensionTest, RejectedPriorityCallsNoHook) {
  auto extension = std::make_shared<RecordingExtension>();
  auto table = MakeTable(Prioritized(1.0), Fifo(), 10, 0, MinSize(1), "t", {extension});
  ASSERT_TRUE(Insert(*table, 1, 1.0).ok());
  EXPECT_FALSE(Insert(*table, 2, -1.0).ok());
  EXPECT_FALSE(table
                   ->MutateItems({[] {
                                   KeyWithPriority update;
                                   update.set_key(1);
                                   update.set_priority(-3.0);
                                   return update;
                                 }()},
                                 {})
                   .ok());
  EXPECT_THAT(extension->events, ElementsAre("insert:1:1:0"));
}

}  // namespace
}  // namespace tf_reverb
