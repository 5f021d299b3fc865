// rediss+cluster:// and rediss+sentinel:// against real deployments serving
// TLS (tests/support/redis_cluster.h) with certificates made by the test:
//
//   * a cluster of three masters, TLS on the cluster bus too: locks on two
//     masters reached only through the slot map (CLUSTER SLOTS names the
//     TLS ports to a TLS client), a waiter woken by pub/sub over TLS, an
//     untrusted CA refused with TlsVerificationError;
//   * a master, a replica and three sentinels, every link TLS: a lock on
//     the master the sentinels name, the same after the master is killed
//     and the sentinels promote the replica; an untrusted CA refused.
//
// Nothing here is timed: conditions are awaited with generous deadlines.

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "redis/sentinel_backend.h"
#include "redis_cluster.h"
#include "redis_test_support.h"
#include "tls_certs.h"
#include "turnstile/client.h"
#include "turnstile/errors.h"
#include "turnstile/redis_backend.h"

namespace turnstile {
namespace {

using ::testing::HasSubstr;
using testing::kDeploymentTimeout;
using testing::message_of;
using testing::RedisCluster;
using testing::SentinelGroup;
using testing::TlsCertificates;
using testing::wait_until;

// Generous: TLS handshakes under a sanitizer on a loaded machine.
constexpr int kTlsTimeoutMs = 5000;
// How long a replica may take to acknowledge an acquisition (at most half
// the command timeout).
constexpr int kReplicaAckTimeoutMs = 2000;
constexpr auto kWaiterWait = std::chrono::seconds(30);

RedisOptions tls_options(const std::string& url, const std::string& ca_file) {
  RedisOptions options = RedisOptions::from_url(url + "?tls_ca_file=" + ca_file);
  options.connect_timeout_ms = kTlsTimeoutMs;
  options.command_timeout_ms = kTlsTimeoutMs;
  options.replica_sync_timeout_ms = kReplicaAckTimeoutMs;
  options.pubsub_ping_interval_ms = testing::kTestPingIntervalMs;
  return options;
}

// Runs `step` until it returns without throwing (across a failover: broken
// connections, READONLY from a demoted master), within kDeploymentTimeout.
bool succeeds_eventually(const std::function<void()>& step) {
  return wait_until(
      [&] {
        step();
        return true;
      },
      kDeploymentTimeout);
}

class TlsClusterTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    certificates_ = new TlsCertificates();
    cluster_ = new RedisCluster(certificates_);
  }
  static void TearDownTestSuite() {
    delete cluster_;
    delete certificates_;
  }

  // Only node 0's TLS port as the seed: the other masters are reached
  // through the slot map, so it must name their TLS ports.
  static RedisOptions options(const std::string& ca_file) {
    return tls_options("rediss+cluster://127.0.0.1:" + std::to_string(cluster_->node(0).tls_port()), ca_file);
  }

  // A name "<prefix>-<n>" that node `index` serves.
  static std::string name_on(int index, const std::string& prefix) {
    for (int n = 0;; ++n) {
      const std::string name = prefix + "-" + std::to_string(n);
      if (cluster_->owner_of(name) == index) return name;
    }
  }

  static inline TlsCertificates* certificates_ = nullptr;
  static inline RedisCluster* cluster_ = nullptr;
};

TEST_F(TlsClusterTest, AnnouncesTheTlsPortsToTlsClientsOnly) {
  const std::string plaintext = cluster_->node(0).command({"CLUSTER", "SLOTS"});
  for (int i = 0; i < RedisCluster::kMasters; ++i) {
    EXPECT_THAT(plaintext, HasSubstr("(integer) " + std::to_string(cluster_->node(i).port())));
    EXPECT_THAT(plaintext, ::testing::Not(HasSubstr("(integer) " + std::to_string(cluster_->node(i).tls_port()))));
  }
}

TEST_F(TlsClusterTest, LocksOnTwoMastersThroughTheSlotMap) {
  Client client(make_redis_backend(options(certificates_->ca_file())));
  for (int index : {1, 2}) {
    const std::string name = name_on(index, "tls-cluster-lock");
    ReentrantLock lock = client.lock(name);
    lock.lock();
    EXPECT_TRUE(lock.is_held_by_current_thread()) << name;
    // Seen in plaintext on the master that serves it.
    EXPECT_EQ(cluster_->node(index).command({"EXISTS", name}), "(integer) 1") << name;
    lock.unlock();
    EXPECT_EQ(cluster_->node(index).command({"EXISTS", name}), "(integer) 0") << name;
  }
}

TEST_F(TlsClusterTest, AWaiterIsWokenByPubSubOverTls) {
  Client client(make_redis_backend(options(certificates_->ca_file())));
  const std::string name = name_on(1, "tls-cluster-wait");
  ReentrantLock holder = client.lock(name);
  // A lease far beyond the waiter's wait: only the unlock can let the
  // waiter in in time.
  holder.lock(std::chrono::minutes(5));
  std::atomic<int> outcome{-1};  // 1 acquired, 0 not, 2 threw
  std::thread waiter([&] {
    try {
      ReentrantLock lock = client.lock(name);
      const bool acquired = lock.try_lock_for(kWaiterWait);
      if (acquired) lock.unlock();
      outcome = acquired ? 1 : 0;
    } catch (...) {
      outcome = 2;
    }
  });
  // The waiter's subscription, on the master serving the channel (sharded
  // pub/sub on Redis 7, plain before): its process's own wake channel, in
  // the lock's slot (wake scope fleet; the lock's shared channel is not
  // heeded behind a turnstile holder).
  const std::string channel = holder.layout().wake_channel(client.id());
  const int channel_owner = cluster_->owner_of(channel);
  const bool subscribed =
      channel_owner >= 0 && wait_until(
                                [&] {
                                  auto& node = cluster_->node(channel_owner);
                                  const std::string shard = node.command({"PUBSUB", "SHARDNUMSUB", channel});
                                  const std::string plain = node.command({"PUBSUB", "NUMSUB", channel});
                                  return shard.find("(integer) 0") == std::string::npos ||
                                         plain.find("(integer) 0") == std::string::npos;
                                },
                                kDeploymentTimeout);
  holder.unlock();
  waiter.join();
  EXPECT_TRUE(subscribed);
  EXPECT_EQ(outcome.load(), 1);
}

TEST_F(TlsClusterTest, RefusesAnUntrustedCa) {
  Client client(make_redis_backend(options(certificates_->other_ca_file())));
  ReentrantLock lock = client.lock("tls-cluster-untrusted");
  const std::string message = message_of<TlsVerificationError>([&] { lock.lock(); });
  EXPECT_THAT(message, HasSubstr("127.0.0.1:" + std::to_string(cluster_->node(0).tls_port())));
  EXPECT_THAT(message, HasSubstr("certificate verify failed"));
}

class TlsSentinelTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { certificates_ = new TlsCertificates(); }
  static void TearDownTestSuite() { delete certificates_; }

  static inline TlsCertificates* certificates_ = nullptr;
};

TEST_F(TlsSentinelTest, LocksOnTheNamedMasterAndAfterAFailover) {
  SentinelGroup group({}, certificates_);
  EXPECT_EQ(group.master_port_by_sentinel(), group.master().tls_port());
  const RedisOptions options = tls_options(group.url(), certificates_->ca_file());
  EXPECT_EQ(redis::resolve_master(options).port, group.master().tls_port());

  Client client(make_redis_backend(options));
  ReentrantLock lock = client.lock("tls-sentinel-lock");
  lock.lock();
  EXPECT_TRUE(lock.is_held_by_current_thread());
  EXPECT_EQ(group.master().command({"EXISTS", "tls-sentinel-lock"}), "(integer) 1");
  lock.unlock();
  EXPECT_EQ(group.master().command({"EXISTS", "tls-sentinel-lock"}), "(integer) 0");

  // The master dies; the sentinels, talking TLS to the replica, promote it
  // and name its TLS port.
  group.master().kill();
  ASSERT_TRUE(
      wait_until([&] { return group.master_port_by_sentinel() == group.replica().tls_port(); }, kDeploymentTimeout));
  // The client follows (re-resolving after the broken connection).
  ReentrantLock after = client.lock("tls-sentinel-after");
  EXPECT_TRUE(succeeds_eventually([&] { after.lock(); }));
  EXPECT_EQ(group.replica().command({"EXISTS", "tls-sentinel-after"}), "(integer) 1");
  EXPECT_TRUE(succeeds_eventually([&] { after.unlock(); }));
  EXPECT_EQ(group.replica().command({"EXISTS", "tls-sentinel-after"}), "(integer) 0");
}

TEST_F(TlsSentinelTest, RefusesAnUntrustedCa) {
  SentinelGroup group({}, certificates_);
  Client client(make_redis_backend(tls_options(group.url(), certificates_->other_ca_file())));
  ReentrantLock lock = client.lock("tls-sentinel-untrusted");
  const std::string message = message_of<TlsVerificationError>([&] { lock.lock(); });
  EXPECT_THAT(message, HasSubstr("certificate verify failed"));
}

}  // namespace
}  // namespace turnstile
