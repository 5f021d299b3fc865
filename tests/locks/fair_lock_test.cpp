// The fair lock's contract, on the fake in virtual time and against a real
// redis-server (tests that need long waits or crashes run in simulation
// only). The FailureMode tests each design out one of Redisson's fair-lock
// bugs (issue 5, (a)-(e)) and fail on Redisson's design.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <limits>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "lock_environment.h"
#include "turnstile/errors.h"
#include "turnstile/fair_lock.h"

namespace turnstile::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

class FairLockTest : public LockTest {
 protected:
  // The owner ids in the queue of the fair lock `name`, head first.
  std::vector<std::string> queue(const std::string& name) {
    std::vector<std::string> owners;
    const Reply reply = inspect({"LRANGE", "redisson_lock_queue:{" + name + "}", "0", "-1"});
    for (const Reply& owner : reply.as_array()) {
      owners.push_back(owner.as_string());
    }
    return owners;
  }
  // The deadlines (epoch ms) in the waiter-deadline zset of `name`.
  std::vector<std::int64_t> deadlines(const std::string& name) {
    std::vector<std::int64_t> scores;
    const Reply reply = inspect({"ZRANGE", "redisson_lock_timeout:{" + name + "}", "0", "-1", "WITHSCORES"});
    for (std::size_t i = 1; i < reply.as_array().size(); i += 2) {
      scores.push_back(std::stoll(reply.as_array()[i].as_string()));
    }
    return scores;
  }
  // The liveness deadlines (epoch ms) of turnstile's waiters of `name`, by
  // owner id.
  std::map<std::string, std::int64_t> liveness(const std::string& name) {
    std::map<std::string, std::int64_t> scores;
    const Reply reply = inspect({"ZRANGE", "turnstile_lock_waiters:{" + name + "}", "0", "-1", "WITHSCORES"});
    for (std::size_t i = 1; i < reply.as_array().size(); i += 2) {
      scores.emplace(reply.as_array()[i - 1].as_string(), std::stoll(reply.as_array()[i].as_string()));
    }
    return scores;
  }
  // Whether any key of the fair lock `name` exists.
  bool any_key_left(const std::string& name) {
    return inspect({"EXISTS", name, "redisson_lock_queue:{" + name + "}", "redisson_lock_timeout:{" + name + "}",
                    "turnstile_lock_waiters:{" + name + "}"})
               .as_integer() != 0;
  }
};

std::int64_t elapsed_ms(Runtime& runtime, Instant since) {
  return std::chrono::duration_cast<milliseconds>(runtime.now() - since).count();
}

TEST_P(FairLockTest, ReentrancyCountsHoldsAndLeavesNoKeys) {
  Client& client = env().add_client();
  env().spawn(client, [&] {
    FairLock lock = client.fair_lock("fair-reentrant");
    lock.lock();
    lock.lock();
    EXPECT_EQ(lock.hold_count(), 2);
    EXPECT_TRUE(lock.is_held_by_current_thread());
    EXPECT_EQ(lock.queue_length(), 0);
    EXPECT_FALSE(lock.queue_position(lock.current_owner()).has_value());
    lock.unlock();
    EXPECT_EQ(lock.hold_count(), 1);
    lock.unlock();
    EXPECT_FALSE(lock.is_locked());
    EXPECT_FALSE(lock.remaining_lease().has_value());
    EXPECT_THROW(lock.unlock(), NotOwnerError);
  });
  env().run();
  EXPECT_FALSE(any_key_left("fair-reentrant"));
}

TEST_P(FairLockTest, KeyLayoutMatchesRedissonAndUnlockWakesOnlyTheHead) {
  Client& holder = env().add_client();
  Client& waiter =
      env().add_client(ClientOptions{.lease = milliseconds(30'000), .key_prefix = "", .on_background_error = nullptr});
  // Published by the store to `waiter_known` (the spawns run on threads
  // against a real server).
  std::string waiter_owner;
  std::atomic<bool> waiter_known = false;
  std::vector<std::string> head_messages;
  std::vector<std::string> shared_messages;
  std::mutex messages_mutex;
  Subscription shared = env().inspector().subscribe("redisson_lock__channel:{fair-layout}", [&](const PubSubEvent& e) {
    std::lock_guard guard(messages_mutex);
    if (e.kind == PubSubEvent::Kind::message) shared_messages.emplace_back(e.payload);
  });
  std::optional<Subscription> head_channel;
  env().spawn(holder, [&] {
    FairLock lock = holder.fair_lock("fair-layout", {.waiter_timeout = seconds(5), .handoff = Handoff::announce});
    lock.lock();
    // The waiter queues at 20 ms; a loaded machine may start it late.
    ASSERT_TRUE(eventually(holder, [&] { return waiter_known.load() && queue("fair-layout").size() == 1; }));
    holder.runtime().sleep_for(milliseconds(200));  // and has subscribed to its channel
    EXPECT_EQ(inspect({"TYPE", "fair-layout"}), Reply::status("hash"));
    EXPECT_EQ(inspect({"TYPE", "redisson_lock_queue:{fair-layout}"}), Reply::status("list"));
    EXPECT_EQ(inspect({"TYPE", "redisson_lock_timeout:{fair-layout}"}), Reply::status("zset"));
    ASSERT_EQ(queue("fair-layout"), std::vector<std::string>{waiter_owner});
    EXPECT_EQ(lock.queue_length(), 1);
    EXPECT_EQ(lock.queue_position(waiter_owner), 0);
    // The chained deadline, Redisson's arithmetic: the lock's expected
    // release (now + its PTTL, 30 s) + the chain wait (Redisson's 5 min
    // + 2 x the waiter timeout).
    const std::int64_t wall_ms = holder.runtime().wall_clock_ms();
    ASSERT_EQ(deadlines("fair-layout").size(), 1u);
    EXPECT_GT(deadlines("fair-layout")[0], wall_ms + 300'000 + 10'000);
    EXPECT_LE(deadlines("fair-layout")[0], wall_ms + 30'000 + 300'000 + 10'000);
    // The liveness deadline: the waiter's wall clock at its latest retry + 5 s.
    ASSERT_EQ(liveness("fair-layout").size(), 1u);
    EXPECT_GT(liveness("fair-layout").begin()->second, wall_ms + 4'000);
    EXPECT_LE(liveness("fair-layout").begin()->second, wall_ms + 5'000);
    // The shared queue keys never expire (Redisson's waiters would vanish
    // with them); turnstile's own key outlives the latest chained deadline.
    EXPECT_EQ(inspect({"PTTL", "redisson_lock_queue:{fair-layout}"}), Reply::integer(-1));
    EXPECT_EQ(inspect({"PTTL", "redisson_lock_timeout:{fair-layout}"}), Reply::integer(-1));
    EXPECT_GT(inspect({"PTTL", "turnstile_lock_waiters:{fair-layout}"}).as_integer(), 300'000);
    head_channel.emplace(
        env().inspector().subscribe("redisson_lock__channel:{fair-layout}:" + waiter_owner, [&](const PubSubEvent& e) {
          std::lock_guard guard(messages_mutex);
          if (e.kind == PubSubEvent::Kind::message) {
            head_messages.emplace_back(e.payload);
          }
        }));
    lock.unlock();
  });
  env().spawn(waiter, [&] {
    FairLock lock = waiter.fair_lock("fair-layout", {.waiter_timeout = seconds(5), .handoff = Handoff::announce});
    waiter.runtime().sleep_for(milliseconds(20));
    waiter_owner = lock.current_owner();
    waiter_known = true;
    lock.lock();
    // Against a real server the inspector's message arrives on another thread.
    for (int i = 0; i < 200; ++i) {
      {
        std::lock_guard guard(messages_mutex);
        if (!head_messages.empty()) break;
      }
      waiter.runtime().sleep_for(milliseconds(5));
    }
    lock.unlock();
  });
  env().run();
  head_channel.reset();
  std::lock_guard guard(messages_mutex);
  EXPECT_EQ(head_messages, std::vector<std::string>{"0"});
  EXPECT_TRUE(shared_messages.empty());
  EXPECT_FALSE(any_key_left("fair-layout"));
}

TEST_P(FairLockTest, EightClientsAcquireInArrivalOrder) {
  // Arrivals are ordered by sleeps a few ms apart: exact in virtual time,
  // a race on a loaded machine (the CLI tests order real processes by
  // checking the queue instead).
  TURNSTILE_SIM_ONLY();
  Client& holder = env().add_client();
  std::vector<int> order;
  std::mutex order_mutex;
  env().spawn(holder, [&] {
    FairLock lock = holder.fair_lock("fair-order");
    lock.lock();
    holder.runtime().sleep_for(milliseconds(150));
    lock.unlock();
  });
  for (int i = 0; i < 8; ++i) {
    Client& client = env().add_client();
    env().spawn(client, [&, i] {
      FairLock lock = client.fair_lock("fair-order");
      client.runtime().sleep_for(milliseconds(20 + 10 * i));
      lock.lock();
      {
        std::lock_guard guard(order_mutex);
        order.push_back(i);
      }
      client.runtime().sleep_for(milliseconds(2));
      lock.unlock();
    });
  }
  env().run();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_FALSE(any_key_left("fair-order"));
}

TEST_P(FairLockTest, TryLockWithoutWaitNeverQueues) {
  Client& holder = env().add_client();
  Client& other = env().add_client();
  env().spawn(holder, [&] {
    FairLock lock = holder.fair_lock("fair-try");
    lock.lock();
    FairLock others = other.fair_lock("fair-try");
    EXPECT_FALSE(others.try_lock());
    EXPECT_FALSE(others.try_lock({.wait = milliseconds(-5), .lease = std::nullopt}));
    EXPECT_EQ(inspect({"EXISTS", "redisson_lock_queue:{fair-try}", "redisson_lock_timeout:{fair-try}"}),
              Reply::integer(0));
    lock.unlock();
  });
  env().run();
  EXPECT_FALSE(any_key_left("fair-try"));
}

// lib/fair_queue.lua reads a queue's deadlines once and writes them back
// in ZADDs of at most 500 pairs: behind a head that takes the lock, every
// entry of a queue longer than several batches (and than one unpack() of
// it could hold) moves down by the same amount, to the ms, though its
// score has more digits than Lua 5.1 prints numbers with (%.14g); and a
// waiter joining behind them all is chained after the last one exactly.
TEST_P(FairLockTest, LongQueueKeepsEveryDeadlineExact) {
  constexpr int kQueued = 4'500;
  constexpr std::int64_t kFirst = 4'503'599'627'370'497;  // 2^52 + 1: 16 digits
  const std::string queue_key = "redisson_lock_queue:{fair-long}";
  const std::string deadlines_key = "redisson_lock_timeout:{fair-long}";
  const FairLockOptions options{.waiter_timeout = seconds(5), .redisson_wait = seconds(300)};
  Client& head = env().add_client();
  Client& joiner = env().add_client();
  std::map<std::string, std::int64_t> before;
  // Written by one client's thread, read by the other's (real threads on a
  // real server): joiner_owner is published by the store to `joined`.
  std::string joiner_owner;
  std::atomic<bool> seeded = false;
  std::atomic<bool> joined = false;
  // Member -> score of the whole deadline zset.
  auto scores = [&] {
    std::map<std::string, std::int64_t> result;
    const Reply reply = inspect({"ZRANGE", deadlines_key, "0", "-1", "WITHSCORES"});
    const std::vector<Reply>& flat = reply.as_array();
    for (std::size_t i = 0; i + 1 < flat.size(); i += 2)
      result[flat[i].as_string()] = std::stoll(flat[i + 1].as_string());
    return result;
  };
  // Every seeded entry moved by the same amount, in [-wait, 0).
  auto expect_uniform_shift = [&](std::int64_t wait) {
    const std::map<std::string, std::int64_t> after = scores();
    std::int64_t shift = 0;
    int checked = 0;
    for (const auto& [member, score] : before) {
      const auto found = after.find(member);
      ASSERT_NE(found, after.end()) << member;
      if (checked++ == 0) shift = found->second - score;
      EXPECT_EQ(found->second - score, shift) << member;
    }
    EXPECT_EQ(checked, kQueued);
    EXPECT_LT(shift, 0);
    EXPECT_GE(shift, -wait);
  };
  env().spawn(head, [&] {
    FairLock lock = head.fair_lock("fair-long", options);
    const std::string owner = lock.current_owner();
    std::vector<std::string> rpush = {"RPUSH", queue_key, owner};
    std::vector<std::string> zadd = {"ZADD", deadlines_key, std::to_string(head.runtime().wall_clock_ms() + 10'000),
                                     owner};
    for (int i = 0; i < kQueued; ++i) {
      const std::string member = "redisson-" + std::to_string(i) + ":1";
      rpush.push_back(member);
      before[member] = kFirst + 7 * i;
      zadd.push_back(std::to_string(before[member]));
      zadd.push_back(member);
    }
    EXPECT_EQ(inspect(zadd), Reply::integer(kQueued + 1));
    EXPECT_EQ(inspect(rpush), Reply::integer(kQueued + 1));
    ASSERT_TRUE(lock.try_lock());
    expect_uniform_shift(10'000);
    seeded = true;
    ASSERT_TRUE(eventually(head, [&] { return joined.load() && queue("fair-long").size() == kQueued + 1; }));
    const std::map<std::string, std::int64_t> now = scores();
    // The largest wait ahead is redisson_wait (the seeded gaps are 7 ms);
    // the margin is two waiter timeouts.
    EXPECT_EQ(now.at(joiner_owner), now.at("redisson-" + std::to_string(kQueued - 1) + ":1") + 300'000 + 10'000);
    lock.unlock();
  });
  env().spawn(joiner, [&] {
    FairLock lock = joiner.fair_lock("fair-long", options);
    ASSERT_TRUE(eventually(joiner, [&] { return seeded.load(); }));
    joiner_owner = lock.current_owner();
    joined = true;
    EXPECT_FALSE(lock.try_lock({.wait = milliseconds(300), .lease = std::nullopt}));
  });
  env().run();
  // The joiner gave up at the tail: nobody moved, and it left no trace.
  EXPECT_EQ(queue("fair-long").size(), static_cast<std::size_t>(kQueued));
  expect_uniform_shift(10'000);
  inspect({"DEL", queue_key, deadlines_key, "turnstile_lock_waiters:{fair-long}"});
  EXPECT_FALSE(any_key_left("fair-long"));
}

// (c) A waiter whose wait runs out leaves list and zset, and those behind it
// move up. Redisson's design left the entry (or shifted the others'
// deadlines by its timeout).
TEST_P(FairLockTest, FailureModeC_WaiterThatGivesUpLeavesTheQueue) {
  // Arrivals are ordered by sleeps a few ms apart: exact in virtual time,
  // a race on a loaded machine (the CLI tests order real processes by
  // checking the queue instead).
  TURNSTILE_SIM_ONLY();
  Client& holder = env().add_client();
  Client& quitter = env().add_client();
  Client& patient = env().add_client();
  std::string quitter_owner;
  std::string patient_owner;
  bool quitter_acquired = true;
  bool patient_acquired = false;
  env().spawn(holder, [&] {
    FairLock lock = holder.fair_lock("fair-giveup");
    lock.lock();
    holder.runtime().sleep_for(milliseconds(100));
    EXPECT_EQ(queue("fair-giveup"), (std::vector<std::string>{quitter_owner, patient_owner}));
    EXPECT_EQ(lock.queue_position(patient_owner), 1);
    holder.runtime().sleep_for(milliseconds(300));  // the quitter gives up at ~220 ms
    EXPECT_EQ(queue("fair-giveup"), std::vector<std::string>{patient_owner});
    EXPECT_EQ(inspect({"ZSCORE", "redisson_lock_timeout:{fair-giveup}", quitter_owner}), Reply::nil());
    EXPECT_EQ(lock.queue_position(patient_owner), 0);
    EXPECT_FALSE(lock.queue_position(quitter_owner).has_value());
    EXPECT_EQ(lock.queue_length(), 1);
    lock.unlock();
  });
  env().spawn(quitter, [&] {
    FairLock lock = quitter.fair_lock("fair-giveup");
    quitter.runtime().sleep_for(milliseconds(20));
    quitter_owner = lock.current_owner();
    quitter_acquired = lock.try_lock({.wait = milliseconds(200), .lease = std::nullopt});
  });
  env().spawn(patient, [&] {
    FairLock lock = patient.fair_lock("fair-giveup");
    patient.runtime().sleep_for(milliseconds(40));
    patient_owner = lock.current_owner();
    lock.lock();
    patient_acquired = true;
    lock.unlock();
  });
  env().run();
  EXPECT_FALSE(quitter_acquired);
  EXPECT_TRUE(patient_acquired);
  EXPECT_FALSE(any_key_left("fair-giveup"));
}

// (c) An attempt that fails with an error also leaves the queue.
TEST_P(FairLockTest, FailureModeC_WaiterWhoseAttemptFailsLeavesTheQueue) {
  Client& holder = env().add_client();
  Client& waiter = env().add_client();
  bool threw = false;
  std::atomic<bool> held = false;
  env().spawn(holder, [&] {
    FairLock lock = holder.fair_lock("fair-error");
    lock.lock();
    held = true;
    // The waiter queues behind it (a loaded machine may start it late).
    EXPECT_TRUE(eventually(holder, [&] { return queue("fair-error").size() == 1; }));
    // Someone overwrites the lock name with a string: the waiter's next
    // retry (within waiter_timeout/3 = 100 ms) fails with WRONGTYPE.
    inspect({"SET", "fair-error", "not a lock"});
  });
  env().spawn(waiter, [&] {
    FairLock lock = waiter.fair_lock("fair-error", {.waiter_timeout = milliseconds(300)});
    // Only behind the holder: a waiter that found the lock free would hold
    // it for good, and the holder would wait for it (a hang, once, under
    // the sanitizers on a loaded machine, when it slept 10 ms instead).
    if (!eventually(waiter, [&] { return held.load(); })) {
      ADD_FAILURE() << "the holder never held the lock";
      return;
    }
    try {
      lock.lock();
    } catch (const WrongTypeError&) {
      threw = true;
    }
  });
  env().run();
  EXPECT_TRUE(threw);
  EXPECT_EQ(inspect({"EXISTS", "redisson_lock_queue:{fair-error}", "redisson_lock_timeout:{fair-error}"}),
            Reply::integer(0));
  EXPECT_EQ(inspect({"GET", "fair-error"}), Reply::bulk("not a lock"));
}

// (a) A live waiter keeps its place however long the holder holds, far past
// the waiter timeout. Redisson's deadlines were fixed at enqueue, so its
// waiters were evicted as stale after `wait`.
TEST_P(FairLockTest, FailureModeA_LiveWaitersKeepTheirPlaceDuringALongHold) {
  TURNSTILE_SIM_ONLY();
  Client& holder = env().add_client();
  const FairLockOptions options{.waiter_timeout = seconds(1)};
  std::vector<std::string> owners(3);
  std::vector<std::string> order;
  int samples_in_order = 0;
  env().spawn(holder, [&] {
    FairLock lock = holder.fair_lock("fair-long", options);
    lock.lock();
    // A minute, sixty waiter timeouts: every sample must show all three
    // waiters in arrival order, none of them past its deadline.
    for (int sample = 0; sample < 600; ++sample) {
      holder.runtime().sleep_for(milliseconds(100));
      const std::int64_t wall_ms = holder.runtime().wall_clock_ms();
      const std::vector<std::int64_t> scores = deadlines("fair-long");
      const bool all_live = std::all_of(scores.begin(), scores.end(), [&](std::int64_t s) { return s > wall_ms; });
      if (queue("fair-long") == owners && scores.size() == 3 && all_live) ++samples_in_order;
    }
    lock.unlock();
  });
  for (int i = 0; i < 3; ++i) {
    Client& client = env().add_client();
    env().spawn(client, [&, i] {
      FairLock lock = client.fair_lock("fair-long", options);
      client.runtime().sleep_for(milliseconds(10 + 10 * i));
      owners[i] = lock.current_owner();
      lock.lock();
      order.push_back(owners[i]);
      lock.unlock();
    });
  }
  env().run();
  EXPECT_EQ(samples_in_order, 600);
  EXPECT_EQ(order, owners);
}

// (b) A crashed holder's lease runs out without any message: the head
// notices at the lease's end (its retry hint is the lock's PTTL), not at the
// end of a long estimate or the waiter timeout.
TEST_P(FairLockTest, FailureModeB_HeadAcquiresWhenACrashedHoldersLeaseRunsOut) {
  TURNSTILE_SIM_ONLY();
  Client& holder = env().add_client();
  Client& waiter = env().add_client();
  const FairLockOptions options{.waiter_timeout = seconds(60)};
  std::int64_t acquired_at_ms = -1;
  const Instant start = waiter.runtime().now();
  env().spawn(holder, [&] {
    FairLock lock = holder.fair_lock("fair-expiry", options);
    lock.lock(seconds(10));
    holder.runtime().sleep_for(seconds(1));
    env().crash(holder);
  });
  env().spawn(waiter, [&] {
    FairLock lock = waiter.fair_lock("fair-expiry", options);
    waiter.runtime().sleep_for(seconds(2));
    lock.lock();
    acquired_at_ms = elapsed_ms(waiter.runtime(), start);
    lock.unlock();
  });
  env().run();
  EXPECT_GE(acquired_at_ms, 10'000);
  EXPECT_LE(acquired_at_ms, 10'010);  // the lease's end plus a retry
}

// (d) Deadlines stay within one waiter timeout of now after many waits.
// Redisson chained each deadline on the previous waiter's, so they drifted
// hours ahead.
// Liveness deadlines of the first two waiters (lib/fair_queue.lua, "Near
// and far waiters") never lead by more than one waiter timeout, the
// others' by more than eight; chained deadlines by at most a lease plus
// one chain wait per waiter queued (and the hysteresis of the lifts).
TEST_P(FairLockTest, FailureModeD_DeadlinesNeverDriftPastOneWaiterTimeout) {
  TURNSTILE_SIM_ONLY();
  const FairLockOptions options{.waiter_timeout = seconds(2)};
  std::int64_t worst_near_lead_ms = 0;
  std::int64_t worst_far_lead_ms = 0;
  std::int64_t worst_chain_excess_ms = std::numeric_limits<std::int64_t>::min();
  int samples_with_waiters = 0;
  bool done = false;
  std::vector<Client*> clients;
  for (int i = 0; i < 4; ++i) clients.push_back(&env().add_client());
  int finished = 0;
  for (Client* client : clients) {
    env().spawn(*client, [&, client] {
      FairLock lock = client->fair_lock("fair-drift", options);
      for (int round = 0; round < 50; ++round) {
        lock.lock();
        client->runtime().sleep_for(milliseconds(500));
        lock.unlock();
      }
      if (++finished == 4) done = true;
    });
  }
  Client& checker = env().add_client();
  env().spawn(checker, [&] {
    while (!done) {
      checker.runtime().sleep_for(milliseconds(250));
      const std::int64_t wall_ms = checker.runtime().wall_clock_ms();
      const std::vector<std::string> queued = queue("fair-drift");
      const std::map<std::string, std::int64_t> scores = liveness("fair-drift");
      if (!scores.empty()) ++samples_with_waiters;
      for (const auto& [owner, score] : scores) {
        const auto place = std::find(queued.begin(), queued.end(), owner);
        std::int64_t& worst = place - queued.begin() < 2 ? worst_near_lead_ms : worst_far_lead_ms;
        worst = std::max(worst, score - wall_ms);
      }
      const std::vector<std::int64_t> chained = deadlines("fair-drift");
      const auto bound = static_cast<std::int64_t>(chained.size()) * (300'000 + 3 * 2'000) + 30'000;
      for (std::int64_t score : chained)
        worst_chain_excess_ms = std::max(worst_chain_excess_ms, score - wall_ms - bound);
    }
  });
  env().run();
  EXPECT_GT(samples_with_waiters, 300);
  EXPECT_LE(worst_near_lead_ms, 2'000);
  EXPECT_GT(worst_far_lead_ms, 2'000);  // a third waiter was far
  EXPECT_LE(worst_far_lead_ms, 16'000);
  EXPECT_LE(worst_chain_excess_ms, 0);
  EXPECT_FALSE(any_key_left("fair-drift"));
}

// (e) Crashed waiters at the head (their connections closed) are skipped
// by the release itself: its grant and its message reach nobody, so the
// first live waiter behind them gets the lock at once. The queue never
// sticks with nobody holding the lock.
TEST_P(FairLockTest, FailureModeE_CrashedWaitersAtTheHeadAreSkippedByTheRelease) {
  TURNSTILE_SIM_ONLY();
  const FairLockOptions options{.waiter_timeout = seconds(3)};
  Client& holder = env().add_client();
  Client& dead_first = env().add_client();
  Client& dead_second = env().add_client();
  Client& live = env().add_client();
  const Instant start = live.runtime().now();
  std::int64_t acquired_at_ms = -1;
  env().spawn(holder, [&] {
    FairLock lock = holder.fair_lock("fair-dead", options);
    lock.lock();
    holder.runtime().sleep_for(seconds(1));
    lock.unlock();  // the dead heads do not listen: the live one is granted
  });
  for (Client* dead : {&dead_first, &dead_second}) {
    env().spawn(*dead, [&, dead] {
      FairLock lock = dead->fair_lock("fair-dead", options);
      dead->runtime().sleep_for(milliseconds(dead == &dead_first ? 10 : 20));
      dead->runtime().schedule_after(milliseconds(500), [&, dead] { env().crash(*dead); });
      lock.lock();
      ADD_FAILURE() << "a crashed waiter acquired";
    });
  }
  env().spawn(live, [&] {
    FairLock lock = live.fair_lock("fair-dead", options);
    live.runtime().sleep_for(milliseconds(30));
    lock.lock();
    acquired_at_ms = elapsed_ms(live.runtime(), start);
    EXPECT_EQ(lock.queue_length(), 0);
    lock.unlock();
  });
  env().run();
  EXPECT_GE(acquired_at_ms, 1'000);
  EXPECT_LE(acquired_at_ms, 1'000 + 10);
  EXPECT_FALSE(any_key_left("fair-dead"));
}

// (e) A frozen waiter at the head (SIGSTOP: its connection open, so a
// message still reaches it) is evicted once its liveness deadline passes,
// by the live waiter behind it, which keeps alive every third of the
// waiter timeout there (the first two places are near): here after the
// holder's fixed lease ran out, with nobody releasing.
TEST_P(FairLockTest, FailureModeE_AFrozenHeadIsEvictedByTheWaiterBehindIt) {
  TURNSTILE_SIM_ONLY();
  const FairLockOptions options{.waiter_timeout = seconds(3)};
  Client& holder = env().add_client();
  Client& frozen = env().add_client();
  Client& live = env().add_client();
  const Instant start = live.runtime().now();
  std::int64_t acquired_at_ms = -1;
  env().spawn(holder, [&] {
    FairLock lock = holder.fair_lock("fair-frozen", options);
    holder.runtime().schedule_after(milliseconds(1), [&] { env().crash(holder); });
    lock.lock(seconds(2));  // a fixed lease, never released
    holder.runtime().sleep_for(seconds(10));
  });
  env().spawn(frozen, [&] {
    FairLock lock = frozen.fair_lock("fair-frozen", options);
    frozen.runtime().sleep_for(milliseconds(10));
    frozen.runtime().schedule_after(milliseconds(500), [&] { env().freeze(frozen); });
    lock.lock();
    ADD_FAILURE() << "a frozen waiter acquired";
  });
  env().spawn(live, [&] {
    FairLock lock = live.fair_lock("fair-frozen", options);
    live.runtime().sleep_for(milliseconds(30));
    lock.lock();
    acquired_at_ms = elapsed_ms(live.runtime(), start);
    EXPECT_EQ(lock.queue_length(), 0);
    lock.unlock();
    env().crash(frozen);
  });
  env().run();
  // The frozen head's last retry was at 10 ms: stale at 3.01 s; the live
  // waiter, second, retries every second.
  EXPECT_GE(acquired_at_ms, 3'010);
  EXPECT_LE(acquired_at_ms, 3'010 + 1'000);
  EXPECT_FALSE(any_key_left("fair-frozen"));
}

// A release whose grant reaches nobody (the head crashed, its liveness
// deadline still ahead) passes on to the next head; a frozen one there
// (SIGSTOP: still subscribed) whose liveness deadline has passed is told,
// never granted: a grant would leave the lock to a process that cannot use
// it for a whole lease. The live waiter behind evicts it at its next try
// and takes the lock.
TEST_P(FairLockTest, FailureModeE_AFrozenHeadBehindADeadOneIsNotGranted) {
  TURNSTILE_SIM_ONLY();
  const FairLockOptions options{.waiter_timeout = seconds(3)};
  Client& holder = env().add_client();
  Client& crashed = env().add_client();
  Client& frozen = env().add_client();
  Client& live = env().add_client();
  const Instant start = live.runtime().now();
  std::int64_t acquired_at_ms = -1;
  env().spawn(holder, [&] {
    FairLock lock = holder.fair_lock("fair-passed-on", options);
    lock.lock();
    holder.runtime().sleep_for(milliseconds(3'600));
    lock.unlock();  // the crashed head hears nothing; the frozen one is stale
  });
  env().spawn(crashed, [&] {
    FairLock lock = crashed.fair_lock("fair-passed-on", options);
    crashed.runtime().sleep_for(milliseconds(10));
    // Its last keep-alive try a little after 3 s: alive until past 6 s.
    crashed.runtime().schedule_after(milliseconds(3'500), [&] { env().crash(crashed); });
    lock.lock();
    ADD_FAILURE() << "a crashed waiter acquired";
  });
  env().spawn(frozen, [&] {
    FairLock lock = frozen.fair_lock("fair-passed-on", options);
    frozen.runtime().sleep_for(milliseconds(20));
    // Its last try at 20 ms: stale from 3.02 s.
    frozen.runtime().schedule_after(milliseconds(100), [&] { env().freeze(frozen); });
    lock.lock();
    ADD_FAILURE() << "a frozen waiter acquired";
  });
  env().spawn(live, [&] {
    FairLock lock = live.fair_lock("fair-passed-on", options);
    live.runtime().sleep_for(milliseconds(30));
    lock.lock();
    acquired_at_ms = elapsed_ms(live.runtime(), start);
    lock.unlock();
    env().crash(frozen);
  });
  env().run();
  // Within one keep-alive period (a third of the waiter timeout) of the
  // release, not after the frozen waiter's lease.
  EXPECT_GE(acquired_at_ms, 3'600);
  EXPECT_LE(acquired_at_ms, 3'600 + 1'100);
}

// A frozen waiter far back (its liveness timeout eight waiter timeouts)
// that reaches the front is told and brought down to one waiter timeout
// from then, with its grant offer dropped: the release grants it nothing,
// and a try_lock() takes the free lock one waiter timeout later.
TEST_P(FairLockTest, TryLockSucceedsOnceFrozenWaitersTimeOut) {
  TURNSTILE_SIM_ONLY();
  const FairLockOptions options{.waiter_timeout = seconds(2)};
  Client& holder = env().add_client();
  Client& prober = env().add_client();
  std::vector<Client*> frozen;
  for (int i = 0; i < 3; ++i) frozen.push_back(&env().add_client());
  env().spawn(holder, [&] {
    FairLock lock = holder.fair_lock("fair-probe", options);
    lock.lock();
    holder.runtime().sleep_for(seconds(3));
    lock.unlock();  // the first two are stale: evicted; the third promoted
  });
  for (int i = 0; i < 3; ++i) {
    Client* client = frozen[i];
    env().spawn(*client, [&, client, i] {
      FairLock lock = client->fair_lock("fair-probe", options);
      client->runtime().sleep_for(milliseconds(10 + i));
      client->runtime().schedule_after(milliseconds(40), [&, client] { env().freeze(*client); });
      lock.lock();
      ADD_FAILURE() << "a frozen waiter acquired";
    });
  }
  env().spawn(prober, [&] {
    FairLock lock = prober.fair_lock("fair-probe", options);
    prober.runtime().sleep_for(milliseconds(3'200));
    EXPECT_FALSE(lock.is_locked());
    EXPECT_EQ(lock.queue_length(), 1);
    EXPECT_FALSE(lock.try_lock());  // the third is not stale yet
    prober.runtime().sleep_for(seconds(2));
    EXPECT_TRUE(lock.try_lock());  // now it is: evicted, and the lock taken
    EXPECT_EQ(lock.queue_length(), 0);
    lock.unlock();
    for (Client* client : frozen) env().crash(*client);
  });
  env().run();
  EXPECT_FALSE(any_key_left("fair-probe"));
}

// (e) Waiters that all crash: the shared queue keys carry no expiry (a
// Redisson waiter queued behind would vanish with them), so their entries
// stay until the next call on the lock, which evicts them by their
// liveness deadlines and leaves no key behind.
TEST_P(FairLockTest, FailureModeE_QueueOfCrashedWaitersGoesAtTheNextCall) {
  TURNSTILE_SIM_ONLY();
  const FairLockOptions options{.waiter_timeout = seconds(2)};
  Client& holder = env().add_client();
  Client& doomed = env().add_client();
  Client& observer = env().add_client();
  env().spawn(holder, [&] {
    FairLock lock = holder.fair_lock("fair-orphan", options);
    holder.runtime().schedule_after(milliseconds(1), [&] { env().crash(holder); });
    lock.lock(milliseconds(100));  // runs out: no call on the lock
    holder.runtime().sleep_for(seconds(10));
  });
  env().spawn(doomed, [&] {
    FairLock lock = doomed.fair_lock("fair-orphan", options);
    doomed.runtime().sleep_for(milliseconds(10));
    doomed.runtime().schedule_after(milliseconds(40), [&] { env().crash(doomed); });
    lock.lock();
  });
  env().spawn(observer, [&] {
    observer.runtime().sleep_for(milliseconds(500));
    EXPECT_EQ(queue("fair-orphan").size(), 1u);
    observer.runtime().sleep_for(seconds(2));
    EXPECT_EQ(queue("fair-orphan").size(), 1u);
    EXPECT_EQ(inspect({"PTTL", "redisson_lock_queue:{fair-orphan}"}), Reply::integer(-1));
    FairLock lock = observer.fair_lock("fair-orphan", options);
    EXPECT_TRUE(lock.try_lock());  // evicts the dead waiter, takes the lock
    lock.unlock();
  });
  env().run();
  EXPECT_FALSE(any_key_left("fair-orphan"));
}

TEST_P(FairLockTest, ForceUnlockWakesTheHead) {
  Client& holder =
      env().add_client(ClientOptions{.lease = milliseconds(300), .key_prefix = "", .on_background_error = nullptr});
  Client& waiter = env().add_client();
  Client& admin = env().add_client();
  const FairLockOptions options{.waiter_timeout = seconds(30)};
  std::vector<LockLostReason> lost;
  std::mutex lost_mutex;
  std::int64_t acquired_at_ms = -1;
  const Instant start = waiter.runtime().now();
  std::atomic<bool> held = false;
  env().spawn(holder, [&] {
    FairLock lock = holder.fair_lock("fair-forced", options);
    lock.set_lost_handler([&](const LockLost& event) {
      std::lock_guard guard(lost_mutex);
      lost.push_back(event.reason);
    });
    lock.lock();
    held = true;
    holder.runtime().sleep_for(milliseconds(250));
    EXPECT_FALSE(lock.is_held_by_current_thread());
  });
  env().spawn(waiter, [&] {
    FairLock lock = waiter.fair_lock("fair-forced", options);
    // Behind the holder, however late a loaded machine starts it.
    ASSERT_TRUE(eventually(waiter, [&] { return held.load(); }));
    lock.lock();
    acquired_at_ms = elapsed_ms(waiter.runtime(), start);
    waiter.runtime().sleep_for(milliseconds(300));
    lock.unlock();
  });
  env().spawn(admin, [&] {
    admin.runtime().sleep_for(milliseconds(50));
    EXPECT_TRUE(admin.fair_lock("fair-forced").force_unlock());
  });
  env().run();
  EXPECT_GE(acquired_at_ms, 50);
  // Woken by the message, not by its 10 s refresh or the 300 ms lease.
  if (env().virtual_time()) {
    EXPECT_LE(acquired_at_ms, 55);
  }
  std::lock_guard guard(lost_mutex);
  EXPECT_EQ(lost, std::vector<LockLostReason>{LockLostReason::gone});
}

TEST_P(FairLockTest, WatchdogKeepsTheLockPastItsTimeout) {
  Client& holder =
      env().add_client(ClientOptions{.lease = milliseconds(300), .key_prefix = "", .on_background_error = nullptr});
  env().spawn(holder, [&] {
    FairLock lock = holder.fair_lock("fair-watchdog");
    lock.lock();
    holder.runtime().sleep_for(milliseconds(700));
    EXPECT_TRUE(lock.is_held_by_current_thread());
    lock.unlock();
  });
  env().run();
}

TEST_P(FairLockTest, FencedFairLockTokensStrictlyIncrease) {
  expect_increasing_fencing_tokens(env(), "redisson_lock_token:{fair-fenced}", [](Client& client) {
    return std::make_unique<FairLock>(client.fair_lock("fair-fenced", {.waiter_timeout = seconds(5), .fenced = true}));
  });
}

TEST_P(FairLockTest, AsyncFormsActForTheCallingTask) {
  Client& client = env().add_client();
  env().spawn(client, [&] {
    FairLock lock = client.fair_lock("fair-async");
    lock.lock_async().get();
    EXPECT_TRUE(lock.is_held_by_current_thread());
    EXPECT_TRUE(lock.try_lock_async({.wait = milliseconds(10), .lease = std::nullopt}).get());
    EXPECT_EQ(lock.hold_count(), 2);
    lock.unlock_async().get();
    lock.unlock_async().get();
    EXPECT_FALSE(lock.is_locked());
  });
  env().run();
  EXPECT_FALSE(any_key_left("fair-async"));
}

TEST_P(FairLockTest, BadOptionsAreTypedErrors) {
  Client& client = env().add_client();
  EXPECT_THROW(client.fair_lock(""), InvalidArgumentError);
  EXPECT_THROW(client.fair_lock("fair-args", {.waiter_timeout = milliseconds(99)}), InvalidArgumentError);
  EXPECT_THROW(client.fair_lock("fair-args", {.waiter_timeout = std::chrono::hours(25)}), InvalidArgumentError);
  EXPECT_NO_THROW(client.fair_lock("fair-args", {.waiter_timeout = FairLock::kMinWaiterTimeout}));
  inspect({"SET", "fair-args", "precious"});
  env().spawn(client, [&] {
    FairLock lock = client.fair_lock("fair-args");
    EXPECT_THROW(lock.lock(Duration::zero()), InvalidArgumentError);
    EXPECT_THROW((void)lock.try_lock(), WrongTypeError);
    EXPECT_THROW((void)lock.is_locked(), WrongTypeError);
    EXPECT_THROW(lock.force_unlock(), WrongTypeError);
  });
  env().run();
  EXPECT_EQ(inspect({"GET", "fair-args"}), Reply::bulk("precious"));
}

TEST_P(FairLockTest, MutualExclusionUnderContention) {
  expect_mutual_exclusion(env(), /*clients=*/4, /*rounds=*/10,
                          [](Client& client) { return std::make_unique<FairLock>(client.fair_lock("fair-counter")); });
  EXPECT_FALSE(any_key_left("fair-counter"));
}

INSTANTIATE_TEST_SUITE_P(Environments, FairLockTest, ::testing::ValuesIn(lock_environments()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace turnstile::testing
