// One of the holder's own processes stopped (SIGSTOP: a debugger, a cgroup
// freezer, an overloaded host) while its command runs on (issue #32):
//
//   * `turnstile run` itself stopped longer than its lease: it cannot
//     renew, nor stop its command at the lease deadline. Its guardian
//     process knows that deadline (moved on every confirmed renewal) and
//     stops the command's group at it by itself, so the next holder's
//     whole section runs after the command died, not inside it; resumed,
//     turnstile exits with the lost-lock status.
//   * the guardian stopped instead, and the lease lost (a frozen link):
//     turnstile stops the command by its own deadline as always, and is
//     not held up by the stopped guardian on its way out.
//
// Both stopped at once (or the whole process tree frozen: the command too)
// is the documented limit, not tested: nothing of ours runs to enforce.

#include <signal.h>

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "faults/fault_harness.h"
#include "redis_server.h"
#include "tcp_proxy.h"

namespace turnstile::testing {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

constexpr milliseconds kLease{2000};
// The numbers: turnstile stopped 6 s, the next holder's section
// 1.6 s (long enough to lie wholly inside an unstopped command).
constexpr milliseconds kStopped{6000};
constexpr milliseconds kSection{1600};

::testing::AssertionResult stopped(pid_t pid) {
  if (eventually([&] { return process_state(pid) == 'T'; }, kConditionTimeout)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "process " << pid << " never showed as stopped";
}

long long ms_since(Clock::time_point since) {
  return std::chrono::duration_cast<milliseconds>(Clock::now() - since).count();
}

// Each flavor's holds tell their deadline through their own machinery
// (the lock engine, the permit semaphore): every one reaches the guardian.
struct StoppedFlavor {
  const char* label;
  Flavor flavor;
  std::vector<std::string> options;
};

class StoppedHolderTest : public FaultTest, public ::testing::WithParamInterface<StoppedFlavor> {};

TEST_P(StoppedHolderTest, TheGuardianStopsTheCommandBeforeTheNextHolderStarts) {
  const StoppedFlavor& param = GetParam();
  std::vector<std::string> options = param.options;
  options.insert(options.end(), {"--lease", duration_arg(kLease)});
  RedisServer server;
  CliProcess holder(run_args(server.url(), "stopped-holder", options, logged_command(milliseconds(0))));
  ASSERT_TRUE(monitor_.wait_for_starts(1, kConditionTimeout)) << holder.err();
  CliProcess next(run_args(server.url(), "stopped-holder", options, logged_command(kSection)));
  ASSERT_TRUE(waits(server, "stopped-holder", param.flavor)) << next.err();

  const Clock::time_point stopped_at = Clock::now();
  holder.signal(SIGSTOP);  // turnstile only: the guardian is in a group of its own
  ASSERT_TRUE(stopped(holder.pid()));
  // The next holder gets the lock once the stopped holder's lease runs out
  // on the server, and its whole section runs while turnstile is stopped.
  ASSERT_TRUE(monitor_.wait_for_starts(2, kLease + kConditionTimeout)) << next.err();
  EXPECT_EQ(next.wait_for(kConditionTimeout), 0) << next.err();
  EXPECT_EQ(process_state(holder.pid()), 'T') << "turnstile ran again before the next holder was done";
  // The rest of the fault's length, not a wait for a condition.
  std::this_thread::sleep_until(stopped_at + kStopped);
  const long long stopped_ms = ms_since(stopped_at);
  holder.signal(SIGCONT);
  // Lost: whichever of its own loss or the guardian's deed it sees first.
  EXPECT_EQ(holder.wait_for(kConditionTimeout), kExitLockLost) << holder.err();

  expect_dead_before_next(std::string(param.label) + ": turnstile run SIGSTOP " + std::to_string(stopped_ms) +
                          "ms, --lease " + duration_arg(kLease) + ", next section " + duration_arg(kSection));
}

INSTANTIATE_TEST_SUITE_P(Flavors, StoppedHolderTest,
                         ::testing::Values(StoppedFlavor{"reentrant", Flavor::reentrant, {}},
                                           StoppedFlavor{"token", Flavor::token, {"--token"}},
                                           StoppedFlavor{"semaphore", Flavor::semaphore, {"--permits", "1"}}),
                         [](const auto& info) { return std::string(info.param.label); });

TEST_F(FaultTest, AStoppedGuardianLeavesTheLeaseToTurnstileWhichStillEndsTheCommandFirst) {
  RedisServer server;
  TcpProxy link(server.port());
  CliProcess holder(
      run_args(link.url(), "stopped-guardian", {"--lease", duration_arg(kLease)}, logged_command(milliseconds(0))));
  ASSERT_TRUE(monitor_.wait_for_starts(1, kConditionTimeout)) << holder.err();
  ForeignProcess guardian = ForeignProcess::guardian_of(holder, monitor_.intervals().at(0).parent_pid);
  ASSERT_TRUE(guardian.valid()) << "turnstile's children: " << ::testing::PrintToString(children_of(holder.pid()));
  CliProcess next(
      run_args(server.url(), "stopped-guardian", {"--lease", duration_arg(kLease)}, logged_command(kSection)));
  ASSERT_TRUE(waits(server, "stopped-guardian")) << next.err();

  const Clock::time_point stopped_at = Clock::now();
  ASSERT_TRUE(guardian.stop());
  ASSERT_TRUE(stopped(guardian.pid()));
  link.freeze();  // the lease is lost: only turnstile is left to enforce it
  ASSERT_TRUE(monitor_.wait_for_starts(2, kLease + kConditionTimeout)) << next.err();
  EXPECT_EQ(next.wait_for(kConditionTimeout), 0) << next.err();
  // Out, with the guardian still stopped (turnstile ends it, stopped or not).
  EXPECT_EQ(holder.wait_for(kConditionTimeout), kExitLockLost) << holder.err();
  const long long stopped_ms = ms_since(stopped_at);

  expect_dead_before_next("guardian SIGSTOP " + std::to_string(stopped_ms) + "ms + frozen link, --lease " +
                          duration_arg(kLease) + ", next section " + duration_arg(kSection));
}

}  // namespace
}  // namespace turnstile::testing
