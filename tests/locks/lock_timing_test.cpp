// Timing edge cases of the reentrant lock, in virtual time: hours of
// watchdog renewal, crashes, exact wait deadlines, wake-up latency. These
// run only in simulation, where they take no real time and are exact.

#include <gtest/gtest.h>

#include "lock_environment.h"
#include "turnstile/errors.h"
#include "turnstile/lock.h"

namespace turnstile::testing {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::seconds;

class LockTimingTest : public LockTest {};

TEST_P(LockTimingTest, LeaseExpiryFreesTheLockAndTheLateUnlockThrows) {
  TURNSTILE_SIM_ONLY();
  Client& client = env().add_client();
  env().spawn(client, [&] {
    ReentrantLock lock = client.lock("leased");
    LockHold hold = lock.acquire_hold(seconds(10));
    client.runtime().sleep_for(milliseconds(10'000));
    // As in Redis, a key lives through its deadline's millisecond...
    EXPECT_TRUE(lock.is_locked());
    client.runtime().sleep_for(milliseconds(1));
    // ...and is gone from the next one.
    EXPECT_FALSE(lock.is_locked());
    EXPECT_THROW(hold.release_or_throw(), NotOwnerError);  // the strict form says it was lost
  });
  env().run();
}

TEST_P(LockTimingTest, WatchdogKeepsALockThroughAnHour) {
  TURNSTILE_SIM_ONLY();
  Client& client = env().add_client();
  int lost = 0;
  env().spawn(client, [&] {
    ReentrantLock lock = client.lock("long-job");
    lock.set_lost_handler([&](const LockLost&) { ++lost; });
    lock.lock();
    for (int minute = 0; minute < 60; ++minute) {
      client.runtime().sleep_for(minutes(1));
      const auto ttl = lock.remaining_lease();
      ASSERT_TRUE(ttl.has_value()) << "lost after " << minute + 1 << " min";
      // Renewed every 9.9 s, and the holder believes in 29.7 s of each
      // renewal (30 s less 1 % and 2 ms), so never below 19.8 s.
      EXPECT_GE(*ttl, milliseconds(19'798));
    }
    lock.unlock();
  });
  env().run();
  EXPECT_EQ(lost, 0);
}

TEST_P(LockTimingTest, CrashedHoldersLockFreesWithinOneWatchdogTimeout) {
  TURNSTILE_SIM_ONLY();
  Client& doomed = env().add_client();
  Client& survivor = env().add_client();
  Instant crashed_at{};
  Instant acquired_at{};
  env().spawn(doomed, [&] {
    ReentrantLock lock = doomed.lock("crash");
    lock.lock();
    doomed.runtime().sleep_for(hours(1));  // never finishes: crashed below
  });
  env().spawn(survivor, [&] {
    survivor.runtime().sleep_for(seconds(95));  // several renewals in
    crashed_at = survivor.runtime().now();
    env().crash(doomed);
    ReentrantLock lock = survivor.lock("crash");
    lock.lock();
    acquired_at = survivor.runtime().now();
    lock.unlock();
  });
  env().run();
  const Duration waited = acquired_at - crashed_at;
  EXPECT_GT(waited, seconds(0));
  EXPECT_LE(waited, seconds(30));
}

TEST_P(LockTimingTest, TryLockGivesUpExactlyAtItsWait) {
  TURNSTILE_SIM_ONLY();
  Client& holder = env().add_client();
  Client& waiter = env().add_client();
  env().spawn(holder, [&] {
    ReentrantLock lock = holder.lock("busy");
    lock.lock();
    holder.runtime().sleep_for(minutes(1));
    lock.unlock();
  });
  env().spawn(waiter, [&] {
    waiter.runtime().sleep_for(seconds(1));
    ReentrantLock lock = waiter.lock("busy");
    const Instant start = waiter.runtime().now();
    EXPECT_FALSE(lock.try_lock({.wait = seconds(3)}));
    EXPECT_EQ(waiter.runtime().now() - start, seconds(3));
  });
  env().run();
}

TEST_P(LockTimingTest, WaiterWakesOnUnlockNotOnTheHoldersTtl) {
  TURNSTILE_SIM_ONLY();
  Client& holder = env().add_client();
  Client& waiter = env().add_client();
  Instant released_at{};
  Instant acquired_at{};
  env().spawn(holder, [&] {
    ReentrantLock lock = holder.lock("handoff");
    lock.lock(minutes(10));
    holder.runtime().sleep_for(seconds(7));
    released_at = holder.runtime().now();
    lock.unlock();
  });
  env().spawn(waiter, [&] {
    waiter.runtime().sleep_for(seconds(1));
    ReentrantLock lock = waiter.lock("handoff");
    lock.lock();
    acquired_at = waiter.runtime().now();
    lock.unlock();
  });
  env().run();
  EXPECT_GE(acquired_at, released_at);
  EXPECT_LT(acquired_at - released_at, milliseconds(50));
}

TEST_P(LockTimingTest, NoSubscriptionIsLeftBehind) {
  TURNSTILE_SIM_ONLY();
  constexpr int kClients = 8;
  constexpr int kRounds = 200;
  std::vector<Client*> clients;
  for (int i = 0; i < kClients; ++i) clients.push_back(&env().add_client());
  for (Client* client : clients) {
    env().spawn(*client, [client] {
      ReentrantLock lock = client->lock("busy-key");
      for (int round = 0; round < kRounds; ++round) {
        if (round % 3 == 0) {
          if (lock.try_lock({.wait = milliseconds(5)})) lock.unlock();
        } else {
          lock.lock();
          client->runtime().sleep_for(milliseconds(1));
          lock.unlock();
        }
      }
    });
  }
  env().run();
  EXPECT_EQ(inspect({"PUBSUB", "NUMSUB", "redisson_lock__channel:{busy-key}"}),
            Reply::array({Reply::bulk("redisson_lock__channel:{busy-key}"), Reply::integer(0)}));
  EXPECT_EQ(inspect({"EXISTS", "busy-key"}), Reply::integer(0));
}

INSTANTIATE_TEST_SUITE_P(Environments, LockTimingTest, ::testing::ValuesIn(lock_environments()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace turnstile::testing
