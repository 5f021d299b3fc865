// A turnstile process and a Redisson process (played at the Redis level,
// redisson_client.h) on the same names: the reentrant lock, the fenced
// lock, the counting semaphore and the crash-safe semaphore. Each side
// holds while the other tries; each side releases while the other waits,
// and the waiter is woken by the release's pub/sub message: the played
// Redisson waiter waits for messages only, and turnstile's waiter would
// retry on its own only after the holder's long lease (120 s), far beyond
// the deadline it is given here.

#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <thread>

#include "interop_fixture.h"
#include "turnstile/errors.h"
#include "turnstile/semaphore.h"

namespace turnstile::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr std::int64_t kLongLeaseMs = 120'000;

class InteropLockTest : public InteropTest {};

TEST_F(InteropLockTest, ReentrantLockEachSideKeepsTheOtherOut) {
  const std::string name = "interop:reentrant";
  const std::string owner = redisson().owner(1);
  ReentrantLock lock = client().lock(name);
  ASSERT_FALSE(redisson().lock(name, owner, kLongLeaseMs).has_value());
  EXPECT_FALSE(lock.try_lock());
  EXPECT_FALSE(lock.try_lock({.wait = milliseconds(200), .lease = std::nullopt}));
  EXPECT_TRUE(lock.is_locked());
  EXPECT_EQ(redisson().unlock(name, owner), Reply::integer(1));

  ASSERT_TRUE(lock.try_lock());
  const std::optional<std::int64_t> ttl = redisson().lock(name, owner, kLongLeaseMs);
  ASSERT_TRUE(ttl.has_value());
  EXPECT_GT(*ttl, 0);
  EXPECT_TRUE(redisson().unlock(name, owner).is_nil());  // not Redisson's to release
  lock.unlock();
  EXPECT_EQ(raw({"EXISTS", name}), Reply::integer(0));
}

TEST_F(InteropLockTest, ReentrantLockRedissonReleaseWakesATurnstileWaiter) {
  const std::string name = "interop:wake-turnstile";
  const std::string channel = "redisson_lock__channel:{" + name + "}";
  const std::string owner = redisson().owner(1);
  ASSERT_FALSE(redisson().lock(name, owner, kLongLeaseMs).has_value());
  std::atomic<bool> acquired = false;
  spawn("turnstile waiter", [&] {
    ReentrantLock lock = client().lock(name);
    if (!lock.try_lock({.wait = seconds(60), .lease = std::nullopt})) throw std::runtime_error("not acquired");
    acquired = true;
    lock.unlock();
  });
  EXPECT_TRUE(eventually([&] { return subscribers(channel) >= 1; }));
  Mailbox released(redisson().backend(), channel);
  EXPECT_FALSE(acquired);
  EXPECT_EQ(redisson().unlock(name, owner), Reply::integer(1));
  // The holder's ttl was 120 s: taken well before it, the waiter was woken
  // by the message.
  EXPECT_GE(released.wait_beyond(0), 1);
  EXPECT_TRUE(eventually([&] { return acquired.load(); }));
  join_all();
}

TEST_F(InteropLockTest, ReentrantLockTurnstileReleaseWakesARedissonWaiter) {
  const std::string name = "interop:wake-redisson";
  const std::string owner = redisson().owner(1);
  ReentrantLock lock = client().lock(name);
  lock.lock();
  Mailbox mailbox(redisson().backend(), "redisson_lock__channel:{" + name + "}");
  ASSERT_TRUE(redisson().lock(name, owner, kLongLeaseMs).has_value());
  lock.unlock();
  EXPECT_GE(mailbox.wait_beyond(0), 1);  // woken by the message
  EXPECT_FALSE(redisson().lock(name, owner, kLongLeaseMs).has_value());
  EXPECT_EQ(redisson().unlock(name, owner), Reply::integer(1));
}

TEST_F(InteropLockTest, FencedLockTokensRiseAcrossBothLibraries) {
  const std::string name = "interop:fenced";
  const std::string owner = redisson().owner(1);
  ReentrantLock lock = client().fenced_lock(name);
  const std::optional<std::int64_t> first = redisson().fenced_lock(name, owner, kLongLeaseMs);
  ASSERT_TRUE(first.has_value());
  EXPECT_FALSE(lock.try_lock());
  std::atomic<bool> acquired = false;
  std::atomic<std::int64_t> turnstile_token = 0;
  spawn("turnstile waiter", [&] {
    ReentrantLock waiter = client().fenced_lock(name);
    if (!waiter.try_lock({.wait = seconds(60), .lease = std::nullopt})) throw std::runtime_error("not acquired");
    turnstile_token = waiter.fencing_token().value_or(0);
    acquired = true;
    waiter.unlock();
  });
  EXPECT_TRUE(eventually([&] { return subscribers("redisson_lock__channel:{" + name + "}") >= 1; }));
  EXPECT_EQ(redisson().unlock(name, owner), Reply::integer(1));
  EXPECT_TRUE(eventually([&] { return acquired.load(); }));
  join_all();
  EXPECT_GT(turnstile_token.load(), *first);
  const std::optional<std::int64_t> third = redisson().fenced_lock(name, owner, kLongLeaseMs);
  ASSERT_TRUE(third.has_value());
  EXPECT_GT(*third, turnstile_token.load());
  EXPECT_EQ(redisson().unlock(name, owner), Reply::integer(1));
}

TEST_F(InteropLockTest, CountingSemaphorePermitsPassBothWays) {
  const std::string name = "interop:semaphore";
  const std::string channel = "redisson_sc:{" + name + "}";
  CountingSemaphore semaphore = client().counting_semaphore(name);
  ASSERT_TRUE(semaphore.try_set_permits(1));
  ASSERT_TRUE(redisson().semaphore_acquire(name, 1));
  EXPECT_FALSE(semaphore.try_acquire());
  std::atomic<bool> acquired = false;
  spawn("turnstile waiter", [&] {
    CountingSemaphore waiter = client().counting_semaphore(name);
    if (!waiter.try_acquire(1, seconds(60))) throw std::runtime_error("not acquired");
    acquired = true;
  });
  EXPECT_TRUE(eventually([&] { return subscribers(channel) >= 1; }));
  EXPECT_EQ(redisson().semaphore_release(name, 1), 1);
  EXPECT_TRUE(eventually([&] { return acquired.load(); }));
  join_all();

  EXPECT_FALSE(redisson().semaphore_acquire(name, 1));
  Mailbox mailbox(redisson().backend(), channel);
  semaphore.release();
  EXPECT_GE(mailbox.wait_beyond(0), 1);
  EXPECT_TRUE(redisson().semaphore_acquire(name, 1));
  EXPECT_EQ(semaphore.available_permits(), 0);
}

// Permits are anonymous: a Redisson client may release permits it never
// took, which only Redisson's channel tells. A turnstile waiter whose try
// found the count turnstile expects (nothing foreign held) still hears it
// at once, as a message (a handoff received), not at its next retry (10 s).
class InteropAnonymousPermitsTest : public InteropLockTest {
 protected:
  // `acquire` (a turnstile waiter's wait, true when it got its permit)
  // runs on a thread; once it listens on `name`'s channel, `release` (a
  // Redisson call) makes one permit available.
  void expect_woken_by(const std::string& name, const std::function<bool()>& acquire,
                       const std::function<void()>& release) {
    const MetricsSnapshot before = client().metrics();
    std::atomic<bool> acquired = false;
    spawn("turnstile waiter", [&] {
      if (!acquire()) throw std::runtime_error("not acquired");
      acquired = true;
    });
    // Asleep: subscribed, and its try after subscribing answered (the
    // first goes out before: a release between the two would be found by
    // the second try, not heard).
    EXPECT_TRUE(eventually([&] {
      return subscribers("redisson_sc:{" + name + "}") >= 1 &&
             client().metrics().script_round_trip.count >= before.script_round_trip.count + 2;
    }));
    EXPECT_FALSE(acquired);
    release();
    EXPECT_TRUE(eventually([&] { return acquired.load(); }));
    join_all();
    EXPECT_EQ(client().metrics().handoffs_received, before.handoffs_received + 1);
  }
};

TEST_F(InteropAnonymousPermitsTest, ACountingSemaphoreReleaseByRedissonWakesATurnstileWaiter) {
  const std::string name = "interop:semaphore-anonymous";
  CountingSemaphore semaphore = client().counting_semaphore(name);
  ASSERT_TRUE(semaphore.try_set_permits(0));
  expect_woken_by(
      name, [&] { return client().counting_semaphore(name).try_acquire(1, seconds(60)); },
      [&] { EXPECT_EQ(redisson().semaphore_release(name, 1), 1); });
  EXPECT_EQ(semaphore.available_permits(), 0);
}

TEST_F(InteropAnonymousPermitsTest, ACrashSafeSemaphoresAddPermitsByRedissonWakesATurnstileWaiter) {
  const std::string name = "interop:permits-anonymous";
  PermitSemaphore semaphore = client().permit_semaphore(name);
  ASSERT_TRUE(semaphore.try_set_permits(0));
  expect_woken_by(
      name,
      [&] {
        PermitSemaphore waiter = client().permit_semaphore(name);
        const std::optional<PermitId> permit = waiter.try_acquire({.wait = seconds(60), .lease = seconds(90)});
        if (permit) waiter.release(*permit);
        return permit.has_value();
      },
      [&] { EXPECT_EQ(redisson().permit_add(name, 1), 1); });
  EXPECT_EQ(semaphore.available_permits(), 1);
}

// turnstile's own releases are told on Redisson's channel with a sign
// ("+1"): a Redisson waiter reads the count (Java's Long.valueOf takes
// it), a turnstile process knows the release woke registered processes.
TEST_F(InteropLockTest, TurnstileSemaphoreCountsAreSignedOnRedissonsChannel) {
  const std::string name = "interop:semaphore-signed";
  CountingSemaphore semaphore = client().counting_semaphore(name);
  ASSERT_TRUE(semaphore.try_set_permits(1));
  ASSERT_TRUE(semaphore.try_acquire());
  Mailbox mailbox(redisson().backend(), "redisson_sc:{" + name + "}");
  semaphore.release();
  EXPECT_GE(mailbox.wait_beyond(0), 1);
  EXPECT_EQ(mailbox.messages(), std::vector<std::string>{"+1"});
}

TEST_F(InteropLockTest, CrashSafePermitIdsAreSharedAsSixteenBytes) {
  const std::string name = "interop:permits";
  const std::string timeout_key = "{" + name + "}:timeout";
  PermitSemaphore semaphore = client().permit_semaphore(name);
  ASSERT_TRUE(semaphore.try_set_permits(1));

  // Redisson holds the only permit: turnstile sees it by its hex id.
  const std::optional<std::string> redisson_id = redisson().permit_acquire(name, kLongLeaseMs);
  ASSERT_TRUE(redisson_id.has_value());
  EXPECT_FALSE(semaphore.try_acquire().has_value());
  const PermitSemaphoreStatus status = semaphore.status();
  ASSERT_EQ(status.permits.size(), 1u);
  EXPECT_EQ(status.permits[0].id.hex(), *redisson_id);
  // turnstile updates and releases Redisson's permit.
  EXPECT_TRUE(semaphore.update_lease(PermitId(*redisson_id), seconds(90)));
  semaphore.release(PermitId(*redisson_id));
  EXPECT_EQ(semaphore.available_permits(), 1);

  // turnstile holds it: stored as 16 raw bytes; Redisson releases it.
  const PermitId mine = *semaphore.try_acquire({.wait = Duration::zero(), .lease = seconds(90)});
  const Reply members = raw({"ZRANGE", timeout_key, "0", "-1"});
  ASSERT_EQ(members.as_array().size(), 1u);
  EXPECT_EQ(members.as_array()[0].as_string(), hex_to_bytes(mine.hex()));
  EXPECT_FALSE(redisson().permit_acquire(name, kLongLeaseMs).has_value());
  EXPECT_TRUE(redisson().permit_release(name, mine.hex()));
  EXPECT_FALSE(semaphore.try_release(mine));  // gone: Redisson released it

  // Redisson holds, turnstile waits and is woken by Redisson's release.
  const std::optional<std::string> second = redisson().permit_acquire(name, kLongLeaseMs);
  ASSERT_TRUE(second.has_value());
  std::atomic<bool> acquired = false;
  spawn("turnstile waiter", [&] {
    PermitSemaphore waiter = client().permit_semaphore(name);
    const std::optional<PermitId> permit = waiter.try_acquire({.wait = seconds(60), .lease = seconds(90)});
    if (!permit) throw std::runtime_error("not acquired");
    acquired = true;
    waiter.release(*permit);
  });
  EXPECT_TRUE(eventually([&] { return subscribers("redisson_sc:{" + name + "}") >= 1; }));
  EXPECT_TRUE(redisson().permit_release(name, *second));
  EXPECT_TRUE(eventually([&] { return acquired.load(); }));
  join_all();

  // turnstile holds, Redisson waits for the message of turnstile's release.
  const PermitId held = *semaphore.try_acquire({.wait = Duration::zero(), .lease = seconds(90)});
  Mailbox mailbox(redisson().backend(), "redisson_sc:{" + name + "}");
  EXPECT_FALSE(redisson().permit_acquire(name, kLongLeaseMs).has_value());
  semaphore.release(held);
  EXPECT_GE(mailbox.wait_beyond(0), 1);
  const std::optional<std::string> third = redisson().permit_acquire(name, std::nullopt);  // never expires
  ASSERT_TRUE(third.has_value());
  const PermitSemaphoreStatus after = semaphore.status();
  ASSERT_EQ(after.permits.size(), 1u);
  EXPECT_EQ(after.permits[0].id.hex(), *third);
  EXPECT_FALSE(after.permits[0].remaining.has_value());
  EXPECT_TRUE(redisson().permit_release(name, *third));
}

TEST_F(InteropLockTest, PermitZsetTakesTheCountsExpiryAsRedissonDoes) {
  const std::string name = "interop:permit-expiry";
  PermitSemaphore semaphore = client().permit_semaphore(name);
  ASSERT_TRUE(semaphore.try_set_permits(2));
  raw({"PEXPIRE", name, "600000"});
  const PermitId mine = *semaphore.try_acquire({.wait = Duration::zero(), .lease = seconds(90)});
  const std::int64_t turnstile_pttl = raw({"PTTL", "{" + name + "}:timeout"}).as_integer();
  EXPECT_GT(turnstile_pttl, 0);
  EXPECT_LE(turnstile_pttl, 600'000);
  semaphore.release(mine);
}

}  // namespace
}  // namespace turnstile::testing
