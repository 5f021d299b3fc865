// A fair queue of 10 `turnstile run --fair` waiters, half of them
// SIGKILLed while queued (every other one, the head included): a killed
// waiter withdraws nothing, but its connection closes, so a release's
// grant or message reaches nobody there and the release drops it and
// passes the lock on in the same call (lua/lib/fair_handoff.lua, pass_on);
// an entry that is never reached so goes once its liveness deadline passes
// (FairLockOptions::waiter_timeout after its last retry). The survivors
// must all run, in their arrival order, one at a time, and the queue must
// end empty. Printed: the gap before each survivor's command (from the
// release, then from the previous command's end), i.e. the dead time the
// killed entries ahead of it cost: about nothing now; the bound kept is
// the liveness path's (one waiter timeout and a keep-alive period).

#include <signal.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "faults/fault_harness.h"
#include "redis_server.h"
#include "turnstile/key_layout.h"

namespace turnstile::testing {
namespace {

using std::chrono::milliseconds;

constexpr int kWaiters = 10;
constexpr milliseconds kHold{200};
// `run --fair`'s waiter timeout (FairLockOptions' default): the longest a
// killed entry can hold up the queue after its last retry.
constexpr milliseconds kWaiterTimeout{5000};

class FairQueueKillTest : public FaultTest {};

TEST_F(FairQueueKillTest, HalfTheQueueKilledTheRestRunInOrder) {
  const std::string name = "fairkill";
  const std::string queue = key_layout(Flavor::fair, name).fair_queue;
  RedisServer server;
  CliProcess holder(run_args(server.url(), name, {"--fair"}, {}));
  ASSERT_TRUE(holds(holder));
  std::vector<std::unique_ptr<CliProcess>> waiters;
  for (int i = 0; i < kWaiters; ++i) {
    waiters.push_back(std::make_unique<CliProcess>(run_args(server.url(), name, {"--fair"}, logged_command(kHold)),
                                                   logger_tag(waiter_tag(i))));
    // One at a time, so the arrival order is the index order.
    ASSERT_TRUE(fair_queue_holds(server, name, i + 1)) << waiters.back()->err();
  }

  std::vector<std::string> survivors;
  for (int i = 0; i < kWaiters; ++i) {
    if (i % 2 == 0) {
      waiters[static_cast<std::size_t>(i)]->signal(SIGKILL);
    } else {
      survivors.push_back(waiter_tag(i));
    }
  }
  for (int i = 0; i < kWaiters; i += 2) {
    EXPECT_EQ(waiters[static_cast<std::size_t>(i)]->wait_for(kConditionTimeout), kExitSignalBase + SIGKILL);
  }
  const MonotonicClock::time_point released = MonotonicClock::now();
  holder.signal(SIGTERM);
  EXPECT_EQ(holder.wait_for(kConditionTimeout), 0) << holder.err();

  for (int i = 1; i < kWaiters; i += 2) {
    CliProcess& survivor = *waiters[static_cast<std::size_t>(i)];
    EXPECT_EQ(survivor.wait_for(kConditionTimeout), 0) << waiter_tag(i) << ": " << survivor.err();
  }
  ASSERT_TRUE(monitor_.wait_for_all_stopped(kConditionTimeout));
  const IntervalReport report = check("fair queue of " + std::to_string(kWaiters) + ", every other one SIGKILLed");
  EXPECT_EQ(report.max_concurrent, 1) << report.summary;
  EXPECT_EQ(report.max_overlap.count(), 0) << report.summary;
  EXPECT_EQ(server.command({"LLEN", queue}), "(integer) 0");

  const std::vector<CommandInterval> intervals = monitor_.intervals();
  std::vector<std::string> order;
  std::string gaps;
  MonotonicClock::time_point previous_end = released;
  milliseconds total_gap{0};
  for (const CommandInterval& interval : intervals) {
    order.push_back(interval.tag);
    const auto gap = std::chrono::duration_cast<milliseconds>(interval.start - previous_end);
    total_gap += gap;
    gaps += (gaps.empty() ? "" : ", ") + interval.tag + " " + std::to_string(gap.count()) + " ms";
    if (interval.stop) previous_end = *interval.stop;
  }
  EXPECT_EQ(order, survivors) << "the survivors ran out of their arrival order";
  // Each release drops the killed entry ahead of the next survivor and
  // grants the survivor in the same call: the gaps are the commands'
  // starts, far below the liveness path's one waiter timeout.
  EXPECT_LT(total_gap, kWaiterTimeout / 2) << gaps;
  const std::string line = "fault-harness: fair queue of " + std::to_string(kWaiters) + ", " +
                           std::to_string(kWaiters / 2) + " SIGKILLed while queued (waiter timeout " +
                           std::to_string(kWaiterTimeout.count()) + " ms): gap before each survivor's command " + gaps +
                           "; total " + std::to_string(total_gap.count()) + " ms, " +
                           std::to_string(total_gap.count() / (kWaiters / 2)) + " ms per killed waiter";
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
  RecordProperty("dead_time", line);
}

// A waiter frozen (SIGSTOP, its connection open) while third in the queue
// for longer than the waiter timeout, then continued: the release that
// brings it into the first two places drops its grant offer (older than
// the waiter timeout), so the next release finds it at the head with
// none, tells it "0" and keeps it there; the waiter behind it,
// keeping alive every third of the waiter timeout, evicts it once its
// liveness (cut to one waiter timeout when it moved up) passes. Continued,
// it joins again at the tail and runs last. Never two at once, and it is
// never granted the lock while stopped.
TEST_F(FairQueueKillTest, AFrozenWaiterIsSkippedAndRunsLastWhenContinued) {
  const std::string name = "fairstop";
  const std::string queue = key_layout(Flavor::fair, name).fair_queue;
  RedisServer server;
  CliProcess holder(run_args(server.url(), name, {"--fair"}, {}));
  ASSERT_TRUE(holds(holder));
  constexpr int kQueued = 4;
  constexpr int kFrozen = 2;
  std::vector<std::unique_ptr<CliProcess>> waiters;
  for (int i = 0; i < kQueued; ++i) {
    waiters.push_back(std::make_unique<CliProcess>(run_args(server.url(), name, {"--fair"}, logged_command(kHold)),
                                                   logger_tag(waiter_tag(i))));
    ASSERT_TRUE(fair_queue_holds(server, name, i + 1)) << waiters.back()->err();
  }
  CliProcess& frozen = *waiters[kFrozen];
  frozen.signal(SIGSTOP);
  // Its offer grows older than the waiter timeout (a grant to a waiter
  // frozen just after its last try is the lease-long stall docs/safety.md
  // lists).
  std::this_thread::sleep_for(kWaiterTimeout + milliseconds(500));
  const MonotonicClock::time_point released = MonotonicClock::now();
  holder.signal(SIGTERM);
  EXPECT_EQ(holder.wait_for(kConditionTimeout), 0) << holder.err();
  for (int i = 0; i < kQueued; ++i) {
    if (i == kFrozen) continue;
    CliProcess& live = *waiters[static_cast<std::size_t>(i)];
    EXPECT_EQ(live.wait_for(kConditionTimeout), 0) << waiter_tag(i) << ": " << live.err();
  }
  EXPECT_TRUE(frozen.running());
  EXPECT_EQ(server.command({"LLEN", queue}), "(integer) 0");  // evicted
  frozen.signal(SIGCONT);
  EXPECT_EQ(frozen.wait_for(kConditionTimeout), 0) << frozen.err();
  ASSERT_TRUE(monitor_.wait_for_all_stopped(kConditionTimeout));
  const IntervalReport report = check("fair queue of 4, the third SIGSTOPped, continued at the end");
  EXPECT_EQ(report.max_concurrent, 1) << report.summary;
  EXPECT_EQ(report.max_overlap.count(), 0) << report.summary;

  const std::vector<CommandInterval> intervals = monitor_.intervals();
  std::vector<std::string> order;
  for (const CommandInterval& interval : intervals) order.push_back(interval.tag);
  EXPECT_EQ(order, (std::vector<std::string>{waiter_tag(0), waiter_tag(1), waiter_tag(3), waiter_tag(2)}));
  ASSERT_EQ(intervals.size(), static_cast<std::size_t>(kQueued));
  ASSERT_TRUE(intervals[1].stop.has_value());
  // The frozen head's liveness: one waiter timeout from when it moved up
  // (w0's grant), found by w3's next keep-alive, a third of it later.
  const auto gap = std::chrono::duration_cast<milliseconds>(intervals[2].start - *intervals[1].stop);
  EXPECT_LT(gap, kWaiterTimeout + kWaiterTimeout / 3 + kConditionTimeout / 10);
  const std::string line =
      "fault-harness: fair queue of 4, the third SIGSTOPped: w3 ran " + std::to_string(gap.count()) +
      " ms after w1 (waiter timeout " + std::to_string(kWaiterTimeout.count()) + " ms), " +
      std::to_string(std::chrono::duration_cast<milliseconds>(intervals[2].start - released).count()) +
      " ms after the release";
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
  RecordProperty("frozen_waiter", line);
}

}  // namespace
}  // namespace turnstile::testing
