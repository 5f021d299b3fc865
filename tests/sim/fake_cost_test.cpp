// The fake Redis's costs in a world (turnstile/sim/server_options.h): a herd
// queues on the single-threaded server and shows as latency in virtual
// time; a script past the BUSY threshold makes others fail with BusyError,
// which a waiting acquisition rides out; wake-ups through sharded pub/sub
// (SPUBLISH / SSUBSCRIBE, the cluster backend's path); restarts that keep
// the keyspace as the servers' AOF setting says; a server clock that
// drifts, within and beyond the clients' allowance.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include "fake_redis/keyspace.h"
#include "fake_redis/server.h"
#include "sim/fake_backend.h"
#include "turnstile/client.h"
#include "turnstile/errors.h"
#include "turnstile/key_layout.h"
#include "turnstile/lock.h"
#include "turnstile/sim/faults.h"
#include "turnstile/sim/world.h"

namespace turnstile::sim {
namespace {

using namespace std::chrono_literals;

const std::string kCalls = "for i = 1, tonumber(ARGV[1]) do redis.call('get', KEYS[1]) end return 0";

std::int64_t to_us(Duration duration) {
  return std::chrono::duration_cast<std::chrono::microseconds>(duration).count();
}

TEST(FakeCostTest, AHerdQueuesOnTheServer) {
  WorldOptions options;
  options.server.command_cost = 1ms;
  World world(1, options);
  std::vector<std::int64_t> latencies_ms;
  for (int i = 0; i < 10; ++i) {
    SimClient* client = &world.add_client("c" + std::to_string(i));
    world.spawn(*client, [&world, client, &latencies_ms] {
      const Instant sent = world.now();
      client->backend().command({"GET", "k"});
      latencies_ms.push_back(std::chrono::duration_cast<std::chrono::milliseconds>(world.now() - sent).count());
    });
  }
  world.run_until_idle();
  EXPECT_EQ(latencies_ms, (std::vector<std::int64_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}));
}

TEST(FakeCostTest, AWorldIsIdealisedByDefault) {
  World world(1);
  SimClient& client = world.add_client("c");
  std::optional<Duration> took;
  world.spawn(client, [&] {
    const Instant sent = world.now();
    client.backend().command({"EVAL", kCalls, "1", "k", "1000"});
    took = world.now() - sent;
  });
  world.run_until_idle();
  EXPECT_EQ(took, Duration::zero());
}

TEST(FakeCostTest, AScriptTakesItsBasePlusACostPerCall) {
  WorldOptions options;
  options.server = ServerOptions();  // the measured costs (a world is idealised by default)
  World world(1, options);
  SimClient& client = world.add_client("c");
  std::vector<std::int64_t> took_us;
  world.spawn(client, [&] {
    for (const int calls : {0, 100, 1000}) {
      const Instant sent = world.now();
      client.backend().command({"EVAL", kCalls, "1", "k", std::to_string(calls)});
      took_us.push_back(to_us(world.now() - sent));
    }
  });
  world.run_until_idle();
  // The measured defaults: 1.1 us a script, 1.2 us a call.
  EXPECT_EQ(took_us, (std::vector<std::int64_t>{1, 121, 1201}));
}

// A script of 6000 calls at 1 ms each: 6 s, past the 5 s threshold.
WorldOptions slow_calls() {
  WorldOptions options;
  options.server.script_cost_per_call = 1ms;  // and no other cost
  return options;
}

TEST(FakeCostTest, ALongScriptMakesOthersBusyAndAWaiterRidesItOut) {
  World world(3, slow_calls());
  SimClient& runner = world.add_client("runner");
  SimClient& other = world.add_client("other");
  SimClient& waiter = world.add_client("waiter");
  std::optional<std::int64_t> script_done_ms;
  std::string busy_text;
  std::optional<std::int64_t> busy_at_ms;
  std::optional<std::int64_t> acquired_at_ms;
  world.spawn(runner, [&] {
    runner.backend().command({"EVAL", kCalls, "1", "k", "6000"});
    script_done_ms = world.now_ms();
  });
  world.spawn(other, [&] {
    other.runtime().sleep_for(5500ms);
    try {
      other.backend().command({"GET", "k"});
    } catch (const BusyError& error) {
      busy_text = error.what();
      busy_at_ms = world.now_ms();
    }
  });
  world.spawn(waiter, [&] {
    waiter.runtime().sleep_for(1s);
    Client client(waiter.backend_ptr(), waiter.runtime_ptr());
    ReentrantLock lock = client.lock("orders");
    lock.lock(10s);  // queued until 5 s, answered BUSY, retried after
    acquired_at_ms = world.now_ms();
    lock.unlock();
  });
  world.run_for(1min);
  EXPECT_EQ(script_done_ms, 6'000);
  EXPECT_EQ(busy_at_ms, 5'500) << "BUSY at once inside the window";
  EXPECT_NE(busy_text.find("BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."),
            std::string::npos)
      << busy_text;
  ASSERT_TRUE(acquired_at_ms.has_value()) << "BUSY is transient for an acquisition";
  EXPECT_GE(*acquired_at_ms, 6'000);
  EXPECT_LT(*acquired_at_ms, 8'000) << "retried within its backoff";
}

// Bob waits for Alice's lock; she releases at 1 s. With `sharded`, the
// release is an SPUBLISH and Bob's wait an SSUBSCRIBE.
struct Handoff {
  std::optional<std::int64_t> bob_acquired_at_ms;
  std::int64_t shard_subscribers = 0;
  std::int64_t classic_subscribers = 0;
  std::string publish_command;
};

Handoff hand_off(bool sharded) {
  WorldOptions options;
  options.sharded_pubsub = sharded;
  World world(5, options);
  SimClient& alice = world.add_client("alice");
  SimClient& bob = world.add_client("bob");
  Handoff handoff;
  handoff.publish_command = std::string(bob.backend().publish_command());
  std::string bob_id;  // his Client's, set before he waits
  world.spawn(alice, [&] {
    Client client(alice.backend_ptr(), alice.runtime_ptr());
    ReentrantLock lock = client.lock("orders");
    lock.lock(30s);
    alice.runtime().sleep_for(1s);
    // Bob's process's own wake channel (behind a turnstile holder he does
    // not heed the lock's shared one), in the lock's slot.
    const std::string channel = key_layout(Flavor::reentrant, "orders").wake_channel(bob_id);
    handoff.shard_subscribers = world.server(0).subscriber_count(channel, ChannelScope::shard);
    handoff.classic_subscribers = world.server(0).subscriber_count(channel, ChannelScope::classic);
    lock.unlock();
  });
  world.spawn(bob, [&] {
    bob.runtime().sleep_for(100ms);
    Client client(bob.backend_ptr(), bob.runtime_ptr());
    bob_id = client.id();
    ReentrantLock lock = client.lock("orders");
    lock.lock(30s);
    handoff.bob_acquired_at_ms = world.now_ms();
    lock.unlock();
  });
  world.run_for(1min);
  return handoff;
}

TEST(FakeCostTest, ShardedWakeUpsHandOffAsClassicOnes) {
  const Handoff classic = hand_off(false);
  const Handoff sharded = hand_off(true);
  EXPECT_EQ(classic.publish_command, "PUBLISH");
  EXPECT_EQ(sharded.publish_command, "SPUBLISH");
  EXPECT_EQ(classic.classic_subscribers, 1);
  EXPECT_EQ(classic.shard_subscribers, 0);
  EXPECT_EQ(sharded.classic_subscribers, 0);
  EXPECT_EQ(sharded.shard_subscribers, 1);
  // Woken by the release, not by the 29 s the lease had left.
  EXPECT_EQ(sharded.bob_acquired_at_ms, 1'000);
  EXPECT_EQ(sharded.bob_acquired_at_ms, classic.bob_acquired_at_ms);
}

// Alice takes a lock at `acquired_ms` and holds it; the server restarts at
// 10.8 s. Whether the lock key is there after the restart.
bool lock_survives_restart(Persistence persistence, std::int64_t acquired_ms) {
  WorldOptions options;
  options.server.persistence = persistence;
  World world(9, options);
  SimClient& alice = world.add_client("alice");
  world.spawn(alice, [&] {
    alice.runtime().sleep_for(std::chrono::milliseconds(acquired_ms));
    Client client(alice.backend_ptr(), alice.runtime_ptr());
    ReentrantLock lock = client.lock("orders");
    lock.lock(30s);
    alice.runtime().sleep_for(20s);
  });
  world.at(Instant(10'800ms), [&] { world.restart_server(0); });
  bool survived = false;
  world.at(Instant(10'801ms), [&] { survived = world.server(0).keyspace().find("orders") != nullptr; });
  world.run_for(15s);
  return survived;
}

TEST(FakeCostTest, ARestartKeepsWhatTheAofSettingKeeps) {
  EXPECT_FALSE(lock_survives_restart(Persistence::none, 9'500));
  EXPECT_TRUE(lock_survives_restart(Persistence::everysec, 9'500)) << "fsynced at 10 s";
  EXPECT_FALSE(lock_survives_restart(Persistence::everysec, 10'500)) << "within the last second";
  EXPECT_TRUE(lock_survives_restart(Persistence::always, 10'500));
}

// Swarm seed 8141 (failover, crash-safe semaphore): the replica was made
// before the fault plan set the servers' persistence, so once promoted it
// restarted with nothing, the permit count too, and every waiter starved.
// A promoted replica is configured as its master was.
TEST(FakeCostTest, APromotedReplicaKeepsItsMastersPersistence) {
  World world(13);
  world.add_replica(0, Duration::zero());
  FaultPlan plan;
  plan.server_persistence = Persistence::always;
  world.apply_fault_plan(plan);
  SimClient& alice = world.add_client("alice");
  world.spawn(alice, [&] {
    alice.runtime().sleep_for(2s);
    Client client(alice.backend_ptr(), alice.runtime_ptr());
    ReentrantLock lock = client.lock("orders");
    lock.lock(30s);
    alice.runtime().sleep_for(20s);
  });
  world.at(Instant(1s), [&] { world.failover(0); });
  world.at(Instant(3s), [&] { world.restart_server(0); });
  bool survived = false;
  world.at(Instant(3'001ms), [&] { survived = world.server(0).keyspace().find("orders") != nullptr; });
  world.run_for(5s);
  EXPECT_EQ(world.server(0).options().persistence, Persistence::always);
  EXPECT_TRUE(survived) << "written after the failover, on a server with appendfsync always";
}

// Alice holds a lock with a fixed 10 s lease; bob tries to take it from
// 9 s on. The server's clock runs `drift_ppm` fast. Returns when bob got it
// and until when alice believed she held it.
struct Overlap {
  std::optional<std::int64_t> bob_acquired_at_ms;
  std::int64_t alice_believed_until_ms = 0;
};

Overlap fast_server_clock(std::int64_t drift_ppm) {
  World world(11);
  world.set_server_clock_skew(0, 0ms, drift_ppm);
  SimClient& alice = world.add_client("alice");
  SimClient& bob = world.add_client("bob");
  Overlap overlap;
  world.spawn(alice, [&] {
    Client client(alice.backend_ptr(), alice.runtime_ptr());
    ReentrantLock lock = client.lock("orders");
    lock.lock(10s);
    const std::stop_token lost = lock.loss_token();  // requested at the local deadline
    while (!lost.stop_requested() && world.now_ms() < 20'000) {
      overlap.alice_believed_until_ms = world.now_ms();
      alice.runtime().sleep_for(1ms);
    }
  });
  world.spawn(bob, [&] {
    bob.runtime().sleep_for(9s);
    Client client(bob.backend_ptr(), bob.runtime_ptr());
    ReentrantLock lock = client.lock("orders");
    bool got = false;
    while (!(got = lock.try_lock()) && world.now_ms() < 20'000) bob.runtime().sleep_for(1ms);
    if (got) overlap.bob_acquired_at_ms = world.now_ms();
  });
  world.run_for(30s);
  return overlap;
}

TEST(FakeCostTest, AServerClockWithinTheDriftAllowanceKeepsHoldersApart) {
  const Overlap within = fast_server_clock(5'000);  // 0.5 %, inside the default 1 %
  ASSERT_TRUE(within.bob_acquired_at_ms.has_value());
  EXPECT_GT(*within.bob_acquired_at_ms, within.alice_believed_until_ms);
  const Overlap beyond = fast_server_clock(50'000);  // 5 %: docs/safety.md's clock-rate limit
  ASSERT_TRUE(beyond.bob_acquired_at_ms.has_value());
  EXPECT_LE(*beyond.bob_acquired_at_ms, beyond.alice_believed_until_ms) << "both believe for a while";
  EXPECT_LT(*beyond.bob_acquired_at_ms, 9'600) << "10 s by a 5 % fast clock end at 9.52 s";
}

TEST(FakeCostTest, AFaultPlanDrawsServerClocksAndPersistenceFromTheSeed) {
  const auto trace_of = [](std::uint64_t seed) {
    WorldOptions options;
    options.servers = 3;
    World world(seed, options);
    FaultPlan plan;
    plan.server_persistence = Persistence::everysec;
    plan.server_clock_offset_max = 500ms;
    plan.server_clock_drift_ppm_max = 1'000;
    world.apply_fault_plan(plan);
    EXPECT_EQ(world.server(2).options().persistence, Persistence::everysec);
    EXPECT_LE(std::abs(world.server(1).server_clock().drift_ppm()), 1'000);
    EXPECT_EQ(fault_kinds(plan), (std::vector<std::string_view>{"server-clock-skew"}));
    return world.trace();
  };
  const auto one = trace_of(21);
  EXPECT_EQ(one, trace_of(21));
  EXPECT_NE(one, trace_of(22));
  ASSERT_GE(one.size(), 3u);
  EXPECT_NE(one.front().find("server-0 clock off by"), std::string::npos) << one.front();
}

}  // namespace
}  // namespace turnstile::sim
