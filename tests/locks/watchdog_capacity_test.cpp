// The watchdog's capacity (issue #33): 100,000 holdings renewed on time on
// the fake, in virtual time, with every reply 40 ms late. One batch after
// another (1,000 batches of 100, one round trip each) would take 40 s a
// tick, four renewal periods and longer than a lease leaves to believe
// in, and lose holdings; pipelined (Watchdog::kMaxRenewalLocksInFlight
// out at once, in waves of half of it) a tick takes half a period and none is missed.
//
// The holdings are made directly (one script writes the 100,000 lock
// hashes, the watchdog watches each), not by 100,000 acquisitions: the
// renewals are what is measured. Deterministic: one seed, no real time.

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "locks/engine/metrics_recorder.h"
#include "locks/engine/watchdog.h"
#include "lua_scripts.h"
#include "sim/fake_backend.h"
#include "turnstile/client.h"
#include "turnstile/lock.h"
#include "turnstile/sim/world.h"

namespace turnstile {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr std::uint64_t kSeed = 33;
constexpr std::int64_t kHoldings = 100'000;
constexpr auto kLease = seconds(30);
constexpr auto kReplyDelay = milliseconds(40);
constexpr int kPeriodsHeld = 4;
constexpr char kOwner[] = "capacity-owner";

std::string key_of(std::int64_t index) { return "held:" + std::to_string(index); }

// Writes every lock hash in one call: {owner: 1}, expiring after the lease.
constexpr char kMakeHoldings[] = R"lua(
for i = 1, tonumber(ARGV[1]) do
  redis.call('hset', 'held:' .. i, ARGV[2], 1)
  redis.call('pexpire', 'held:' .. i, ARGV[3])
end
return 1
)lua";

// How many lock hashes are still there with a ttl.
constexpr char kCountLive[] = R"lua(
local live = 0
for i = 1, tonumber(ARGV[1]) do
  if redis.call('pttl', 'held:' .. i) > 0 then live = live + 1 end
end
return live
)lua";

TEST(WatchdogCapacityTest, HundredThousandHoldingsAreRenewedOnTimeThroughSlowReplies) {
  sim::World world(kSeed);
  sim::SimClient& holder = world.add_client("holder");
  const std::string renew_sha(scripts::reentrant_lock_renew.sha1);
  // Every renewal's send instant, and how many are in flight at most.
  std::vector<Instant> renewals_sent;
  bool slow = false;
  holder.link().set_request_filter([&](const std::vector<std::string>& argv) {
    sim::FakeBackend::RequestFate fate;
    if (slow) fate.extra_reply_delay = kReplyDelay;
    if (argv.size() > 1 && argv[1] == renew_sha) renewals_sent.push_back(world.now());
    return fate;
  });
  std::int64_t lost = 0;
  std::int64_t errors = 0;
  std::optional<Duration> period;
  std::int64_t live_at_end = -1;
  std::size_t watched_at_end = 0;
  auto metrics = std::make_shared<detail::MetricsRecorder>();
  world.spawn(holder, [&] {
    Backend& backend = holder.backend();
    (void)backend.command({"SCRIPT", "LOAD", std::string(scripts::reentrant_lock_renew.source)});
    const Instant sent_at = holder.runtime().now();
    (void)backend.command({"EVAL", kMakeHoldings, "0", std::to_string(kHoldings), kOwner,
                           std::to_string(std::chrono::duration_cast<milliseconds>(kLease).count())});
    auto watchdog = std::make_shared<detail::Watchdog>(
        backend, holder.runtime(), kLease,
        detail::LeaseTiming{.clock_drift_factor = 0.01, .stop_margin = kDefaultStopMargin},
        [&errors](std::exception_ptr) { ++errors; }, std::nullopt, metrics);
    period = watchdog->renewal_period();
    for (std::int64_t i = 1; i <= kHoldings; ++i) {
      (void)watchdog->watch(detail::Watchdog::Target{
          .renew_script = &scripts::reentrant_lock_renew,
          .key = key_of(i),
          .holder = kOwner,
          .sent_at = sent_at,
          .lease = kLease,
          .on_lost = [&lost](std::uint64_t, LockLostReason) { ++lost; },
      });
    }
    slow = true;
    // Until the kPeriodsHeld-th tick is over (it starts kPeriodsHeld periods in).
    holder.runtime().sleep_for(watchdog->renewal_period() * kPeriodsHeld + watchdog->renewal_period() * 3 / 4);
    slow = false;
    watched_at_end = watchdog->watched_count();
    live_at_end = backend.command({"EVAL", kCountLive, "0", std::to_string(kHoldings)}).as_integer();
    watchdog->stop();
  });
  world.run_until_idle();
  holder.link().set_request_filter(nullptr);  // it reads locals that die before the world

  ASSERT_TRUE(period.has_value());
  EXPECT_EQ(lost, 0);
  EXPECT_EQ(errors, 0);
  EXPECT_EQ(watched_at_end, static_cast<std::size_t>(kHoldings));
  EXPECT_EQ(live_at_end, kHoldings);
  const std::uint64_t batches_per_tick = kHoldings / detail::Watchdog::kMaxLocksPerRenewal;
  ASSERT_EQ(renewals_sent.size(), batches_per_tick * kPeriodsHeld);
  EXPECT_EQ(metrics->snapshot().renewals, static_cast<std::uint64_t>(kHoldings) * kPeriodsHeld);
  EXPECT_EQ(metrics->snapshot().renewal_failures, 0u);
  // Each tick's batches went out within part of the period: at most
  // batches / (a wave's batches) reply delays (125 x 40 ms), not
  // batches x 40 ms: a wave is sent while the one before is in flight.
  constexpr std::uint64_t kBatchesPerWave =
      detail::Watchdog::kMaxRenewalLocksInFlight / 2 / detail::Watchdog::kMaxLocksPerRenewal;
  const Duration pipelined = kReplyDelay * static_cast<std::int64_t>(batches_per_tick / kBatchesPerWave);
  for (std::size_t tick = 0; tick < kPeriodsHeld; ++tick) {
    const Instant first = renewals_sent[tick * batches_per_tick];
    const Instant last = renewals_sent[(tick + 1) * batches_per_tick - 1];
    EXPECT_LE(last - first, pipelined) << "tick " << tick;
    EXPECT_LT(last - first + kReplyDelay, *period) << "tick " << tick;
  }
  // One batch after another would have needed longer than a renewal
  // leaves to believe in (3 periods): the last batches' holdings lost.
  EXPECT_GT(kReplyDelay * static_cast<std::int64_t>(batches_per_tick), *period * 3);
}

}  // namespace
}  // namespace turnstile
