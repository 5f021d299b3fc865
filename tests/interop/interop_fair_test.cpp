// The fair lock in a mixed fleet: turnstile and Redisson (played at the
// Redis level, redisson_client.h) waiters in one queue. Every arrival
// order of three waiters behind either library's holder, with give-ups
// at the head and in the middle, and Redisson waits from 10 s (longer
// than turnstile's waiter timeout) to 20 min: the lock is served in
// arrival order, nobody is evicted, and the shared queue keys never carry
// an expiry. Redisson waiters here wait for their wake-up message only,
// so each handoff to one of them is the message's doing.

#include <gtest/gtest.h>

#include <atomic>
#include <stop_token>
#include <thread>

#include "interop_fixture.h"
#include "turnstile/errors.h"
#include "turnstile/fair_lock.h"

namespace turnstile::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr std::int64_t kLeaseMs = 60'000;
constexpr milliseconds kHold{100};

struct QueueCase {
  char holder = 'T';     // 'T' turnstile, 'R' Redisson
  std::string arrivals;  // e.g. "RTR", in arrival order
  int gives_up = -1;     // index of the waiter that gives up, or -1
  std::int64_t redisson_wait_ms = RedissonClient::kDefaultWaitMs;
};

std::string case_name(const ::testing::TestParamInfo<QueueCase>& info) {
  std::string name = std::string(1, info.param.holder) + "_holds_then_" + info.param.arrivals;
  if (info.param.gives_up >= 0) name += "_quits" + std::to_string(info.param.gives_up);
  if (info.param.redisson_wait_ms != RedissonClient::kDefaultWaitMs) {
    name += "_wait" + std::to_string(info.param.redisson_wait_ms / 1000) + "s";
  }
  return name;
}

class MixedFairQueueTest : public InteropTest, public ::testing::WithParamInterface<QueueCase> {};

TEST_P(MixedFairQueueTest, ServedInArrivalOrder) {
  const QueueCase& c = GetParam();
  const std::string name = "interop:fair:" + case_name({c, 0});
  const std::int64_t wait_ms = c.redisson_wait_ms;
  // turnstile's waiters retry every second; its allowance for Redisson's
  // waits covers the longest one in the fleet.
  const FairLockOptions options{.waiter_timeout = seconds(3),
                                .redisson_wait = milliseconds(std::max(wait_ms, RedissonClient::kDefaultWaitMs))};
  const std::size_t count = c.arrivals.size();

  std::mutex mutex;
  std::vector<std::string> owners(count);  // guarded by mutex
  std::vector<std::string> served;         // guarded by mutex
  std::vector<std::stop_source> quit(count);
  std::atomic<bool> release_holder = false;
  std::atomic<bool> holding = false;
  auto record = [&](const std::string& owner) {
    std::lock_guard guard(mutex);
    served.push_back(owner);
  };
  auto owner_of = [&](std::size_t i) {
    std::lock_guard guard(mutex);
    return owners[i];
  };

  // The holder.
  const std::string redisson_holder = redisson().owner(1000);
  if (c.holder == 'R') {
    ASSERT_FALSE(redisson().fair_lock(name, redisson_holder, kLeaseMs, wait_ms).has_value());
    holding = true;
  } else {
    spawn("turnstile holder", [&] {
      FairLock lock = client().fair_lock(name, options);
      lock.lock();
      holding = true;
      while (!release_holder) std::this_thread::sleep_for(milliseconds(5));
      lock.unlock();
    });
  }
  EXPECT_TRUE(eventually([&] { return holding.load(); }));

  // The waiters, one after the other in the queue.
  for (std::size_t i = 0; i < count; ++i) {
    const std::string who = std::string(1, c.arrivals[i]) + " waiter #" + std::to_string(i);
    if (c.arrivals[i] == 'T') {
      spawn(who, [&, i, who] {
        FairLock lock = client().fair_lock(name, options);
        {
          std::lock_guard guard(mutex);
          owners[i] = lock.current_owner();
        }
        const bool got = lock.try_lock({.wait = seconds(90), .lease = std::nullopt, .stop = quit[i].get_token()});
        if (static_cast<int>(i) == c.gives_up) {
          if (got) throw std::runtime_error(who + " was served although it gave up");
          return;
        }
        if (!got) throw std::runtime_error(who + " was never served");
        record(lock.current_owner());
        std::this_thread::sleep_for(kHold);
        lock.unlock();
      });
    } else {
      const std::string owner = redisson().owner(static_cast<int>(i) + 1);
      {
        std::lock_guard guard(mutex);
        owners[i] = owner;
      }
      spawn(who, [&, i, who, owner] {
        RedissonClient& r = redisson();
        Mailbox mailbox(r.backend(), "redisson_lock__channel:{" + name + "}:" + owner);
        if (!r.fair_lock(name, owner, kLeaseMs, wait_ms).has_value())
          throw std::runtime_error(who + " jumped the queue");
        std::int64_t seen = 0;
        const auto deadline = std::chrono::steady_clock::now() + seconds(90);
        while (std::chrono::steady_clock::now() < deadline) {
          if (quit[i].stop_requested()) {
            r.fair_give_up(name, owner, wait_ms);
            return;
          }
          const std::int64_t now_seen = mailbox.wait_beyond(seen, milliseconds(50));
          if (now_seen == seen) continue;
          seen = now_seen;
          if (!r.fair_lock(name, owner, kLeaseMs, wait_ms).has_value()) {
            record(owner);
            std::this_thread::sleep_for(kHold);
            if (r.fair_unlock(name, owner) != Reply::integer(1)) throw std::runtime_error(who + ": unlock failed");
            return;
          }
        }
        throw std::runtime_error(who + " was never woken to take the lock");
      });
    }
    EXPECT_TRUE(eventually([&] {
      const std::string owner = owner_of(i);
      const std::vector<std::string> now_queued = queue(name);
      return !owner.empty() && now_queued.size() == i + 1 && now_queued[i] == owner;
    })) << who
        << " did not queue in place " << i;
  }

  // Everybody queued, live for a while (turnstile's waiters lift their
  // deadlines), and the shared keys never expire.
  std::this_thread::sleep_for(milliseconds(1500));
  EXPECT_EQ(queue(name).size(), count);
  EXPECT_EQ(raw({"PTTL", "redisson_lock_queue:{" + name + "}"}), Reply::integer(-1));
  EXPECT_EQ(raw({"PTTL", "redisson_lock_timeout:{" + name + "}"}), Reply::integer(-1));

  std::vector<std::string> expected;
  for (std::size_t i = 0; i < count; ++i) {
    if (static_cast<int>(i) != c.gives_up) expected.push_back(owner_of(i));
  }
  if (c.gives_up >= 0) {
    const std::string quitter = owner_of(static_cast<std::size_t>(c.gives_up));
    quit[static_cast<std::size_t>(c.gives_up)].request_stop();
    EXPECT_TRUE(eventually([&] {
      const std::vector<std::string> now_queued = queue(name);
      return std::find(now_queued.begin(), now_queued.end(), quitter) == now_queued.end();
    }));
  }

  // The handoffs.
  if (c.holder == 'R') {
    EXPECT_EQ(redisson().fair_unlock(name, redisson_holder), Reply::integer(1));
  } else {
    release_holder = true;
  }
  join_all();
  std::lock_guard guard(mutex);
  EXPECT_EQ(served, expected);
  EXPECT_EQ(raw({"EXISTS", name, "redisson_lock_queue:{" + name + "}", "redisson_lock_timeout:{" + name + "}"}),
            Reply::integer(0));
}

std::vector<QueueCase> all_cases() {
  std::vector<QueueCase> cases;
  const std::vector<std::string> orders = {"RRR", "RRT", "RTR", "RTT", "TRR", "TRT", "TTR", "TTT"};
  for (const char holder : {'T', 'R'}) {
    for (const std::string& order : orders) cases.push_back({.holder = holder, .arrivals = order});
  }
  // Give-ups at the head and in the middle, by either library.
  for (const char* order : {"RTR", "TRT", "RRT", "TTR"}) {
    cases.push_back({.holder = 'T', .arrivals = order, .gives_up = 1});
    cases.push_back({.holder = 'R', .arrivals = order, .gives_up = 0});
  }
  // Redisson waits longer than turnstile's waiter timeout (3 s), and
  // longer than Redisson's default.
  for (const std::int64_t wait_ms : {std::int64_t{10'000}, std::int64_t{1'200'000}}) {
    cases.push_back({.holder = 'T', .arrivals = "TRT", .redisson_wait_ms = wait_ms});
    cases.push_back({.holder = 'R', .arrivals = "RTR", .redisson_wait_ms = wait_ms});
    cases.push_back({.holder = 'R', .arrivals = "RRTT", .gives_up = 1, .redisson_wait_ms = wait_ms});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Orders, MixedFairQueueTest, ::testing::ValuesIn(all_cases()), case_name);

class InteropFairLockTest : public InteropTest {};

TEST_F(InteropFairLockTest, EachSideKeepsTheOtherOutAndWakesItsHead) {
  const std::string name = "interop:fair-wake";
  const std::string owner = redisson().owner(1);
  // A waiter timeout of 3 min: turnstile's waiter retries on its own every
  // minute, so taking the lock within kPatience means the message woke it.
  const FairLockOptions options{.waiter_timeout = std::chrono::minutes(3)};
  FairLock lock = client().fair_lock(name, options);
  ASSERT_FALSE(redisson().fair_lock(name, owner, 120'000, RedissonClient::kDefaultWaitMs).has_value());
  EXPECT_FALSE(lock.try_lock());
  std::atomic<bool> acquired = false;
  spawn("turnstile waiter", [&] {
    FairLock waiter = client().fair_lock(name, options);
    if (!waiter.try_lock({.wait = seconds(60), .lease = std::nullopt})) throw std::runtime_error("not acquired");
    acquired = true;
    waiter.unlock();
  });
  EXPECT_TRUE(eventually([&] { return queue(name).size() == 1; }));
  EXPECT_EQ(redisson().fair_unlock(name, owner), Reply::integer(1));
  EXPECT_TRUE(eventually([&] { return acquired.load(); }));
  join_all();

  // turnstile holds; a Redisson waiter is woken by turnstile's unlock.
  lock.lock();
  Mailbox mailbox(redisson().backend(), "redisson_lock__channel:{" + name + "}:" + owner);
  ASSERT_TRUE(redisson().fair_lock(name, owner, 120'000, RedissonClient::kDefaultWaitMs).has_value());
  // Redisson's tryLock() without wait neither takes it nor queues.
  EXPECT_TRUE(redisson().fair_lock(name, redisson().owner(2), 120'000, 1, /*queue=*/false).has_value());
  EXPECT_EQ(queue(name), std::vector<std::string>{owner});
  lock.unlock();
  EXPECT_GE(mailbox.wait_beyond(0), 1);
  EXPECT_FALSE(redisson().fair_lock(name, owner, 120'000, RedissonClient::kDefaultWaitMs).has_value());
  EXPECT_EQ(redisson().fair_unlock(name, owner), Reply::integer(1));
}

// A lease that runs out publishes nothing. A Redisson head is then woken
// by turnstile's force unlock (nothing to delete) as by the late unlock of
// the Redisson holder, so it never sleeps out its ttl.
TEST_F(InteropFairLockTest, AfterTheLeaseRanOutTheHeadIsWoken) {
  const std::string name = "interop:fair-expired";
  const std::string holder = redisson().owner(1);
  const std::string waiter = redisson().owner(2);
  ASSERT_FALSE(redisson().fair_lock(name, holder, 200, RedissonClient::kDefaultWaitMs).has_value());
  Mailbox mailbox(redisson().backend(), "redisson_lock__channel:{" + name + "}:" + waiter);
  ASSERT_TRUE(redisson().fair_lock(name, waiter, kLeaseMs, RedissonClient::kDefaultWaitMs).has_value());
  EXPECT_TRUE(eventually([&] { return raw({"EXISTS", name}) == Reply::integer(0); }));
  FairLock lock = client().fair_lock(name, {});
  // turnstile's force unlock and the Redisson holder's late unlock both
  // wake the head.
  EXPECT_FALSE(lock.force_unlock());
  EXPECT_GE(mailbox.wait_beyond(0), 1);
  EXPECT_EQ(redisson().fair_unlock(name, holder), Reply::integer(1));
  EXPECT_GE(mailbox.wait_beyond(1), 2);
  EXPECT_FALSE(redisson().fair_lock(name, waiter, kLeaseMs, RedissonClient::kDefaultWaitMs).has_value());
  EXPECT_EQ(redisson().fair_unlock(name, waiter), Reply::integer(1));
}

}  // namespace
}  // namespace turnstile::testing
