// Simulated twins of tests/faults rows the simulator can express (issue
// #32; the restart without persistence and the eviction have theirs in
// server_restart_test.cpp):
//
//   * A fair queue of 10 with every other waiter crashed while queued: the
//     survivors acquire in their arrival order, one at a time, and a
//     crashed entry costs nothing: its connection closed, so the release's
//     grant reaches nobody and the release passes the lock on at once
//     (lua/lib/fair_handoff.lua, pass_on). Twin of
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
  // Every release skips the crashed waiter ahead of the next survivor: it
  // is granted in the release's own call, its message one hop away.
  const std::int64_t timeout_ms = kWaiterTimeout.count();
  EXPECT_LE(total_gap, 5 * 10) << gaps;
  std::printf(
      "sim: fair queue of %d, every other one crashed at %lld ms, release at %lld ms (waiter timeout %lld ms): gap "
      "before each survivor %s; total %lld ms, %lld ms per crashed waiter\n",
      kFairWaiters, static_cast<long long>(kCrashMs), static_cast<long long>(kReleaseMs),
      static_cast<long long>(timeout_ms), gaps.c_str(), static_cast<long long>(total_gap),
      static_cast<long long>(total_gap / (kFairWaiters / 2)));
}

}  // namespace
}  // namespace turnstile::sim
