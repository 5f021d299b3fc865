// A Sentinel failover without replica sync (?replica_sync=off): the lock is
// written on the master only — its replication link is frozen (a proxy in
// the replica's link), so the promoted replica never had it — and a waiter
// gets the lock on the new master while the old holder still runs. This is
// the loss replica sync exists to prevent (docs: redis_backend.h); the test
// measures and reports the overlap and fails only if the harness itself
// cannot run the scenario.

#include <gtest/gtest.h>

#include <memory>

#include "faults/fault_harness.h"
#include "redis_cluster.h"
#include "tcp_proxy.h"

namespace turnstile::testing {
namespace {

using std::chrono::milliseconds;

TEST_F(FaultTest, ASentinelFailoverWithoutReplicaSyncLosesTheLockMeasured) {
  constexpr milliseconds kTtl{3000};
  std::unique_ptr<TcpProxy> replication;  // outlives the group
  SentinelGroup group([&](int master_port) {
    replication = std::make_unique<TcpProxy>(master_port);
    return replication->port();
  });
  const std::string url = group.url() + "?replica_sync=off";
  replication->freeze();  // the replica stays up and looks healthy, but learns nothing more

  CliProcess holder(run_args(url, "failover", {"--lease", duration_arg(kTtl)}, logged_command(milliseconds(0))));
  ASSERT_TRUE(monitor_.wait_for_starts(1, kConditionTimeout)) << holder.err();
  CliProcess next(run_args(url, "failover", {"--lease", duration_arg(kTtl)}, logged_command(kShortHold)));
  ASSERT_TRUE(waits(group.master(), "failover")) << next.err();

  // Sentinels refuse (NOGOODSLAVE) until they have the replica's own INFO.
  ASSERT_TRUE(eventually(
      [&] {
        return group.sentinel(0).command({"SENTINEL", "FAILOVER", SentinelGroup::kMasterName}) == "OK";
      },
      kConditionTimeout));
  ASSERT_TRUE(eventually([&] { return group.master_port_by_sentinel() == group.replica().port(); }, kConditionTimeout));

  ASSERT_TRUE(monitor_.wait_for_starts(2, kConditionTimeout)) << next.err();
  EXPECT_EQ(next.wait_for(kConditionTimeout), 0) << next.err();
  const std::optional<int> holder_status = holder.wait_for(kTtl + kConditionTimeout);
  EXPECT_EQ(holder_status, kExitLockLost) << holder.err();
  // The expected, documented loss: reported, not judged (a command still
  // running after its holder exited shows in the report).
  (void)monitor_.wait_for_all_stopped(kConditionTimeout);
  check("Sentinel failover without replica sync (expected loss), --lease " + duration_arg(kTtl));
}

}  // namespace
}  // namespace turnstile::testing
