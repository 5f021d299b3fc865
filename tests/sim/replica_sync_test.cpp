// Replica-sync safety in simulation (issue #11): a fake server with a
// lagging replica answers eval_synced() as EVALSHA + WAIT would, so a lock
// acquired with the replica's acknowledgement survives a failover, and one
// the replica did not acknowledge in time is undone (ReplicaSyncError).

#include <gtest/gtest.h>

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

constexpr char kLockName[] = "orders";

WorldOptions with_replica_sync(std::optional<Duration> timeout) {
  WorldOptions options;
  options.replica_sync_timeout = timeout;
  return options;
}

bool lock_key_exists(SimClient& observer) {
  return observer.backend().command({"EXISTS", kLockName}) == Reply::integer(1);
}

TEST(ReplicaSyncTest, AnAcknowledgedLockSurvivesTheFailover) {
  World world(1, with_replica_sync(1s));
  world.add_replica(0, 200ms);
  SimClient& alice = world.add_client("alice");
  SimClient& bob = world.add_client("bob");
  std::optional<std::int64_t> acquired_at_ms;
  bool bob_got_it = true;
  bool alice_still_held = false;
  world.spawn(alice, [&] {
    Client client(alice.backend_ptr(), alice.runtime_ptr());
    ReentrantLock lock = client.lock(kLockName);
    lock.lock(10s);
    acquired_at_ms = world.now_ms();
    alice.runtime().sleep_for(2s);  // the failover happens at 1 s
    lock.unlock();                  // throws NotOwnerError if the lock was lost
    alice_still_held = true;
  });
  world.at(Instant(1s), [&] {
    EXPECT_EQ(world.failover(0), 0u);  // the acquisition was replicated long ago
    world.spawn(bob, [&] {
      Client client(bob.backend_ptr(), bob.runtime_ptr());
      ReentrantLock lock = client.lock(kLockName);
      bob_got_it = lock.try_lock(AcquireOptions{.wait = Duration::zero(), .lease = 10s});
    });
  });
  world.run_until_idle();
  ASSERT_TRUE(acquired_at_ms.has_value());
  EXPECT_EQ(*acquired_at_ms, 200);  // lock() returned once the replica applied it (WAIT)
  EXPECT_FALSE(bob_got_it);
  EXPECT_TRUE(alice_still_held);
}

TEST(ReplicaSyncTest, AnUnacknowledgedLockIsUndoneWithReplicaSyncError) {
  World world(1, with_replica_sync(1s));
  world.add_replica(0, 5s);  // slower than the 1 s WAIT timeout
  SimClient& alice = world.add_client("alice");
  std::string error;
  std::int64_t failed_at_ms = -1;
  bool key_after = true;
  world.spawn(alice, [&] {
    Client client(alice.backend_ptr(), alice.runtime_ptr());
    ReentrantLock lock = client.lock(kLockName);
    try {
      lock.lock(10s);
    } catch (const ReplicaSyncError& caught) {
      error = caught.what();
      failed_at_ms = world.now_ms();
    }
    key_after = lock_key_exists(alice);
    EXPECT_FALSE(lock.is_held_by_current_thread());
  });
  world.run_until_idle();
  EXPECT_EQ(failed_at_ms, 1000);  // the WAIT timeout
  EXPECT_NE(error.find("none of its 1 replicas acknowledged"), std::string::npos) << error;
  EXPECT_NE(error.find("released again"), std::string::npos) << error;
  EXPECT_FALSE(key_after);
}

TEST(ReplicaSyncTest, AFailoverDuringTheWaitLeavesTheLockUnacknowledged) {
  World world(1, with_replica_sync(1s));
  world.add_replica(0, 500ms);
  SimClient& alice = world.add_client("alice");
  bool sync_error = false;
  world.spawn(alice, [&] {
    Client client(alice.backend_ptr(), alice.runtime_ptr());
    ReentrantLock lock = client.lock(kLockName);
    try {
      lock.lock(10s);
    } catch (const ReplicaSyncError&) {
      sync_error = true;
    }
  });
  world.at(Instant(100ms), [&] { EXPECT_GT(world.failover(0), 0u); });  // the grant was not replicated yet
  world.run_until_idle();
  EXPECT_TRUE(sync_error);
}

TEST(ReplicaSyncTest, WithoutReplicaSyncAFailoverLosesTheLock) {
  World world(1, with_replica_sync(std::nullopt));
  world.add_replica(0, 5s);
  SimClient& alice = world.add_client("alice");
  std::int64_t acquired_at_ms = -1;
  bool key_after_failover = true;
  world.spawn(alice, [&] {
    Client client(alice.backend_ptr(), alice.runtime_ptr());
    ReentrantLock lock = client.lock(kLockName);
    lock.lock(10s);
    acquired_at_ms = world.now_ms();
    alice.runtime().sleep_for(2s);
    key_after_failover = lock_key_exists(alice);
    EXPECT_NO_THROW(lock.unlock());  // lost: told, unlock() returns (lock.h)
  });
  world.at(Instant(1s), [&] { (void)world.failover(0); });
  world.run_until_idle();
  EXPECT_EQ(acquired_at_ms, 0);  // no waiting for the replica
  EXPECT_FALSE(key_after_failover);
}

TEST(ReplicaSyncTest, ALinkToAServerWithoutReplicaReportsNone) {
  World world(1, with_replica_sync(1s));
  SimClient& alice = world.add_client("alice");
  world.spawn(alice, [&] {
    Client client(alice.backend_ptr(), alice.runtime_ptr());
    ReentrantLock lock = client.lock(kLockName);
    lock.lock(10s);
    EXPECT_EQ(world.now_ms(), 0);
    lock.unlock();
  });
  world.run_until_idle();
  EXPECT_FALSE(world.stopped());
}

}  // namespace
}  // namespace turnstile::sim
