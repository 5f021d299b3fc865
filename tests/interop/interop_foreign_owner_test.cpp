// Issue #30: locks held by other clients of Redisson's layout, whose owner
// fields are not "<uuid>:<thread>": the node-redisson npm port writes
// "<uuid>:<uuid>", Redisson's transactions "<uuid>:<thread>:<32 hex>".
// Redisson's scripts take any field of a lock hash for an owner; so does
// turnstile: a turnstile waiter waits for such a holder and gets the lock
// when it is released or deleted, inspect() shows it, and force_unlock()
// deletes it as Redisson's forceUnlock does. A hash of counts under other
// fields (someone's data) is shown and waited on but never force-unlocked;
// a hash of other values is no lock at all, never deleted.

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <vector>

#include "interop_fixture.h"
#include "turnstile/errors.h"
#include "turnstile/inspection.h"

namespace turnstile::testing {
namespace {

using std::chrono::seconds;

constexpr std::int64_t kLongLeaseMs = 120'000;
const std::string kUuid = "6d1f3c2a-9b8e-4f70-a1b2-c3d4e5f60718";
const std::string kOtherUuid = "0c9a1e0e-7d52-4e44-9a8e-0123456789ab";

// The owner fields of the clients above.
std::vector<std::string> foreign_owners() {
  return {kUuid + ":" + kOtherUuid,                              // node-redisson
          kUuid + ":42:" + "0123456789abcdef0123456789abcdef"};  // Redisson's transactions
}

class InteropForeignOwnerTest : public InteropTest {
 protected:
  // A turnstile waiter on `name` (up to a minute, far below the holders'
  // 120 s leases: only a release's message wakes it in time); `acquired`
  // once it holds, then it releases.
  void spawn_waiter(const std::string& name, std::atomic<bool>& acquired) {
    spawn("turnstile waiter", [this, name, &acquired] {
      ReentrantLock lock = client().lock(name);
      if (!lock.try_lock({.wait = seconds(60), .lease = std::nullopt})) throw std::runtime_error("not acquired");
      acquired = true;
      lock.unlock();
    });
  }
};

TEST_F(InteropForeignOwnerTest, ATurnstileWaiterWaitsForAForeignHolderAndGetsTheLockOnRelease) {
  int n = 0;
  for (const std::string& owner : foreign_owners()) {
    const std::string name = "foreign:wait:" + std::to_string(n++);
    const std::string channel = "redisson_lock__channel:{" + name + "}";
    ASSERT_FALSE(redisson().lock(name, owner, kLongLeaseMs).has_value()) << owner;
    // A single try is refused as held, not as something else.
    EXPECT_FALSE(client().lock(name).try_lock()) << owner;
    EXPECT_FALSE(client().fenced_lock(name).try_lock()) << owner;
    EXPECT_FALSE(client().fair_lock(name).try_lock()) << owner;
    std::atomic<bool> acquired = false;
    spawn_waiter(name, acquired);
    // EXPECT, not ASSERT: the waiter's thread holds `acquired` until join_all().
    EXPECT_TRUE(eventually([&] { return subscribers(channel) >= 1; }));
    EXPECT_FALSE(acquired);
    EXPECT_EQ(redisson().unlock(name, owner), Reply::integer(1));
    // The holder's lease was 120 s: the waiter was woken by the release.
    EXPECT_TRUE(eventually([&] { return acquired.load(); })) << owner;
    join_all();
  }
}

TEST_F(InteropForeignOwnerTest, ATurnstileWaiterGetsTheLockWhenAForeignHolderIsForceUnlocked) {
  const std::string name = "foreign:force-wakes";
  const std::string owner = foreign_owners().front();
  ASSERT_FALSE(redisson().lock(name, owner, kLongLeaseMs).has_value());
  std::atomic<bool> acquired = false;
  spawn_waiter(name, acquired);
  // EXPECT, not ASSERT: the waiter's thread holds `acquired` until join_all().
  EXPECT_TRUE(eventually([&] { return subscribers("redisson_lock__channel:{" + name + "}") >= 1; }));
  EXPECT_TRUE(force_unlock(client(), name));  // Redisson's forceUnlock: deleted, waiters woken
  EXPECT_TRUE(eventually([&] { return acquired.load(); }));
  join_all();
}

TEST_F(InteropForeignOwnerTest, InspectionShowsForeignHolders) {
  int n = 0;
  for (const std::string& owner : foreign_owners()) {
    const std::string name = "foreign:shown:" + std::to_string(n++);
    ASSERT_FALSE(redisson().lock(name, owner, kLongLeaseMs).has_value());
    ASSERT_FALSE(redisson().lock(name, owner, kLongLeaseMs).has_value());  // reentrant: 2 holds
    const Inspection seen = inspect(client().backend(), name);
    EXPECT_EQ(seen.flavor, Flavor::reentrant) << owner;
    EXPECT_GT(seen.could_be.size(), 1u) << "reentrant or fair: Redis alone cannot tell";
    ASSERT_EQ(seen.holders.size(), 1u) << owner;
    EXPECT_EQ(seen.holders[0].owner, owner);
    EXPECT_EQ(seen.holders[0].hold_count, 2);
    EXPECT_TRUE(seen.holders[0].foreign);
    ASSERT_TRUE(seen.remaining_lease.has_value());
    EXPECT_GT(seen.remaining_lease->count(), 60'000);
  }
  // Redisson's own owner ids are not foreign.
  const std::string name = "foreign:shown:redisson";
  ASSERT_FALSE(redisson().lock(name, redisson().owner(1), kLongLeaseMs).has_value());
  const Inspection seen = inspect(client().backend(), name, {.flavor = Flavor::fair});
  EXPECT_EQ(seen.flavor, Flavor::fair);
  EXPECT_EQ(seen.could_be, std::vector<Flavor>{Flavor::fair});
  ASSERT_EQ(seen.holders.size(), 1u);
  EXPECT_FALSE(seen.holders[0].foreign);
}

TEST_F(InteropForeignOwnerTest, AForeignWriterKeepsTurnstileReadersOut) {
  const std::string name = "foreign:rw";
  const std::string writer = foreign_owners().front() + ":write";
  raw({"HSET", name, "mode", "write", writer, "1"});
  raw({"PEXPIRE", name, "60000"});
  ReadWriteLock lock = client().read_write_lock(name);
  EXPECT_FALSE(lock.read().try_lock());
  EXPECT_FALSE(lock.write().try_lock());
  const Inspection seen = inspect(client().backend(), name);
  EXPECT_EQ(seen.flavor, Flavor::read_write);
  ASSERT_EQ(seen.holders.size(), 1u);
  EXPECT_EQ(seen.holders[0].owner, foreign_owners().front());
  EXPECT_TRUE(seen.holders[0].writes);
  EXPECT_TRUE(seen.holders[0].foreign);
  EXPECT_TRUE(force_unlock(client(), name));
  EXPECT_EQ(raw({"EXISTS", name}), Reply::integer(0));
}

TEST_F(InteropForeignOwnerTest, ForceUnlockDeletesForeignRedissonLayoutLocksOnly) {
  int n = 0;
  for (const std::string& owner : foreign_owners()) {
    const std::string name = "foreign:force:" + std::to_string(n++);
    ASSERT_FALSE(redisson().lock(name, owner, kLongLeaseMs).has_value());
    EXPECT_TRUE(force_unlock(client(), name)) << owner;
    EXPECT_EQ(raw({"EXISTS", name}), Reply::integer(0)) << owner;
    EXPECT_FALSE(force_unlock(client(), name)) << "nothing left to unlock";
  }
}

TEST_F(InteropForeignOwnerTest, UserDataIsNeverForceUnlocked) {
  // Counts under fields that are no owner of Redisson's layout: a lock as
  // Redisson's scripts see one (waited on, shown), but maybe someone's data.
  raw({"HSET", "foreign:counts", "views", "3", "likes", "5"});
  raw({"PEXPIRE", "foreign:counts", "60000"});
  // Values that are no hold counts: no lock at all.
  raw({"HSET", "foreign:profile", kUuid + ":1", "alice"});
  raw({"PEXPIRE", "foreign:profile", "60000"});
  raw({"HSET", "foreign:zero", kUuid + ":" + kOtherUuid, "0"});
  raw({"PEXPIRE", "foreign:zero", "60000"});

  EXPECT_FALSE(client().lock("foreign:counts").try_lock());  // held: waited on, not refused
  const Inspection counts = inspect(client().backend(), "foreign:counts");
  EXPECT_EQ(counts.holder_count, 2);
  EXPECT_TRUE(counts.holders[0].foreign);
  for (const std::string name : {"foreign:counts", "foreign:profile", "foreign:zero"}) {
    EXPECT_THROW((void)force_unlock(client(), name), WrongTypeError) << name;
    // The scripts check again, atomically, whatever the caller inspected.
    EXPECT_THROW((void)client().lock(name).force_unlock(), WrongTypeError) << name;
    EXPECT_THROW((void)client().fair_lock(name).force_unlock(), WrongTypeError) << name;
    EXPECT_EQ(raw({"EXISTS", name}), Reply::integer(1)) << name;
  }
  for (const std::string name : {"foreign:profile", "foreign:zero"}) {
    EXPECT_THROW((void)inspect(client().backend(), name), WrongTypeError) << name;
    EXPECT_THROW((void)client().lock(name).try_lock(), WrongTypeError) << name;
  }
  EXPECT_EQ(raw({"HGET", "foreign:counts", "views"}), Reply::bulk("3"));
  EXPECT_EQ(raw({"HGET", "foreign:profile", kUuid + ":1"}), Reply::bulk("alice"));
}

}  // namespace
}  // namespace turnstile::testing
