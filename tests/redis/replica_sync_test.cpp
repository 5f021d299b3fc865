// Replica-sync safety against a real master with one replica (standalone
// backend): acquisitions wait for the replica; one no replica acknowledged
// is undone and reported as ReplicaSyncError.

#include <gtest/gtest.h>

#include "lua_scripts.h"
#include "redis_cluster.h"
#include "turnstile/client.h"
#include "turnstile/errors.h"
#include "turnstile/redis_backend.h"

namespace turnstile::testing {
namespace {

using namespace std::chrono_literals;

struct MasterWithReplica {
  MasterWithReplica() : replica({"--replicaof", "127.0.0.1", std::to_string(master.port())}) {
    EXPECT_TRUE(wait_for_replica_online(master, replica));
  }
  RedisServer master;
  RedisServer replica;
};

// How long the replica may take to acknowledge. Where it must acknowledge,
// generous (a loaded machine); where it is paused and cannot, short.
constexpr int kHealthyAckTimeoutMs = 2000;
constexpr int kPausedAckTimeoutMs = 100;

RedisOptions options_for(const RedisServer& server, int ack_timeout_ms = kHealthyAckTimeoutMs) {
  RedisOptions options = RedisOptions::from_url(server.url());
  options.replica_sync_timeout_ms = ack_timeout_ms;
  return options;
}

TEST(ReplicaSyncTest, AnAcquisitionIsOnTheReplicaWhenLockReturns) {
  MasterWithReplica servers;
  const std::shared_ptr<Backend> backend = make_redis_backend(options_for(servers.master));
  const SyncedReply synced = backend->eval_synced(scripts::reentrant_lock_acquire, {"synced"}, {"30000", "o"});
  EXPECT_EQ(synced.reply, Reply::nil());
  EXPECT_EQ(synced.ack.replicas, 1);
  EXPECT_EQ(synced.ack.acknowledged, 1);

  Client client(backend);
  TokenLock lock = client.token_lock("replicated");
  lock.lock();
  EXPECT_EQ(servers.replica.command({"EXISTS", "replicated"}), "(integer) 1");  // no sleep needed
  lock.unlock();
}

TEST(ReplicaSyncTest, SendEvalPipelinesTheWaitAndReportsTheAck) {
  MasterWithReplica servers;
  const std::shared_ptr<Backend> backend = make_redis_backend(options_for(servers.master));
  const std::unique_ptr<PendingReply> pending =
      backend->send_eval(scripts::reentrant_lock_acquire, {"sent"}, {"30000", "o"}, EvalSync::replicas);
  ASSERT_TRUE(pending->wait_for(std::chrono::seconds(5)));  // the WAIT reply too
  EXPECT_EQ(servers.replica.command({"EXISTS", "sent"}), "(integer) 1");
  const SyncedReply synced = pending->get();
  EXPECT_EQ(synced.reply, Reply::nil());
  EXPECT_EQ(synced.ack.replicas, 1);
  EXPECT_EQ(synced.ack.acknowledged, 1);

  servers.replica.pause();  // connected, but acknowledges nothing
  const SyncedReply unsynced =
      backend->send_eval(scripts::reentrant_lock_acquire, {"unsent"}, {"30000", "o"}, EvalSync::replicas)->get();
  EXPECT_EQ(unsynced.reply, Reply::nil());
  EXPECT_EQ(unsynced.ack.replicas, 1);
  EXPECT_TRUE(unsynced.ack.unconfirmed());
  // EvalSync::none sends no WAIT: no replica count, nothing waited for.
  const std::unique_ptr<PendingReply> plain =
      backend->send_eval(scripts::reentrant_lock_acquire, {"plain"}, {"30000", "o"}, EvalSync::none);
  EXPECT_EQ(plain->get().ack.replicas, 0);
  servers.replica.resume();
}

TEST(ReplicaSyncTest, AnAcquisitionNoReplicaAcknowledgedIsUndone) {
  MasterWithReplica servers;
  const std::shared_ptr<Backend> backend = make_redis_backend(options_for(servers.master));
  Client client(backend);
  ReentrantLock lock = client.lock("unsynced");
  EXPECT_TRUE(lock.try_lock());  // learns that there is a replica
  lock.unlock();

  servers.replica.pause();  // connected, but acknowledges nothing
  try {
    (void)lock.try_lock();
    ADD_FAILURE() << "acquired without a replica's acknowledgement";
  } catch (const ReplicaSyncError& error) {
    EXPECT_NE(std::string(error.what()).find("none of its 1 replicas"), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("released again"), std::string::npos) << error.what();
  }
  EXPECT_EQ(servers.master.command({"EXISTS", "unsynced"}), "(integer) 0");
  EXPECT_FALSE(lock.is_held_by_current_thread());
  servers.replica.resume();
}

TEST(ReplicaSyncTest, OffMeansNoWait) {
  MasterWithReplica servers;
  RedisOptions options = options_for(servers.master);
  options.replica_sync = false;
  const std::shared_ptr<Backend> backend = make_redis_backend(options);
  servers.replica.pause();
  Client client(backend);
  ReentrantLock lock = client.lock("unchecked");
  EXPECT_TRUE(lock.try_lock());
  lock.unlock();
  servers.replica.resume();
}

TEST(ReplicaSyncTest, WithoutReplicasNothingIsWaitedFor) {
  RedisServer server;
  const std::shared_ptr<Backend> backend = make_redis_backend(options_for(server));
  const SyncedReply synced = backend->eval_synced(scripts::reentrant_lock_acquire, {"alone"}, {"30000", "o"});
  EXPECT_EQ(synced.reply, Reply::nil());
  EXPECT_EQ(synced.ack.replicas, 0);
  EXPECT_FALSE(synced.ack.unconfirmed());
}

}  // namespace
}  // namespace turnstile::testing
