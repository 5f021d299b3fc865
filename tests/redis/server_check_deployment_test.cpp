// check_server() (turnstile/server_check.h) on every deployment mode: on a
// cluster every master is read and one evicting master makes the whole
// server evicting, named; under Sentinel the current master is read.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "redis_cluster.h"
#include "turnstile/redis_backend.h"
#include "turnstile/server_check.h"

namespace turnstile {
namespace {

using ::testing::HasSubstr;
using testing::RedisCluster;
using testing::SentinelGroup;

void set_policy(testing::RedisServer& server, const std::string& policy, const std::string& maxmemory) {
  server.command({"CONFIG", "SET", "maxmemory-policy", policy});
  server.command({"CONFIG", "SET", "maxmemory", maxmemory});
}

TEST(ServerCheckDeploymentTest, EveryClusterMasterIsReadAndOneEvictingMasterIsNamed) {
  RedisCluster& cluster = testing::shared_test_cluster();
  const std::unique_ptr<Backend> backend = make_redis_backend(RedisOptions::from_url(cluster.url()));
  const ServerSafety safe = check_server(*backend);
  ASSERT_EQ(safe.masters.size(), static_cast<std::size_t>(RedisCluster::kMasters));
  EXPECT_EQ(safe.risk, EvictionRisk::safe) << describe_policy(safe);

  testing::RedisServer& evicting = cluster.node(RedisCluster::kMasters - 1);
  set_policy(evicting, "volatile-lru", "104857600");
  const ServerSafety unsafe = check_server(*backend);
  set_policy(evicting, "noeviction", "0");
  ASSERT_EQ(unsafe.masters.size(), static_cast<std::size_t>(RedisCluster::kMasters));
  EXPECT_EQ(unsafe.risk, EvictionRisk::evicts_locks);
  int evicting_masters = 0;
  for (const MasterSafety& master : unsafe.masters) {
    if (master.risk != EvictionRisk::evicts_locks) continue;
    ++evicting_masters;
    EXPECT_EQ(master.node, "127.0.0.1:" + std::to_string(evicting.port()));
  }
  EXPECT_EQ(evicting_masters, 1);
  EXPECT_THAT(unsafe_server_message(unsafe),
              HasSubstr("volatile-lru (maxmemory 104857600) on 127.0.0.1:" + std::to_string(evicting.port())));
}

TEST(ServerCheckDeploymentTest, SentinelsCurrentMasterIsRead) {
  SentinelGroup group;
  set_policy(group.master(), "allkeys-lru", "104857600");
  const std::unique_ptr<Backend> backend = make_redis_backend(RedisOptions::from_url(group.url()));
  const ServerSafety safety = check_server(*backend);
  ASSERT_EQ(safety.masters.size(), 1u);
  EXPECT_EQ(safety.risk, EvictionRisk::evicts_locks);
  EXPECT_EQ(safety.masters[0].node, "127.0.0.1:" + std::to_string(group.master().port()));
  EXPECT_EQ(safety.masters[0].maxmemory_policy, "allkeys-lru");
}

}  // namespace
}  // namespace turnstile
