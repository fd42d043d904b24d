#include "server/logging/event_log.h"

#include <cmath>
#include <cstdint>

#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace tf_reverb {
namespace {

const absl::Time kTime = absl::FromUnixMillis(1796000000123);

TEST(EventLogTest, TextIsKeyValueWithQuotingOnlyWhereNeeded) {
  EXPECT_EQ(FormatEvent(kTime, "reverb_server", "started",
                        {{"port", 8000},
                         {"tables", "a,b"},
                         {"on", true},
                         {"ratio", 0.5},
                         {"message", "Cannot read \"x\""},
                         {"empty", ""}},
                        LogFormat::kText),
            "ts=2026-11-30T00:53:20.123Z component=reverb_server event=started port=8000 "
            "tables=a,b on=true ratio=0.5 message=\"Cannot read \\\"x\\\"\" empty=\"\"");
}

TEST(EventLogTest, JsonKeepsKindsAndEscapes) {
  EXPECT_EQ(FormatEvent(kTime, "rpc", "rpc_error",
                        {{"code", "NOT_FOUND"},
                         {"calls", int64_t{3}},
                         {"seconds", 1.5},
                         {"ok", false},
                         {"message", "line\nnext \\ \"q\" \x01"},
                         {"nan", std::nan("")}},
                        LogFormat::kJson),
            "{\"ts\":\"2026-11-30T00:53:20.123Z\",\"component\":\"rpc\",\"event\":\"rpc_error\","
            "\"code\":\"NOT_FOUND\",\"calls\":3,\"seconds\":1.5,\"ok\":false,"
            "\"message\":\"line\\nnext \\\\ \\\"q\\\" \\u0001\",\"nan\":\"nan\"}");
}

TEST(EventLogTest, ParsesFormatNames) {
  LogFormat format = LogFormat::kText;
  EXPECT_TRUE(ParseLogFormat("json", &format));
  EXPECT_EQ(format, LogFormat::kJson);
  EXPECT_TRUE(ParseLogFormat("text", &format));
  EXPECT_EQ(format, LogFormat::kText);
  EXPECT_FALSE(ParseLogFormat("xml", &format));
  EXPECT_EQ(format, LogFormat::kText);
}

}  // namespace
}  // namespace tf_reverb
