// Faults of the simulated world that go beyond one link's drops and delays:
// duplicated requests and replies, a lagging replica and failover, and
// random fault plans drawn from the seed.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sim/fake_backend.h"
#include "fake_redis/server.h"
#include "turnstile/client.h"
#include "turnstile/errors.h"
#include "turnstile/sim/faults.h"
#include "turnstile/sim/world.h"

namespace turnstile::sim {
namespace {

using namespace std::chrono_literals;

TEST(FaultsTest, ADuplicatedRequestRunsTwiceAndTheCallerSeesTheFirstReply) {
  World world(1);
  SimClient& alice = world.add_client("alice");
  bool once = true;
  alice.link().set_request_filter([&once](const std::vector<std::string>&) {
    FakeBackend::RequestFate fate;
    fate.duplicate_request = std::exchange(once, false);
    return fate;
  });
  std::int64_t first = 0, stored = 0;
  world.spawn(alice, [&] {
    first = alice.backend().command({"INCR", "counter"}).as_integer();
    stored = std::stoll(alice.backend().command({"GET", "counter"}).as_string());
  });
  world.run_until_idle();
  EXPECT_EQ(first, 1);
  EXPECT_EQ(stored, 2);
}

TEST(FaultsTest, ADuplicatedReplyIsTakenForTheNextCallsReply) {
  World world(1);
  SimClient& alice = world.add_client("alice");
  bool once = true;
  alice.link().set_request_filter([&once](const std::vector<std::string>&) {
    FakeBackend::RequestFate fate;
    fate.duplicate_reply = std::exchange(once, false);
    return fate;
  });
  std::string first, second, third;
  world.spawn(alice, [&] {
    first = alice.backend().command({"ECHO", "one"}).as_string();
    second = alice.backend().command({"ECHO", "two"}).as_string();
    third = alice.backend().command({"ECHO", "three"}).as_string();
  });
  world.run_until_idle();
  EXPECT_EQ(first, "one");
  EXPECT_EQ(second, "one");   // the stale copy
  EXPECT_EQ(third, "three");  // in step again
}

TEST(FaultsTest, FailoverLosesTheWritesWithinTheReplicaLag) {
  World world(1);
  SimClient& alice = world.add_client("alice");
  world.add_replica(0, 5s);
  world.spawn(alice, [&] {
    alice.backend().command({"SET", "old", "1"});
    alice.backend().command({"SET", "expiring", "1", "PX", "60000"});
    alice.runtime().sleep_for(10s);
    alice.backend().command({"SET", "recent", "1"});
    alice.backend().command({"DEL", "old"});
  });
  world.run_for(12s);
  EXPECT_EQ(world.failover(0), 2u);  // the SET recent and the DEL, 2 s old
  std::string old_value;
  bool recent_missing = false;
  std::int64_t expiring_ttl_ms = 0;
  world.spawn(alice, [&] {
    old_value = alice.backend().command({"GET", "old"}).as_string();
    recent_missing = alice.backend().command({"GET", "recent"}).is_nil();
    expiring_ttl_ms = alice.backend().command({"PTTL", "expiring"}).as_integer();
  });
  world.run_until_idle();
  EXPECT_EQ(old_value, "1");
  EXPECT_TRUE(recent_missing);
  EXPECT_EQ(expiring_ttl_ms, 48'000);                     // absolute deadline kept, not re-applied late
  EXPECT_THROW(world.failover(0), InvalidArgumentError);  // no replica left
  EXPECT_THROW(world.add_replica(0, -1s), InvalidArgumentError);
}

// RedLock's delayed restart: the promoted replica is out of reach for the
// delay — a link fault healing meanwhile does not bring it back — and then
// answers with what it had.
TEST(FaultsTest, ADelayedRestartKeepsTheFailedOverServerOutUntilItRejoins) {
  World world(1);
  SimClient& alice = world.add_client("alice");
  world.add_replica(0, 1s);
  world.spawn(alice, [&] { alice.backend().command({"SET", "kept", "1"}); });
  world.run_for(3s);
  EXPECT_EQ(world.failover(0, 5s), 0u);

  std::vector<std::string> seen;
  auto try_get = [&] {
    world.spawn(alice, [&] {
      try {
        seen.push_back(alice.backend().command({"GET", "kept"}).as_string());
      } catch (const ConnectionError&) {
        seen.push_back("refused");
      }
    });
  };
  try_get();
  world.run_for(1s);
  alice.link(0).set_down(true);  // a link fault comes and goes while the server is out
  alice.link(0).set_down(false);
  try_get();
  world.run_for(3500ms);
  try_get();  // 4.5 s after the failover: still out
  world.run_for(1s);
  try_get();  // 5.5 s: back, with what the replica had
  world.run_for(1s);
  EXPECT_EQ(seen, (std::vector<std::string>{"refused", "refused", "refused", "1"}));
  EXPECT_THROW(world.failover(0, -1s), InvalidArgumentError);
}

TEST(FaultsTest, ScriptsReplicateByTheirEffectsAndSubscribersHearOfTheFailover) {
  World world(1);
  SimClient& alice = world.add_client("alice");
  SimClient& bob = world.add_client("bob");
  world.add_replica(0, 1s);
  Client locks(alice.backend_ptr(), alice.runtime_ptr());
  int resubscribed = 0;
  Subscription subscription = bob.backend().subscribe("news", [&](const PubSubEvent& event) {
    if (event.kind == PubSubEvent::Kind::resubscribed) ++resubscribed;
  });
  bool held_on_replica = false;
  world.spawn(alice, [&] {
    ReentrantLock lock = locks.lock("orders");
    lock.lock();
    alice.runtime().sleep_for(2s);
  });
  world.run_for(3s);
  world.failover(0);
  world.spawn(bob, [&] { held_on_replica = bob.backend().command({"EXISTS", "orders"}).as_integer() == 1; });
  world.run_for(1s);
  EXPECT_TRUE(held_on_replica);
  EXPECT_EQ(resubscribed, 1);
  subscription.reset();
}

FaultPlan busy_plan() {
  FaultPlan plan;
  plan.crash_per_client_hour = 2;
  plan.pause_per_client_hour = 6;
  plan.link_down_per_client_hour = 6;
  plan.server_restart_per_hour = 1;
  plan.request_drop = 0.01;
  plan.reply_drop = 0.01;
  plan.request_duplicate = 0.01;
  plan.reply_duplicate = 0.01;
  plan.request_delay = 0.05;
  plan.message_drop = 0.05;
  plan.message_duplicate = 0.05;
  plan.until = Instant{} + 1h;
  return plan;
}

struct PlanRun {
  std::uint64_t hash = 0;
  World::FaultCounts counts;
  std::uint64_t rounds = 0;
};

PlanRun run_with_plan(std::uint64_t seed) {
  World world(seed);
  std::vector<std::unique_ptr<Client>> clients;
  PlanRun run;
  for (int i = 0; i < 8; ++i) {
    SimClient& sim = world.add_client("c" + std::to_string(i));
    ClientOptions options;
    options.on_background_error = [](std::exception_ptr) {};
    clients.push_back(std::make_unique<Client>(sim.backend_ptr(), sim.runtime_ptr(), options));
    Client* client = clients.back().get();
    world.spawn(sim, [&run, &sim, client] {
      ReentrantLock lock = client->lock("shared");
      for (int round = 0; round < 100'000 && sim.runtime().now() < Instant{} + 1h; ++round) {
        try {
          lock.lock();
          sim.runtime().sleep_for(1s);
          lock.unlock();
          ++run.rounds;
        } catch (const Error&) {
          sim.runtime().sleep_for(100ms);
        }
      }
    });
  }
  world.apply_fault_plan(busy_plan());
  world.run_for(70min);
  run.hash = world.trace_hash();
  run.counts = world.fault_counts();
  return run;
}

TEST(FaultsTest, AFaultPlanDrawsEveryKindFromTheSeedAndReplaysExactly) {
  const PlanRun one = run_with_plan(7);
  const PlanRun two = run_with_plan(7);
  const PlanRun other = run_with_plan(8);
  EXPECT_EQ(one.hash, two.hash);
  EXPECT_EQ(one.counts.total(), two.counts.total());
  EXPECT_NE(one.hash, other.hash);
  EXPECT_GT(one.counts.crashes, 0u);
  EXPECT_GT(one.counts.pauses, 0u);
  EXPECT_GT(one.counts.links_down, 0u);
  EXPECT_GT(one.counts.requests_dropped, 0u);
  EXPECT_GT(one.counts.replies_duplicated, 0u);
  EXPECT_GT(one.counts.messages_duplicated, 0u);
  EXPECT_GT(one.rounds, 0u);
}

TEST(FaultsTest, AFaultPlanRejectsNonsense) {
  World world(1);
  FaultPlan plan;
  plan.request_drop = 1.5;
  EXPECT_THROW(world.apply_fault_plan(plan), InvalidArgumentError);
  plan.request_drop = 0;
  plan.crash_per_client_hour = -1;
  EXPECT_THROW(world.apply_fault_plan(plan), InvalidArgumentError);
}

}  // namespace
}  // namespace turnstile::sim
