// BUGGIFY (turnstile/sim/buggify.h): a real runtime never fires; a world
// draws each point from its seed (same seed, same draws); every point does
// what its name says when it fires; a world without BUGGIFY counts the
// points reached and fires none.

#include "turnstile/sim/buggify.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "fake_redis/keyspace.h"
#include "fake_redis/server.h"
#include "turnstile/client.h"
#include "turnstile/errors.h"
#include "turnstile/lock.h"
#include "turnstile/sim/world.h"

namespace turnstile::sim {
namespace {

using namespace std::chrono_literals;

const BuggifyCount& count_of(const World& world, std::string_view point) {
  const std::vector<BuggifyCount>& counts = world.buggify_counts();
  const auto found =
      std::find_if(counts.begin(), counts.end(), [point](const BuggifyCount& count) { return count.point == point; });
  EXPECT_NE(found, counts.end()) << point;
  return *found;
}

// Two clients take turns on one lock for ten virtual minutes: renewals,
// scripts, subscriptions and release messages, every point reached.
void contend(World& world) {
  std::vector<std::unique_ptr<Client>> clients;
  for (const char* name : {"a", "b"}) {
    SimClient& sim = world.add_client(name);
    clients.push_back(std::make_unique<Client>(sim.backend_ptr(), sim.runtime_ptr()));
    Client& client = *clients.back();
    world.spawn(sim, [&sim, &client] {
      ReentrantLock lock = client.lock("orders");
      while (sim.runtime().now() < Instant{} + 10min) {
        try {
          lock.lock();
          sim.runtime().sleep_for(15s);  // past a renewal
          lock.unlock();
        } catch (const Error&) {
          // a BUGGIFY fault in transit: try again
        }
      }
    });
  }
  world.run_for(12min);
  world.stop();
  clients.clear();
}

TEST(BuggifyTest, ARealRuntimeNeverFires) {
  const std::shared_ptr<Runtime> runtime = make_real_runtime();
  for (const std::string_view point : buggify_point_names()) EXPECT_FALSE(runtime->buggify(point)) << point;
}

TEST(BuggifyTest, PointsHaveStableNames) {
  EXPECT_EQ(buggify_point_names(),
            (std::vector<std::string_view>{"watchdog.renewal_delayed", "fake.reply_dropped_after_apply",
                                           "pubsub.reconnect_mid_wait", "fake.slow_script", "fake.publish_lost"}));
}

TEST(BuggifyTest, WithoutBuggifyPointsAreReachedAndNeverFire) {
  World world(3);
  contend(world);
  for (const BuggifyCount& count : world.buggify_counts()) {
    EXPECT_FALSE(count.enabled) << count.point;
    EXPECT_GT(count.reached, 0u) << count.point;
    EXPECT_EQ(count.fired, 0u) << count.point;
  }
}

TEST(BuggifyTest, TheSeedDrawsWhichPointsAreEnabledTheSameEveryTime) {
  std::vector<std::uint64_t> enabled_in(buggify_point_names().size(), 0);
  constexpr std::uint64_t kSeeds = 40;
  for (std::uint64_t seed = 1; seed <= kSeeds; ++seed) {
    World one(seed, {.buggify = true});
    World two(seed, {.buggify = true});
    for (std::size_t point = 0; point < enabled_in.size(); ++point) {
      EXPECT_EQ(one.buggify_counts()[point].enabled, two.buggify_counts()[point].enabled);
      enabled_in[point] += one.buggify_counts()[point].enabled ? 1 : 0;
    }
  }
  for (std::size_t point = 0; point < enabled_in.size(); ++point) {
    EXPECT_GT(enabled_in[point], 0u) << buggify_point_names()[point];
    EXPECT_LT(enabled_in[point], kSeeds) << buggify_point_names()[point];
  }
}

TEST(BuggifyTest, TheSameSeedFiresTheSameWay) {
  World one(11, {.buggify = true});
  World two(11, {.buggify = true});
  contend(one);
  contend(two);
  EXPECT_EQ(one.trace_hash(), two.trace_hash());
  for (std::size_t point = 0; point < buggify_point_names().size(); ++point) {
    EXPECT_EQ(one.buggify_counts()[point].fired, two.buggify_counts()[point].fired);
  }
}

TEST(BuggifyTest, UnknownPointsAreRefused) {
  World world(1);
  EXPECT_THROW(world.buggify_always("no.such.point"), InvalidArgumentError);
  EXPECT_THROW(world.buggify_never("no.such.point"), InvalidArgumentError);
}

TEST(BuggifyTest, ADelayedRenewalStillKeepsTheLock) {
  World world(1);
  world.buggify_always("watchdog.renewal_delayed");
  SimClient& holder = world.add_client("holder");
  Client client(holder.backend_ptr(), holder.runtime_ptr());
  bool held = false;
  world.spawn(holder, [&] {
    ReentrantLock lock = client.lock("orders");
    lock.lock();
    holder.runtime().sleep_for(2min);
    held = lock.is_held_by_current_thread();
    lock.unlock();
  });
  world.run_until_idle();
  EXPECT_TRUE(held);
  EXPECT_GT(count_of(world, "watchdog.renewal_delayed").fired, 0u);
}

TEST(BuggifyTest, AReplyDroppedAfterTheServerAppliedIt) {
  World world(1);
  world.buggify_always("fake.reply_dropped_after_apply");
  SimClient& writer = world.add_client("writer");
  bool timed_out = false;
  world.spawn(writer, [&] {
    try {
      (void)writer.backend().command({"SET", "k", "v"});
    } catch (const TimeoutError&) {
      timed_out = true;
    }
  });
  world.run_until_idle();
  EXPECT_TRUE(timed_out);
  EXPECT_EQ(world.now_ms(), 2'000) << "the command timeout";
  EXPECT_NE(world.server(0).keyspace().find("k"), nullptr) << "applied all the same";
}

TEST(BuggifyTest, ASlowScriptKeepsTheServerBusy) {
  World world(1);
  world.buggify_always("fake.slow_script");
  SimClient& scripted = world.add_client("scripted");
  SimClient& other = world.add_client("other");
  std::int64_t script_reply_ms = -1, other_reply_ms = -1;
  world.spawn(scripted, [&] {
    (void)scripted.backend().command({"EVAL", "return redis.call('SET', KEYS[1], 'v')", "1", "k"});
    script_reply_ms = world.now_ms();
  });
  world.spawn(other, [&] {
    other.runtime().sleep_for(100ms);
    (void)other.backend().command({"GET", "k"});
    other_reply_ms = world.now_ms();
  });
  world.run_until_idle();
  EXPECT_EQ(script_reply_ms, 1'500);
  EXPECT_EQ(other_reply_ms, 1'500) << "waited for the server";
}

TEST(BuggifyTest, APublishLostReachesNoSubscriber) {
  World world(1);
  world.buggify_always("fake.publish_lost");
  SimClient& waiter = world.add_client("waiter");
  SimClient& publisher = world.add_client("publisher");
  int messages = 0;
  std::int64_t receivers = -1;
  world.spawn(waiter, [&] {
    auto event = waiter.runtime().make_event();
    Subscription subscription = waiter.backend().subscribe("wake", [&](const PubSubEvent&) { ++messages; });
    waiter.runtime().sleep_for(1s);
  });
  world.spawn(publisher, [&] {
    publisher.runtime().sleep_for(100ms);
    receivers = publisher.backend().command({"PUBLISH", "wake", "go"}).as_integer();
  });
  world.run_until_idle();
  EXPECT_EQ(messages, 0);
  EXPECT_EQ(receivers, 1) << "the publisher cannot tell";
}

TEST(BuggifyTest, AReconnectMidWaitLosesMessagesThenSaysSo) {
  World world(1);
  world.buggify_always("pubsub.reconnect_mid_wait");
  SimClient& waiter = world.add_client("waiter");
  SimClient& publisher = world.add_client("publisher");
  std::vector<std::string> seen;
  world.spawn(waiter, [&] {
    Subscription subscription = waiter.backend().subscribe("wake", [&](const PubSubEvent& event) {
      seen.push_back(event.kind == PubSubEvent::Kind::resubscribed ? "resubscribed@" + std::to_string(world.now_ms())
                                                                   : std::string(event.payload));
    });
    waiter.runtime().sleep_for(2s);
  });
  world.spawn(publisher, [&] {
    publisher.runtime().sleep_for(100ms);
    (void)publisher.backend().command({"PUBLISH", "wake", "lost"});
    publisher.runtime().sleep_for(900ms);
    (void)publisher.backend().command({"PUBLISH", "wake", "heard"});
  });
  world.run_until_idle();
  EXPECT_EQ(seen, (std::vector<std::string>{"resubscribed@520", "heard"}));
}

}  // namespace
}  // namespace turnstile::sim
