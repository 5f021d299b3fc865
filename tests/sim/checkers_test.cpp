// Each checker must catch a violation planted on purpose, stop the world
// with a clear report, and stay quiet on a correct run.

#include "turnstile/sim/checkers.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "turnstile/client.h"
#include "turnstile/flavor.h"
#include "turnstile/semaphore.h"

namespace turnstile::sim {
namespace {

using namespace std::chrono_literals;

TEST(CheckersTest, CatchesTwoHoldersGrantedByTheServer) {
  World world(42);
  Checkers checkers(world);
  checkers.watch({.resource = "orders", .reader = hash_lock_reader("orders")});
  SimClient& alice = world.add_client("alice");
  checkers.name_holder("uuid-a", "alice");
  checkers.name_holder("uuid-b", "bob");
  world.spawn(alice, [&] {
    alice.backend().command({"HSET", "orders", "uuid-a:1", "1"});
    alice.backend().command({"PEXPIRE", "orders", "30000"});
    alice.runtime().sleep_for(5s);
    alice.backend().command({"HSET", "orders", "uuid-b:1", "1"});  // a broken script would do this
    alice.runtime().sleep_for(5s);
  });
  world.run_for(1min);
  ASSERT_EQ(checkers.count(ViolationKind::mutual_exclusion), 1u);
  EXPECT_EQ(checkers.unexpected_count(), 1u);
  EXPECT_TRUE(world.stopped());
  EXPECT_EQ(world.now_ms(), 5000);  // stopped there, not at the end
  const Violation& violation = checkers.violations()[0];
  EXPECT_EQ(violation.virtual_ms, 5000);
  EXPECT_EQ(violation.clients, (std::vector<std::string>{"bob", "alice"}));
  EXPECT_EQ(violation.seed, 42u);
  EXPECT_NE(violation.report().find("mutual exclusion violated at 5000 ms on 'orders' (bob, alice)"),
            std::string::npos);
  EXPECT_NE(violation.report().find("replay with seed 42"), std::string::npos);
}

TEST(CheckersTest, AGrantEndsAtItsLeaseDeadline) {
  World world(1);
  Checkers checkers(world);
  checkers.watch({.resource = "t", .reader = string_lock_reader("t")});
  SimClient& alice = world.add_client("alice");
  world.spawn(alice, [&] {
    alice.backend().command({"SET", "t", "token-1", "PX", "1000"});
    alice.runtime().sleep_for(1001ms);
    alice.backend().command({"SET", "t", "token-2", "NX", "PX", "1000"});
  });
  world.run_until_idle();
  EXPECT_EQ(checkers.grants_observed(), 2u);
  EXPECT_EQ(checkers.unexpected_count(), 0u);
}

TEST(CheckersTest, AGrantSurvivesARestartThatForgotIt) {
  World world(1);
  Checkers checkers(world);
  checkers.watch({.resource = "t", .reader = string_lock_reader("t")});
  checkers.expect(ViolationKind::mutual_exclusion);
  SimClient& alice = world.add_client("alice");
  world.spawn(alice, [&] {
    alice.backend().command({"SET", "t", "token-1", "PX", "30000"});
    alice.runtime().sleep_for(1s);
    alice.backend().command({"SET", "t", "token-2", "NX", "PX", "30000"});
  });
  world.at(Instant{} + 500ms, [&] { world.restart_server(0); });
  world.run_until_idle();
  EXPECT_EQ(checkers.count(ViolationKind::mutual_exclusion), 1u);
  EXPECT_EQ(checkers.unexpected_count(), 0u);  // expected: not stopping
  EXPECT_FALSE(world.stopped());
  EXPECT_TRUE(checkers.violations()[0].expected);
}

// A RedLock node that fails over loses what it listed: a waiter's key read
// there before the failover does not count towards its quorum afterwards,
// and the node, never listing the holder, does not back the holder's grant
// (swarm seed 1387 of issue #34 reported a double grant here).
TEST(CheckersTest, AQuorumCountsNoListingAFailoverLost) {
  World world(1, WorldOptions{.servers = 3});
  Checkers checkers(world);
  checkers.watch({.resource = "r", .reader = hash_lock_reader("r"), .quorum = 2});
  checkers.name_holder("a", "alice");
  checkers.name_holder("b", "bob");
  world.add_replica(0, 10s);
  SimClient& client = world.add_client("client");
  const auto take = [&](std::size_t server, const std::string& owner) {
    client.backend_ptr(server)->command({"HSET", "r", owner + ":1", "1"});
    client.backend_ptr(server)->command({"PEXPIRE", "r", "30000"});
  };
  world.spawn(client, [&] {
    take(0, "b");  // bob's minority attempt
    take(1, "a");
    take(2, "a");  // alice's majority
    client.runtime().sleep_for(1s);
    world.failover(0);  // bob's key on server-0 is lost
    client.runtime().sleep_for(1s);
    client.backend_ptr(2)->command({"DEL", "r"});  // alice releases server-2 first
    take(2, "b");                                  // bob: server-2 alone, no majority
  });
  world.run_until_idle();
  EXPECT_EQ(checkers.count(ViolationKind::mutual_exclusion), 0u);
  EXPECT_EQ(checkers.unexpected_count(), 0u);
  EXPECT_EQ(checkers.grants_observed(), 1u);  // alice's only
}

// A majority lasts until the quorum-th latest of the leases that still
// list it: alice's release reaches server-1 only (server-0's link is
// down), and her older key on server-2 runs out first, so her majority
// ends then, not at the deadline it had while server-1 still listed her
// (swarm seed 39643 of issue #54, contention, redlock, chaos, reported a
// double grant here). Bob, one millisecond earlier, is a double grant.
std::uint64_t double_grants_after_a_partial_release(std::chrono::milliseconds bob_after_old_key) {
  World world(1, WorldOptions{.servers = 3});
  Checkers checkers(world);
  checkers.watch({.resource = "r", .reader = hash_lock_reader("r"), .quorum = 2});
  checkers.name_holder("a", "alice");
  checkers.name_holder("b", "bob");
  SimClient& client = world.add_client("client");
  const auto take = [&](std::size_t server, const std::string& owner, const char* lease_ms) {
    client.backend_ptr(server)->command({"HSET", "r", owner + ":1", "1"});
    client.backend_ptr(server)->command({"PEXPIRE", "r", lease_ms});
  };
  world.spawn(client, [&] {
    take(2, "a", "10000");  // an earlier hold whose release never reached server-2
    client.runtime().sleep_for(1s);
    take(0, "a", "30000");
    take(1, "a", "30000");  // alice's majority: until 31 s by servers 0 and 1
    client.runtime().sleep_for(1s);
    client.backend_ptr(1)->command({"DEL", "r"});  // her release reaches server-1 only
    client.runtime().sleep_until(Instant{} + 10s + bob_after_old_key);
    take(1, "b", "30000");
    take(2, "b", "30000");  // server-2's "a" key has (or has not) run out
  });
  world.run_until_idle();
  return checkers.count(ViolationKind::mutual_exclusion);
}

TEST(CheckersTest, AMajorityEndsWithTheShorterLeaseItStillStandsOn) {
  EXPECT_EQ(double_grants_after_a_partial_release(1ms), 0u);
  EXPECT_EQ(double_grants_after_a_partial_release(-1ms), 1u);
}

// Replica sync: alice's grant is lost in a failover while she waits for
// the replica; bob is granted it by the promoted replica. Whether that is a
// double grant is alice's answer: undone (withdrawn) it is not; taken it is.
std::uint64_t double_grants_after_a_failover_mid_acquisition(bool alice_takes_it) {
  World world(7);
  Checkers checkers(world);
  checkers.watch({.resource = "orders", .reader = hash_lock_reader("orders")});
  world.add_replica(0, 6s);
  SimClient& alice = world.add_client("alice");
  SimClient& bob = world.add_client("bob");
  checkers.name_holder("uuid-a", "alice");
  checkers.name_holder("uuid-b", "bob");
  world.spawn(alice, [&] {
    checkers.waiting(alice, "orders");
    alice.backend().command({"HSET", "orders", "uuid-a:1", "1"});
    alice.backend().command({"PEXPIRE", "orders", "30000"});
    alice.runtime().sleep_for(1s);  // WAIT; the failover comes meanwhile
    if (alice_takes_it) {
      checkers.acquired(alice, "orders", std::nullopt);
    } else {
      checkers.withdrawn(alice, "orders");
    }
  });
  world.spawn(bob, [&] {
    bob.runtime().sleep_for(600ms);
    bob.backend().command({"HSET", "orders", "uuid-b:1", "1"});
    bob.backend().command({"PEXPIRE", "orders", "30000"});
  });
  world.at(Instant{} + 500ms, [&] { world.failover(0); });
  world.run_until_idle();
  EXPECT_FALSE(world.stopped() && !alice_takes_it);
  return checkers.count(ViolationKind::mutual_exclusion);
}

TEST(CheckersTest, AGrantUndoneAfterAFailoverLostItIsNoDoubleGrant) {
  EXPECT_EQ(double_grants_after_a_failover_mid_acquisition(false), 0u);
}

TEST(CheckersTest, AGrantTakenAfterAFailoverLostItIsADoubleGrant) {
  EXPECT_EQ(double_grants_after_a_failover_mid_acquisition(true), 1u);
}

TEST(CheckersTest, CatchesAFairLockSkippingAnEarlierWaiter) {
  World world(1);
  Checkers checkers(world);
  checkers.watch({.resource = "fair", .reader = fair_lock_reader("fair", "queue"), .fifo = true});
  checkers.name_holder("w1", "first");
  checkers.name_holder("w2", "second");
  SimClient& alice = world.add_client("alice");
  world.spawn(alice, [&] {
    alice.backend().command({"RPUSH", "queue", "w1:1", "w2:1"});
    alice.runtime().sleep_for(1s);
    alice.backend().command({"LREM", "queue", "1", "w2:1"});  // a FIFO grant would pop w1
    alice.backend().command({"HSET", "fair", "w2:1", "1"});
  });
  world.run_until_idle();
  ASSERT_EQ(checkers.count(ViolationKind::fifo), 1u);
  EXPECT_EQ(checkers.violations()[0].clients, (std::vector<std::string>{"second", "first"}));
}

TEST(CheckersTest, AFairGrantToTheHeadIsFine) {
  World world(1);
  Checkers checkers(world);
  checkers.watch({.resource = "fair", .reader = fair_lock_reader("fair", "queue"), .fifo = true});
  SimClient& alice = world.add_client("alice");
  world.spawn(alice, [&] {
    alice.backend().command({"RPUSH", "queue", "w1:1", "w2:1"});
    alice.runtime().sleep_for(1s);
    alice.backend().command({"HSET", "fair", "w1:1", "1"});  // the head, then it leaves the queue
    alice.backend().command({"LPOP", "queue"});
  });
  world.run_until_idle();
  EXPECT_EQ(checkers.unexpected_count(), 0u);
}

// A release handing the lock to a waiter past its liveness deadline
// (turnstile_lock_waiters: gone, or frozen while still subscribed) while a
// live waiter queues behind it: the lock sits with nobody who uses it (the
// fault fair_handoff.lua's liveness test prevents). Handed over with nobody
// live behind it, or within its deadline, it is fine; a free lock's taking
// is the waiter's own try (judged in the next test).
std::uint64_t fifo_reports_for_a_grant(std::int64_t grantee_alive_ms, std::int64_t behind_alive_ms) {
  World world(1);
  Checkers checkers(world);
  checkers.watch({.resource = "fair", .reader = fair_lock_reader("fair", "queue", "alive"), .fifo = true});
  SimClient& alice = world.add_client("alice");
  // Unix ms, as the clients' wall clocks write them.
  const auto unix_ms = [](std::int64_t virtual_ms) {
    return std::to_string(WorldOptions{}.unix_ms_at_zero + virtual_ms);
  };
  world.spawn(alice, [&] {
    alice.backend().command({"HSET", "fair", "w0:1", "1"});  // the holder, who releases at 10 s
    alice.backend().command({"RPUSH", "queue", "w1:1", "w2:1"});
    alice.backend().command({"ZADD", "alive", unix_ms(grantee_alive_ms), "w1:1"});
    if (behind_alive_ms >= 0) alice.backend().command({"ZADD", "alive", unix_ms(behind_alive_ms), "w2:1"});
    alice.runtime().sleep_for(10s);
    alice.backend().command({"EVAL",
                             "redis.call('del', KEYS[1]); redis.call('lpop', KEYS[2]); "
                             "redis.call('zrem', KEYS[3], 'w1:1'); redis.call('hset', KEYS[1], 'w1:1', '1')",
                             "3", "fair", "queue", "alive"});
  });
  world.run_until_idle();
  return checkers.count(ViolationKind::fifo);
}

TEST(CheckersTest, AFairGrantToAWaiterPastItsLivenessDeadlineIsCaught) {
  EXPECT_EQ(fifo_reports_for_a_grant(5'000, 20'000), 1u);   // dead at 10 s, a live waiter behind
  EXPECT_EQ(fifo_reports_for_a_grant(5'000, -1), 1u);       // behind it, Redisson's: live
  EXPECT_EQ(fifo_reports_for_a_grant(20'000, 20'000), 0u);  // within its deadline
  EXPECT_EQ(fifo_reports_for_a_grant(5'000, 8'000), 0u);    // nobody live behind it
  EXPECT_EQ(fifo_reports_for_a_grant(10'000, 20'000), 0u);  // in its deadline's ms: not judged
}

// A waiter's own try takes a free lock at the head of the queue: it is
// alive whatever its deadline said, and its script reads its clock as of
// the send (a request delayed in transit reads an older one): not judged
// against its liveness deadline.
TEST(CheckersTest, AWaiterTakingAFreeLockIsNotJudgedByItsLivenessDeadline) {
  World world(1);
  Checkers checkers(world);
  checkers.watch({.resource = "fair", .reader = fair_lock_reader("fair", "queue", "alive"), .fifo = true});
  SimClient& alice = world.add_client("alice");
  world.spawn(alice, [&] {
    alice.backend().command({"RPUSH", "queue", "w1:1", "w2:1"});
    alice.backend().command(
        {"ZADD", "alive", std::to_string(WorldOptions{}.unix_ms_at_zero + 5'000), "w1:1", "99999999999999", "w2:1"});
    alice.runtime().sleep_for(10s);
    alice.backend().command(
        {"EVAL", "redis.call('lpop', KEYS[2]); redis.call('hset', KEYS[1], 'w1:1', '1')", "2", "fair", "queue"});
  });
  world.run_until_idle();
  EXPECT_EQ(checkers.count(ViolationKind::fifo), 0u);
}

// With no tolerance known (a run whose requests may wait in transit by an
// unknown time), a release is not judged by liveness deadlines either.
TEST(CheckersTest, NoToleranceNoLivenessJudgement) {
  World world(1);
  Checkers checkers(world);
  checkers.watch({.resource = "fair",
                  .reader = fair_lock_reader("fair", "queue", "alive"),
                  .fifo = true,
                  .waiter_deadline_tolerance = std::nullopt});
  SimClient& alice = world.add_client("alice");
  world.spawn(alice, [&] {
    alice.backend().command({"HSET", "fair", "w0:1", "1"});
    alice.backend().command({"RPUSH", "queue", "w1:1", "w2:1"});
    alice.backend().command({"ZADD", "alive", std::to_string(WorldOptions{}.unix_ms_at_zero + 5'000), "w1:1"});
    alice.runtime().sleep_for(10s);
    alice.backend().command({"EVAL",
                             "redis.call('del', KEYS[1]); redis.call('lpop', KEYS[2]); "
                             "redis.call('hset', KEYS[1], 'w1:1', '1')",
                             "2", "fair", "queue"});
  });
  world.run_until_idle();
  EXPECT_EQ(checkers.count(ViolationKind::fifo), 0u);
}

// A lock hash's direct handoff (a fair lock's head, a reentrant lock's
// registered process) releases the holder and grants the next in one
// script: read after it, the holder left its hash by a release. A token
// replaced in one command (a forced SET: nothing released) is a double
// grant.
TEST(CheckersTest, ALockHashHandedOnInOneScriptIsReleasedThenGranted) {
  for (const bool fair : {true, false}) {
    World world(1);
    Checkers checkers(world);
    checkers.watch({.resource = "lock", .reader = fair ? fair_lock_reader("lock", "queue") : hash_lock_reader("lock")});
    SimClient& alice = world.add_client("alice");
    world.spawn(alice, [&] {
      alice.backend().command({"HSET", "lock", "a:1", "1"});
      alice.backend().command({"PEXPIRE", "lock", "30000"});
      alice.runtime().sleep_for(1s);
      alice.backend().command({"EVAL",
                               "redis.call('del', KEYS[1]); redis.call('hset', KEYS[1], 'b:1', '1'); "
                               "redis.call('pexpire', KEYS[1], 30000)",
                               "1", "lock"});
    });
    world.run_until_idle();
    EXPECT_EQ(checkers.count(ViolationKind::mutual_exclusion), 0u) << (fair ? "fair" : "hash");
  }
}

TEST(CheckersTest, ATokenReplacedByAForcedSetIsADoubleGrant) {
  World world(1);
  Checkers checkers(world);
  checkers.watch({.resource = "lock", .reader = string_lock_reader("lock")});
  SimClient& alice = world.add_client("alice");
  world.spawn(alice, [&] {
    alice.backend().command({"SET", "lock", "token-a", "PX", "30000"});
    alice.runtime().sleep_for(1s);
    alice.backend().command({"SET", "lock", "token-b", "PX", "30000"});
  });
  world.run_until_idle();
  EXPECT_EQ(checkers.count(ViolationKind::mutual_exclusion), 1u);
}

// A holder whose unlock failed in transit let go, but the server still
// grants it the lock until its lease runs out: reading that unchanged hold
// (or the holder's reentrant re-acquisition on it) again is no new grant
// ahead of the waiters (swarm: fair-fifo --seed 33 --faults crashes). Once
// the server drops it, a grant that skips a waiter is still caught.
TEST(CheckersTest, AHoldWhoseUnlockFailedIsNoNewGrantButASkipAfterItIsCaught) {
  World world(1);
  Checkers checkers(world);
  checkers.watch({.resource = "fair", .reader = fair_lock_reader("fair", "queue"), .fifo = true});
  SimClient& alice = world.add_client("alice");
  checkers.name_holder("a", "alice");
  checkers.name_holder("b", "bob");
  checkers.name_holder("c", "carol");
  std::uint64_t fifo_while_held = 0;
  world.spawn(alice, [&] {
    alice.backend().command({"HSET", "fair", "a:1", "1"});
    alice.backend().command({"PEXPIRE", "fair", "30000"});
    checkers.acquired(alice, "fair");
    alice.backend().command({"RPUSH", "queue", "b:1"});  // bob waits
    alice.runtime().sleep_for(1s);
    checkers.releasing(alice, "fair");
    checkers.released(alice, "fair");                          // its unlock failed in transit: nothing written
    alice.backend().command({"PEXPIRE", "queue", "5000"});     // bob refreshes his place
    alice.backend().command({"HINCRBY", "fair", "a:1", "1"});  // alice locks again, reentrant
    alice.backend().command({"PEXPIRE", "fair", "30000"});
    fifo_while_held = checkers.count(ViolationKind::fifo);
    alice.backend().command({"DEL", "fair"});               // the server drops alice's hold
    alice.backend().command({"HSET", "fair", "c:1", "1"});  // carol skips bob: a real violation
  });
  world.run_until_idle();
  EXPECT_EQ(fifo_while_held, 0u);
  ASSERT_EQ(checkers.count(ViolationKind::fifo), 1u);
  EXPECT_EQ(checkers.violations()[0].clients, (std::vector<std::string>{"carol", "bob"}));
  EXPECT_EQ(checkers.count(ViolationKind::mutual_exclusion), 0u);
}

TEST(CheckersTest, CatchesPermitsAppearingFromNowhere) {
  World world(1);
  Checkers checkers(world);
  checkers.watch({.resource = "pool", .reader = counting_semaphore_reader("pool"), .capacity = 3, .permits = true});
  SimClient& alice = world.add_client("alice");
  world.spawn(alice, [&] {
    alice.backend().command({"SET", "pool", "3"});
    alice.backend().command({"INCR", "pool"});  // a release without an acquire
  });
  world.run_until_idle();
  EXPECT_EQ(checkers.count(ViolationKind::permit_conservation), 1u);
}

TEST(CheckersTest, CatchesPermitsLostAtTheEnd) {
  World world(1);
  Checkers checkers(world);
  checkers.watch({.resource = "pool", .reader = counting_semaphore_reader("pool"), .capacity = 3, .permits = true});
  SimClient& alice = world.add_client("alice");
  world.spawn(alice, [&] {
    alice.backend().command({"SET", "pool", "3"});
    alice.backend().command({"DECR", "pool"});
    checkers.acquired(alice, "pool");
    alice.backend().command({"DECR", "pool"});  // taken, never told
  });
  world.run_until_idle();
  EXPECT_EQ(checkers.unexpected_count(), 0u);
  checkers.check_liveness();
  EXPECT_EQ(checkers.count(ViolationKind::permit_conservation), 1u);
}

// A name with its own hash tag keeps its side keys where the library puts
// them (key_layout(): "{pool}:a:timeout"); a checker that wrapped the name
// again ("{{pool}:a}:timeout") would see no permit and miss this one.
TEST(CheckersTest, ReadsAHashTaggedNameWhereTheLibraryWritesIt) {
  World world(1);
  Checkers checkers(world);
  const std::string name = "{pool}:a";
  checkers.watch({.resource = name,
                  .reader = state_reader(Flavor::semaphore, name),
                  .capacity = 2,
                  .permits = true,
                  .permits_expire = true});
  SimClient& alice = world.add_client("alice");
  world.spawn(alice, [&] {
    Client client(alice.backend_ptr(), alice.runtime_ptr());
    PermitSemaphore pool = client.permit_semaphore(name);
    EXPECT_EQ(pool.timeout_key(), "{pool}:a:timeout");
    EXPECT_TRUE(pool.try_set_permits(2));
    (void)pool.acquire(10s);
    checkers.acquired(alice, name);
    EXPECT_EQ(checkers.count(ViolationKind::permit_conservation), 0u);  // 1 free + 1 listed
    // A permit appearing in the library's set with no change to the count.
    alice.backend().command({"ZADD", pool.timeout_key(), "99999999999999", std::string(16, 'x')});
  });
  world.run_until_idle();
  EXPECT_EQ(checkers.count(ViolationKind::permit_conservation), 1u);
}

TEST(CheckersTest, CatchesAFencingTokenGoingBackwards) {
  World world(1);
  Checkers checkers(world);
  checkers.watch({.resource = "orders", .reader = hash_lock_reader("orders")});
  SimClient& alice = world.add_client("alice");
  SimClient& bob = world.add_client("bob");
  checkers.acquired(alice, "orders", 5);
  checkers.released(alice, "orders");
  checkers.acquired(bob, "orders", 6);
  checkers.released(bob, "orders");
  EXPECT_EQ(checkers.unexpected_count(), 0u);
  checkers.acquired(alice, "orders", 6);
  ASSERT_EQ(checkers.count(ViolationKind::fencing_order), 1u);
  EXPECT_EQ(checkers.violations()[0].clients, (std::vector<std::string>{"alice", "bob"}));
}

TEST(CheckersTest, CatchesAWaiterThatNeverGetsIn) {
  World world(1);
  Checkers checkers(world);
  SimClient& alice = world.add_client("alice");
  SimClient& bob = world.add_client("bob");
  SimClient& carol = world.add_client("carol");
  checkers.waiting(alice, "orders");
  checkers.waiting(bob, "orders");
  checkers.acquired(bob, "orders");
  checkers.waiting(carol, "orders");
  world.crash(carol);  // the dead do not count
  checkers.check_liveness();
  ASSERT_EQ(checkers.count(ViolationKind::liveness), 1u);
  EXPECT_EQ(checkers.violations()[0].clients, (std::vector<std::string>{"alice"}));
}

TEST(CheckersTest, QuietOnCorrectLocking) {
  World world(3);
  Checkers checkers(world);
  checkers.watch({.resource = "orders", .reader = hash_lock_reader("orders")});
  std::vector<std::unique_ptr<Client>> clients;
  for (int i = 0; i < 8; ++i) {
    SimClient& sim = world.add_client("c" + std::to_string(i));
    clients.push_back(std::make_unique<Client>(sim.backend_ptr(), sim.runtime_ptr()));
    Client* client = clients.back().get();
    world.spawn(sim, [&sim, client, &checkers] {
      ReentrantLock lock = client->lock("orders");
      for (int round = 0; round < 20; ++round) {
        checkers.waiting(sim, "orders");
        lock.lock();
        checkers.acquired(sim, "orders");
        sim.runtime().sleep_for(1s);
        lock.unlock();
        checkers.released(sim, "orders");
      }
    });
  }
  world.run_for(10min);
  checkers.check_liveness();
  EXPECT_EQ(checkers.grants_observed(), 160u);
  EXPECT_EQ(checkers.unexpected_count(), 0u);
  EXPECT_TRUE(checkers.violations().empty());
}

// ---- belief intervals ----

TEST(CheckersTest, CatchesAHolderStillBelievingAfterAnotherAcquired) {
  World world(9);
  Checkers checkers(world);
  checkers.watch({.resource = "orders", .reader = hash_lock_reader("orders")});
  SimClient& alice = world.add_client("alice");
  SimClient& bob = world.add_client("bob");
  world.at(Instant{} + 1s, [&] { checkers.acquired(alice, "orders"); });
  world.at(Instant{} + 5s, [&] { checkers.acquired(bob, "orders"); });
  world.at(Instant{} + 6s, [&] { checkers.lost(alice, "orders"); });
  world.run_for(1min);
  ASSERT_EQ(checkers.count(ViolationKind::belief_overlap), 1u);
  EXPECT_EQ(checkers.count(ViolationKind::mutual_exclusion), 0u);  // no server granted anything
  EXPECT_TRUE(world.stopped());
  EXPECT_EQ(world.now_ms(), 5000);
  const Violation& violation = checkers.violations()[0];
  EXPECT_EQ(violation.clients, (std::vector<std::string>{"bob", "alice"}));
  EXPECT_NE(violation.report().find("belief overlap violated at 5000 ms on 'orders' (bob, alice): bob began to hold "
                                    "it while alice still believed it held 1 permit(s) (since 1000 ms; capacity 1)"),
            std::string::npos)
      << violation.report();
  EXPECT_NE(violation.report().find("replay with seed 9"), std::string::npos);
}

TEST(CheckersTest, ABeliefEndsAtALossAReleaseACrashOrItsDeadline) {
  World world(1);
  Checkers checkers(world);
  checkers.watch({.resource = "orders", .reader = hash_lock_reader("orders")});
  std::vector<SimClient*> sims;
  for (const char* name : {"a", "b", "c", "d", "e", "f"}) sims.push_back(&world.add_client(name));
  world.at(Instant{} + 1s, [&] { checkers.acquired(*sims[0], "orders"); });
  world.at(Instant{} + 2s, [&] {
    checkers.lost(*sims[0], "orders");  // the lost handler ran
    checkers.acquired(*sims[1], "orders");
  });
  world.at(Instant{} + 3s, [&] {
    checkers.releasing(*sims[1], "orders");  // its unlock is on its way
    checkers.acquired(*sims[2], "orders");
    checkers.released(*sims[1], "orders");
  });
  world.at(Instant{} + 4s, [&] {
    world.crash(*sims[2]);
    checkers.acquired(*sims[3], "orders");
    checkers.believes_until(*sims[3], "orders", Instant{} + 5s);  // a fixed lease
  });
  world.at(Instant{} + 5s, [&] { checkers.acquired(*sims[4], "orders"); });
  world.at(Instant{} + 6s, [&] {
    checkers.released(*sims[4], "orders");  // without releasing(): ends now
    checkers.acquired(*sims[5], "orders");
  });
  world.run_for(1min);
  EXPECT_EQ(checkers.beliefs_opened(), 6u);
  EXPECT_EQ(checkers.unexpected_count(), 0u);
  EXPECT_TRUE(checkers.violations().empty()) << checkers.violations()[0].report();
}

// lock_delay: a holder lost at its deadline (2 s) keeps the lock closed for
// the delay (10 s, less 1 %); one that crashed, from its last deadline; a
// released one, not at all.
TEST(CheckersTest, CatchesAHolderLetInDuringALostHoldersLockDelay) {
  World world(1);
  Checkers checkers(world);
  checkers.watch({.resource = "orders", .reader = hash_lock_reader("orders"), .lock_delay = 10s});
  std::vector<SimClient*> sims;
  for (const char* name : {"a", "b", "c", "d", "e"}) sims.push_back(&world.add_client(name));
  world.at(Instant{} + 1s, [&] {
    checkers.lease_deadline(*sims[0], "orders", Instant{} + 2s);
    checkers.acquired(*sims[0], "orders");
  });
  world.at(Instant{} + 3s, [&] { checkers.lost(*sims[0], "orders"); });
  world.at(Instant{} + 11s, [&] { checkers.acquired(*sims[1], "orders"); });  // 0.9 s early: caught
  world.at(Instant{} + 11s + 100ms, [&] { checkers.released(*sims[1], "orders"); });
  world.at(Instant{} + 12s, [&] {
    checkers.acquired(*sims[2], "orders");  // 12 s = 2 s + 10 s: fine
    checkers.lease_deadline(*sims[2], "orders", Instant{} + 40s);
    world.crash(*sims[2]);
  });
  world.at(Instant{} + 45s, [&] { checkers.acquired(*sims[3], "orders"); });  // before 40 s + 9.9 s: caught
  world.at(Instant{} + 46s, [&] {
    checkers.releasing(*sims[3], "orders");
    checkers.released(*sims[3], "orders");
    checkers.acquired(*sims[4], "orders");  // d released: only c's crash is judged, caught again
  });
  checkers.expect(ViolationKind::lock_delay);
  world.run_for(1min);
  ASSERT_EQ(checkers.count(ViolationKind::lock_delay), 3u);
  EXPECT_EQ(checkers.violations()[0].clients, (std::vector<std::string>{"b", "a"}));
  EXPECT_EQ(checkers.violations()[0].virtual_ms, 11'000);
  EXPECT_NE(checkers.violations()[0].report().find("lock delay"), std::string::npos)
      << checkers.violations()[0].report();
  EXPECT_EQ(checkers.violations()[1].clients, (std::vector<std::string>{"d", "c"}));
  EXPECT_EQ(checkers.violations()[2].clients, (std::vector<std::string>{"e", "c"}));
  EXPECT_EQ(checkers.count(ViolationKind::belief_overlap), 0u);
}

TEST(CheckersTest, ASemaphoreOfTwoAdmitsTwoBeliefsNotThree) {
  World world(1);
  Checkers checkers(world);
  checkers.watch({.resource = "pool", .reader = counting_semaphore_reader("pool"), .capacity = 2});
  SimClient& alice = world.add_client("alice");
  SimClient& bob = world.add_client("bob");
  SimClient& carol = world.add_client("carol");
  checkers.acquired(alice, "pool");
  checkers.acquired(bob, "pool");
  EXPECT_EQ(checkers.unexpected_count(), 0u);
  checkers.acquired(carol, "pool");
  ASSERT_EQ(checkers.count(ViolationKind::belief_overlap), 1u);
  EXPECT_EQ(checkers.violations()[0].clients, (std::vector<std::string>{"carol", "alice", "bob"}));
}

TEST(CheckersTest, AnOverlapWithAPausedHolderIsCountedApart) {
  World world(1);
  Checkers checkers(world);
  checkers.watch({.resource = "orders", .reader = hash_lock_reader("orders")});
  SimClient& alice = world.add_client("alice");
  SimClient& bob = world.add_client("bob");
  world.at(Instant{} + 1s, [&] {
    checkers.acquired(alice, "orders");
    world.pause(alice, 40s);
  });
  world.at(Instant{} + 35s, [&] { checkers.acquired(bob, "orders"); });
  world.run_for(1min);
  EXPECT_EQ(checkers.overlaps_while_paused(), 1u);
  EXPECT_EQ(checkers.unexpected_count(), 0u);
}

// ---- readers and writers (the read-write lock) ----

// A read-write lock's hash as the library writes it: 'mode' and a field per
// holder, '<owner>' for reads, '<owner>:write' for writes.
WatchOptions readers_writers_watch() {
  return {.resource = "catalog", .reader = read_write_lock_reader("catalog"), .readers_writers = true};
}

void name_readers_and_writers(Checkers& checkers) {
  checkers.name_holder("uuid-a", "alice");
  checkers.name_holder("uuid-b", "bob");
  checkers.name_holder("uuid-c", "carol");
}

// Runs `commands` (HSET field-value pairs on "catalog", one a second) with
// a 30 s ttl.
void write_catalog(World& world, std::vector<std::vector<std::string>> commands) {
  SimClient& server_side = world.add_client("script");
  world.spawn(server_side, [&server_side, commands = std::move(commands)] {
    for (const std::vector<std::string>& fields : commands) {
      std::vector<std::string> command = {"HSET", "catalog"};
      command.insert(command.end(), fields.begin(), fields.end());
      server_side.backend().command(command);
      server_side.backend().command({"PEXPIRE", "catalog", "30000"});
      server_side.runtime().sleep_for(1s);
    }
  });
}

TEST(ReadersWritersTest, ReadersTogetherAndADowngradingWriterAreFine) {
  World world(5);
  Checkers checkers(world);
  checkers.watch(readers_writers_watch());
  name_readers_and_writers(checkers);
  SimClient& script = world.add_client("cleanup");
  write_catalog(world, {{"mode", "write", "uuid-a:1:write", "1"},
                        {"uuid-a:1", "1"}});  // alice downgrades: her own read beside her write
  world.spawn(script, [&] {
    script.runtime().sleep_for(3s);
    script.backend().command({"HDEL", "catalog", "uuid-a:1:write"});
    script.backend().command({"HSET", "catalog", "mode", "read", "uuid-b:1", "1"});
    script.backend().command({"HSET", "catalog", "uuid-c:1", "2"});
  });
  world.run_until_idle();
  EXPECT_EQ(checkers.grants_observed(), 3u);  // alice (write, then read), bob, carol
  EXPECT_EQ(checkers.unexpected_count(), 0u) << checkers.violations()[0].report();
}

TEST(ReadersWritersTest, CatchesAWriteGrantBesideAReadGrant) {
  World world(7);
  Checkers checkers(world);
  checkers.watch(readers_writers_watch());
  name_readers_and_writers(checkers);
  write_catalog(world, {{"mode", "read", "uuid-a:1", "1"}, {"uuid-b:1:write", "1"}});
  world.run_until_idle();
  ASSERT_EQ(checkers.count(ViolationKind::mutual_exclusion), 1u);
  EXPECT_TRUE(world.stopped());
  const Violation& violation = checkers.violations()[0];
  EXPECT_EQ(violation.clients, (std::vector<std::string>{"bob", "alice"}));
  EXPECT_NE(violation.report().find("mutual exclusion violated at 1000 ms on 'catalog' (bob, alice): server-0 granted "
                                    "a write hold to bob while alice held read holds"),
            std::string::npos)
      << violation.report();
  EXPECT_NE(violation.report().find("replay with seed 7"), std::string::npos);
}

TEST(ReadersWritersTest, CatchesAReadGrantBesideAWriteGrant) {
  World world(7);
  Checkers checkers(world);
  checkers.watch(readers_writers_watch());
  name_readers_and_writers(checkers);
  write_catalog(world, {{"mode", "write", "uuid-a:1:write", "1"}, {"uuid-b:1", "1"}});
  world.run_until_idle();
  ASSERT_EQ(checkers.count(ViolationKind::mutual_exclusion), 1u);
  EXPECT_EQ(checkers.violations()[0].clients, (std::vector<std::string>{"bob", "alice"}));
  EXPECT_NE(checkers.violations()[0].what.find("granted a read hold to bob while alice held a write hold"),
            std::string::npos)
      << checkers.violations()[0].report();
}

TEST(ReadersWritersTest, CatchesTwoWriters) {
  World world(7);
  Checkers checkers(world);
  checkers.watch(readers_writers_watch());
  name_readers_and_writers(checkers);
  write_catalog(world, {{"mode", "write", "uuid-a:1:write", "1"}, {"uuid-b:1:write", "1"}});
  world.run_until_idle();
  ASSERT_EQ(checkers.count(ViolationKind::mutual_exclusion), 1u);
  EXPECT_EQ(checkers.violations()[0].clients, (std::vector<std::string>{"bob", "alice"}));
  EXPECT_EQ(checkers.violations()[0].virtual_ms, 1000);
}

TEST(ReadersWritersTest, CatchesAReaderTurnedWriterBesideAnotherReader) {
  World world(7);
  Checkers checkers(world);
  checkers.watch(readers_writers_watch());
  name_readers_and_writers(checkers);
  write_catalog(world, {{"mode", "read", "uuid-a:1", "1", "uuid-b:1", "1"}, {"uuid-a:1:write", "1"}});
  world.run_until_idle();
  ASSERT_EQ(checkers.count(ViolationKind::mutual_exclusion), 1u);
  EXPECT_EQ(checkers.violations()[0].clients, (std::vector<std::string>{"alice", "bob"}));
}

TEST(ReadersWritersTest, ReadBeliefsTogetherAreFine) {
  World world(3);
  Checkers checkers(world);
  checkers.watch(readers_writers_watch());
  SimClient& alice = world.add_client("alice");
  SimClient& bob = world.add_client("bob");
  SimClient& carol = world.add_client("carol");
  world.at(Instant{} + 1s, [&] {
    checkers.acquired(alice, "catalog", std::nullopt, 1, /*shared=*/true);
    checkers.acquired(bob, "catalog", std::nullopt, 1, /*shared=*/true);
    checkers.acquired(carol, "catalog", std::nullopt, 1, /*shared=*/true);
  });
  world.at(Instant{} + 2s, [&] {
    for (SimClient* reader : {&alice, &bob, &carol}) checkers.releasing(*reader, "catalog", 1, /*shared=*/true);
    checkers.acquired(alice, "catalog");                                    // then a writer alone
    checkers.acquired(alice, "catalog", std::nullopt, 1, /*shared=*/true);  // downgrading: its own read
    checkers.releasing(alice, "catalog");
  });
  world.at(Instant{} + 3s, [&] { checkers.acquired(bob, "catalog", std::nullopt, 1, /*shared=*/true); });
  world.run_for(1min);
  EXPECT_EQ(checkers.beliefs_opened(), 6u);
  EXPECT_EQ(checkers.unexpected_count(), 0u) << checkers.violations()[0].report();
}

TEST(ReadersWritersTest, CatchesTwoOverlappingWriteBeliefs) {
  World world(11);
  Checkers checkers(world);
  checkers.watch(readers_writers_watch());
  SimClient& alice = world.add_client("alice");
  SimClient& bob = world.add_client("bob");
  world.at(Instant{} + 1s, [&] { checkers.acquired(alice, "catalog"); });
  world.at(Instant{} + 2s, [&] { checkers.acquired(bob, "catalog"); });
  world.run_for(1min);
  ASSERT_EQ(checkers.count(ViolationKind::belief_overlap), 1u);
  EXPECT_EQ(world.now_ms(), 2000);
  const Violation& violation = checkers.violations()[0];
  EXPECT_EQ(violation.clients, (std::vector<std::string>{"bob", "alice"}));
  EXPECT_NE(violation.report().find("belief overlap violated at 2000 ms on 'catalog' (bob, alice): bob began to "
                                    "write while alice still believed it held a write hold (since 1000 ms"),
            std::string::npos)
      << violation.report();
  EXPECT_NE(violation.report().find("replay with seed 11"), std::string::npos);
}

TEST(ReadersWritersTest, CatchesAWriteBeliefOverlappingAReadBelief) {
  for (const bool writer_first : {false, true}) {
    World world(11);
    Checkers checkers(world);
    checkers.watch(readers_writers_watch());
    SimClient& alice = world.add_client("alice");
    SimClient& bob = world.add_client("bob");
    world.at(Instant{} + 1s, [&] { checkers.acquired(alice, "catalog", std::nullopt, 1, /*shared=*/!writer_first); });
    world.at(Instant{} + 2s, [&] { checkers.acquired(bob, "catalog", std::nullopt, 1, /*shared=*/writer_first); });
    world.run_for(1min);
    ASSERT_EQ(checkers.count(ViolationKind::belief_overlap), 1u) << writer_first;
    EXPECT_EQ(checkers.violations()[0].clients, (std::vector<std::string>{"bob", "alice"}));
    EXPECT_NE(checkers.violations()[0].what.find(writer_first ? "bob began to read while alice still believed it "
                                                                "held a write hold"
                                                              : "bob began to write while alice still believed it "
                                                                "held read holds"),
              std::string::npos)
        << checkers.violations()[0].report();
  }
}

}  // namespace
}  // namespace turnstile::sim
