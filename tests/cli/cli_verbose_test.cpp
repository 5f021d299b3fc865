// `turnstile run -v/-vv` (cli/verbose_log.h) with stderr on a
// pseudo-terminal, against a real redis-server that wants a password: the
// waiting line and its refresh while another process holds the lock, the
// acquisition, renewals (-vv) and the loss when the key is deleted, each
// with a local timestamp; never the password. Quiet without -v. A fair
// waiter's place in the queue; a reconnection after CLIENT KILL.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <signal.h>

#include <fstream>
#include <memory>
#include <regex>
#include <string>
#include <vector>

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

// A fair lock's waiters are told their place: a holder and two queued
// waiters ahead of a third, each waiter's stderr on a pseudo-terminal;
// then served in that order.
TEST_F(CliVerboseTest, FairWaitersAreToldTheirPlaceInTheQueue) {
  CliProcess holder({"run", "--redis", url(), "--fair", "--lease", "30s", "verbose:fair"});
  ASSERT_TRUE(eventually([&] { return holder.out().find("holding 'verbose:fair'") != std::string::npos; }))
      << holder.err();
  const std::vector<std::string> told = {"next in the queue", "1 ahead in the queue", "2 ahead in the queue"};
  std::vector<std::unique_ptr<CliProcess>> waiters;
  for (const std::string& place : told) {
    waiters.push_back(std::make_unique<CliProcess>(
        std::vector<std::string>{"run", "-v", "--redis", url(), "--fair", "verbose:fair", "--", "true"},
        CliProcess::Environment{}, CliProcessOptions{.stderr_on_terminal = true}));
    const CliProcess& waiter = *waiters.back();
    ASSERT_TRUE(eventually([&] { return contains(waiter, "waiting for 'verbose:fair' (fair, attempt 1)"); }))
        << waiter.err();
    const std::string text = waiter.err();
    const std::string line = text.substr(text.find("waiting for 'verbose:fair'"));
    EXPECT_THAT(line.substr(0, line.find('\n')), HasSubstr(place));
  }
  holder.signal(SIGTERM);
  EXPECT_EQ(holder.wait_for(), 0) << holder.err();
  for (const auto& waiter : waiters) {
    EXPECT_EQ(waiter->wait_for(), 0) << waiter->err();
    EXPECT_THAT(waiter->err(), HasSubstr("acquired 'verbose:fair' (fair) after "));
  }
}

// A fair waiter tries again about every 1.7 s: at -v it is told once, then
// every 5 s a line read afresh, where the old line counted the first
// try's reading down to zero while the holder renewed. Its place did not
// change, so no other "waiting" line; -w's deadline counts down.
TEST_F(CliVerboseTest, AWaitIsRefreshedFromRedisEveryFiveSecondsNotAtEachTry) {
  CliProcess holder({"run", "--redis", url(), "--fair", "--lease", "3s", "verbose:cadence"});
  ASSERT_TRUE(eventually([&] { return holder.out().find("holding 'verbose:cadence'") != std::string::npos; }))
      << holder.err();
  CliProcess waiter({"run", "-v", "--redis", url(), "--fair", "-w", "20s", "verbose:cadence", "--", "true"}, {},
                    {.stderr_on_terminal = true});
  ASSERT_TRUE(eventually([&] { return contains(waiter, "still waiting for 'verbose:cadence'"); })) << waiter.err();
  const std::string told = waiter.err();
  std::size_t waiting_lines = 0;
  for (std::size_t at = told.find(" waiting for 'verbose:cadence'"); at != std::string::npos;
       at = told.find(" waiting for 'verbose:cadence'", at + 1)) {
    if (at < 5 || told.compare(at - 5, 5, "still") != 0) ++waiting_lines;
  }
  EXPECT_EQ(waiting_lines, 1u) << told;
  const std::string refreshed = told.substr(told.find("still waiting for 'verbose:cadence'"));
  const std::string line = refreshed.substr(0, refreshed.find('\n'));
  std::smatch lease;
  ASSERT_TRUE(std::regex_search(line, lease, std::regex(R"(: holder's lease (\d+)\.\d{3} s left)"))) << line;
  EXPECT_GE(std::stoi(lease[1]), 1) << "renewed every second: never near zero; " << line;
  std::smatch gives_up;
  ASSERT_TRUE(std::regex_search(line, gives_up, std::regex(R"(gives up in (\d+)\.\d{3} s)"))) << line;
  EXPECT_GT(std::stoi(gives_up[1]), 5) << line;
  EXPECT_LT(std::stoi(gives_up[1]), 16) << line;
  EXPECT_THAT(line, HasSubstr(" by ")) << line;
  holder.signal(SIGTERM);
  EXPECT_EQ(holder.wait_for(), 0) << holder.err();
  EXPECT_EQ(waiter.wait_for(), 0) << waiter.err();
}

// A connection killed under a holder (CLIENT KILL): the client opens
// another to the same server, says so at -v ("reconnected", not
// "server restarted"), and keeps the lock.
TEST_F(CliVerboseTest, AKilledConnectionIsToldAsAReconnectionAndTheLockIsKept) {
  const std::string go_on = scratch_.file("go-on");
  CliProcess run({"run", "-v", "--redis", url(), "--lease", "3s", "verbose:reconnect", "--", "sh", "-c",
                  "while [ ! -e " + go_on + " ]; do sleep 0.05; done"},
                 {}, {.stderr_on_terminal = true});
  ASSERT_TRUE(eventually([&] { return contains(run, "acquired 'verbose:reconnect'"); })) << run.err();
  // Every command connection but redis-cli's own; renewals go on.
  EXPECT_THAT(server().command({"CLIENT", "KILL", "TYPE", "normal"}), Not(HasSubstr("(integer) 0")));
  const std::string reconnected = "reconnected to 127.0.0.1:" + std::to_string(server().port());
  ASSERT_TRUE(eventually([&] { return contains(run, reconnected); })) << run.err();
  EXPECT_THAT(run.err(), Not(HasSubstr("server restarted")));
  std::ofstream(go_on) << "";
  EXPECT_EQ(run.wait_for(), 0) << run.err();
  EXPECT_THAT(run.err(), Not(HasSubstr("lost 'verbose:reconnect'")));
  EXPECT_FALSE(exists("verbose:reconnect"));
}

}  // namespace
}  // namespace turnstile::testing
