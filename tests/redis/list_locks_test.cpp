// list_locks() (turnstile/inspection.h) and Backend::scan_each_master() on a
// real redis-server: every flavor held at a name is listed once, with its
// flavor; side keys (fencing counters, fair queue keys, permit sets, read
// timeouts, latches) are never names of their own; anyone's data is left
// out; a free fair lock with waiters still queued is listed; the pattern
// and the bounds hold. side_key_owner() maps every side key of
// key_layout() back to its name.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "redis_server.h"
#include "redis_test_support.h"
#include "turnstile/client.h"
#include "turnstile/errors.h"
#include "turnstile/inspection.h"
#include "turnstile/key_layout.h"
#include "turnstile/redis_backend.h"

namespace turnstile {
namespace {

using ::testing::ElementsAre;
using ::testing::Pair;

std::vector<std::pair<std::string, std::string>> names_and_kinds(const LockListing& listing) {
  std::vector<std::pair<std::string, std::string>> seen;
  for (const Inspection& lock : listing.locks) {
    seen.emplace_back(lock.name, lock.flavor ? std::string(flavor_name(*lock.flavor)) : "free");
  }
  return seen;
}

TEST(SideKeyOwnerTest, EverySideKeyOfEveryFlavorNamesItsLock) {
  for (const std::string name : {"orders", "a:b:c", "x{tag}y"}) {
    for (const FlavorTraits& traits : kFlavorTable) {
      const KeyLayout layout = key_layout(traits.flavor, name);
      for (const std::string& side : layout.side_keys()) EXPECT_EQ(side_key_owner(side), name) << side;
      if (!layout.unlock_latch_prefix.empty()) {
        EXPECT_EQ(side_key_owner(layout.unlock_latch("17")), name);
      }
      EXPECT_EQ(side_key_owner(layout.name), std::nullopt) << layout.name;
    }
    // Each permit's and each fair waiter's identity, beside the holder's.
    EXPECT_EQ(side_key_owner(permit_identity_key(name, "00112233445566778899aabbccddeeff")), name);
    EXPECT_EQ(side_key_owner(fair_waiter_identity_key(name, "0a1b2c3d-0000-4000-8000-000000000001:7")), name);
  }
  const KeyLayout read_write = key_layout(Flavor::read_write, "catalog");
  EXPECT_EQ(side_key_owner(read_write.read_timeouts("0a1b2c3d-0000-4000-8000-000000000001:7") + ":2"), "catalog");
  EXPECT_EQ(side_key_owner(fence_key("table:7")), "table:7");
  for (const char* data : {"user:1", "timeout", "{x}", "redisson_lock_queue", "redisson_lock_queue:", "a:timeout:b",
                           "{x}:rwlock_timeout:", "{x}:owner:rwlock_timeout:k"}) {
    EXPECT_EQ(side_key_owner(data), std::nullopt) << data;
  }
}

class ListLocksTest : public testing::SharedRedisServerTest {
 protected:
  void SetUp() override {
    server_->command({"FLUSHALL"});
    backend_ = make_redis_backend(testing::test_options(*server_));
    client_ = std::make_unique<Client>(backend_);
  }
  void TearDown() override {
    client_.reset();
    server_->command({"FLUSHALL"});
  }

  std::shared_ptr<Backend> backend_;
  std::unique_ptr<Client> client_;
};

TEST_F(ListLocksTest, EveryFlavorOnceSideKeysAndDataLeftOut) {
  ReentrantLock reentrant = client_->fenced_lock("app:reentrant");
  reentrant.lock();
  TokenLock token = client_->token_lock("app:token");
  token.lock();
  ReadWriteLock catalog = client_->read_write_lock("app:catalog");
  catalog.read().lock();
  PermitSemaphore slots = client_->permit_semaphore("app:slots");
  ASSERT_TRUE(slots.try_set_permits(3));
  const PermitId permit = slots.acquire();
  CountingSemaphore counter = client_->counting_semaphore("app:counter");
  ASSERT_TRUE(counter.try_set_permits(2));
  server_->command({"SET", "app:user-string", "hello"});
  server_->command({"HSET", "app:user-hash", "name", "alice"});
  server_->command({"RPUSH", "other:list", "a"});

  const LockListing all = list_locks(*backend_, {.pattern = "app:*"});
  EXPECT_TRUE(all.complete);
  // The semaphores' kinds: Redis alone cannot tell a counting one without
  // held permits from a crash-safe one (inspection.h): the first that fits.
  EXPECT_THAT(names_and_kinds(all), ElementsAre(Pair("app:catalog", "read-write"), Pair("app:counter", "semaphore"),
                                                Pair("app:reentrant", "reentrant"), Pair("app:slots", "semaphore"),
                                                Pair("app:token", "token")));
  EXPECT_EQ(all.locks[2].holder_count, 1);
  EXPECT_EQ(all.locks[3].permits_held, 1);

  // "*" sees the side keys too (fencing counter, permit set, read timeout,
  // latch-less): still one entry per name, data still left out.
  const LockListing everything = list_locks(*backend_);
  EXPECT_EQ(names_and_kinds(everything), names_and_kinds(all));

  slots.release(permit);
  catalog.read().unlock();
  token.unlock();
  reentrant.unlock();
  EXPECT_THAT(names_and_kinds(list_locks(*backend_, {.pattern = "app:*"})),
              ElementsAre(Pair("app:counter", "semaphore"), Pair("app:slots", "semaphore")));
}

TEST_F(ListLocksTest, AFairQueueWhoseLockIsFreeIsListed) {
  // A queue with an entry and no lock: between holders, or a crashed
  // waiter's entry left behind (Redisson's layout, written as it would be).
  const KeyLayout layout = key_layout(Flavor::fair, "jobs:fair");
  server_->command({"RPUSH", layout.fair_queue, "0a1b2c3d-0000-4000-8000-000000000001:1"});
  server_->command({"ZADD", layout.fair_timeouts, "99999999999999", "0a1b2c3d-0000-4000-8000-000000000001:1"});
  const LockListing listing = list_locks(*backend_, {.pattern = "jobs:*"});
  ASSERT_EQ(listing.locks.size(), 1u);
  EXPECT_EQ(listing.locks[0].name, "jobs:fair");
  EXPECT_EQ(listing.locks[0].queue_length, 1);
  EXPECT_EQ(listing.locks[0].flavor, Flavor::fair);
}

// Issue #50 (row 8): a string longer than any lock's is left out by its
// length alone, so listing beside large values never fetches them (20 MiB
// were sent to list one lock); status names the length.
TEST_F(ListLocksTest, LargeValuesAtMatchingNamesAreNeverRead) {
  constexpr int kLarge = 20;
  constexpr std::size_t kBytes = std::size_t{1} << 20;
  for (int i = 0; i < kLarge; ++i) server_->command({"SET", "big:" + std::to_string(i), std::string(kBytes, 'x')});
  ReentrantLock lock = client_->lock("big:lock");
  lock.lock();
  // What the server has sent to every client so far.
  const auto sent_bytes = [&] {
    const std::string info = server_->command({"INFO", "stats"});
    const std::string field = "total_net_output_bytes:";
    const std::size_t at = info.find(field);
    EXPECT_NE(at, std::string::npos) << info;
    return at == std::string::npos ? 0LL : std::stoll(info.substr(at + field.size()));
  };
  const long long before = sent_bytes();
  const LockListing listing = list_locks(*backend_, {.pattern = "big:*"});
  const long long during = sent_bytes() - before;
  ASSERT_EQ(listing.locks.size(), 1u);
  EXPECT_EQ(listing.locks[0].name, "big:lock");
  EXPECT_LT(during, static_cast<long long>(kBytes)) << "a large value was read";
  try {
    (void)inspect(*backend_, "big:0");
    ADD_FAILURE() << "a 1 MiB string was taken for a lock";
  } catch (const WrongTypeError& error) {
    EXPECT_THAT(error.what(), ::testing::HasSubstr("a string of 1048576 bytes"));
  }
  lock.unlock();
}

// Issue #50 (row 7): max_names counts locks listed. On a shared Redis,
// other keys at matching names used up the scan's budget (eight keys per
// name): 43 of 1,000 locks were listed beside 200,000 other keys.
TEST_F(ListLocksTest, OtherKeysDoNotCountAgainstTheLimit) {
  constexpr int kOtherKeys = 2000;
  constexpr int kLocks = 5;
  server_->command({"EVAL", "for i = 1, tonumber(ARGV[1]) do redis.call('SET', 'shared:data:' .. i, 'value ' .. i) end",
                    "0", std::to_string(kOtherKeys)});
  std::vector<ReentrantLock> locks;
  for (int i = 0; i < kLocks; ++i) {
    locks.push_back(client_->lock("shared:lock:" + std::to_string(i)));
    locks.back().lock();
  }
  const LockListing all = list_locks(*backend_, {.pattern = "shared:*", .max_names = kLocks});
  EXPECT_TRUE(all.complete);  // exactly the limit: nothing left out
  EXPECT_EQ(all.locks.size(), static_cast<std::size_t>(kLocks));
  const LockListing cut = list_locks(*backend_, {.pattern = "shared:*", .max_names = kLocks - 1});
  EXPECT_FALSE(cut.complete);
  EXPECT_EQ(cut.locks.size(), static_cast<std::size_t>(kLocks - 1));
  for (ReentrantLock& lock : locks) lock.unlock();
}

TEST_F(ListLocksTest, TheBoundsHold) {
  std::vector<ReentrantLock> locks;
  for (int i = 0; i < 30; ++i) {
    locks.push_back(client_->lock("many:" + std::to_string(i)));
    locks.back().lock();
  }
  const LockListing cut = list_locks(*backend_, {.pattern = "many:*", .max_names = 10, .count_per_call = 3});
  EXPECT_FALSE(cut.complete);
  EXPECT_EQ(cut.locks.size(), 10u);
  const LockListing whole = list_locks(*backend_, {.pattern = "many:*", .count_per_call = 1});
  EXPECT_TRUE(whole.complete);
  EXPECT_EQ(whole.locks.size(), 30u);
  EXPECT_TRUE(std::is_sorted(whole.locks.begin(), whole.locks.end(),
                             [](const Inspection& a, const Inspection& b) { return a.name < b.name; }));
  for (ReentrantLock& lock : locks) lock.unlock();

  EXPECT_THROW(list_locks(*backend_, {.max_names = 0}), InvalidArgumentError);
  EXPECT_THROW(list_locks(*backend_, {.count_per_call = 0}), InvalidArgumentError);
  EXPECT_THROW(list_locks(*backend_, {.pattern = ""}), InvalidArgumentError);
  EXPECT_THROW(backend_->scan_each_master({.max_keys = kMaxScanKeys + 1}), InvalidArgumentError);
}

}  // namespace
}  // namespace turnstile
