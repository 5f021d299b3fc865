// Durable grants in simulation (RedisOptions::aof_sync, issue #51): a fake
// server with an append-only file answers eval_synced() as EVALSHA +
// WAITAOF 1 0 would, so a grant fsynced before its holder proceeds
// survives a restart, one not fsynced in time is undone (AofSyncError),
// and a server without an append-only file grants nothing.

#include <gtest/gtest.h>

#include <functional>
#include <optional>
#include <string>

#include "sim/fake_backend.h"
#include "turnstile/client.h"
#include "turnstile/errors.h"
#include "turnstile/lock.h"
#include "turnstile/sim/world.h"

namespace turnstile::sim {
namespace {

using namespace std::chrono_literals;

constexpr char kLockName[] = "deploys";
const AcquireOptions kPatient{.wait = 60s, .lease = 60s};

WorldOptions durable(Persistence persistence, std::optional<Duration> aof_sync_timeout) {
  WorldOptions options;
  options.server.persistence = persistence;
  options.aof_sync_timeout = aof_sync_timeout;
  return options;
}

bool lock_key_exists(SimClient& observer) {
  return observer.backend().command({"EXISTS", kLockName}) == Reply::integer(1);
}

// A client tries for the lock at 300 ms with `acquire` and, once it has
// it, runs `then` at once; returns when the try returned, in virtual ms
// (nullopt: not acquired).
std::optional<std::int64_t> lock_at_300ms(World& world, const AcquireOptions& acquire,
                                          const std::function<void(SimClient&, ReentrantLock&)>& then) {
  SimClient& alice = world.add_client("alice");
  std::optional<std::int64_t> acquired_at_ms;
  world.spawn(alice, [&] {
    Client client(alice.backend_ptr(), alice.runtime_ptr());
    ReentrantLock lock = client.lock(kLockName);
    alice.runtime().sleep_for(300ms);
    if (!lock.try_lock(acquire)) return;
    acquired_at_ms = world.now_ms();
    then(alice, lock);
  });
  world.run_until_idle();
  return acquired_at_ms;
}

// appendfsync everysec: the grant made at 300 ms is on disk at the next
// whole second, when lock() returns; a machine crash right after keeps it
// (without aof_sync, the same restart loses it: the next test's control).
TEST(AofSyncTest, AGrantFsyncedBeforeItsHolderProceedsSurvivesARestart) {
  for (const bool aof_sync : {true, false}) {
    SCOPED_TRACE(aof_sync ? "aof_sync" : "without aof_sync");
    World world(1, durable(Persistence::everysec, aof_sync ? std::optional<Duration>(2s) : std::nullopt));
    const std::optional<std::int64_t> acquired_at_ms =
        lock_at_300ms(world, kPatient, [&](SimClient& alice, ReentrantLock&) {
          world.restart_server(0);  // as soon as the holder proceeds
          EXPECT_EQ(lock_key_exists(alice), aof_sync);
        });
    ASSERT_TRUE(acquired_at_ms.has_value());
    EXPECT_EQ(*acquired_at_ms, aof_sync ? 1000 : 300);
  }
}

// One try: the fsync comes at 1 s, after the 100 ms WAITAOF timeout of a
// grant made at 300 ms. The grant is undone and the caller told.
TEST(AofSyncTest, AGrantNotFsyncedInTimeIsUndoneWithAofSyncError) {
  World world(1, durable(Persistence::everysec, 100ms));
  SimClient& alice = world.add_client("alice");
  std::string error;
  std::int64_t failed_at_ms = -1;
  bool key_after = true;
  std::uint64_t undone = 0;
  world.spawn(alice, [&] {
    Client client(alice.backend_ptr(), alice.runtime_ptr());
    ReentrantLock lock = client.lock(kLockName);
    alice.runtime().sleep_for(300ms);
    try {
      (void)lock.try_lock({.lease = 10s});
    } catch (const AofSyncError& caught) {
      error = caught.what();
      failed_at_ms = world.now_ms();
    }
    key_after = lock_key_exists(alice);
    EXPECT_FALSE(lock.is_held_by_current_thread());
    undone = client.metrics().unreplicated_grants;
  });
  world.run_until_idle();
  EXPECT_EQ(failed_at_ms, 400);  // the WAITAOF timeout
  EXPECT_NE(error.find("did not confirm its fsync to the append-only file"), std::string::npos) << error;
  EXPECT_NE(error.find("released again"), std::string::npos) << error;
  EXPECT_FALSE(key_after);
  EXPECT_EQ(undone, 1u);
}

// A wait tries again after an undone grant: a try made late enough in its
// second (the fsync within the 100 ms timeout) gets the lock.
TEST(AofSyncTest, AWaitTriesAgainUntilAGrantIsFsyncedInTime) {
  World world(1, durable(Persistence::everysec, 100ms));
  const std::optional<std::int64_t> acquired_at_ms =
      lock_at_300ms(world, {.wait = 5s, .lease = 10s}, [&](SimClient& alice, ReentrantLock& lock) {
        world.restart_server(0);
        EXPECT_TRUE(lock_key_exists(alice));
        lock.unlock();
      });
  ASSERT_TRUE(acquired_at_ms.has_value());
  EXPECT_EQ(*acquired_at_ms % 1000, 0) << *acquired_at_ms << ": returned at a fsync";
  EXPECT_LT(*acquired_at_ms, 5300);
}

// appendfsync always: fsynced before WAITAOF is read, no wait at all.
TEST(AofSyncTest, WithAppendfsyncAlwaysAGrantWaitsForNothing) {
  World world(1, durable(Persistence::always, 1s));
  EXPECT_EQ(lock_at_300ms(world, kPatient, [](SimClient&, ReentrantLock& lock) { lock.unlock(); }), 300);
}

// No append-only file: no grant is made, every acquisition refused at once.
TEST(AofSyncTest, AServerWithoutAnAppendOnlyFileGrantsNothing) {
  World world(1, durable(Persistence::none, 1s));
  SimClient& alice = world.add_client("alice");
  std::string error;
  std::int64_t failed_at_ms = -1;
  world.spawn(alice, [&] {
    Client client(alice.backend_ptr(), alice.runtime_ptr());
    ReentrantLock lock = client.lock(kLockName);
    try {
      (void)lock.try_lock({.wait = 2s, .lease = 10s});
    } catch (const UnsafeServerError& caught) {
      error = caught.what();
      failed_at_ms = world.now_ms();
    }
    EXPECT_FALSE(lock_key_exists(alice));
  });
  world.run_until_idle();
  EXPECT_NE(error.find("append-only file"), std::string::npos) << error;
  EXPECT_EQ(failed_at_ms, 0) << "not a transient failure: the wait ends at once";
}

}  // namespace
}  // namespace turnstile::sim
