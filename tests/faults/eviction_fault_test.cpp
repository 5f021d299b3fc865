// A Redis that evicts (issue #32): maxmemory just above what the server
// uses, maxmemory-policy allkeys-lru, `turnstile run --allow-evicting`
// holding a lock; the test fills memory until Redis evicts the lock key,
// then a second `run -n` takes the lock at once. Eviction is unsafe by
// nature (the second holder gets in as soon as the key is gone, whatever
// the first one knows), so what is asserted is only that the first holder
// is told (its command stopped, exit 75): with keyspace `evicted` events
// on (`notify-keyspace-events Ee`) through the event, without them at its
// next renewal. Measured and printed on "fault-harness:" lines, not
// judged: the time from the eviction to the first command's end, whether
// the two commands overlapped, and both fencing tokens (under allkeys-*
// the counter is evicted too, so tokens may repeat).

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "faults/fault_harness.h"
#include "redis_cluster.h"
#include "redis_server.h"

namespace turnstile::testing {
namespace {

using std::chrono::milliseconds;
using ::testing::HasSubstr;

constexpr milliseconds kLease{6000};  // renewals every ~1.6 s
constexpr std::size_t kFillValueBytes = 256 * 1024;
// A bound on the filling, far beyond what evicts the lock key (a few dozen
// values of 2 MB of headroom): reaching it fails the test, never hangs it.
constexpr int kMaxFills = 4000;
constexpr std::int64_t kHeadroomBytes = 2 * 1024 * 1024;

std::int64_t used_memory(RedisServer& server) {
  const std::string info = server.command({"INFO", "memory"});
  const std::size_t at = info.find("used_memory:");
  if (at == std::string::npos) return 0;
  return std::stoll(info.substr(at + 12));
}

// `run`'s renewal period for kLease: a third of the lease less its margin
// (1 % + 2 ms + the default kill grace, a quarter of the lease).
milliseconds renewal_period() {
  const milliseconds margin = kLease / 100 + milliseconds(2) + kLease / 4;
  return (kLease - margin) / 3;
}

long long ms_between(MonotonicClock::time_point from, MonotonicClock::time_point to) {
  return std::chrono::duration_cast<milliseconds>(to - from).count();
}

class EvictionFaultTest : public FaultTest {
 protected:
  // Holds the lock with a command, fills memory until Redis evicts the
  // lock key, starts a second holder at once, and reports.
  // `policy_set_later`: the server starts with noeviction (so `run` needs
  // no --allow-evicting) and an operator sets allkeys-lru while the lock
  // is held (issue #50, row 4).
  void evict_under_a_holder(bool evicted_events, const std::string& what, bool policy_set_later = false) {
    std::vector<std::string> server_args = {"--maxmemory-policy", policy_set_later ? "noeviction" : "allkeys-lru",
                                            "--maxmemory-samples", "10"};
    if (evicted_events) server_args.insert(server_args.end(), {"--notify-keyspace-events", "Ee"});
    RedisServer server(server_args);
    const std::string name = "evicted";
    const std::vector<std::string> options = {"--allow-evicting", "--lease", duration_arg(kLease)};
    server.command({"CONFIG", "SET", "maxmemory", std::to_string(used_memory(server) + kHeadroomBytes)});

    CliProcess first(run_args(server.url(), name,
                              policy_set_later ? std::vector<std::string>{"--lease", "60s"} : options,
                              logged_command(milliseconds(0))));
    ASSERT_TRUE(monitor_.wait_for_starts(1, kConditionTimeout)) << first.err();
    if (!policy_set_later) {
      EXPECT_THAT(first.err(), HasSubstr("warning: Redis may evict lock keys: maxmemory-policy allkeys-lru"));
    }
    if (evicted_events) {
      // The holder listens for evictions, whatever the policy it found. It
      // subscribes beside its first call, not before it (the server check
      // spawns the subscription): the evictions below wait for it.
      EXPECT_TRUE(wait_until(
          [&] {
            return server.command({"PUBSUB", "NUMSUB", "__keyevent@0__:evicted"}).find("(integer) 1") !=
                   std::string::npos;
          },
          kConditionTimeout))
          << server.command({"PUBSUB", "NUMSUB", "__keyevent@0__:evicted"});
    }
    if (policy_set_later) server.command({"CONFIG", "SET", "maxmemory-policy", "allkeys-lru"});

    const std::string value(kFillValueBytes, 'x');
    // The eviction happens inside the SET that needed the memory: the
    // times below are measured from its send instant, so they bound the
    // time to learn from above.
    std::optional<MonotonicClock::time_point> evicted;
    int fills = 0;
    for (; fills < kMaxFills && !evicted; ++fills) {
      const MonotonicClock::time_point sent = MonotonicClock::now();
      server.command({"SET", "fill:" + std::to_string(fills), value});
      // EXISTS does not touch the key's LRU clock.
      if (server.command({"EXISTS", name}) == "(integer) 0") evicted = sent;
    }
    ASSERT_TRUE(evicted) << "the lock key was not evicted after " << kMaxFills << " values";
    CliProcess second(run_args(server.url(), name, {"-n", "--allow-evicting", "--lease", duration_arg(kLease)},
                               logged_command(kShortHold)));
    EXPECT_EQ(first.wait_for(kConditionTimeout), kExitLockLost) << first.err();
    EXPECT_THAT(first.err(), HasSubstr("lost lock 'evicted'"));
    const std::optional<int> second_status = second.wait_for(kConditionTimeout);
    ASSERT_TRUE(monitor_.wait_for_all_stopped(kConditionTimeout));

    const IntervalReport report = check(what);
    const std::vector<CommandInterval> intervals = monitor_.intervals();
    ASSERT_FALSE(intervals.empty());
    ASSERT_TRUE(intervals[0].stop);
    const MonotonicClock::time_point stopped = intervals[0].first_exit.value_or(*intervals[0].stop);
    if (policy_set_later) {
      // --lease 60s renews every ~18 s: told long before that, through the
      // event (or the wipe check, when the presence key was evicted too).
      EXPECT_LT(stopped - *evicted, std::chrono::seconds(10)) << first.err();
    }
    std::string line =
        "fault-harness: " + what + ": evicted after " + std::to_string(fills) +
        " fills; first holder's command stopped " + std::to_string(ms_between(*evicted, stopped)) +
        " ms after the evicting SET was sent (renewal period " + std::to_string(renewal_period().count()) +
        " ms); second holder: exit " + (second_status ? std::to_string(*second_status) : "none") +
        (intervals.size() > 1
             ? ", started " + std::to_string(ms_between(*evicted, intervals[1].start)) +
                   " ms after it, fencing tokens " + intervals[0].fencing_token + " then " + intervals[1].fencing_token
             : std::string(", did not run")) +
        "; overlap " + format_ms(report.max_overlap);
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
    RecordProperty("eviction", line);
  }
};

TEST_F(EvictionFaultTest, AnEvictedLockIsToldThroughTheEvictedEvent) {
  evict_under_a_holder(true, "allkeys-lru eviction, keyspace evicted events on");
}

TEST_F(EvictionFaultTest, APolicySetWhileHoldingIsStillListenedTo) {
  evict_under_a_holder(true, "allkeys-lru set while holding, keyspace evicted events on", /*policy_set_later=*/true);
}

TEST_F(EvictionFaultTest, AnEvictedLockIsToldAtTheNextRenewalWithoutEvents) {
  evict_under_a_holder(false, "allkeys-lru eviction, no keyspace events");
}

}  // namespace
}  // namespace turnstile::testing
