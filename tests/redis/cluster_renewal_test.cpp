// The watchdog's renewals on a real 3-master Redis Cluster: held locks whose
// names hash to different slots (and some sharing a {tag}) are renewed in
// calls of one slot each, so none is lost; a MultiLock over names of
// different slots on one cluster, read holds (with their timeout keys) and
// permits are renewed too.

#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "redis/slot.h"
#include "redis_cluster.h"
#include "turnstile/client.h"
#include "turnstile/multi_lock.h"
#include "turnstile/read_write_lock.h"
#include "turnstile/redis_backend.h"
#include "turnstile/semaphore.h"

namespace turnstile::testing {
namespace {

using namespace std::chrono_literals;

// Short, so several renewal periods (lease / 3 each) pass in a few seconds.
constexpr std::chrono::milliseconds kLease{1500};

struct RenewalClient {
  std::atomic<int> background_errors{0};
  std::shared_ptr<Backend> backend;
  std::unique_ptr<Client> client;

  explicit RenewalClient(Duration wipe_check_period = ClientOptions().wipe_check_period) {
    backend = make_redis_backend(RedisOptions::from_url(shared_test_cluster().url()));
    backend->command({"FLUSHALL"});
    ClientOptions options;
    options.lease = kLease;
    options.wipe_check_period = wipe_check_period;
    options.on_background_error = [this](std::exception_ptr) { ++background_errors; };
    client = std::make_unique<Client>(backend, options);
  }
  // The key's time to live on the server, in ms (-2: no key).
  std::int64_t pttl(const std::string& key) const { return backend->command({"PTTL", key}).as_integer(); }
};

// Three lease lengths of real time: a lock not renewed is gone by then.
void outlive_the_lease() { std::this_thread::sleep_for(3 * kLease); }

// Held locks in many slots, with the wipe check on: each check reads a
// presence key per slot it covers (up to 64), and used to send all its
// calls before reading any, each holding a pooled connection (16 per
// node): the next send waited for a connection the check itself held, and
// the renewals found none either, so every lock was lost. The check keeps
// a few calls in flight now, as the renewals do. (It runs only when more
// frequent than the renewals: here every 100 ms beside the lease's 450.)
constexpr int kManySlotLocks = 300;
constexpr auto kFrequentWipeCheck = 100ms;

TEST(ClusterRenewalTest, LocksInManySlotsAreRenewedWithTheWipeCheckOn) {
  RenewalClient renewal(kFrequentWipeCheck);
  std::vector<ReentrantLock> locks;
  std::set<int> slots;
  for (int i = 0; i < kManySlotLocks; ++i) {
    const std::string name = "renew-many-" + std::to_string(i);
    slots.insert(redis::key_slot(name));
    locks.push_back(renewal.client->lock(name));
    locks.back().lock();
  }
  ASSERT_GT(slots.size(), 200u);
  outlive_the_lease();
  EXPECT_EQ(renewal.background_errors.load(), 0);
  int lost = 0;
  for (ReentrantLock& lock : locks) lost += lock.loss_token().stop_requested() ? 1 : 0;
  EXPECT_EQ(lost, 0);
  for (ReentrantLock& lock : locks) lock.unlock();
}

TEST(ClusterRenewalTest, LocksInDifferentSlotsAreAllRenewed) {
  RenewalClient renewal;
  const std::vector<std::string> names = {"renew-alpha",    "renew-bravo",    "renew-charlie",   "renew-delta",
                                          "{renew-tag}one", "{renew-tag}two", "{renew-tag}three"};
  std::set<int> slots;
  for (const std::string& name : names) slots.insert(redis::key_slot(name));
  ASSERT_GT(slots.size(), 2u);  // several slots, and one shared by the tagged names
  ASSERT_EQ(redis::key_slot("{renew-tag}one"), redis::key_slot("{renew-tag}two"));

  std::vector<ReentrantLock> locks;
  std::vector<TokenLock> token_locks;
  for (const std::string& name : names) {
    locks.push_back(renewal.client->lock(name));
    locks.back().lock();  // no lease: the watchdog renews it
    token_locks.push_back(renewal.client->token_lock("token-" + name));
    token_locks.back().lock();
  }
  outlive_the_lease();
  EXPECT_EQ(renewal.background_errors.load(), 0);
  for (std::size_t i = 0; i < names.size(); ++i) {
    EXPECT_TRUE(locks[i].is_held_by_current_thread()) << names[i];
    EXPECT_FALSE(locks[i].loss_token().stop_requested()) << names[i];
    EXPECT_GT(renewal.pttl(names[i]), 0) << names[i];  // renewed: older than its lease, still there
    EXPECT_GT(renewal.pttl("token-" + names[i]), 0) << names[i];
  }
  for (ReentrantLock& lock : locks) lock.unlock();
  for (TokenLock& lock : token_locks) lock.unlock();
  for (const std::string& name : names) EXPECT_EQ(renewal.pttl(name), -2) << name;
}

TEST(ClusterRenewalTest, AMultiLockOverDifferentSlotsIsRenewed) {
  RenewalClient renewal;
  const std::vector<std::string> names = {"multi-alpha", "multi-bravo", "multi-charlie"};
  std::set<int> slots;
  for (const std::string& name : names) slots.insert(redis::key_slot(name));
  ASSERT_GT(slots.size(), 1u);
  std::vector<ReentrantLock> nodes;
  for (const std::string& name : names) nodes.push_back(renewal.client->lock(name));
  MultiLock multi(std::vector<std::reference_wrapper<Lock>>(nodes.begin(), nodes.end()));
  std::atomic<bool> lost{false};
  multi.set_lost_handler([&lost](const LockLost&) { lost = true; });
  multi.lock();
  outlive_the_lease();
  EXPECT_EQ(renewal.background_errors.load(), 0);
  EXPECT_FALSE(lost.load());
  EXPECT_TRUE(multi.is_held_by_current_thread());
  for (const std::string& name : names) EXPECT_GT(renewal.pttl(name), 0) << name;
  multi.unlock();
  for (const std::string& name : names) EXPECT_EQ(renewal.pttl(name), -2) << name;
}

TEST(ClusterRenewalTest, ReadHoldsAndPermitsInDifferentSlotsAreRenewed) {
  RenewalClient renewal;
  const std::vector<std::string> names = {"shared-alpha", "shared-bravo", "shared-charlie", "{shared-tag}one",
                                          "{shared-tag}two"};
  std::set<int> slots;
  for (const std::string& name : names) slots.insert(redis::key_slot(name));
  ASSERT_GT(slots.size(), 2u);
  std::vector<ReadWriteLock> locks;
  std::vector<PermitSemaphore> semaphores;
  std::vector<PermitId> permits;
  for (const std::string& name : names) {
    locks.push_back(renewal.client->read_write_lock(name));
    locks.back().read().lock();  // a read hold: its timeout key is renewed too
    semaphores.push_back(renewal.client->permit_semaphore("permits-" + name));
    semaphores.back().set_permits(1);
    permits.push_back(semaphores.back().acquire());  // no lease: the watchdog renews it
  }
  outlive_the_lease();
  EXPECT_EQ(renewal.background_errors.load(), 0);
  for (std::size_t i = 0; i < names.size(); ++i) {
    EXPECT_TRUE(locks[i].read().is_held_by_current_thread()) << names[i];
    EXPECT_GT(renewal.pttl(names[i]), 0) << names[i];
    EXPECT_TRUE(semaphores[i].try_release(permits[i])) << names[i];  // still held: renewed, not expired
    locks[i].read().unlock();
  }
}

}  // namespace
}  // namespace turnstile::testing
