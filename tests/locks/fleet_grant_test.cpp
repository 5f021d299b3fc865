// The reentrant lock's direct handoff to registered processes (fleet-wide
// wake-ups, ClientOptions::fleet_handoff; lua/lib/wake_registry.lua), on
// the fake in virtual time and against a real redis-server: a release
// grants the lock to the oldest registered process's offer and the message
// carries the grant; a Redisson reader sees an ordinary holder and a
// Redisson waiter still hears "0"; a grant to a task that has gone is given
// back and passed on; the grantee's lease is timed from its own try.

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "handoff_support.h"
#include "lock_environment.h"
#include "lua_scripts.h"
#include "turnstile/key_layout.h"
#include "turnstile/lock.h"

namespace turnstile::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr std::string_view kGrantPrefix = "turnstile:grant:";

class FleetGrantTest : public LockTest {
 protected:
  static KeyLayout layout(const std::string& name) { return key_layout(Flavor::reentrant, name); }

  std::optional<std::string> hash_field(const std::string& key, const std::string& field) {
    const Reply reply = inspect({"HGET", key, field});
    if (reply.is_nil()) return std::nullopt;
    return reply.as_string();
  }
  std::vector<std::string> hash(const std::string& key) {
    std::vector<std::string> fields;
    const Reply reply = inspect({"HGETALL", key});  // outlives the loop
    for (const Reply& field : reply.as_array()) fields.push_back(field.as_string());
    return fields;
  }

  // A waiting task played at the script level: process `uuid` (whose wake
  // channel the inspector listens on) registers with an offer for its task
  // 1 to take grants for `lease_ms`, naming acquisition `acquisition` and
  // send instant `sent`.
  Reply offer_scripted(Client& client, const std::string& name, const std::string& uuid, const std::string& lease_ms,
                       const std::string& acquisition, const std::string& sent) {
    const KeyLayout keys = layout(name);
    return env().inspector().eval(scripts::reentrant_lock_acquire,
                                  {name, keys.holder_identity, keys.wake_registry, keys.fair_grants},
                                  {lease_ms, uuid + ":1", "1", "", keys.wake_channel(uuid),
                                   std::to_string(client.runtime().wall_clock_ms()), "1", "0", acquisition, sent});
  }
  // The scripted task gives up (its wait ran out), its process's last.
  Reply abandon_scripted(Client& client, const std::string& name, const std::string& uuid,
                         const std::string& acquisition) {
    const KeyLayout keys = layout(name);
    return env().inspector().eval(
        scripts::reentrant_lock_abandon,
        {name, keys.channel, keys.holder_identity, keys.wake_registry, keys.fair_grants},
        {uuid + ":1", acquisition, keys.wake_channel(uuid), "1", "0", std::string(env().inspector().publish_command()),
         std::to_string(client.runtime().wall_clock_ms())});
  }
};

// The waiter's acquisition costs the two tries that registered it (before
// and after subscribing) and nothing after the release: it returns on the
// message. A Redisson client reading the hash sees an ordinary holder, and
// a Redisson waiter on the shared channel still hears "0".
TEST_P(FleetGrantTest, ReleaseGrantsTheRegisteredProcessAndTheMessageCarriesIt) {
  const std::string name = "fleet-grant";
  Client& holder = env().add_client();
  Client& waiter = env().add_client();
  Heard redisson_waiter(env().inspector(), layout(name).channel);
  std::uint64_t waiter_calls = 0;
  std::vector<std::string> held_as;
  std::optional<std::string> marker;
  std::string waiter_owner;
  env().spawn(holder, [&] {
    ReentrantLock lock = holder.lock(name);
    lock.lock();
    holder.runtime().sleep_for(milliseconds(400));
    lock.unlock();
  });
  env().spawn(waiter, [&] {
    ReentrantLock lock = waiter.lock(name);
    waiter.runtime().sleep_for(milliseconds(20));
    waiter_owner = lock.current_owner();
    const std::uint64_t before = waiter.metrics().script_round_trip.count;
    lock.lock();
    waiter_calls = waiter.metrics().script_round_trip.count - before;
    held_as = hash(name);
    marker = hash_field(layout(name).fair_grants, waiter_owner);
    EXPECT_EQ(lock.hold_count(), 1);
    lock.unlock();
    EXPECT_FALSE(lock.is_locked());
  });
  env().run();
  EXPECT_EQ(waiter_calls, 2u);
  EXPECT_EQ(held_as, (std::vector<std::string>{waiter_owner, "1"}));
  ASSERT_TRUE(marker.has_value());
  EXPECT_TRUE(marker->starts_with("g:")) << *marker;
  EXPECT_FALSE(redisson_waiter.awaited(holder).empty());
  for (const std::string& message : redisson_waiter.messages()) EXPECT_EQ(message, "0");
  EXPECT_EQ(inspect({"EXISTS", name, layout(name).holder_identity}), Reply::integer(0));
}

// A grant its task never takes (its wait ran out as the grant was made) is
// given back by the task's give-up script, which passes the lock on: here
// to a process registered behind it, granted in turn.
TEST_P(FleetGrantTest, GrantToATaskThatTimedOutIsGivenBackAndPassedOn) {
  const std::string name = "fleet-give-back";
  const std::string uuid = "5c3f5b1e-0000-4000-8000-000000000012";
  Client& holder = env().add_client();
  Client& next = env().add_client();
  std::atomic<bool> next_acquired = false;  // set on one client's thread, read on another's
  std::optional<Heard> heard;
  env().spawn(holder, [&] {
    ReentrantLock lock = holder.lock(name);
    lock.lock();
    heard.emplace(env().inspector(), layout(name).wake_channel(uuid));  // its process listens
    const Reply offered = offer_scripted(holder, name, uuid, "30000", "ab12", "5");
    ASSERT_TRUE(offered.is_array());
    holder.runtime().sleep_for(milliseconds(100));  // `next` registers behind it at 50 ms
    lock.unlock();
    EXPECT_EQ(heard->awaited(holder), std::vector<std::string>{std::string(kGrantPrefix) + "ab12:5"});
    EXPECT_EQ(hash_field(name, uuid + ":1"), "1");
    EXPECT_EQ(hash_field(layout(name).fair_grants, uuid + ":1"), "g:ab12");
    EXPECT_FALSE(next_acquired.load());
    // Its wait ran out: the give-up script releases the grant and grants
    // the lock to the next registered process.
    EXPECT_EQ(abandon_scripted(holder, name, uuid, "ab12"), Reply::integer(1));
    EXPECT_FALSE(hash_field(name, uuid + ":1").has_value());
    // A second give-up (a retry) gives nothing back.
    EXPECT_EQ(abandon_scripted(holder, name, uuid, "ab12"), Reply::integer(0));
  });
  env().spawn(next, [&] {
    ReentrantLock lock = next.lock(name);
    next.runtime().sleep_for(milliseconds(50));
    next_acquired = lock.try_lock({.wait = seconds(1)});
    if (next_acquired) lock.unlock();
  });
  env().run();
  heard.reset();
  EXPECT_TRUE(next_acquired.load());
  EXPECT_EQ(inspect({"EXISTS", name, layout(name).holder_identity}), Reply::integer(0));
}

// A task whose wait runs out while the lock is granted to it gives it back
// at once: the next waiter gets the lock long before the grant's lease
// would run out.
TEST_P(FleetGrantTest, TaskTimingOutAsItIsGrantedGivesItBack) {
  if (needs_virtual_time()) GTEST_SKIP() << "needs virtual time";
  const std::string name = "fleet-timed-out";
  Client& holder = env().add_client();
  Client& quitter = env().add_client();
  Client& next = env().add_client();
  bool quitter_acquired = true;
  std::int64_t next_acquired_ms = -1;
  const Instant start = holder.runtime().now();
  env().spawn(holder, [&] {
    ReentrantLock lock = holder.lock(name);
    lock.lock();
    holder.runtime().sleep_for(milliseconds(300));
    lock.unlock();  // granted to the quitter, whose wait ends at 300 ms too
  });
  env().spawn(quitter, [&] {
    ReentrantLock lock = quitter.lock(name);
    quitter.runtime().sleep_for(milliseconds(10));
    quitter_acquired = lock.try_lock({.wait = milliseconds(290)});
    if (quitter_acquired) lock.unlock();
  });
  env().spawn(next, [&] {
    ReentrantLock lock = next.lock(name);
    next.runtime().sleep_for(milliseconds(20));
    lock.lock();
    next_acquired_ms = std::chrono::duration_cast<milliseconds>(next.runtime().now() - start).count();
    lock.unlock();
  });
  env().run();
  // Whichever came first on the server (the grant or the give-up), the
  // next waiter got the lock within a few round trips of 300 ms.
  EXPECT_GE(next_acquired_ms, 300);
  EXPECT_LT(next_acquired_ms, 1000);
  EXPECT_EQ(inspect({"EXISTS", name, layout(name).holder_identity}), Reply::integer(0));
  EXPECT_EQ(inspect({"HLEN", layout(name).fair_grants}), Reply::integer(0));
}

// A Redisson holder (its release publishes on the shared channel only)
// keeps working: the turnstile waiter heeds the shared channel while such
// a holder holds, and acquires when it releases.
TEST_P(FleetGrantTest, RedissonHolderReleaseWakesTheTurnstileWaiter) {
  const std::string name = "fleet-redisson-holder";
  const std::string redisson_owner = "7d3f5b1e-0000-4000-8000-000000000001:1";
  Client& redisson = env().add_client();
  Client& waiter = env().add_client();
  std::int64_t acquired_ms = -1;
  const Instant start = waiter.runtime().now();
  env().spawn(redisson, [&] {
    (void)inspect({"HSET", name, redisson_owner, "1"});
    (void)inspect({"PEXPIRE", name, "30000"});
    redisson.runtime().sleep_for(milliseconds(200));
    // Redisson's unlock: the last hold deleted, "0" on the shared channel.
    (void)inspect({"EVAL", "redis.call('del', KEYS[1]); redis.call(ARGV[1], KEYS[2], '0'); return 1", "2", name,
                   layout(name).channel, std::string(env().inspector().publish_command())});
  });
  env().spawn(waiter, [&] {
    ReentrantLock lock = waiter.lock(name);
    waiter.runtime().sleep_for(milliseconds(20));
    lock.lock();
    acquired_ms = std::chrono::duration_cast<milliseconds>(waiter.runtime().now() - start).count();
    lock.unlock();
  });
  env().run();
  EXPECT_GE(acquired_ms, 200);
  EXPECT_LT(acquired_ms, 5000);  // woken by the message, not by the lease (30 s)
}

// A process's offer is its oldest waiting task's: the tasks of one
// process get the lock in the order they started waiting.
TEST_P(FleetGrantTest, TasksOfOneProcessAreGrantedOldestFirst) {
  const std::string name = "fleet-order";
  constexpr int kTasks = 4;
  Client& holder = env().add_client();
  Client& waiters = env().add_client();
  std::mutex mutex;
  std::vector<int> order;
  env().spawn(holder, [&] {
    ReentrantLock lock = holder.lock(name);
    lock.lock();
    holder.runtime().sleep_for(milliseconds(300));
    lock.unlock();
  });
  for (int i = 0; i < kTasks; ++i) {
    env().spawn(waiters, [&, i] {
      ReentrantLock lock = waiters.lock(name);
      waiters.runtime().sleep_for(milliseconds(20 * (i + 1)));
      lock.lock();
      {
        const std::lock_guard guard(mutex);
        order.push_back(i);
      }
      waiters.runtime().sleep_for(milliseconds(10));
      lock.unlock();
    });
  }
  env().run();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3}));
}

// The grantee's lease is timed from its own try's send instant
// (handoff_support.h).
TEST_P(FleetGrantTest, GranteeLeaseIsTimedFromItsTrysSendInstant) {
  const std::string name = "fleet-lease";
  expect_grantee_lease_timed_from_its_try(env(), name, [&name](Client& client) { return client.lock(name); });
}

// A renewed grantee keeps two renewal periods (handoff_support.h).
TEST_P(FleetGrantTest, RenewedGranteeKeepsTwoRenewalPeriods) {
  expect_renewed_grantee_keeps_two_renewal_periods(env(), [](Client& client) { return client.lock("fleet-renewed"); });
}

INSTANTIATE_TEST_SUITE_P(Environments, FleetGrantTest, ::testing::ValuesIn(lock_environments()),
                         ::testing::PrintToStringParamName());

}  // namespace
}  // namespace turnstile::testing
