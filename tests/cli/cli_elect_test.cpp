// End to end: `turnstile elect` and `turnstile leader` on a real
// redis-server, with real processes killed (SIGKILL) and stopped (SIGSTOP).
// Every wait is bounded.

#include <signal.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cli_process.h"
#include "cli/cli_redis_test.h"

namespace turnstile::testing {
namespace {

using std::chrono::milliseconds;
using ::testing::HasSubstr;

constexpr int kConflict = 1;
constexpr int kLockLost = 75;

class CliElectTest : public CliRedisTest {
 protected:
  // `turnstile elect --redis URL extra... NAME -- sh -c SCRIPT`.
  std::vector<std::string> elect_sh(const std::string& name, const std::string& script,
                                    std::vector<std::string> options = {}) const {
    std::vector<std::string> args = {"elect", "--redis", url()};
    args.insert(args.end(), options.begin(), options.end());
    args.insert(args.end(), {name, "--", "sh", "-c", script});
    return args;
  }
  // A command that appends "<who> <term>" to `log` every 50 ms, for ever.
  static std::string acting(const std::string& who, const std::string& log) {
    return "while true; do echo \"" + who + " $TURNSTILE_LEADER_TERM\" >> '" + log + "'; sleep 0.05; done";
  }
  // The lines of `log`, in the order they were appended.
  static std::vector<std::string> lines_of(const std::string& log) {
    std::vector<std::string> lines;
    std::istringstream in(read_file(log));
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
  }
};

TEST_F(CliElectTest, TheLeaderRunsTheCommandAndResignsWhenItEnds) {
  const CliResult nobody = run_cli({"leader", "--redis", url(), "elect:basic"});
  EXPECT_EQ(nobody.status, kConflict) << nobody.err;
  EXPECT_THAT(nobody.out, HasSubstr("leader:      none"));

  const std::string ready = scratch_.file("ready");
  CliProcess leader(
      elect_sh("elect:basic",
               "echo \"term=$TURNSTILE_LEADER_TERM value=$TURNSTILE_LEADER_VALUE\"; touch '" + ready + "'; sleep 30",
               {"--value", "host-a:8080"}));
  ASSERT_TRUE(eventually([&] { return file_exists(ready); }));
  const CliResult shown = run_cli({"leader", "--redis", url(), "--json", "elect:basic"});
  EXPECT_EQ(shown.status, 0) << shown.err;
  EXPECT_THAT(shown.out, HasSubstr("\"value\": \"host-a:8080\""));
  EXPECT_THAT(shown.out, HasSubstr("\"leads\": true"));
  const CliResult second = run_cli(elect_sh("elect:basic", "echo ran", {"-n"}));
  EXPECT_EQ(second.status, kConflict) << second.err;
  EXPECT_THAT(second.err, HasSubstr("is led elsewhere"));
  EXPECT_THAT(second.out, ::testing::Not(HasSubstr("ran")));

  leader.signal(SIGTERM);
  EXPECT_EQ(leader.wait_for(), 128 + SIGTERM) << leader.err();
  EXPECT_THAT(leader.out(), HasSubstr("value=host-a:8080"));
  EXPECT_THAT(leader.err(), HasSubstr("leading 'elect:basic' in term "));
  EXPECT_EQ(run_cli({"leader", "--redis", url(), "elect:basic"}).status, kConflict) << "resigned: nobody leads";
  const CliResult next = run_cli(elect_sh("elect:basic", "exit 3", {"-n"}));
  EXPECT_EQ(next.status, 3) << next.err << " (the command's status)";
  EXPECT_FALSE(exists("elect:basic"));
}

// The closing case of issue #53: a leader stopped (SIGSTOP) past its lease.
// Its command is stopped at the lease deadline by the guardian process
// (turnstile itself is not running), a successor is elected once the lease
// ends on the server, and the old leader, continued, is told it lost the
// leadership and campaigns again: nothing acted in the old term after the
// successor began.
TEST_F(CliElectTest, AStoppedLeaderIsDeposedBeforeItActsAgain) {
  const std::string log = scratch_.file("acts");
  CliProcess old_leader(elect_sh("elect:stopped", acting("old", log), {"--lease", "1s", "--value", "old"}));
  ASSERT_TRUE(eventually([&] { return !lines_of(log).empty(); }));
  old_leader.signal(SIGSTOP);
  const std::string successor_done = scratch_.file("successor-done");
  const CliResult successor =
      run_cli(elect_sh("elect:stopped",
                       "for i in 1 2 3 4 5 6 7 8 9 10; do echo \"new $TURNSTILE_LEADER_TERM\" >> '" + log +
                           "'; sleep 0.05; done; touch '" + successor_done + "'",
                       {"--lease", "1s", "--value", "new", "--wait", "20s"}));
  EXPECT_EQ(successor.status, 0) << successor.err;
  old_leader.signal(SIGCONT);
  // Continued: told of the loss, campaigns again and leads in a later term.
  ASSERT_TRUE(eventually([&] { return old_leader.err().find("campaigning again") != std::string::npos; }));
  EXPECT_THAT(old_leader.err(), HasSubstr("lost the leadership of 'elect:stopped' (term "));
  ASSERT_TRUE(eventually([&] {
    const std::vector<std::string> lines = lines_of(log);
    return !lines.empty() && lines.back().starts_with("old ") && lines.back() != lines.front();
  }));
  old_leader.signal(SIGTERM);
  EXPECT_EQ(old_leader.wait_for(), 128 + SIGTERM) << old_leader.err();
  // The old term's loss is told once, and never taken for the next term's
  // (the watchdog may find it after the guardian stopped the command).
  const std::string err = old_leader.err();
  std::size_t losses = 0;
  for (std::size_t at = err.find("lost the leadership"); at != std::string::npos;
       at = err.find("lost the leadership", at + 1)) {
    ++losses;
  }
  EXPECT_EQ(losses, 1u) << err;

  const std::vector<std::string> lines = lines_of(log);
  ASSERT_FALSE(lines.empty());
  const std::string first_term = lines.front();
  std::string new_term;
  std::string last_term = first_term;
  bool successor_began = false;
  for (const std::string& line : lines) {
    if (line.starts_with("new ")) {
      successor_began = true;
      new_term = line;
    }
    EXPECT_FALSE(successor_began && line == first_term)
        << "the stopped leader acted in its old term after " << new_term;
    last_term = line;
  }
  ASSERT_TRUE(successor_began);
  const auto term_of = [](const std::string& line) { return std::stoll(line.substr(line.find(' ') + 1)); };
  EXPECT_GT(term_of(new_term), term_of(first_term));
  EXPECT_GT(term_of(last_term), term_of(new_term)) << "the old leader leads again in a later term";
}

// A leader killed outright releases nothing: its successor is elected when
// its lease ends on the server, in a later term.
TEST_F(CliElectTest, AKilledLeaderIsSucceededWhenItsLeaseEnds) {
  const std::string log = scratch_.file("acts");
  CliProcess killed(elect_sh("elect:killed", acting("old", log), {"--lease", "1s"}));
  ASSERT_TRUE(eventually([&] { return !lines_of(log).empty(); }));
  killed.signal(SIGKILL);
  EXPECT_EQ(killed.wait_for(), 128 + SIGKILL);
  const std::int64_t left_ms = pttl_ms("elect:killed");
  const auto waited_from = std::chrono::steady_clock::now();
  const CliResult next =
      run_cli(elect_sh("elect:killed", "echo \"term $TURNSTILE_LEADER_TERM\"", {"--lease", "1s", "--wait", "20s"}));
  EXPECT_EQ(next.status, 0) << next.err;
  EXPECT_GE(std::chrono::steady_clock::now() - waited_from, milliseconds(left_ms) - milliseconds(100));
  const std::vector<std::string> lines = lines_of(log);
  ASSERT_FALSE(lines.empty());
  EXPECT_GT(std::stoll(next.out.substr(next.out.find(' ') + 1)), std::stoll(lines.front().substr(4)));
}

// Without a command: lead until SIGTERM, then resign.
TEST_F(CliElectTest, WithoutACommandItLeadsUntilSignalled) {
  CliProcess leader({"elect", "--redis", url(), "--value", "bare", "elect:bare"});
  ASSERT_TRUE(eventually([&] { return leader.out().find("leading 'elect:bare'") != std::string::npos; }));
  EXPECT_THAT(leader.out(), HasSubstr("SIGINT or SIGTERM resigns"));
  EXPECT_EQ(run_cli({"leader", "--redis", url(), "elect:bare"}).status, 0);
  leader.signal(SIGTERM);
  EXPECT_EQ(leader.wait_for(), 0) << leader.err();
  EXPECT_EQ(run_cli({"leader", "--redis", url(), "elect:bare"}).status, kConflict) << "resigned";
}

// FLUSHALL under a leader: the wipe check finds it within a second, the
// command is stopped, and elect campaigns again: it leads again, in a later
// term (the fencing counter, flushed too, is floored by the server's clock).
TEST_F(CliElectTest, AFlushDeposesTheLeaderWhichLeadsAgainInALaterTerm) {
  const std::string log = scratch_.file("terms");
  CliProcess leader(
      elect_sh("elect:flushed", "echo \"$TURNSTILE_LEADER_TERM\" >> '" + log + "'; exec sleep 30", {"--lease", "3s"}));
  ASSERT_TRUE(eventually([&] { return lines_of(log).size() == 1; }));
  server().command({"FLUSHALL"});
  ASSERT_TRUE(eventually([&] { return lines_of(log).size() == 2; })) << leader.err();
  EXPECT_THAT(leader.err(), HasSubstr("lost the leadership of 'elect:flushed'"));
  EXPECT_THAT(leader.err(), HasSubstr("campaigning again"));
  const std::vector<std::string> terms = lines_of(log);
  EXPECT_GT(std::stoll(terms[1]), std::stoll(terms[0]));
  leader.signal(SIGTERM);
  EXPECT_EQ(leader.wait_for(), 128 + SIGTERM) << leader.err();
}

// --once: a lost leadership (here its lock deleted) ends the run with 75
// instead of campaigning again.
TEST_F(CliElectTest, OnceExitsWhenTheLeadershipIsLost) {
  const std::string ready = scratch_.file("ready");
  CliProcess leader(elect_sh("elect:once", "touch '" + ready + "'; exec sleep 30", {"--once", "--lease", "900ms"}));
  ASSERT_TRUE(eventually([&] { return file_exists(ready); }));
  server().command({"DEL", "elect:once"});
  EXPECT_EQ(leader.wait_for(), kLockLost) << leader.err();
  EXPECT_THAT(leader.err(), HasSubstr("lost the leadership of 'elect:once'"));
  EXPECT_THAT(leader.err(), ::testing::Not(HasSubstr("campaigning again")));
}

}  // namespace
}  // namespace turnstile::testing
