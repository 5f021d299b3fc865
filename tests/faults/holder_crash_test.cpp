// `kill -9` of the `turnstile run` that holds the lock: nobody renews the
// lease, so the lock frees after the ttl — and the command (a process group
// with a grandchild: `sh -c 'logger & wait'`) must be dead before the next
// holder's command starts, not orphaned beside it.

#include <signal.h>

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "faults/fault_harness.h"
#include "redis_server.h"

namespace turnstile::testing {
namespace {

using std::chrono::milliseconds;

TEST_F(FaultTest, AKilledHoldersCommandIsDeadBeforeTheNextHolderStarts) {
  constexpr milliseconds kTtl{2000};
  RedisServer server;
  CliProcess holder(run_args(server.url(), "crash", {"--lease", duration_arg(kTtl)}, logged_command(milliseconds(0))));
  ASSERT_TRUE(monitor_.wait_for_starts(1, kConditionTimeout)) << holder.err();
  CliProcess next(run_args(server.url(), "crash", {"--lease", duration_arg(kTtl)}, logged_command(kShortHold)));
  ASSERT_TRUE(waits(server, "crash")) << next.err();

  holder.signal(SIGKILL);
  EXPECT_EQ(holder.wait_for(kConditionTimeout), kExitSignalBase + SIGKILL);
  ASSERT_TRUE(monitor_.wait_for_starts(2, kTtl + kConditionTimeout)) << next.err();
  EXPECT_EQ(next.wait_for(kConditionTimeout), 0) << next.err();

  // The killed holder's shell and logger both died, before the next began.
  expect_dead_before_next("kill -9 of the holder, --lease " + duration_arg(kTtl));
}

// A hostile double kill: first the guardian (the process that kills the
// command's group if turnstile dies), then turnstile itself. turnstile
// replaces a guardian that died, so the command's whole group (the shell
// and its logger) is still dead before the next holder starts.
TEST_F(FaultTest, AKilledGuardianIsReplacedSoTheCommandStillDiesWithTheHolder) {
  constexpr milliseconds kTtl{2000};
  RedisServer server;
  CliProcess holder(
      run_args(server.url(), "guardian", {"--lease", duration_arg(kTtl)}, logged_command(milliseconds(0))));
  ASSERT_TRUE(monitor_.wait_for_starts(1, kConditionTimeout)) << holder.err();
  CliProcess next(run_args(server.url(), "guardian", {"--lease", duration_arg(kTtl)}, logged_command(kShortHold)));
  ASSERT_TRUE(waits(server, "guardian")) << next.err();

  const pid_t shell = monitor_.intervals().at(0).parent_pid;
  auto guardians = [&] {
    std::vector<pid_t> found = children_of(holder.pid());
    std::erase(found, shell);
    return found;
  };
  const std::vector<pid_t> first = guardians();
  ASSERT_EQ(first.size(), 1u) << "turnstile's children besides the command's shell " << shell;
  ASSERT_EQ(::kill(first[0], SIGKILL), 0);
  ASSERT_TRUE(eventually([&] { return holder.err().find("guardian process") != std::string::npos; }, kConditionTimeout))
      << holder.err();
  const std::vector<pid_t> second = guardians();
  ASSERT_EQ(second.size(), 1u);
  EXPECT_NE(second[0], first[0]);

  holder.signal(SIGKILL);
  EXPECT_EQ(holder.wait_for(kConditionTimeout), kExitSignalBase + SIGKILL);
  ASSERT_TRUE(monitor_.wait_for_starts(2, kTtl + kConditionTimeout)) << next.err();
  EXPECT_EQ(next.wait_for(kConditionTimeout), 0) << next.err();

  expect_dead_before_next("kill -9 of the guardian, then of the holder, --lease " + duration_arg(kTtl));
}

}  // namespace
}  // namespace turnstile::testing
