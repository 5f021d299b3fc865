// The cluster backend against a real 3-master Redis Cluster on loopback:
// routing by slot, client-side cross-slot refusal, sharded pub/sub, a
// resharding of a contended lock's slot, and a node restart.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <thread>

#include "lua_scripts.h"
#include "peak_count.h"
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

// Gives `slot` to node `to` on every node (CLUSTER SETSLOT NODE).
void assign_slot(RedisCluster& cluster, int slot, int to) {
  const std::string to_id = cluster.id_of(to);
  for (int i = 0; i < RedisCluster::kMasters; ++i) {
    ASSERT_EQ(cluster.node(i).command({"CLUSTER", "SETSLOT", std::to_string(slot), "NODE", to_id}), "OK");
  }
}

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
  assign_slot(cluster, slot, to);
}

// The names, one per master, that the masters own (index: the master).
std::vector<std::string> one_name_per_master(RedisCluster& cluster, const std::string& prefix) {
  std::vector<std::string> names(RedisCluster::kMasters);
  int found = 0;
  constexpr int kMaxNames = 1000;
  for (int i = 0; i < kMaxNames && found < RedisCluster::kMasters; ++i) {
    std::string name = prefix + std::to_string(i);
    const int owner = cluster.owner_of(name);
    if (owner < 0 || !names[static_cast<std::size_t>(owner)].empty()) continue;
    names[static_cast<std::size_t>(owner)] = std::move(name);
    ++found;
  }
  return names;
}

// Every node back at cluster_state:ok (after a node was paused).
bool cluster_ok(RedisCluster& cluster) {
  return wait_until(
      [&] {
        for (int i = 0; i < RedisCluster::kMasters; ++i) {
          if (cluster.node(i).command({"CLUSTER", "INFO"}).find("cluster_state:ok") == std::string::npos) return false;
        }
        return true;
      },
      kDeploymentTimeout);
}

const std::vector<std::string> kAcquireArgs = {"30000", "pipelined"};

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

// Sharded pub/sub from Redis 7 on; on 6.2, classic (its PUBLISH reaches
// every node's subscribers, and no direct handoff is made there:
// tests/locks/classic_cluster_handoff_test.cpp).
TEST(ClusterTest, WakeUpsUseShardedPubSubWhereTheServersHaveIt) {
  const auto backend = cluster_backend();
  const bool sharded = redis_server_major_version() >= 7;
  EXPECT_EQ(backend->publish_command(), sharded ? "SPUBLISH" : "PUBLISH");
  Events events;
  const std::string channel = "redisson_lock__channel:{wake}";
  Subscription subscription = backend->subscribe(channel, events.handler());
  const Reply published = backend->command({std::string(backend->publish_command()), channel, "0"});
  // SPUBLISH runs on the slot owner, where the subscription is; a classic
  // PUBLISH counts only the subscribers of the node it ran on.
  if (sharded) {
    EXPECT_EQ(published, Reply::integer(1));
  }
  EXPECT_TRUE(events.wait_for(1, 0));

  // An unlock on the cluster publishes through the script with the same command.
  Client client(backend);
  ReentrantLock lock = client.lock("wake");
  lock.lock();
  lock.unlock();
  EXPECT_TRUE(events.wait_for(2, 0));
}

// send_eval writes the call now and returns (a call per slot, the
// watchdog's batches): with one master hung (SIGSTOP, well within the
// cluster's node timeout), its call is in flight unanswered while the
// other masters' calls are answered; it is answered once the master is
// back. (Run at once, as the default send_eval would, the hung master's
// call would be over, a timeout, before send_eval returned.)
TEST(ClusterTest, SendEvalIsPipelinedOnEachSlotOwner) {
  const auto backend = cluster_backend();
  RedisCluster& cluster = shared_test_cluster();
  const std::vector<std::string> names = one_name_per_master(cluster, "pipelined-");
  for (const std::string& name : names) {
    ASSERT_FALSE(name.empty());
    // Scripts loaded and connections open: the hang below stalls replies only.
    ASSERT_EQ(backend->eval(scripts::reentrant_lock_acquire, {name}, kAcquireArgs), Reply::nil());
  }
  cluster.node(0).pause();
  const std::unique_ptr<RedisServer, void (*)(RedisServer*)> paused(&cluster.node(0),
                                                                    [](RedisServer* node) { node->resume(); });
  std::vector<std::unique_ptr<PendingReply>> sent;
  for (const std::string& name : names) {
    sent.push_back(backend->send_eval(scripts::reentrant_lock_acquire, {name}, kAcquireArgs, EvalSync::none));
  }
  EXPECT_FALSE(sent[0]->wait_for(std::chrono::nanoseconds::zero())) << "the hung master's call was over already";
  for (std::size_t i = 1; i < sent.size(); ++i) {
    ASSERT_TRUE(sent[i]->wait_for(kEventWait)) << names[i];
    EXPECT_EQ(sent[i]->get().reply, Reply::nil()) << names[i];  // entered again
  }
  cluster.node(0).resume();
  ASSERT_TRUE(sent[0]->wait_for(kEventWait));
  EXPECT_EQ(sent[0]->get().reply, Reply::nil());
  for (const std::string& name : names) EXPECT_EQ(backend->command({"HGET", name, "pipelined"}), Reply::bulk("2"));
  EXPECT_TRUE(cluster_ok(cluster));
}

// A pipelined call answered MOVED (the slot given to another master since
// the backend read the map) or ASK (the slot migrating, the key not on
// its old owner) is made again where the redirection says, as eval() does.
TEST(ClusterTest, SendEvalFollowsMovedAndAsk) {
  const auto backend = cluster_backend();
  RedisCluster& cluster = shared_test_cluster();
  const std::vector<std::string> names = one_name_per_master(cluster, "redirected-");
  const std::string& moved = names[0];
  const std::string& asked = names[1];
  ASSERT_FALSE(moved.empty() || asked.empty());
  // The backend reads the map: both slots at their owners.
  for (const std::string& name : {moved, asked}) {
    EXPECT_EQ(backend->command({"EXISTS", name}), Reply::integer(0)) << name;
  }

  const int moved_slot = redis::key_slot(moved);
  migrate_slot(cluster, moved_slot, 0, 2);  // empty: no key to move
  std::unique_ptr<PendingReply> sent =
      backend->send_eval(scripts::reentrant_lock_acquire, {moved}, kAcquireArgs, EvalSync::none);
  EXPECT_EQ(sent->get().reply, Reply::nil());
  EXPECT_EQ(cluster.node(2).command({"EXISTS", moved}), "(integer) 1");

  const int asked_slot = redis::key_slot(asked);
  const std::string slot_text = std::to_string(asked_slot);
  ASSERT_EQ(cluster.node(2).command({"CLUSTER", "SETSLOT", slot_text, "IMPORTING", cluster.id_of(1)}), "OK");
  ASSERT_EQ(cluster.node(1).command({"CLUSTER", "SETSLOT", slot_text, "MIGRATING", cluster.id_of(2)}), "OK");
  sent = backend->send_eval(scripts::reentrant_lock_acquire, {asked}, kAcquireArgs, EvalSync::none);
  EXPECT_EQ(sent->get().reply, Reply::nil());
  assign_slot(cluster, asked_slot, 2);  // the migration ends: node 1 had no key
  EXPECT_EQ(cluster.node(2).command({"EXISTS", asked}), "(integer) 1");
  EXPECT_EQ(backend->command({"HGET", asked, "pipelined"}), Reply::bulk("1"));
}

// send_evals groups a batch by master and pipelines each group on one
// connection: with a pool of one connection per master and master 0 hung,
// a batch over many slots is sent whole (one by one, master 0's second
// call would wait for its only connection); the other masters' calls are
// answered meanwhile, master 0's once it is back. A call whose keys span
// two slots fails alone, before anything is sent; one answered MOVED (its
// slot given away meanwhile) is made again at the new owner.
TEST(ClusterTest, SendEvalsPipelinesEachMastersCallsOnOneConnection) {
  RedisCluster& cluster = shared_test_cluster();
  RedisOptions options = RedisOptions::from_url(cluster.url());
  options.pool_size = 1;
  const std::shared_ptr<Backend> backend = make_redis_backend(options);
  backend->command({"FLUSHALL"});
  constexpr int kNames = 30;
  std::vector<std::string> names;
  std::vector<int> owners;
  for (int i = 0; i < kNames; ++i) {
    names.push_back("batched-" + std::to_string(i));
    owners.push_back(cluster.owner_of(names.back()));
    ASSERT_GE(owners.back(), 0) << names.back();
  }
  // Scripts loaded and a connection open on every master.
  for (const std::string& name : one_name_per_master(cluster, "batch-warm-")) {
    ASSERT_EQ(backend->eval(scripts::reentrant_lock_acquire, {name}, kAcquireArgs), Reply::nil());
  }
  std::vector<EvalRequest> calls;
  for (const std::string& name : names)
    calls.push_back(EvalRequest{&scripts::reentrant_lock_acquire, {name}, kAcquireArgs});
  calls.push_back(EvalRequest{&scripts::reentrant_lock_acquire, {names[0], "{x}" + names[0]}, kAcquireArgs});

  cluster.node(0).pause();
  std::unique_ptr<RedisServer, void (*)(RedisServer*)> paused(&cluster.node(0),
                                                              [](RedisServer* node) { node->resume(); });
  std::vector<std::unique_ptr<PendingReply>> sent = backend->send_evals(std::move(calls));
  ASSERT_EQ(sent.size(), static_cast<std::size_t>(kNames) + 1);
  EXPECT_TRUE(sent.back()->wait_for(std::chrono::nanoseconds::zero()));  // refused before sending
  EXPECT_THROW((void)sent.back()->get(), InvalidArgumentError);
  for (int i = 0; i < kNames; ++i) {
    if (owners[i] == 0) {
      EXPECT_FALSE(sent[i]->wait_for(std::chrono::nanoseconds::zero())) << names[i];
    } else {
      ASSERT_TRUE(sent[i]->wait_for(kEventWait)) << names[i];
      EXPECT_EQ(sent[i]->get().reply, Reply::nil()) << names[i];
    }
  }
  paused.reset();
  for (int i = 0; i < kNames; ++i) {
    if (owners[i] != 0) continue;
    ASSERT_TRUE(sent[i]->wait_for(kEventWait)) << names[i];
    EXPECT_EQ(sent[i]->get().reply, Reply::nil()) << names[i];
  }
  for (const std::string& name : names) EXPECT_EQ(backend->command({"HGET", name, "pipelined"}), Reply::bulk("1"));
  EXPECT_TRUE(cluster_ok(cluster));

  // A slot moved since the backend read the map: its call is followed.
  const std::string moved = one_name_per_master(cluster, "batch-moved-")[0];
  ASSERT_FALSE(moved.empty());
  migrate_slot(cluster, redis::key_slot(moved), 0, 2);  // empty: no key to move
  sent = backend->send_evals({EvalRequest{&scripts::reentrant_lock_acquire, {moved}, kAcquireArgs},
                              EvalRequest{&scripts::reentrant_lock_acquire, {names[1]}, kAcquireArgs}});
  EXPECT_EQ(sent[0]->get().reply, Reply::nil());
  EXPECT_EQ(sent[1]->get().reply, Reply::nil());  // entered again
  EXPECT_EQ(cluster.node(2).command({"EXISTS", moved}), "(integer) 1");
  EXPECT_EQ(backend->command({"HGET", names[1], "pipelined"}), Reply::bulk("2"));
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
  PeakCount inside;
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
          inside.enter();
          std::this_thread::sleep_for(1ms);
          inside.leave();
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
  EXPECT_EQ(inside.most(), 1);
  EXPECT_GT(rounds.load(), rounds_before);
  EXPECT_EQ(cluster.owner_of(name), to);
  EXPECT_EQ(backend->command({"EXISTS", name}), Reply::integer(0));  // every hold released
  // The subscription followed its slot: re-subscribed on the new owner, and
  // messages published there reach it.
  EXPECT_TRUE(events.wait_for(1, 1));
  EXPECT_EQ(backend->command({std::string(backend->publish_command()), "redisson_lock__channel:{" + name + "}", "0"}),
            Reply::integer(1));
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

// A failover to the owner's replica (CLUSTER FAILOVER TAKEOVER, as an
// operator or an election does it when the master is unreachable) puts the
// slot on a server that may lack the latest writes: a replica in its first
// sync, or one behind another. The holder is told at its first contact
// since (the wipe check's, within about a second), as a Sentinel switch is
// told, not at a renewal that may come two renewal periods later (issue
// #50, row 2: 1.25 s overlap). Here the replica was in sync and has the
// lock, so nothing else would ever tell the holder: only the failover's
// detection can.
TEST(ClusterTest, AFailoverToTheOwnersReplicaIsToldAsALoss) {
  RedisCluster cluster;  // its own: the failover changes which node owns what
  const std::string name = "promoted";
  const int owner = cluster.owner_of(name);
  ASSERT_GE(owner, 0);
  RedisServer& replica = cluster.add_replica(owner);
  Client client(make_redis_backend(RedisOptions::from_url(cluster.url())));
  ReentrantLock lock = client.lock(name);
  std::mutex mutex;
  std::vector<LockLostReason> reasons;
  lock.set_lost_handler([&](const LockLost& lost) {
    const std::lock_guard guard(mutex);
    reasons.push_back(lost.reason);
  });
  lock.lock();  // renewed by the watchdog; the replica acknowledged it
  const std::stop_token loss = lock.loss_token();

  const auto took_over = std::chrono::steady_clock::now();
  EXPECT_NE(replica.command({"CLUSTER", "FAILOVER", "TAKEOVER"}).find("OK"), std::string::npos);
  ASSERT_TRUE(wait_until([&] { return loss.stop_requested(); }, kDeploymentTimeout));
  std::printf(
      "cluster failover: the holder was told %lld ms after the takeover\n",
      static_cast<long long>(
          std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - took_over).count()));
  EXPECT_EQ(replica.command({"EXISTS", name}), "(integer) 1");  // the new master has it: a renewal would pass
  {
    const std::lock_guard guard(mutex);
    EXPECT_EQ(reasons, std::vector<LockLostReason>{LockLostReason::server_restarted});
  }
  EXPECT_FALSE(lock.is_held_by_current_thread());
  lock.unlock();  // quiet: the loss was told
}

}  // namespace
}  // namespace turnstile::testing
