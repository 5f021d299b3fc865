// The read-write lock under the faults the exclusive flavors are tried
// with (holder_crash_test, frozen_link_test): a `turnstile run --read` or
// `--write` holder killed with SIGKILL, or cut off from Redis by a frozen
// link, while the other half waits. Readers and a writer must never run
// together: the dead or cut-off holder's command (a process group with a
// grandchild) must be over before the waiter's starts.

#include <signal.h>

#include <gtest/gtest.h>

#include <string>

#include "faults/fault_harness.h"
#include "redis_server.h"
#include "tcp_proxy.h"

namespace turnstile::testing {
namespace {

using std::chrono::milliseconds;

// Which half holds first; the other half waits.
struct Halves {
  std::string holder;  // "--read" or "--write"
  std::string waiter;
};

std::string halves_name(const ::testing::TestParamInfo<Halves>& info) {
  return info.param.holder == "--read" ? "ReaderHoldsWriterWaits" : "WriterHoldsReaderWaits";
}

class ReadWriteFaultTest : public FaultTest, public ::testing::WithParamInterface<Halves> {};

TEST_P(ReadWriteFaultTest, AKilledHoldersCommandIsDeadBeforeTheOtherHalfStarts) {
  constexpr milliseconds kTtl{2000};
  const Halves halves = GetParam();
  RedisServer server;
  CliProcess holder(run_args(server.url(), "rw-crash", {halves.holder, "--lease", duration_arg(kTtl)},
                             logged_command(milliseconds(0))));
  ASSERT_TRUE(monitor_.wait_for_starts(1, kConditionTimeout)) << holder.err();
  CliProcess next(
      run_args(server.url(), "rw-crash", {halves.waiter, "--lease", duration_arg(kTtl)}, logged_command(kShortHold)));
  ASSERT_TRUE(waits(server, "rw-crash", Flavor::read_write)) << next.err();

  holder.signal(SIGKILL);
  EXPECT_EQ(holder.wait_for(kConditionTimeout), kExitSignalBase + SIGKILL);
  ASSERT_TRUE(monitor_.wait_for_starts(2, kTtl + kConditionTimeout)) << next.err();
  EXPECT_EQ(next.wait_for(kConditionTimeout), 0) << next.err();

  expect_dead_before_next("kill -9 of the " + halves.holder + " holder, --lease " + duration_arg(kTtl));
}

TEST_P(ReadWriteFaultTest, ACutOffHoldersCommandEndsBeforeTheOtherHalfStarts) {
  constexpr milliseconds kTtl{2000};
  const Halves halves = GetParam();
  RedisServer server;
  TcpProxy link(server.port());
  CliProcess cut_off(run_args(link.url(), "rw-frozen", {halves.holder, "--lease", duration_arg(kTtl)},
                              logged_command(milliseconds(0))));
  ASSERT_TRUE(monitor_.wait_for_starts(1, kConditionTimeout)) << cut_off.err();

  link.freeze();
  CliProcess next(
      run_args(server.url(), "rw-frozen", {halves.waiter, "--lease", duration_arg(kTtl)}, logged_command(kShortHold)));
  ASSERT_TRUE(monitor_.wait_for_starts(2, kTtl + kConditionTimeout)) << next.err();
  EXPECT_EQ(next.wait_for(kTtl + kConditionTimeout), 0) << next.err();
  EXPECT_EQ(cut_off.wait_for(kTtl + kConditionTimeout), kExitLockLost) << cut_off.err();

  const IntervalReport report = check("frozen link of the " + halves.holder + " holder, --lease " + duration_arg(kTtl));
  EXPECT_EQ(report.max_concurrent, 1) << report.summary;
  EXPECT_EQ(report.max_overlap.count(), 0) << report.summary;
}

INSTANTIATE_TEST_SUITE_P(Halves, ReadWriteFaultTest,
                         ::testing::Values(Halves{"--read", "--write"}, Halves{"--write", "--read"}), halves_name);

}  // namespace
}  // namespace turnstile::testing
