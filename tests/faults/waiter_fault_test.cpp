// Waiters through faults. A waiter with no --wait limit waits until it gets
// the lock: a killed connection, a server restart or a server that stops
// answering for seconds are transient — it reconnects (with backoff) and
// keeps waiting, it does not exit 69. So is a script running past
// busy-reply-threshold (BUSY replies: BusyError, transient). A fair-lock waiter that gives up
// (SIGTERM, SIGINT) withdraws its queue entry on the way out, so the next
// waiter takes the lock as soon as it is free, not after the entry expires.

#include <signal.h>

#include <gtest/gtest.h>

#include <string>
#include <thread>

#include "faults/fault_harness.h"
#include "redis_server.h"
#include "tcp_proxy.h"
#include "turnstile/redis_backend.h"

namespace turnstile::testing {
namespace {

using std::chrono::milliseconds;

// Long enough that no fault below costs the holder its lease.
constexpr milliseconds kHolderTtl{10'000};

// Runs a command that blocks the server for seconds (RedisServer::command
// gives up after 2 s), over the library's own backend.
void blocking_command(const RedisServer& server, const std::vector<std::string>& argv) {
  RedisOptions options = RedisOptions::from_url(server.url());
  options.command_timeout_ms = static_cast<int>(kConditionTimeout.count());
  make_redis_backend(options)->command(argv);
}

// A script that keeps the server busy for 1.5 s by its own clock (TIME
// moves inside a script), past the test server's 100 ms busy-reply-threshold.
const std::string kBusyScript =
    "local function now() local t = redis.call('TIME') return tonumber(t[1]) * 1000000 + tonumber(t[2]) end "
    "local start = now() while now() - start < 1500000 do end return 1";

enum class WaiterFault { client_kill, server_restart, client_pause, debug_sleep, busy_script };

std::string fault_name(WaiterFault fault) {
  switch (fault) {
    case WaiterFault::client_kill:
      return "ClientKill";
    case WaiterFault::server_restart:
      return "ServerRestart";
    case WaiterFault::client_pause:
      return "ClientPause3s";
    case WaiterFault::debug_sleep:
      return "DebugSleep2s";
    case WaiterFault::busy_script:
      return "BusyScript1500ms";
  }
  return "?";
}

class WaiterFaultTest : public FaultTest, public ::testing::WithParamInterface<WaiterFault> {
 protected:
  // Applies the fault; returns how long it lasts beyond this call.
  static milliseconds apply(WaiterFault fault, RedisServer& server, const TcpProxy& waiter_link) {
    switch (fault) {
      case WaiterFault::client_kill:
        // Every connection of the waiter (the proxy's to the server), by address.
        for (const int port : waiter_link.upstream_local_ports()) {
          server.command({"CLIENT", "KILL", "ADDR", "127.0.0.1:" + std::to_string(port)});
        }
        return milliseconds(0);
      case WaiterFault::server_restart:
        server.stop();
        std::this_thread::sleep_for(milliseconds(1000));  // the fault's length
        server.start();
        return milliseconds(0);
      case WaiterFault::client_pause:
        server.command({"CLIENT", "PAUSE", "3000"});
        return milliseconds(3000);
      case WaiterFault::debug_sleep:
        blocking_command(server, {"DEBUG", "SLEEP", "2"});  // returns when the server wakes
        return milliseconds(0);
      case WaiterFault::busy_script:
        blocking_command(server, {"EVAL", kBusyScript, "0"});  // meanwhile others get BUSY
        return milliseconds(0);
    }
    return milliseconds(0);
  }
};

TEST_P(WaiterFaultTest, AWaiterWithoutALimitKeepsWaitingThroughIt) {
  // lua-time-limit: busy-reply-threshold's older name, which every server knows.
  std::vector<std::string> args = debug_command_args();
  args.insert(args.end(), {"--lua-time-limit", "100"});
  RedisServer server(args);
  TcpProxy waiter_link(server.port());
  CliProcess holder(run_args(server.url(), "waited", {"--lease", duration_arg(kHolderTtl)}, {}));
  ASSERT_TRUE(holds(holder));
  CliProcess waiter(run_args(waiter_link.url(), "waited", {}, logged_command(kShortHold)));
  ASSERT_TRUE(waits(server, "waited")) << waiter.err();

  const milliseconds lasting = apply(GetParam(), server, waiter_link);
  // Give a waiter that wrongly gives up the time to do so (the fault, then
  // a reconnection's worth); one that keeps waiting is unaffected. (After a
  // restart the keyspace is empty: the waiter may take the lock at once and
  // end with its command's status 0.)
  const std::optional<int> early = waiter.wait_for(lasting + milliseconds(2000));
  ASSERT_TRUE(!early || *early == 0) << "the waiter exited " << *early << " during " << fault_name(GetParam()) << ": "
                                     << waiter.err();

  holder.signal(SIGTERM);  // releases (after a restart: it lost the lock already)
  const std::optional<int> holder_status = holder.wait_for(kConditionTimeout);
  EXPECT_TRUE(holder_status == 0 || holder_status == kExitLockLost) << holder.err();
  ASSERT_TRUE(monitor_.wait_for_starts(1, kConditionTimeout)) << waiter.err();
  EXPECT_EQ(waiter.wait_for(kConditionTimeout), 0) << waiter.err();
  check("waiter through " + fault_name(GetParam()));
}

INSTANTIATE_TEST_SUITE_P(Faults, WaiterFaultTest,
                         ::testing::Values(WaiterFault::client_kill, WaiterFault::server_restart,
                                           WaiterFault::client_pause, WaiterFault::debug_sleep,
                                           WaiterFault::busy_script),
                         [](const auto& info) { return fault_name(info.param); });

// Fair waiters: Redisson's queue and the waiter timeout (FairLockOptions).
constexpr milliseconds kFairWaiterTimeout{5000};

class FairWaiterSignalTest : public FaultTest, public ::testing::WithParamInterface<int> {};

TEST_P(FairWaiterSignalTest, AFairWaiterStoppedBySignalWithdrawsItsQueueEntry) {
  const int signal_number = GetParam();
  const std::string queue = "redisson_lock_queue:{fair}";
  RedisServer server;
  CliProcess holder(run_args(server.url(), "fair", {"--fair"}, {}));
  ASSERT_TRUE(holds(holder));
  CliProcess first(run_args(server.url(), "fair", {"--fair"}, logged_command(kShortHold)));
  ASSERT_TRUE(fair_queue_holds(server, "fair", 1)) << first.err();
  CliProcess second(run_args(server.url(), "fair", {"--fair"}, logged_command(kShortHold)));
  ASSERT_TRUE(fair_queue_holds(server, "fair", 2)) << second.err();

  first.signal(signal_number);
  EXPECT_EQ(first.wait_for(kConditionTimeout), kExitSignalBase + signal_number) << first.err();
  // Withdrawn on the way out: gone the moment the process is.
  EXPECT_EQ(server.command({"LLEN", queue}), "(integer) 1");

  const MonotonicClock::time_point released = MonotonicClock::now();
  holder.signal(SIGTERM);
  EXPECT_EQ(holder.wait_for(kConditionTimeout), 0) << holder.err();
  ASSERT_TRUE(monitor_.wait_for_starts(1, kConditionTimeout)) << second.err();
  const auto takeover =
      std::chrono::duration_cast<std::chrono::microseconds>(monitor_.intervals().front().start - released);
  check("fair waiter stopped by signal " + std::to_string(signal_number) + ": takeover after release " +
        format_ms(takeover));
  // Promptly: well before the withdrawn entry could have expired by itself.
  EXPECT_LT(takeover, kFairWaiterTimeout / 2);
  EXPECT_EQ(second.wait_for(kConditionTimeout), 0) << second.err();
}

INSTANTIATE_TEST_SUITE_P(Signals, FairWaiterSignalTest, ::testing::Values(SIGTERM, SIGINT),
                         [](const auto& info) { return info.param == SIGTERM ? "Sigterm" : "Sigint"; });

}  // namespace
}  // namespace turnstile::testing
