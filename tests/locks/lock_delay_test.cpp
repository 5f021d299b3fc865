// Lock-delay (ClientOptions::lock_delay, issue #53): every lease a client
// arms on the server is the delay longer than the one its holder believes
// in. A clean release frees the lock at once; a holder lost without one
// (crashed, paused past its lease) keeps everybody out for the delay beyond
// its own deadline. Bodies run in virtual time and against a real
// redis-server; crashes and pauses in simulation only.

#include <gtest/gtest.h>

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
#include "turnstile/hold.h"
#include "turnstile/key_layout.h"
#include "turnstile/lock.h"
#include "turnstile/read_write_lock.h"
#include "turnstile/semaphore.h"

namespace turnstile::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::seconds;

constexpr auto kDelay = seconds(5);
constexpr std::int64_t kWatchdogMs = 30'000;  // ClientOptions::watchdog_timeout's default
constexpr std::int64_t kDelayMs = 5'000;

using MakeLock = std::function<std::unique_ptr<Lock>(Client&)>;

class LockDelayTest : public LockTest {
 protected:
  std::int64_t pttl(const std::string& key) { return inspect({"PTTL", key}).as_integer(); }

  // Taken with the watchdog and with a fixed lease by a client with the
  // delay: the key lives the lease and the delay, the holder believes in
  // the lease alone, its identity names the delay, and an unlock frees the
  // lock for another client at once.
  void expect_armed_with_the_delay(const std::string& name, const MakeLock& make) {
    Client& holder = env().add_client(ClientOptions{.lock_delay = kDelay});
    Client& other = env().add_client();
    env().spawn(holder, [&] {
      const std::unique_ptr<Lock> lock = make(holder);
      lock->lock();
      EXPECT_GT(pttl(name), kWatchdogMs + kDelayMs - 1'000);
      EXPECT_LE(pttl(name), kWatchdogMs + kDelayMs);
      EXPECT_LT(*lock->remaining_ttl(), milliseconds(kWatchdogMs)) << "the local deadline is the lease's";
      const Reply identity = inspect({"GET", key_layout(lock->flavor(), name).holder_identity});
      ASSERT_TRUE(identity.is_bulk());
      const std::optional<HolderIdentity> parsed = parse_holder_identity(identity.as_string());
      ASSERT_TRUE(parsed.has_value());
      EXPECT_EQ(parsed->lock_delay_ms, kDelayMs);
      lock->unlock();
      EXPECT_EQ(pttl(name), -2) << "a clean release deletes the key: no delay";

      lock->lock(seconds(10));  // a fixed lease
      EXPECT_GT(pttl(name), 10'000 + kDelayMs - 1'000);
      EXPECT_LE(pttl(name), 10'000 + kDelayMs);
      EXPECT_LT(*lock->remaining_ttl(), seconds(10));
      lock->unlock();
    });
    env().run();
    env().spawn(other, [&] {
      const std::unique_ptr<Lock> lock = make(other);
      EXPECT_TRUE(lock->try_lock()) << "released cleanly: free at once";
      lock->unlock();
    });
    env().run();
  }
};

TEST_P(LockDelayTest, ReentrantArmsItsLeaseAndTheDelay) {
  expect_armed_with_the_delay("delay:reentrant", [](Client& client) {
    return std::make_unique<ReentrantLock>(client.lock("delay:reentrant"));
  });
}

TEST_P(LockDelayTest, FencedArmsItsLeaseAndTheDelay) {
  expect_armed_with_the_delay("delay:fenced", [](Client& client) {
    return std::make_unique<ReentrantLock>(client.fenced_lock("delay:fenced"));
  });
}

TEST_P(LockDelayTest, FairArmsItsLeaseAndTheDelay) {
  expect_armed_with_the_delay(
      "delay:fair", [](Client& client) { return std::make_unique<FairLock>(client.fair_lock("delay:fair")); });
}

TEST_P(LockDelayTest, TokenArmsItsLeaseAndTheDelay) {
  expect_armed_with_the_delay(
      "delay:token", [](Client& client) { return std::make_unique<TokenLock>(client.token_lock("delay:token")); });
}

TEST_P(LockDelayTest, WriteHalfArmsItsLeaseAndTheDelay) {
  Client& holder = env().add_client(ClientOptions{.lock_delay = kDelay});
  env().spawn(holder, [&] {
    ReadWriteLock lock = holder.read_write_lock("delay:rw");
    lock.write().lock();
    EXPECT_GT(pttl("delay:rw"), kWatchdogMs + kDelayMs - 1'000);
    EXPECT_LE(pttl("delay:rw"), kWatchdogMs + kDelayMs);
    EXPECT_LT(*lock.write().remaining_ttl(), milliseconds(kWatchdogMs));
    lock.write().unlock();
    EXPECT_EQ(pttl("delay:rw"), -2);
  });
  env().run();
}

TEST_P(LockDelayTest, OutOfRangeIsRefused) {
  EXPECT_THROW((void)env().add_client(ClientOptions{.lock_delay = -milliseconds(1)}), InvalidArgumentError);
  EXPECT_THROW((void)env().add_client(ClientOptions{.lock_delay = kMaxLockDelay + milliseconds(1)}),
               InvalidArgumentError);
  EXPECT_NO_THROW((void)env().add_client(ClientOptions{.lock_delay = kMaxLockDelay}));
}

// The watchdog's renewals re-arm the lease and the delay.
TEST_P(LockDelayTest, RenewalsKeepTheDelay) {
  TURNSTILE_SIM_ONLY();
  Client& holder = env().add_client(ClientOptions{.lock_delay = kDelay});
  env().spawn(holder, [&] {
    ReentrantLock lock = holder.lock("delay:renewed");
    lock.lock();
    holder.runtime().sleep_for(seconds(15));  // renewed at about 10 s
    // Renewed to 35 s about 5 s ago; without the delay it would be ~25 s.
    EXPECT_GT(pttl("delay:renewed"), kWatchdogMs + kDelayMs - 6'000);
    EXPECT_TRUE(lock.is_held_by_current_thread());
    lock.unlock();
  });
  env().run();
}

// A crashed holder keeps the others out for its lease and the delay; one
// without a delay, for its lease alone.
TEST_P(LockDelayTest, ACrashedHoldersLockFreesAfterTheLeaseAndTheDelay) {
  TURNSTILE_SIM_ONLY();
  for (const bool delayed : {false, true}) {
    SCOPED_TRACE(delayed ? "with a 20 s lock-delay" : "without");
    const std::string name = delayed ? "delay:crash:20s" : "delay:crash:none";
    Client& holder = env().add_client(ClientOptions{.lock_delay = delayed ? Duration(seconds(20)) : Duration::zero()});
    Client& other = env().add_client();
    std::optional<Instant> acquired_at;
    bool held = false;
    env().spawn(holder, [&] {
      ReentrantLock lock = holder.lock(name);
      acquired_at = holder.runtime().now();
      lock.lock();
      held = true;
      holder.runtime().sleep_for(minutes(5));  // crashed meanwhile
    });
    env().spawn(other, [&] {
      ASSERT_TRUE(eventually(other, [&] { return held; }));
      env().crash(holder);  // nothing released
      ReentrantLock lock = other.lock(name);
      ASSERT_TRUE(lock.try_lock({.wait = minutes(2)}));
      const Instant got_it = other.runtime().now();
      const Duration kept = got_it - *acquired_at;
      const Duration expected = seconds(30) + (delayed ? seconds(20) : seconds(0));
      EXPECT_GE(kept, expected - milliseconds(10));
      EXPECT_LE(kept, expected + seconds(1));
      lock.unlock();
    });
    env().run();
  }
}

// The failure lock-delay exists for: a holder frozen past its lease (a GC
// pause, SIGSTOP). It is told at its deadline, once it runs again; with a
// delay longer than the pause nobody was let in before that, and the
// watchdog sends no renewal for a hold past its deadline (which would keep
// the key from everybody for another lease and delay).
TEST_P(LockDelayTest, AFrozenHolderIsToldBeforeAnybodyElseGetsIn) {
  TURNSTILE_SIM_ONLY();
  Client& holder = env().add_client(ClientOptions{.lock_delay = seconds(20)});
  Client& other = env().add_client();
  std::optional<Instant> acquired_at;
  std::optional<Instant> lost_at;
  std::optional<LockLostReason> lost_reason;
  std::optional<Instant> other_got_it;
  env().spawn(holder, [&] {
    ReentrantLock lock = holder.lock("delay:frozen");
    lock.set_lost_handler([&](const LockLost& lost) {
      lost_at = holder.runtime().now();
      lost_reason = lost.reason;
    });
    acquired_at = holder.runtime().now();
    lock.lock();
    env().freeze(holder);  // 40 s: past the 30 s lease, within lease + delay
    holder.runtime().sleep_for(milliseconds(1));
    EXPECT_FALSE(lock.is_held_by_current_thread());
    // No unlock(): one now would end the delay (its holder is done).
  });
  env().spawn(other, [&] {
    ASSERT_TRUE(eventually(other, [&] { return acquired_at.has_value(); }));
    other.runtime().schedule_after(seconds(40), [&] { env().thaw(holder); });
    ReentrantLock lock = other.lock("delay:frozen");
    ASSERT_TRUE(lock.try_lock({.wait = minutes(3)}));
    other_got_it = other.runtime().now();
    lock.unlock();
  });
  env().run();
  ASSERT_TRUE(acquired_at && lost_at && other_got_it);
  EXPECT_EQ(lost_reason, LockLostReason::lease_expired);
  EXPECT_LT(*lost_at, *other_got_it) << "the frozen holder was told before anybody else got in";
  // Not before the lease and the delay; no renewal after the thaw pushed
  // it further (that would be 40 s + 50 s).
  EXPECT_GE(*other_got_it - *acquired_at, seconds(50) - milliseconds(10));
  EXPECT_LE(*other_got_it - *acquired_at, seconds(51));
}

// Released after its local deadline, before the expiry timer had its turn
// (the holder thawed and released at once): the hold was lost at the
// deadline, and is told so, though its key is still there.
TEST_P(LockDelayTest, AHoldReleasedPastItsDeadlineIsLost) {
  TURNSTILE_SIM_ONLY();
  Client& holder = env().add_client(ClientOptions{.lock_delay = seconds(20)});
  Client& other = env().add_client();
  bool held = false;
  std::vector<LockLostReason> lost;
  env().spawn(holder, [&] {
    ReentrantLock lock = holder.lock("delay:late-release");
    lock.set_lost_handler([&](const LockLost& event) { lost.push_back(event.reason); });
    LockHold hold = lock.try_acquire_hold({});
    ASSERT_TRUE(hold);
    PermitSemaphore semaphore = holder.permit_semaphore("delay:late-permit");
    ASSERT_TRUE(semaphore.try_set_permits(1));
    const PermitId permit = semaphore.acquire();
    held = true;
    env().freeze(holder);
    holder.runtime().sleep_for(milliseconds(1));  // frozen here; runs first on the thaw
    EXPECT_THROW(hold.release_or_throw(), NotOwnerError) << "released as if held in time";
    EXPECT_THROW(semaphore.release(permit), PermitNotHeldError);
  });
  env().spawn(other, [&] {
    ASSERT_TRUE(eventually(other, [&] { return held; }));
    other.runtime().schedule_after(seconds(40), [&] { env().thaw(holder); });
  });
  env().run();
  EXPECT_EQ(lost, std::vector<LockLostReason>{LockLostReason::lease_expired});
}

// A crash-safe semaphore's permit: its expiry is the lease and the delay.
TEST_P(LockDelayTest, ACrashedHoldersPermitComesBackAfterTheLeaseAndTheDelay) {
  TURNSTILE_SIM_ONLY();
  Client& holder = env().add_client(ClientOptions{.lock_delay = seconds(20)});
  Client& other = env().add_client();
  std::optional<Instant> acquired_at;
  bool held = false;
  env().spawn(holder, [&] {
    PermitSemaphore semaphore = holder.permit_semaphore("delay:permits");
    ASSERT_TRUE(semaphore.try_set_permits(1));
    acquired_at = holder.runtime().now();
    (void)semaphore.acquire();
    held = true;
    holder.runtime().sleep_for(minutes(5));  // crashed meanwhile
  });
  env().spawn(other, [&] {
    ASSERT_TRUE(eventually(other, [&] { return held; }));
    env().crash(holder);
    PermitSemaphore semaphore = other.permit_semaphore("delay:permits");
    const std::optional<PermitId> permit = semaphore.try_acquire({.wait = minutes(2)});
    ASSERT_TRUE(permit.has_value());
    const Duration kept = other.runtime().now() - *acquired_at;
    EXPECT_GE(kept, seconds(50) - milliseconds(10));
    EXPECT_LE(kept, seconds(51));
    semaphore.release(*permit);
  });
  env().run();
}

INSTANTIATE_TEST_SUITE_P(Environments, LockDelayTest, ::testing::ValuesIn(lock_environments()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace turnstile::testing
