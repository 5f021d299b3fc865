// The cluster backend against a real 3-master Redis Cluster on loopback:
// routing by slot, client-side cross-slot refusal, sharded pub/sub, a
// resharding of a contended lock's slot, and a node restart.

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <thread>

#include "lua_scripts.h"
#include "redis/slot.h"
#include "redis_cluster.h"
#include "turnstile/client.h"
#include "turnstile/errors.h"
#include "turnstile/redis_backend.h"

namespace turnstile::testing {
namespace {

using namespace std::chrono_literals;

constexpr auto kEventWait = 10s;

std::shared_ptr<Backend> cluster_backend() {
  std::shared_ptr<Backend> backend = make_redis_backend(RedisOptions::from_url(shared_test_cluster().url()));
  backend->command({"FLUSHALL"});
  return backend;
}

// Collects pub/sub events for a test to wait on.
class Events {
 public:
  PubSubHandler handler() {
    return [this](const PubSubEvent& event) {
      const std::lock_guard lock(mutex_);
      (event.kind == PubSubEvent::Kind::message ? messages_ : resubscribed_)++;
      changed_.notify_all();
    };
  }
  bool wait_for(int messages, int resubscribed) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, kEventWait, [&] { return messages_ >= messages && resubscribed_ >= resubscribed; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  int messages_ = 0;
  int resubscribed_ = 0;
};

// Moves `slot` from node `from` to node `to` by hand, as redis-cli
// --cluster reshard does: IMPORTING/MIGRATING, MIGRATE every key, then
// SETSLOT NODE everywhere. `between` runs after each batch of keys.
void migrate_slot(RedisCluster& cluster, int slot, int from, int to) {
  const std::string slot_text = std::to_string(slot);
  const std::string from_id = cluster.id_of(from);
  const std::string to_id = cluster.id_of(to);
  ASSERT_EQ(cluster.node(to).command({"CLUSTER", "SETSLOT", slot_text, "IMPORTING", from_id}), "OK");
  ASSERT_EQ(cluster.node(from).command({"CLUSTER", "SETSLOT", slot_text, "MIGRATING", to_id}), "OK");
  constexpr int kMaxBatches = 1000;
  for (int batch = 0; batch < kMaxBatches; ++batch) {
    const std::string keys = cluster.node(from).command({"CLUSTER", "GETKEYSINSLOT", slot_text, "100"});
    if (keys == "[]") break;
    // ["k1", "k2"]: lock names here have no quotes or commas.
    std::vector<std::string> argv = {"MIGRATE", "127.0.0.1", std::to_string(cluster.node(to).port()), "", "0",
                                     "5000",    "KEYS"};
    for (std::size_t start = keys.find('"'); start != std::string::npos;) {
      const std::size_t end = keys.find('"', start + 1);
      argv.push_back(keys.substr(start + 1, end - start - 1));
      start = keys.find('"', end + 1);
    }
    const std::string migrated = cluster.node(from).command(argv);
    ASSERT_TRUE(migrated == "OK" || migrated == "NOKEY") << migrated;
    std::this_thread::sleep_for(5ms);  // let the contenders work mid-migration
  }
  for (int i = 0; i < RedisCluster::kMasters; ++i) {
    ASSERT_EQ(cluster.node(i).command({"CLUSTER", "SETSLOT", slot_text, "NODE", to_id}), "OK");
  }
}

TEST(ClusterTest, RoutesEachScriptToItsSlotOwner) {
  const auto backend = cluster_backend();
  RedisCluster& cluster = shared_test_cluster();
  std::set<int> owners;
  for (const std::string name : {"alpha", "bravo", "charlie", "delta", "echo", "foxtrot"}) {
    EXPECT_EQ(backend->eval(scripts::reentrant_lock_acquire, {name}, {"30000", "owner"}), Reply::nil());
    const int owner = cluster.owner_of(name);
    ASSERT_GE(owner, 0);
    owners.insert(owner);
    EXPECT_EQ(cluster.node(owner).command({"EXISTS", name}), "(integer) 1") << name;
    EXPECT_EQ(backend->command({"HGET", name, "owner"}), Reply::bulk("1"));
  }
  EXPECT_GT(owners.size(), 1u);  // the names really spread over nodes
}

TEST(ClusterTest, RefusesKeysOfDifferentSlotsBeforeSending) {
  const auto backend = cluster_backend();
  try {
    backend->eval(scripts::lock_force_unlock, {"foo", "bar"}, {"0", "hash", "PUBLISH"});
    ADD_FAILURE() << "cross-slot call was sent";
  } catch (const InvalidArgumentError& error) {
    EXPECT_NE(std::string(error.what()).find("'bar' (slot 5061)"), std::string::npos) << error.what();
  }
  EXPECT_EQ(backend->command({"EXISTS", "foo"}), Reply::integer(0));
}

TEST(ClusterTest, WakeUpsUseShardedPubSubOnTheSlotOwner) {
  const auto backend = cluster_backend();
  EXPECT_EQ(backend->publish_command(), "SPUBLISH");
  Events events;
  const std::string channel = "redisson_lock__channel:{wake}";
  Subscription subscription = backend->subscribe(channel, events.handler());
  EXPECT_EQ(backend->command({"SPUBLISH", channel, "0"}), Reply::integer(1));
  EXPECT_TRUE(events.wait_for(1, 0));

  // An unlock on the cluster publishes through the script with SPUBLISH.
  Client client(backend);
  ReentrantLock lock = client.lock("wake");
  lock.lock();
  lock.unlock();
  EXPECT_TRUE(events.wait_for(2, 0));
}

TEST(ClusterTest, ReshardingTheSlotOfAContendedLockLosesNothing) {
  const auto backend = cluster_backend();
  RedisCluster& cluster = shared_test_cluster();
  const std::string name = "reshard-me";
  const int slot = redis::key_slot(name);
  Events events;
  Subscription subscription = backend->subscribe("redisson_lock__channel:{" + name + "}", events.handler());

  constexpr int kThreads = 4;
  std::atomic<bool> stop{false};
  std::atomic<int> inside{0};
  std::atomic<int> max_inside{0};
  std::atomic<int> rounds{0};
  std::mutex errors_mutex;
  std::vector<std::string> errors;
  Client client(backend);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&] {
      ReentrantLock lock = client.lock(name);
      constexpr int kMaxRounds = 100'000;
      for (int round = 0; round < kMaxRounds && !stop; ++round) {
        try {
          lock.lock();
          max_inside = std::max(max_inside.load(), ++inside);
          std::this_thread::sleep_for(1ms);
          --inside;
          lock.unlock();
          ++rounds;
        } catch (const std::exception& error) {
          const std::lock_guard guard(errors_mutex);
          errors.push_back(error.what());
          return;
        }
      }
    });
  }
  std::this_thread::sleep_for(100ms);
  const int from = cluster.owner_of(name);
  const int to = (from + 1) % RedisCluster::kMasters;
  const int rounds_before = rounds.load();
  migrate_slot(cluster, slot, from, to);
  std::this_thread::sleep_for(300ms);  // keep contending on the new owner
  stop = true;
  for (std::thread& thread : threads) thread.join();

  EXPECT_TRUE(errors.empty()) << errors.front();
  EXPECT_EQ(max_inside.load(), 1);
  EXPECT_GT(rounds.load(), rounds_before);
  EXPECT_EQ(cluster.owner_of(name), to);
  EXPECT_EQ(backend->command({"EXISTS", name}), Reply::integer(0));  // every hold released
  // The subscription followed its slot: re-subscribed on the new owner, and
  // messages published there reach it.
  EXPECT_TRUE(events.wait_for(1, 1));
  EXPECT_EQ(backend->command({"SPUBLISH", "redisson_lock__channel:{" + name + "}", "0"}), Reply::integer(1));
}

TEST(ClusterTest, ANodeRestartIsSurvivedByLocksAndSubscriptions) {
  const auto backend = cluster_backend();
  RedisCluster& cluster = shared_test_cluster();
  const std::string name = "restarted";
  Client client(backend);
  ReentrantLock lock = client.lock(name);
  lock.lock(10s);
  lock.unlock();
  Events events;
  Subscription subscription = backend->subscribe("redisson_lock__channel:{" + name + "}", events.handler());

  const int owner = cluster.owner_of(name);
  cluster.node(owner).stop();
  cluster.node(owner).start();  // same port and nodes.conf: it rejoins with its slots
  ASSERT_TRUE(wait_until([&] { return cluster.healthy(); }, kDeploymentTimeout));

  // Callers see typed transport errors at most, then the lock works again.
  bool locked = false;
  ASSERT_TRUE(wait_until(
      [&] {
        try {
          locked = lock.try_lock();
          return true;
        } catch (const ConnectionError&) {
          return false;
        }
      },
      kDeploymentTimeout));
  EXPECT_TRUE(locked);
  EXPECT_TRUE(events.wait_for(0, 1));  // the subscriber reconnected and said so
  lock.unlock();
  EXPECT_TRUE(events.wait_for(1, 1));
}

}  // namespace
}  // namespace turnstile::testing
