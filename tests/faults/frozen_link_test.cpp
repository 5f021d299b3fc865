// A holder cut off from Redis without being told: its link frozen (the
// proxy stops forwarding, requests hang) or its server stopped (SIGSTOP).
// Once its lease runs out on the server the next holder gets the lock, so
// the cut-off holder's command must be dead by then: it must end the
// command by its own clock (the lease deadline it computed locally), not
// wait for a renewal's answer that never comes.

#include <signal.h>

#include <gtest/gtest.h>

#include <thread>

#include "faults/fault_harness.h"
#include "redis_server.h"
#include "tcp_proxy.h"

namespace turnstile::testing {
namespace {

using std::chrono::milliseconds;

class FrozenLinkTest : public FaultTest, public ::testing::WithParamInterface<milliseconds> {};

TEST_P(FrozenLinkTest, TheCutOffHoldersCommandEndsBeforeTheNextHolderStarts) {
  const milliseconds ttl = GetParam();
  RedisServer server;
  TcpProxy link(server.port());
  CliProcess cut_off(run_args(link.url(), "frozen", {"--lease", duration_arg(ttl)}, logged_command(milliseconds(0))));
  ASSERT_TRUE(monitor_.wait_for_starts(1, kConditionTimeout)) << cut_off.err();

  link.freeze();
  CliProcess next(run_args(server.url(), "frozen", {"--lease", duration_arg(ttl)}, logged_command(kShortHold)));
  // It gets the lock once the cut-off holder's lease runs out on the server.
  ASSERT_TRUE(monitor_.wait_for_starts(2, ttl + kConditionTimeout)) << next.err();
  EXPECT_EQ(next.wait_for(ttl + kConditionTimeout), 0) << next.err();
  EXPECT_EQ(cut_off.wait_for(ttl + kConditionTimeout), kExitLockLost) << cut_off.err();

  const IntervalReport report = check("frozen link, --lease " + duration_arg(ttl));
  EXPECT_EQ(report.max_concurrent, 1) << report.summary;
  EXPECT_EQ(report.max_overlap.count(), 0) << report.summary;
}

INSTANTIATE_TEST_SUITE_P(Ttls, FrozenLinkTest,
                         ::testing::Values(milliseconds(1000), milliseconds(3000), milliseconds(10'000)),
                         [](const auto& info) { return "Ttl" + std::to_string(info.param.count()) + "ms"; });

// An election's leader cut off by a frozen link (turnstile elect, issue
// #53): its command ends by its own clock before the next candidate, on a
// link of its own, is elected when the lease runs out on the server; the
// cut-off leader, with --once, exits 75 rather than campaigning again.
TEST_F(FaultTest, AnElectedLeaderCutOffByAFrozenLinkStopsBeforeItsSuccessorLeads) {
  constexpr milliseconds kLease{1000};
  RedisServer server;
  TcpProxy link(server.port());
  std::vector<std::string> leader_args =
      run_args(link.url(), "elected", {"--lease", duration_arg(kLease), "--once"}, logged_command(milliseconds(0)));
  leader_args.front() = "elect";
  CliProcess leader(leader_args);
  ASSERT_TRUE(monitor_.wait_for_starts(1, kConditionTimeout)) << leader.err();

  link.freeze();
  std::vector<std::string> successor_args =
      run_args(server.url(), "elected", {"--lease", duration_arg(kLease)}, logged_command(kShortHold));
  successor_args.front() = "elect";
  CliProcess successor(successor_args);
  ASSERT_TRUE(monitor_.wait_for_starts(2, kLease + kConditionTimeout)) << successor.err();
  EXPECT_EQ(successor.wait_for(kLease + kConditionTimeout), 0) << successor.err();
  EXPECT_EQ(leader.wait_for(kLease + kConditionTimeout), kExitLockLost) << leader.err();

  const IntervalReport report = check("elect over a frozen link, --lease " + duration_arg(kLease));
  EXPECT_EQ(report.max_concurrent, 1) << report.summary;
  EXPECT_EQ(report.max_overlap.count(), 0) << report.summary;
}

// The holder's server hangs (SIGSTOP) longer than the lease, then resumes:
// the lease expires the moment it runs again, and the waiter (on the same
// server) may get the lock at once.
TEST_F(FaultTest, AStoppedServerOutlastingTheLeaseEndsTheHoldersCommandFirst) {
  constexpr milliseconds kTtl{1000};
  constexpr milliseconds kStopped = kTtl * 2;
  RedisServer server;
  CliProcess holder(
      run_args(server.url(), "stopped", {"--lease", duration_arg(kTtl)}, logged_command(milliseconds(0))));
  ASSERT_TRUE(monitor_.wait_for_starts(1, kConditionTimeout)) << holder.err();
  CliProcess waiter(run_args(server.url(), "stopped", {"--lease", duration_arg(kTtl)}, logged_command(kShortHold)));
  ASSERT_TRUE(waits(server, "stopped")) << waiter.err();

  server.pause();
  std::this_thread::sleep_for(kStopped);  // the fault's length, not a wait for a condition
  server.resume();
  ASSERT_TRUE(monitor_.wait_for_starts(2, kConditionTimeout)) << waiter.err();
  EXPECT_EQ(waiter.wait_for(kConditionTimeout), 0) << waiter.err();
  EXPECT_EQ(holder.wait_for(kConditionTimeout), kExitLockLost) << holder.err();

  const IntervalReport report = check("server SIGSTOP " + duration_arg(kStopped) + ", --lease " + duration_arg(kTtl));
  EXPECT_EQ(report.max_concurrent, 1) << report.summary;
  EXPECT_EQ(report.max_overlap.count(), 0) << report.summary;
}

}  // namespace
}  // namespace turnstile::testing
