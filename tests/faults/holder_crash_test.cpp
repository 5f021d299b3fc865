// `kill -9` of the `turnstile run` that holds the lock: nobody renews the
// lease, so the lock frees after the ttl — and the command (a process group
// with a grandchild: `sh -c 'logger & wait'`) must be dead before the next
// holder's command starts, not orphaned beside it.

#include <signal.h>

#include <gtest/gtest.h>

#include "faults/fault_harness.h"
#include "redis_server.h"

namespace turnstile::testing {
namespace {

using std::chrono::milliseconds;

TEST_F(FaultTest, AKilledHoldersCommandIsDeadBeforeTheNextHolderStarts) {
  constexpr milliseconds kTtl{2000};
  RedisServer server;
  CliProcess holder(run_args(server.url(), "crash", {"--ttl", duration_arg(kTtl)}, logged_command(milliseconds(0))));
  ASSERT_TRUE(monitor_.wait_for_starts(1, kConditionTimeout)) << holder.err();
  CliProcess next(run_args(server.url(), "crash", {"--ttl", duration_arg(kTtl)}, logged_command(kShortHold)));
  ASSERT_TRUE(waits(server, "crash")) << next.err();

  holder.signal(SIGKILL);
  EXPECT_EQ(holder.wait_for(kConditionTimeout), kExitSignalBase + SIGKILL);
  ASSERT_TRUE(monitor_.wait_for_starts(2, kTtl + kConditionTimeout)) << next.err();
  EXPECT_EQ(next.wait_for(kConditionTimeout), 0) << next.err();

  // The killed holder's shell and logger both died, before the next began.
  const IntervalReport report = check("kill -9 of the holder, --ttl " + duration_arg(kTtl));
  const std::vector<CommandInterval> intervals = monitor_.intervals();
  ASSERT_EQ(intervals.size(), 2u);
  ASSERT_TRUE(intervals[0].stop) << "the killed holder's command (pid " << intervals[0].pid << ", shell "
                                 << intervals[0].parent_pid << ") still runs";
  EXPECT_LE(*intervals[0].stop, intervals[1].start);
  EXPECT_EQ(report.max_concurrent, 1) << report.summary;
  EXPECT_EQ(report.max_overlap.count(), 0) << report.summary;
}

}  // namespace
}  // namespace turnstile::testing
