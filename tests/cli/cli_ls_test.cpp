// `turnstile ls` end to end on a real redis-server: every kind under a
// pattern in one table (JSON: `status --json` per name), data and side
// keys left out, --limit cutting the listing short with a word on stderr,
// bad input a usage error.

#include <signal.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/cli_redis_test.h"

namespace turnstile::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::Not;

class CliLsTest : public CliRedisTest {
 protected:
  void SetUp() override { server().command({"FLUSHALL"}); }
};

TEST_F(CliLsTest, ListsEveryKindUnderThePattern) {
  CliProcess holder({"run", "--redis", url(), "ls:backup"});  // held until SIGTERM
  ASSERT_TRUE(eventually([&] { return holder.out().find("holding") != std::string::npos; })) << holder.err();
  ASSERT_EQ(run_cli({"run", "--redis", url(), "--permits", "3", "ls:slots", "--", "true"}).status, 0);
  server().command({"SET", "ls:user-data", "hello"});
  server().command({"SET", "elsewhere", "7"});

  const CliResult table = run_cli({"ls", "--redis", url(), "ls:*"});
  ASSERT_EQ(table.status, 0) << table.err;
  const std::vector<std::string> lines = [&] {
    std::vector<std::string> split;
    std::string line;
    for (char c : table.out) {
      if (c != '\n') {
        line += c;
        continue;
      }
      split.push_back(line);
      line.clear();
    }
    return split;
  }();
  ASSERT_EQ(lines.size(), 3u) << table.out;
  EXPECT_THAT(lines[0], MatchesRegex("NAME +FLAVOR +HELD +WAITING +AVAILABLE +LEASE +HOLDER"));
  // A lock hash without queue keys could be a fair lock's too: "?".
  EXPECT_THAT(lines[1], MatchesRegex("ls:backup +reentrant\\? +1 +0 +- +[0-9.]+s +[^ ]+:[0-9]+"));
  EXPECT_THAT(lines[2], MatchesRegex("ls:slots +semaphore\\? +0 +0 +3 +- +-"));
  EXPECT_THAT(table.out, Not(HasSubstr("user-data")));
  EXPECT_EQ(table.err, "");

  const CliResult json = run_cli({"ls", "--redis", url(), "--json"});
  ASSERT_EQ(json.status, 0) << json.err;
  const nlohmann::json listing = nlohmann::json::parse(json.out);
  EXPECT_EQ(listing["pattern"], "*");
  EXPECT_EQ(listing["complete"], true);
  ASSERT_EQ(listing["locks"].size(), 3u) << json.out;  // "elsewhere" = 7: a semaphore's count, for all Redis can tell
  EXPECT_EQ(listing["locks"][0]["name"], "elsewhere");
  EXPECT_EQ(listing["locks"][1]["name"], "ls:backup");
  EXPECT_EQ(listing["locks"][1]["holder_count"], 1);
  EXPECT_EQ(listing["locks"][2]["permits_available"], 3);

  const CliResult cut = run_cli({"ls", "--redis", url(), "--limit", "1"});
  EXPECT_EQ(cut.status, 0) << cut.err;
  EXPECT_THAT(cut.err, HasSubstr("more locks match '*' than --limit 1 lists"));

  holder.signal(SIGTERM);
  EXPECT_EQ(holder.wait_for(), 0) << holder.err();
  const CliResult after = run_cli({"ls", "--redis", url(), "ls:*"});
  EXPECT_THAT(after.out, Not(HasSubstr("ls:backup")));
}

TEST_F(CliLsTest, BadInputIsAUsageError) {
  EXPECT_EQ(run_cli({"ls", "--redis", url(), ""}).status, 64);
  EXPECT_EQ(run_cli({"ls", "--redis", url(), "--limit", "0"}).status, 64);
  EXPECT_EQ(run_cli({"ls", "--redis", "http://127.0.0.1"}).status, 64);
  EXPECT_EQ(run_cli({"ls", "--redis", "redis://127.0.0.1:1"}).status, 69);
}

}  // namespace
}  // namespace turnstile::testing
