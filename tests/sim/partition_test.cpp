// Hanging partitions (World::partition / heal, FakeBackend::set_hanging):
// a call neither answered nor refused fails with TimeoutError exactly one
// command timeout after it started and never reaches the server; a reply
// on its way when the link froze is lost the same way (send_eval's pending:
// fake_send_eval_test); messages published meanwhile are lost and healing tells
// subscribers `resubscribed`; random partitions of a fault plan replay.

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "sim/fake_backend.h"
#include "turnstile/errors.h"
#include "turnstile/sim/faults.h"
#include "turnstile/sim/world.h"

namespace turnstile::sim {
namespace {

using namespace std::chrono_literals;

std::int64_t counter(World& world, SimClient& reader) {
  std::int64_t value = -1;
  world.spawn(reader, [&] {
    const Reply reply = reader.backend().command({"GET", "n"});
    value = reply.is_nil() ? 0 : std::stoll(reply.as_string());
  });
  world.run_for(1s);  // past any link delay
  return value;
}

TEST(PartitionTest, ACallOnAHangingLinkTimesOutAtTheCommandTimeoutAndNeverArrives) {
  World world(1);
  SimClient& alice = world.add_client("alice");
  SimClient& bob = world.add_client("bob");
  EXPECT_EQ(world.options().command_timeout, 2000ms);  // the real backend's default
  std::vector<std::string> log;
  world.spawn(alice, [&] {
    (void)alice.backend().command({"INCR", "n"});
    world.partition(alice, 0);
    EXPECT_TRUE(alice.link(0).hanging());
    const Instant sent = world.now();
    EXPECT_THROW((void)alice.backend().command({"INCR", "n"}), TimeoutError);
    log.push_back("timed out after " + std::to_string((world.now() - sent) / 1ms) + " ms");
    world.heal(alice, 0);
    (void)alice.backend().command({"INCR", "n"});
    log.push_back("healed");
  });
  world.run_for(10s);
  EXPECT_EQ(log, (std::vector<std::string>{"timed out after 2000 ms", "healed"}));
  EXPECT_EQ(counter(world, bob), 2);  // the request sent while hanging never arrived
  const std::string trace = world.trace_text();
  EXPECT_NE(trace.find("alice link to server-0 hangs (partition)"), std::string::npos) << trace;
  EXPECT_NE(trace.find("alice link to server-0 healed"), std::string::npos) << trace;
  EXPECT_THROW(world.partition(alice, 3), InvalidArgumentError);
}

TEST(PartitionTest, AReplyOnItsWayWhenTheLinkFreezesIsLost) {
  WorldOptions options;
  options.reply_delay = 100ms;
  World world(1, options);
  SimClient& alice = world.add_client("alice");
  SimClient& bob = world.add_client("bob");
  std::int64_t failed_at_ms = -1;
  world.spawn(alice, [&] {
    try {
      (void)alice.backend().command({"INCR", "n"});
    } catch (const TimeoutError&) {
      failed_at_ms = world.now_ms();
    }
  });
  world.at(Instant{} + 50ms, [&] { world.partition(alice, 0); });
  world.run_for(5s);
  EXPECT_EQ(failed_at_ms, 2000);      // one command timeout after the call began
  EXPECT_EQ(counter(world, bob), 1);  // it ran; the caller never heard
}

TEST(PartitionTest, MessagesAreLostWhileHangingAndHealingResubscribes) {
  World world(1);
  SimClient& alice = world.add_client("alice");
  SimClient& bob = world.add_client("bob");
  std::vector<std::string> heard;
  std::optional<Subscription> subscription;
  world.spawn(alice, [&] {
    subscription.emplace(alice.backend().subscribe("news", [&](const PubSubEvent& event) {
      heard.emplace_back(event.kind == PubSubEvent::Kind::message ? std::string(event.payload) : "resubscribed");
    }));
  });
  world.run_for(1ms);
  world.spawn(bob, [&] { (void)bob.backend().command({"PUBLISH", "news", "one"}); });
  world.run_for(1s);
  world.partition(alice, 0);
  world.spawn(bob, [&] { (void)bob.backend().command({"PUBLISH", "news", "two"}); });
  world.run_for(1s);
  world.heal(alice, 0);
  world.run_for(1ms);
  world.spawn(bob, [&] { (void)bob.backend().command({"PUBLISH", "news", "three"}); });
  world.run_for(1s);
  EXPECT_EQ(heard, (std::vector<std::string>{"one", "resubscribed", "three"}));
  EXPECT_EQ(alice.link(0).messages_dropped(), 1u);
  subscription.reset();
}

struct PlanRun {
  std::uint64_t hash = 0;
  std::uint64_t partitions = 0;
  std::uint64_t timeouts = 0;
  std::uint64_t calls = 0;
};

PlanRun run_partition_plan(std::uint64_t seed) {
  World world(seed);
  PlanRun run;
  for (int i = 0; i < 4; ++i) {
    SimClient& sim = world.add_client("c" + std::to_string(i));
    world.spawn(sim, [&run, &sim] {
      for (int round = 0; round < 10'000 && sim.runtime().now() < Instant{} + 1h; ++round) {
        try {
          (void)sim.backend().command({"INCR", "n"});
          ++run.calls;
        } catch (const TimeoutError&) {
          ++run.timeouts;
        }
        sim.runtime().sleep_for(1s);
      }
    });
  }
  FaultPlan plan;
  plan.partition_per_client_hour = 4;
  plan.partition_max = 30s;
  plan.until = Instant{} + 1h;
  world.apply_fault_plan(plan);
  world.run_for(70min);
  run.hash = world.trace_hash();
  run.partitions = world.fault_counts().partitions;
  return run;
}

TEST(PartitionTest, AFaultPlanDrawsPartitionsFromTheSeedAndReplaysExactly) {
  const PlanRun one = run_partition_plan(5);
  const PlanRun two = run_partition_plan(5);
  EXPECT_EQ(one.hash, two.hash);
  EXPECT_EQ(one.partitions, two.partitions);
  EXPECT_GT(one.partitions, 0u);
  EXPECT_GT(one.timeouts, 0u);
  EXPECT_GT(one.calls, one.timeouts);
  FaultPlan bad;
  bad.partition_per_client_hour = -1;
  EXPECT_THROW(bad.validate(), InvalidArgumentError);
}

}  // namespace
}  // namespace turnstile::sim
