// list_locks() and Backend::scan_each_master() on a Redis Cluster: SCAN
// runs on every master with a cursor of its own, so locks whose slots live
// on different masters are all listed, once.

#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "redis_cluster.h"
#include "turnstile/client.h"
#include "turnstile/inspection.h"
#include "turnstile/redis_backend.h"

namespace turnstile {
namespace {

using testing::RedisCluster;

TEST(ListLocksClusterTest, EveryMasterIsScanned) {
  RedisCluster& cluster = testing::shared_test_cluster();
  const std::shared_ptr<Backend> backend = make_redis_backend(RedisOptions::from_url(cluster.url()));
  Client client(backend);
  // Enough names that every master owns some (16384 slots in 3 ranges).
  constexpr int kNames = 24;
  std::vector<ReentrantLock> locks;
  std::set<std::string> expected;
  for (int i = 0; i < kNames; ++i) {
    const std::string name = "ls-cluster:" + std::to_string(i);
    locks.push_back(client.lock(name));
    locks.back().lock();
    expected.insert(name);
  }
  std::set<int> masters_used;
  for (int master = 0; master < RedisCluster::kMasters; ++master) {
    // KEYS on one test node, never in the library.
    if (cluster.node(master).command({"KEYS", "ls-cluster:*"}).find("ls-cluster:") != std::string::npos) {
      masters_used.insert(master);
    }
  }
  ASSERT_GE(masters_used.size(), 2u) << "the names all hashed to one master: the test proves nothing";

  const LockListing listing = list_locks(*backend, {.pattern = "ls-cluster:*", .count_per_call = 5});
  EXPECT_TRUE(listing.complete);
  std::set<std::string> seen;
  for (const Inspection& lock : listing.locks) {
    EXPECT_TRUE(seen.insert(lock.name).second) << lock.name << " listed twice";
    EXPECT_EQ(lock.holder_count, 1) << lock.name;
  }
  EXPECT_EQ(seen, expected);
  const ScanResult keys = backend->scan_each_master({.match = "ls-cluster:*"});
  EXPECT_EQ(std::set<std::string>(keys.keys.begin(), keys.keys.end()), expected);
  for (ReentrantLock& lock : locks) lock.unlock();
}

}  // namespace
}  // namespace turnstile
