// `turnstile run -v/-vv` (cli/verbose_log.h) with stderr on a
// pseudo-terminal, against a real redis-server that wants a password: the
// waiting line and its refresh while another process holds the lock, the
// acquisition, renewals (-vv) and the loss when the key is deleted, each
// with a local timestamp; never the password. Quiet without -v.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <signal.h>

#include <regex>
#include <string>

#include "cli/cli_process.h"
#include "cli/cli_redis_test.h"
#include "redis_server.h"

namespace turnstile::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class CliVerboseTest : public CliRedisTest {};

bool contains(const CliProcess& process, const std::string& text) {
  return process.err().find(text) != std::string::npos;
}

TEST_F(CliVerboseTest, InATerminalTellsTheWaitTheAcquisitionRenewalsAndTheLossWithTimestamps) {
  RedisServer guarded({"--requirepass", "pa55word"});
  const CliProcess::Environment environment = {
      {"TURNSTILE_REDIS", "redis://:pa55word@127.0.0.1:" + std::to_string(guarded.port())}};
  // The holder's lease of 30 s: the waiter, told so, sleeps until a
  // release wakes it (or nearly 30 s), and its line is refreshed meanwhile.
  CliProcess holder({"run", "--lease", "30s", "--label", "verbose-holder", "verbose:held"}, environment);
  ASSERT_TRUE(eventually([&] { return holder.out().find("holding 'verbose:held'") != std::string::npos; }))
      << holder.err();

  CliProcess waiter({"run", "-vv", "--lease", "3s", "verbose:held", "--", "sleep", "60"}, environment,
                    {.stderr_on_terminal = true});
  ASSERT_TRUE(eventually([&] { return contains(waiter, "waiting for 'verbose:held' (reentrant, attempt 1)"); }))
      << waiter.err();
  EXPECT_THAT(waiter.err(), HasSubstr("holder's lease"));
  // Refreshed every 5 s while nothing changes.
  ASSERT_TRUE(eventually([&] { return contains(waiter, "still waiting for 'verbose:held'"); })) << waiter.err();
  // ... naming the holder, as Redis has it (its identity).
  {
    const std::string told = waiter.err();
    const std::string refreshed = told.substr(told.find("still waiting for 'verbose:held'"));
    const std::string line = refreshed.substr(0, refreshed.find('\n'));
    EXPECT_THAT(line, HasSubstr(" by "));
    EXPECT_THAT(line, HasSubstr("label \"verbose-holder\"")) << line;
  }

  holder.signal(SIGTERM);  // hold mode: releases and exits 0
  EXPECT_EQ(holder.wait_for(), 0) << holder.err();
  ASSERT_TRUE(eventually([&] { return contains(waiter, "acquired 'verbose:held' (reentrant) after "); }))
      << waiter.err();
  ASSERT_TRUE(eventually([&] { return contains(waiter, "renewed 'verbose:held' for 3.000 s"); })) << waiter.err();

  EXPECT_EQ(guarded.command({"DEL", "verbose:held"}), "(integer) 1");
  ASSERT_TRUE(eventually([&] { return contains(waiter, "lost 'verbose:held': gone"); })) << waiter.err();
  EXPECT_EQ(waiter.wait_for(), 75) << waiter.err();

  const std::string told = waiter.err();
  EXPECT_THAT(told, Not(HasSubstr("pa55word")));
  // Every event line starts with a local timestamp, to the millisecond.
  const std::regex stamped(
      R"(turnstile: \d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} (waiting|still waiting|acquired|renewed|woken|lost) )");
  for (const char* kind : {"waiting for", "still waiting", "acquired", "renewed", "lost 'verbose"}) {
    const std::size_t at = told.find(kind);
    ASSERT_NE(at, std::string::npos) << kind;
    const std::size_t line_start = told.rfind('\n', at);
    const std::string line = told.substr(line_start == std::string::npos ? 0 : line_start + 1,
                                         told.find('\n', at) - (line_start == std::string::npos ? 0 : line_start + 1));
    EXPECT_TRUE(std::regex_search(line, stamped)) << line;
  }
  EXPECT_THAT(holder.err(), Not(HasSubstr("acquired 'verbose:held'"))) << "quiet without -v";
}

// -v alone: the wait and the acquisition, no renewals.
TEST_F(CliVerboseTest, OneVTellsNoRenewals) {
  CliProcess run({"run", "-v", "--redis", url(), "--lease", "1s", "verbose:one", "--", "sleep", "2"}, {},
                 {.stderr_on_terminal = true});
  EXPECT_EQ(run.wait_for(), 0) << run.err();
  EXPECT_THAT(run.err(), HasSubstr("acquired 'verbose:one' (reentrant) after "));
  EXPECT_THAT(run.err(), Not(HasSubstr("renewed")));
}

}  // namespace
}  // namespace turnstile::testing
