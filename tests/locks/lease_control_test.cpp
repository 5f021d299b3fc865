// Lease control (issue #22): extend() on a held lock or permit, and the
// client's maximum hold (ClientOptions::max_hold). Bodies run in virtual
// time and against a real redis-server; the ones that need hours of
// waiting run in simulation only.

#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "lock_environment.h"
#include "turnstile/client.h"
#include "turnstile/errors.h"
#include "turnstile/fair_lock.h"
#include "turnstile/lock.h"
#include "turnstile/semaphore.h"

namespace turnstile::testing {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::seconds;

class LeaseControlTest : public LockTest {
 protected:
  std::int64_t pttl(const std::string& key) { return inspect({"PTTL", key}).as_integer(); }

  // `make` builds the flavor at `name` on a client; the body takes it with
  // the watchdog, extends it, and checks the server's PTTL and the local
  // deadline (remaining_lease() never exceeds it).
  void expect_extend_rearms(const std::string& name, const std::function<std::unique_ptr<Lock>(Client&)>& make) {
    Client& client = env().add_client();
    Client& other = env().add_client();
    env().spawn(client, [&] {
      const std::unique_ptr<Lock> lock = make(client);
      EXPECT_THROW(lock->extend(seconds(20)), NotOwnerError) << "not held yet";
      lock->lock();  // the watchdog's 30 s
      EXPECT_GT(*lock->remaining_lease(), seconds(25));

      lock->extend(seconds(10));  // shorter: the hold shrinks
      EXPECT_GT(pttl(name), 9'000);
      EXPECT_LE(pttl(name), 10'000);
      // The local deadline: sent + 10 s - (10 s x 1 % + 2 ms).
      EXPECT_LE(*lock->remaining_lease(), milliseconds(10'000 - 102));
      EXPECT_GT(*lock->remaining_lease(), seconds(9));

      lock->extend(minutes(2));  // longer
      EXPECT_GT(pttl(name), 119'000);
      EXPECT_LE(pttl(name), 120'000);
      EXPECT_LE(*lock->remaining_lease(), milliseconds(120'000 - 1'202));
      EXPECT_GT(*lock->remaining_lease(), seconds(110));
      EXPECT_TRUE(lock->is_held_by_current_thread());
      lock->unlock();
      EXPECT_THROW(lock->extend(seconds(20)), NotOwnerError) << "released";
      EXPECT_THROW(lock->extend(milliseconds(0)), InvalidArgumentError);
    });
    env().run();
    // Held by someone else: not ours to extend.
    std::atomic<bool> held{false};
    std::atomic<bool> tried{false};
    env().spawn(client, [&] {
      const std::unique_ptr<Lock> lock = make(client);
      lock->lock();
      held = true;
      EXPECT_TRUE(eventually(client, [&] { return tried.load(); }));
      lock->unlock();
    });
    env().spawn(other, [&] {
      EXPECT_TRUE(eventually(other, [&] { return held.load(); }));
      EXPECT_THROW(make(other)->extend(seconds(20)), NotOwnerError);
      tried = true;
    });
    env().run();
  }
};

TEST_P(LeaseControlTest, ExtendReentrant) {
  expect_extend_rearms("extend:reentrant",
                       [](Client& client) { return std::make_unique<ReentrantLock>(client.lock("extend:reentrant")); });
}

TEST_P(LeaseControlTest, ExtendFair) {
  expect_extend_rearms("extend:fair",
                       [](Client& client) { return std::make_unique<FairLock>(client.fair_lock("extend:fair")); });
}

TEST_P(LeaseControlTest, ExtendToken) {
  expect_extend_rearms("extend:token",
                       [](Client& client) { return std::make_unique<TokenLock>(client.token_lock("extend:token")); });
}

TEST_P(LeaseControlTest, ExtendOfALockGoneOnTheServerIsNotOwner) {
  Client& client = env().add_client();
  env().spawn(client, [&] {
    ReentrantLock lock = client.lock("extend:gone");
    lock.lock();
    EXPECT_EQ(inspect({"DEL", "extend:gone"}), Reply::integer(1));
    EXPECT_THROW(lock.extend(seconds(20)), NotOwnerError);
    EXPECT_FALSE(lock.is_held_by_current_thread());
    EXPECT_NO_THROW(lock.unlock());  // lost: told, unlock() returns (lock.h)
  });
  env().run();
}

TEST_P(LeaseControlTest, ExtendPermit) {
  Client& client = env().add_client();
  env().spawn(client, [&] {
    PermitSemaphore semaphore = client.permit_semaphore("extend:permits");
    ASSERT_TRUE(semaphore.try_set_permits(2));
    const PermitId permit = semaphore.acquire();
    semaphore.extend(permit, seconds(10));
    const PermitSemaphoreStatus status = semaphore.status();
    ASSERT_EQ(status.permits.size(), 1u);
    ASSERT_TRUE(status.permits[0].remaining);
    EXPECT_GT(*status.permits[0].remaining, seconds(9));
    EXPECT_LE(*status.permits[0].remaining, seconds(10));
    semaphore.release(permit);
    EXPECT_THROW(semaphore.extend(permit, seconds(10)), PermitNotHeldError);
    EXPECT_THROW(semaphore.extend(PermitId(std::string(32, 'a')), seconds(10)), PermitNotHeldError);
  });
  env().run();
}

// An extended hold has a fixed lease: the watchdog renews it no more, and
// it is lost at its new deadline.
TEST_P(LeaseControlTest, ExtendedHoldIsNoLongerRenewed) {
  TURNSTILE_SIM_ONLY();
  Client& client = env().add_client();
  Client& other = env().add_client();
  std::vector<std::pair<Instant, LockLostReason>> lost;
  std::mutex lost_mutex;
  Instant extended_at{};
  env().spawn(client, [&] {
    ReentrantLock lock = client.lock("extend:fixed");
    lock.set_lost_handler([&](const LockLost& event) {
      std::lock_guard guard(lost_mutex);
      lost.emplace_back(client.runtime().now(), event.reason);
    });
    lock.lock();
    client.runtime().sleep_for(minutes(5));  // renewed meanwhile
    EXPECT_TRUE(lock.is_held_by_current_thread());
    extended_at = client.runtime().now();
    lock.extend(seconds(40));
    client.runtime().sleep_for(minutes(5));
    EXPECT_FALSE(lock.is_held_by_current_thread());
    EXPECT_NO_THROW(lock.unlock());  // lost: told, unlock() returns (lock.h)
  });
  env().spawn(other, [&] {
    other.runtime().sleep_for(minutes(5) + seconds(1));
    ReentrantLock lock = other.lock("extend:fixed");
    ASSERT_TRUE(lock.try_lock({.wait = minutes(2)}));
    EXPECT_GE(other.runtime().now(), extended_at + seconds(40));
    lock.unlock();
  });
  env().run();
  std::lock_guard guard(lost_mutex);
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].second, LockLostReason::lease_expired);
  // Its deadline: the extension's send instant + 40 s - (0.4 s + 2 ms).
  EXPECT_GE(lost[0].first, extended_at + seconds(40) - milliseconds(402));
  EXPECT_LT(lost[0].first, extended_at + seconds(40));
}

// ClientOptions::max_hold: renewed for an hour, then renewed no more; the
// holder hears max_hold_reached at the hour, the lease lapses within one
// watchdog timeout, and another client gets the lock then.
TEST_P(LeaseControlTest, MaxHoldStopsTheWatchdog) {
  TURNSTILE_SIM_ONLY();
  Client& holder = env().add_client(ClientOptions{.max_hold = hours(1)});
  Client& other = env().add_client();
  std::vector<std::pair<Instant, LockLostReason>> lost;
  std::mutex lost_mutex;
  Instant acquired_at{};
  env().spawn(holder, [&] {
    ReentrantLock lock = holder.lock("max-hold");
    lock.set_lost_handler([&](const LockLost& event) {
      std::lock_guard guard(lost_mutex);
      lost.emplace_back(holder.runtime().now(), event.reason);
      // Never renewed past the hour: what is left is at most one lease.
      EXPECT_LE(pttl("max-hold"), 30'000);
    });
    acquired_at = holder.runtime().now();
    lock.lock();
    holder.runtime().sleep_for(minutes(59));
    EXPECT_TRUE(lock.is_held_by_current_thread());
    holder.runtime().sleep_for(hours(2));  // a stuck holder
    EXPECT_FALSE(lock.is_held_by_current_thread());
    EXPECT_NO_THROW(lock.unlock());  // lost: told, unlock() returns (lock.h)
  });
  env().spawn(other, [&] {
    other.runtime().sleep_for(milliseconds(1));
    ReentrantLock lock = other.lock("max-hold");
    ASSERT_TRUE(lock.try_lock({.wait = hours(3)}));
    const Instant got_it = other.runtime().now();
    EXPECT_GT(got_it, acquired_at + hours(1));
    EXPECT_LE(got_it, acquired_at + hours(1) + seconds(30));
    lock.unlock();
  });
  env().run();
  std::lock_guard guard(lost_mutex);
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].second, LockLostReason::max_hold_reached);
  // An hour from the acquisition's send instant.
  EXPECT_GE(lost[0].first, acquired_at + hours(1));
  EXPECT_LE(lost[0].first, acquired_at + hours(1) + seconds(1));
}

// The same for a permit of the crash-safe semaphore.
TEST_P(LeaseControlTest, MaxHoldOfAPermit) {
  TURNSTILE_SIM_ONLY();
  Client& holder = env().add_client(ClientOptions{.max_hold = minutes(10)});
  std::vector<LockLostReason> lost;
  std::mutex lost_mutex;
  env().spawn(holder, [&] {
    PermitSemaphore semaphore = holder.permit_semaphore("max-hold:permits");
    ASSERT_TRUE(semaphore.try_set_permits(1));
    semaphore.set_lost_handler([&](const PermitLost& event) {
      std::lock_guard guard(lost_mutex);
      lost.push_back(event.reason);
    });
    const PermitId permit = semaphore.acquire();
    holder.runtime().sleep_for(minutes(11));
    EXPECT_EQ(semaphore.available_permits(), 1) << "the permit lapsed after its last lease";
    EXPECT_THROW(semaphore.release(permit), PermitNotHeldError);
  });
  env().run();
  std::lock_guard guard(lost_mutex);
  EXPECT_EQ(lost, std::vector<LockLostReason>{LockLostReason::max_hold_reached});
}

INSTANTIATE_TEST_SUITE_P(Environments, LeaseControlTest, ::testing::ValuesIn(lock_environments()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace turnstile::testing
