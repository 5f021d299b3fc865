#include "turnstile/sim/world.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sim/fake_backend.h"
#include "sim/scheduler.h"
#include "fake_redis/server.h"
#include "sim/sim_runtime.h"
#include "turnstile/client.h"
#include "turnstile/errors.h"
#include "turnstile/lock.h"

namespace turnstile::sim {
namespace {

using namespace std::chrono_literals;

TEST(WorldTest, AnHourOfVirtualTimeWithManyClients) {
  World world(1);
  constexpr int kClients = 64;
  int rounds = 0;
  for (int i = 0; i < kClients; ++i) {
    SimClient& client = world.add_client("c" + std::to_string(i));
    world.spawn(client, [&client, &rounds] {
      for (int round = 0; round < 60; ++round) {
        client.runtime().sleep_for(1min);
        ++rounds;
      }
    });
  }
  const RunStats stats = world.run_for(2h);
  EXPECT_EQ(rounds, kClients * 60);
  EXPECT_EQ(world.now_ms(), 2 * 3'600'000);
  EXPECT_TRUE(stats.idle);
  EXPECT_EQ(stats.stuck_tasks, 0u);
}

TEST(WorldTest, ClientsTalkToServersThroughTheirBackends) {
  World world(1, {.servers = 2});
  SimClient& alice = world.add_client("alice");
  SimClient& bob = world.add_client("bob");
  EXPECT_EQ(alice.server_count(), 2u);
  EXPECT_EQ(alice.backend(1).describe(), "sim:server-1");
  world.spawn(alice, [&] { alice.backend(1).command({"SET", "k", "from alice"}); });
  std::string seen;
  world.spawn(bob, [&] {
    bob.runtime().sleep_for(1ms);
    seen = bob.backend(1).command({"GET", "k"}).as_string();
    EXPECT_TRUE(bob.backend(0).command({"GET", "k"}).is_nil());  // another server
  });
  world.run_until_idle();
  EXPECT_EQ(seen, "from alice");
  EXPECT_THROW(world.add_client("alice"), InvalidArgumentError);
  EXPECT_THROW(world.client("carol"), InvalidArgumentError);
  EXPECT_EQ(&world.client("bob"), &bob);
}

TEST(WorldTest, PubSubWakesAWaiterAcrossClients) {
  World world(1, {.pubsub_delay = 2ms});
  SimClient& waiter = world.add_client("waiter");
  SimClient& publisher = world.add_client("publisher");
  std::int64_t woke_at_ms = -1;
  world.spawn(waiter, [&] {
    auto event = waiter.runtime().make_event();
    Subscription subscription = waiter.backend().subscribe("wake", [&](const PubSubEvent&) { event->notify(); });
    if (event->wait_until(waiter.runtime().deadline_after(10s))) woke_at_ms = world.now_ms();
  });
  world.spawn(publisher, [&] {
    publisher.runtime().sleep_for(100ms);
    publisher.backend().command({"PUBLISH", "wake", "go"});
  });
  world.run_until_idle();
  EXPECT_EQ(woke_at_ms, 102);
}

TEST(WorldTest, CrashStopsTheClientAndItsTimersAndSendsNothing) {
  World world(1);
  SimClient& victim = world.add_client("victim");
  SimClient& witness = world.add_client("witness");
  int ticks = 0;
  int timer_runs = 0;
  world.spawn(victim, [&] {
    victim.runtime().schedule_after(10s, [&] { ++timer_runs; });  // a "watchdog"
    struct UnlockOnUnwind {
      SimClient& client;
      ~UnlockOnUnwind() {
        try {
          client.backend().command({"DEL", "lock"});
        } catch (const ConnectionError&) {  // the crashed link refuses
        }
      }
    } guard{victim};
    victim.backend().command({"SET", "lock", "victim"});
    while (true) {
      victim.runtime().sleep_for(1s);
      ++ticks;
    }
  });
  world.after(3500ms, [&] { world.crash(victim); });
  std::string lock_value;
  world.spawn(witness, [&] {
    witness.runtime().sleep_for(1min);
    lock_value = witness.backend().command({"GET", "lock"}).as_string();
  });
  world.run_until_idle();
  EXPECT_EQ(ticks, 3);
  EXPECT_EQ(timer_runs, 0);
  EXPECT_TRUE(victim.crashed());
  EXPECT_EQ(lock_value, "victim");  // the destructor's DEL never reached the server
  EXPECT_EQ(world.trace(), (std::vector<std::string>{"3500.000 victim crashed"}));
}

TEST(WorldTest, PauseFreezesTimersThenTheClientResumes) {
  World world(1);
  SimClient& client = world.add_client("gc");
  std::vector<std::int64_t> fired_ms;
  world.spawn(client, [&] {
    for (int i = 1; i <= 3; ++i) {
      client.runtime().schedule_after(std::chrono::seconds(i * 10), [&] { fired_ms.push_back(world.now_ms()); });
    }
  });
  world.after(15s, [&] { world.pause(client, 20s); });
  world.run_until_idle();
  // 10 s fires on time; 20 s and 30 s came due during the pause (15..35 s)
  // and run when it ends.
  EXPECT_EQ(fired_ms, (std::vector<std::int64_t>{10'000, 35'000, 35'000}));
  EXPECT_EQ(world.trace(), (std::vector<std::string>{"15000.000 gc paused", "35000.000 gc resumed"}));
}

TEST(WorldTest, RestartServerLosesTheKeyspaceAndTellsSubscribers) {
  World world(1);
  SimClient& client = world.add_client("c");
  int resubscribed = 0;
  Subscription subscription = client.backend().subscribe("ch", [&](const PubSubEvent& event) {
    if (event.kind == PubSubEvent::Kind::resubscribed) ++resubscribed;
  });
  world.spawn(client, [&] { client.backend().command({"SET", "k", "v"}); });
  world.run_until_idle();
  world.restart_server(0);
  world.run_until_idle();
  bool gone = false;
  world.spawn(client, [&] { gone = client.backend().command({"GET", "k"}).is_nil(); });
  world.run_until_idle();
  EXPECT_TRUE(gone);
  EXPECT_EQ(resubscribed, 1);
  EXPECT_EQ(world.trace().at(0), "0.000 world server-0 restarted");
}

TEST(WorldTest, AClientCountsTheReconnectAndTheScriptReloadsOfARestart) {
  World world(1);
  SimClient& process = world.add_client("c");
  Client client(process.backend_ptr(), process.runtime_ptr());
  const auto lock_and_unlock = [&] {
    world.spawn(process, [&] {
      ReentrantLock lock = client.lock("orders");
      lock.lock();
      lock.unlock();
    });
    world.run_until_idle();
  };
  lock_and_unlock();
  EXPECT_EQ(client.metrics().script_reloads, 0u) << "first loads";
  EXPECT_EQ(client.metrics().reconnects, 0u);
  world.restart_server(0);  // the script cache is empty again
  lock_and_unlock();
  EXPECT_EQ(client.metrics().script_reloads, 2u) << "acquire and release scripts";
  EXPECT_EQ(client.metrics().reconnects, 1u);
  EXPECT_EQ(client.metrics().acquisitions_of(Flavor::reentrant), 2u);
}

// Clients sleep random amounts and note their order: the trace depends only
// on the seed.
std::pair<std::uint64_t, std::string> random_run(std::uint64_t seed) {
  World world(seed);
  for (int i = 0; i < 8; ++i) {
    SimClient& client = world.add_client("c" + std::to_string(i));
    world.spawn(client, [&world, &client] {
      for (int round = 0; round < 5; ++round) {
        client.runtime().sleep_for(std::chrono::milliseconds(client.runtime().random_u64() % 1000));
        world.note("round " + std::to_string(round));
      }
    });
  }
  world.after(1234ms, [&] { world.crash(world.client("c3")); });
  world.run_until_idle();
  return {world.trace_hash(), world.trace_text()};
}

TEST(WorldTest, SameSeedSameTraceDifferentSeedDifferentOrder) {
  const auto first = random_run(7);
  const auto again = random_run(7);
  const auto other = random_run(8);
  EXPECT_EQ(first.first, again.first);
  EXPECT_EQ(first.second, again.second);
  EXPECT_NE(first.first, other.first);
  EXPECT_NE(first.second, other.second);
  EXPECT_NE(first.second.find("c3 crashed"), std::string::npos);
}

TEST(WorldTest, ClockDriftShowsInTheClientsWallClockOnly) {
  World world(1);
  SimClient& fast = world.add_client("fast");
  fast.sim_runtime().set_clock_drift_ppm(10'000);  // 1%
  world.run_for(100s);
  EXPECT_EQ(fast.runtime().wall_clock_ms(), WorldOptions().unix_ms_at_zero + 101'000);
  EXPECT_EQ(fast.runtime().now(), world.now());
}

TEST(WorldTest, TaskFailureSurfacesFromRunAndInTheTrace) {
  World world(1);
  SimClient& client = world.add_client("c");
  world.spawn(client, [] { throw std::runtime_error("bug in a task"); });
  EXPECT_THROW(world.run_until_idle(), std::runtime_error);
  EXPECT_EQ(world.trace().back(), "0.000 c task 1 failed");
}

TEST(WorldTest, BadOptionsAreRejected) {
  EXPECT_THROW(World(1, {.servers = 0}), InvalidArgumentError);
  EXPECT_THROW(World(1, {.servers = World::kMaxServers + 1}), InvalidArgumentError);
  World world(1);
  EXPECT_THROW(world.add_client(""), InvalidArgumentError);
  EXPECT_THROW(world.server(1), InvalidArgumentError);
}

// A world whose holder is renewed for ever never idles: run_until_idle()
// stops at the virtual-time budget with a typed error naming the seed and
// the last trace lines, at once, instead of hanging.
TEST(WorldBudgetTest, ARunThatNeverIdlesFailsAtTheVirtualTimeBudget) {
  WorldOptions options;
  options.virtual_time_budget = 1h;
  World world(4242, options);
  SimClient& holder = world.add_client("holder");
  std::unique_ptr<Client> client;  // outlives the task, not the world
  world.spawn(holder, [&] {
    client = std::make_unique<Client>(holder.backend_ptr(), holder.runtime_ptr());
    client->lock("forever").lock();  // the watchdog renews it for as long as the world runs
    world.note("holding for ever");
  });
  try {
    (void)world.run_until_idle();
    ADD_FAILURE() << "no budget error";
  } catch (const SimulationBudgetError& error) {
    const SimulationBudgetError::Details& details = error.details();
    EXPECT_EQ(details.budget, SimulationBudgetError::Budget::virtual_time);
    EXPECT_EQ(details.seed, 4242u);
    EXPECT_LE(details.virtual_ms, 3'600'000);
    EXPECT_GT(details.virtual_ms, 3'500'000);
    ASSERT_FALSE(details.trace_tail.empty());
    EXPECT_NE(details.trace_tail.back().find("holding for ever"), std::string::npos);
    const std::string what = error.what();
    EXPECT_NE(what.find("replay with seed 4242"), std::string::npos) << what;
    EXPECT_NE(what.find("holding for ever"), std::string::npos) << what;
  }
}

TEST(WorldBudgetTest, ALoopAtOneInstantFailsAtTheEventBudget) {
  WorldOptions options;
  options.event_budget = 10'000;
  World world(7, options);
  SimClient& looper = world.add_client("looper");
  world.spawn(looper, [&] {
    world.note("looping at one instant");
    while (true) looper.runtime().sleep_for(Duration::zero());
  });
  try {
    (void)world.run_for(1s);
    ADD_FAILURE() << "no budget error";
  } catch (const SimulationBudgetError& error) {
    EXPECT_EQ(error.details().budget, SimulationBudgetError::Budget::events);
    EXPECT_EQ(error.details().events, 10'000u);
    EXPECT_EQ(error.details().virtual_ms, 0);
    EXPECT_EQ(error.details().seed, 7u);
    EXPECT_NE(std::string(error.what()).find("looping at one instant"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace turnstile::sim
