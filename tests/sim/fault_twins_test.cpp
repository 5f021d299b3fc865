// Simulated twins of tests/faults rows the simulator can express (issue
// #32; the restart without persistence has its own twin,
// server_restart_test.cpp):
//
//   * Eviction: the lock key and its fencing counter removed while held
//     (allkeys-* evicts both; the fake sends no keyspace `evicted` events,
//     so this is the row without them). The holder is told at its next
//     renewal (LockLostReason::gone), never later; a second holder gets in
//     at once, so the two believe together for up to a renewal period
//     (eviction is unsafe by nature: measured, bounded, not zero); tokens
//     keep rising (the missing counter is floored by the server's clock).
//     Twin of tests/faults/eviction_fault_test.cpp.
//   * A fair queue of 10 with every other waiter crashed while queued: the
//     survivors acquire in their arrival order, one at a time, and each
//     crashed entry costs at most its liveness (waiter_timeout after its
//     last retry) plus one keep-alive period. Twin of
//     tests/faults/fair_queue_kill_test.cpp, in virtual time.

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "turnstile/client.h"
#include "turnstile/fair_lock.h"
#include "turnstile/key_layout.h"
#include "turnstile/lock.h"
#include "turnstile/sim/world.h"

namespace turnstile::sim {
namespace {

using namespace std::chrono_literals;
using std::chrono::milliseconds;

constexpr milliseconds kWatchdog{3000};

struct EvictionOutcome {
  std::optional<std::int64_t> alice_token, bob_token;
  std::optional<std::int64_t> told_at_ms, bob_acquired_at_ms;
  std::optional<LockLostReason> reason;
  Duration renewal_period{};
};

constexpr std::int64_t kEvictMs = 1200;

EvictionOutcome run_eviction() {
  World world(11);
  SimClient& alice = world.add_client("alice");
  SimClient& bob = world.add_client("bob");
  SimClient& redis = world.add_client("evictor");
  EvictionOutcome outcome;
  ClientOptions options;
  options.watchdog_timeout = kWatchdog;
  world.spawn(alice, [&] {
    Client client(alice.backend_ptr(), alice.runtime_ptr(), options);
    outcome.renewal_period = (kWatchdog - (kWatchdog / 100 + client.options().stop_margin)) / 3;
    ReentrantLock lock = client.fenced_lock("orders");
    lock.set_lost_handler([&](const LockLost& lost) {
      if (outcome.told_at_ms) return;
      outcome.told_at_ms = world.now_ms();
      outcome.reason = lost.reason;
    });
    lock.lock();
    outcome.alice_token = lock.fencing_token();
    alice.runtime().sleep_for(5s);
    lock.unlock();  // lost: never throws
  });
  world.at(Instant(milliseconds(kEvictMs)), [&] {
    world.spawn(redis, [&] {
      // What allkeys-* eviction does: the key and the counter, gone.
      const KeyLayout keys = key_layout(Flavor::reentrant, "orders");
      redis.backend().command({"DEL", keys.name, keys.fencing_counter});
      world.note("evicted");
    });
    world.spawn(bob, [&] {
      Client client(bob.backend_ptr(), bob.runtime_ptr(), options);
      ReentrantLock lock = client.fenced_lock("orders");
      if (!lock.try_lock({.wait = 10s})) return;
      outcome.bob_acquired_at_ms = world.now_ms();
      outcome.bob_token = lock.fencing_token();
      lock.unlock();
    });
  });
  world.run_until_idle();
  return outcome;
}

TEST(FaultTwinsTest, AnEvictedHolderIsToldAtItsNextRenewalAndTokensKeepRising) {
  const EvictionOutcome outcome = run_eviction();
  ASSERT_TRUE(outcome.told_at_ms.has_value());
  ASSERT_TRUE(outcome.bob_acquired_at_ms.has_value());
  EXPECT_EQ(outcome.reason, LockLostReason::gone);
  const auto period_ms = std::chrono::duration_cast<milliseconds>(outcome.renewal_period).count();
  EXPECT_GT(*outcome.told_at_ms, kEvictMs);
  EXPECT_LE(*outcome.told_at_ms, kEvictMs + period_ms);
  ASSERT_TRUE(outcome.alice_token && outcome.bob_token);
  EXPECT_LT(*outcome.alice_token, *outcome.bob_token);
  std::printf(
      "sim: key and counter evicted at %lld ms; next holder in at %lld ms; holder told at %lld ms (renewal "
      "period %lld ms): both believed for %lld ms; tokens %lld -> %lld\n",
      static_cast<long long>(kEvictMs), static_cast<long long>(*outcome.bob_acquired_at_ms),
      static_cast<long long>(*outcome.told_at_ms), static_cast<long long>(period_ms),
      static_cast<long long>(*outcome.told_at_ms - *outcome.bob_acquired_at_ms),
      static_cast<long long>(*outcome.alice_token), static_cast<long long>(*outcome.bob_token));
}

constexpr int kFairWaiters = 10;
constexpr milliseconds kWaiterTimeout{5000};
constexpr milliseconds kFairHold{200};
constexpr std::int64_t kCrashMs = 3000;
constexpr std::int64_t kReleaseMs = 3100;

struct Acquisition {
  int index = 0;
  std::int64_t at_ms = 0;
  std::int64_t released_ms = 0;
};

TEST(FaultTwinsTest, AFairQueueWithHalfItsWaitersCrashedServesTheRestInOrder) {
  World world(5);
  SimClient& holder = world.add_client("holder");
  std::vector<SimClient*> waiters;
  for (int i = 0; i < kFairWaiters; ++i) waiters.push_back(&world.add_client("w" + std::to_string(i)));
  std::vector<Acquisition> acquisitions;
  int inside = 0;
  int most_inside = 0;
  FairLockOptions fair;
  fair.waiter_timeout = kWaiterTimeout;

  world.spawn(holder, [&] {
    Client client(holder.backend_ptr(), holder.runtime_ptr());
    FairLock lock = client.fair_lock("queue", fair);
    lock.lock();
    holder.runtime().sleep_until(Instant(milliseconds(kReleaseMs)));
    lock.unlock();
  });
  for (int i = 0; i < kFairWaiters; ++i) {
    SimClient& sim = *waiters[static_cast<std::size_t>(i)];
    // Arrivals 100 ms apart: the queue order is the index order.
    world.at(Instant(milliseconds(100 * (i + 1))), [&, i] {
      world.spawn(sim, [&, i] {
        Client client(sim.backend_ptr(), sim.runtime_ptr());
        FairLock lock = client.fair_lock("queue", fair);
        if (!lock.try_lock({.wait = 60s})) return;
        ++inside;
        most_inside = std::max(most_inside, inside);
        Acquisition acquisition{.index = i, .at_ms = world.now_ms(), .released_ms = 0};
        sim.runtime().sleep_for(kFairHold);
        --inside;
        acquisition.released_ms = world.now_ms();
        acquisitions.push_back(acquisition);
        lock.unlock();
      });
    });
  }
  world.at(Instant(milliseconds(kCrashMs)), [&] {
    for (int i = 0; i < kFairWaiters; i += 2) world.crash(*waiters[static_cast<std::size_t>(i)]);
  });
  world.run_for(2min);

  ASSERT_EQ(acquisitions.size(), static_cast<std::size_t>(kFairWaiters / 2));
  EXPECT_EQ(most_inside, 1);
  std::string gaps;
  std::int64_t previous_end = kReleaseMs;
  std::int64_t total_gap = 0;
  for (std::size_t k = 0; k < acquisitions.size(); ++k) {
    EXPECT_EQ(acquisitions[k].index, static_cast<int>(2 * k + 1)) << "out of arrival order";
    const std::int64_t gap = acquisitions[k].at_ms - previous_end;
    gaps += (gaps.empty() ? "" : ", ") + std::string("w") + std::to_string(acquisitions[k].index) + " " +
            std::to_string(gap) + " ms";
    total_gap += gap;
    previous_end = acquisitions[k].released_ms;
  }
  // The dead head's liveness ran out at most waiter_timeout after its last
  // retry (before the crash); the first survivor finds it at its next
  // keep-alive, a third of the timeout later at most.
  const std::int64_t timeout_ms = kWaiterTimeout.count();
  EXPECT_LE(acquisitions.front().at_ms, kCrashMs + timeout_ms + timeout_ms / 3 + 100);
  std::printf(
      "sim: fair queue of %d, every other one crashed at %lld ms, release at %lld ms (waiter timeout %lld ms): gap "
      "before each survivor %s; total %lld ms, %lld ms per crashed waiter\n",
      kFairWaiters, static_cast<long long>(kCrashMs), static_cast<long long>(kReleaseMs),
      static_cast<long long>(timeout_ms), gaps.c_str(), static_cast<long long>(total_gap),
      static_cast<long long>(total_gap / (kFairWaiters / 2)));
}

}  // namespace
}  // namespace turnstile::sim
