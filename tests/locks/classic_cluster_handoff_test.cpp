// No direct handoff on a Redis Cluster with classic pub/sub (Redis 6.2).
// A grant is committed only when its message is counted as received, but
// there PUBLISH counts the node's own subscribers while the cluster bus
// delivers the message to every node's: a waiter subscribed on another node
// received a grant the script counted as reaching nobody and never made,
// and held the lock beside whoever took it (found by
// tests/redis/cluster_test.cpp's resharding case on Redis 6.2.16). There
// every flavor tells its waiters instead, and they take the lock by their
// own tries. On the fake, in virtual time, behind a decorator that answers
// Redis's slots as a cluster backend does and records the keys of every
// call; with sharded pub/sub or on one server, grants are still passed.

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "redis/slot.h"
#include "turnstile/backend.h"
#include "turnstile/client.h"
#include "turnstile/fair_lock.h"
#include "turnstile/lock.h"
#include "turnstile/sim/world.h"

namespace turnstile {
namespace {

using namespace std::chrono_literals;

constexpr std::uint64_t kSeed = 11;
constexpr auto kHold = 2s;
constexpr auto kBudget = std::chrono::minutes(2);

enum class Topology { one_server, classic_cluster, sharded_cluster };

std::string topology_name(Topology topology) {
  switch (topology) {
    case Topology::one_server:
      return "OneServer";
    case Topology::classic_cluster:
      return "ClassicCluster";
    case Topology::sharded_cluster:
      return "ShardedCluster";
  }
  return "?";
}

// The fake as the backend of `topology` sees it: slots on a cluster, the
// publish command of its pub/sub, and every key any call carried.
class TopologyBackend final : public ForwardingBackend {
 public:
  TopologyBackend(std::shared_ptr<Backend> inner, Topology topology)
      : ForwardingBackend(std::move(inner)), topology_(topology) {}

  std::optional<int> cluster_slot(std::string_view key) const override {
    if (topology_ == Topology::one_server) return std::nullopt;
    return redis::key_slot(key);
  }
  std::string_view publish_command() const override {
    return topology_ == Topology::sharded_cluster ? "SPUBLISH" : "PUBLISH";
  }
  Reply eval(const Script& script, const std::vector<std::string>& keys,
             const std::vector<std::string>& args) override {
    note(keys);
    return ForwardingBackend::eval(script, keys, args);
  }
  std::unique_ptr<PendingReply> send_eval(const Script& script, const std::vector<std::string>& keys,
                                          const std::vector<std::string>& args, EvalSync sync) override {
    note(keys);
    return ForwardingBackend::send_eval(script, keys, args, sync);
  }

  // Whether any call carried a key starting with `prefix`.
  bool carried(std::string_view prefix) const {
    for (const std::string& key : keys_) {
      if (key.starts_with(prefix)) return true;
    }
    return false;
  }

 private:
  void note(const std::vector<std::string>& keys) { keys_.insert(keys_.end(), keys.begin(), keys.end()); }

  Topology topology_;
  std::vector<std::string> keys_;  // the fake runs one task at a time: no lock needed
};

class ClassicClusterHandoffTest : public ::testing::TestWithParam<Topology> {
 protected:
  // A holder, and a waiter in another process that waits for the lock the
  // holder releases after kHold; returns whether the waiter got it.
  // `make_lock` makes the lock's handle on a Client.
  template <typename MakeLock>
  bool handed_over(MakeLock make_lock) {
    sim::World world(kSeed);
    sim::SimClient& holder = world.add_client("holder");
    sim::SimClient& waiter = world.add_client("waiter");
    holder_backend_ = std::make_shared<TopologyBackend>(holder.backend_ptr(), GetParam());
    waiter_backend_ = std::make_shared<TopologyBackend>(waiter.backend_ptr(), GetParam());
    bool got = false;
    world.spawn(holder, [&] {
      Client client(holder_backend_, holder.runtime_ptr());
      auto lock = make_lock(client);
      lock.lock();
      holder.runtime().sleep_for(kHold);
      lock.unlock();
    });
    world.spawn(waiter, [&] {
      waiter.runtime().sleep_for(kHold / 4);  // the holder holds by then
      Client client(waiter_backend_, waiter.runtime_ptr());
      auto lock = make_lock(client);
      lock.lock();
      got = lock.is_held_by_current_thread();
      lock.unlock();
    });
    world.run_for(kBudget);
    return got;
  }

  // Whether a grant was passed: the grants key (every flavor's
  // "turnstile_lock_grants:{<name>}") was in some call.
  bool grants_passed() const {
    return holder_backend_->carried("turnstile_lock_grants:") || waiter_backend_->carried("turnstile_lock_grants:");
  }
  bool expect_grants() const { return GetParam() != Topology::classic_cluster; }

  std::shared_ptr<TopologyBackend> holder_backend_;
  std::shared_ptr<TopologyBackend> waiter_backend_;
};

TEST_P(ClassicClusterHandoffTest, AReentrantLocksWaiterIsHandedTheLockOnlyWherePublishCountsEveryReceiver) {
  EXPECT_TRUE(handed_over([](Client& client) { return client.lock("handed"); }));
  EXPECT_EQ(grants_passed(), expect_grants()) << topology_name(GetParam());
}

TEST_P(ClassicClusterHandoffTest, AFairLocksWaiterIsHandedTheLockOnlyWherePublishCountsEveryReceiver) {
  EXPECT_TRUE(handed_over(
      [](Client& client) { return client.fair_lock("handed-fairly", FairLockOptions{.handoff = Handoff::direct}); }));
  EXPECT_EQ(grants_passed(), expect_grants()) << topology_name(GetParam());
}

INSTANTIATE_TEST_SUITE_P(Topologies, ClassicClusterHandoffTest,
                         ::testing::Values(Topology::one_server, Topology::classic_cluster, Topology::sharded_cluster),
                         [](const ::testing::TestParamInfo<Topology>& info) { return topology_name(info.param); });

}  // namespace
}  // namespace turnstile
