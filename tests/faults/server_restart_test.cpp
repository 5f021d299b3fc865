// `kill -9` and restart, without persistence, of the redis-server under a
// `turnstile run` holder: the holder's next renewal meets the new process
// (another run_id), so the hold is lost with "the Redis server restarted"
// and the command (a process group with a grandchild) is ended, the run
// exiting 75, well before the holder's lease could have run out. The
// library's own view of the same fault is loss_token_fault_test.cpp's
// ServerRestartTest.

#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <string>

#include "faults/fault_harness.h"
#include "redis_server.h"

namespace turnstile::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

TEST_F(FaultTest, AServerRestartWithoutPersistenceEndsTheHoldersCommand) {
  constexpr milliseconds kLease{4000};
  RedisServer server;
  CliProcess holder(
      run_args(server.url(), "restart", {"--lease", duration_arg(kLease)}, logged_command(milliseconds(0))));
  ASSERT_TRUE(monitor_.wait_for_starts(1, kConditionTimeout)) << holder.err();

  const steady_clock::time_point killed_at = steady_clock::now();
  server.kill();
  server.start();
  const std::optional<int> status = holder.wait_for(kLease + kConditionTimeout);
  const steady_clock::time_point ended_at = steady_clock::now();
  EXPECT_EQ(status, kExitLockLost) << holder.err();
  EXPECT_NE(holder.err().find("restarted"), std::string::npos) << holder.err();
  EXPECT_TRUE(monitor_.wait_for_all_stopped(kConditionTimeout));
  check("server restart without persistence under the holder, --lease " + duration_arg(kLease) + ": the run ended " +
        std::to_string(std::chrono::duration_cast<milliseconds>(ended_at - killed_at).count()) + " ms after the kill");
}

}  // namespace
}  // namespace turnstile::testing
