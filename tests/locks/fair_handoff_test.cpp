// The fair lock's direct handoff (docs/safety.md, "Direct handoff"), on the
// fake in virtual time and against a real redis-server: a release grants
// the lock to a turnstile waiter at the head and the message carries the
// grant; a Redisson waiter at the head is told as today; a grant nobody
// takes is given back, or runs out with its lease; the grantee's lease is
// timed from the send instant of its own try that the grant followed.

#include <gtest/gtest.h>
#include <atomic>

#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "handoff_support.h"
#include "lock_environment.h"
#include "lua_scripts.h"
#include "turnstile/fair_lock.h"
#include "turnstile/key_layout.h"

namespace turnstile::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr std::string_view kGrantPrefix = "turnstile:grant:";
const FairLockOptions kDirect{.handoff = Handoff::direct};

class FairHandoffTest : public LockTest {
 protected:
  // What a holder and a waiter tell each other. A real environment runs
  // them on threads of their own: each note is published by its flag
  // (release) and read only once the flag is seen set (acquire).
  struct Notes {
    std::string waiter_owner;
    std::atomic<bool> owner_known{false};
    std::optional<Heard> heard;
    std::atomic<bool> listening{false};

    void tell_owner(std::string owner) {
      waiter_owner = std::move(owner);
      owner_known.store(true, std::memory_order_release);
    }
    void listen(Backend& inspector, const std::string& channel) {
      heard.emplace(inspector, channel);
      listening.store(true, std::memory_order_release);
    }
    // What was heard, once the holder listens (empty if it never did).
    std::vector<std::string> awaited(Client& client) {
      if (!listening.load(std::memory_order_acquire)) return {};
      return heard->awaited(client);
    }
  };

  static KeyLayout layout(const std::string& name) { return key_layout(Flavor::fair, name); }

  // Whether the waiter is alone in the queue: it queues at about 20 ms, so
  // this waits (in the client's time) for a loaded machine's late thread.
  bool waiter_queued(Client& client, const std::string& name, const Notes& notes) {
    for (int i = 0; i < 400; ++i) {
      if (notes.owner_known.load(std::memory_order_acquire) &&
          queue(name) == std::vector<std::string>{notes.waiter_owner}) {
        return true;
      }
      client.runtime().sleep_for(milliseconds(5));
    }
    return false;
  }

  std::vector<std::string> queue(const std::string& name) {
    std::vector<std::string> owners;
    const Reply reply = inspect({"LRANGE", layout(name).fair_queue, "0", "-1"});  // outlives the loop
    for (const Reply& owner : reply.as_array()) {
      owners.push_back(owner.as_string());
    }
    return owners;
  }
  std::optional<std::string> hash_field(const std::string& key, const std::string& field) {
    const Reply reply = inspect({"HGET", key, field});
    if (reply.is_nil()) return std::nullopt;
    return reply.as_string();
  }
  bool any_key_left(const std::string& name) {
    const KeyLayout keys = layout(name);
    return inspect({"EXISTS", name, keys.fair_queue, keys.fair_timeouts, keys.fair_waiters, keys.fair_grants,
                    keys.holder_identity})
               .as_integer() != 0;
  }

  // A waiter played at the script level (no client behind it): it queues
  // for `name` with an offer to take grants for `lease_ms`, naming
  // acquisition `acquisition` and send instant `sent`.
  Reply queue_scripted_waiter(Client& client, const std::string& name, const std::string& owner,
                              const std::string& lease_ms, const std::string& acquisition, const std::string& sent) {
    const KeyLayout keys = layout(name);
    return env().inspector().eval(
        scripts::fair_lock_acquire,
        {name, keys.fair_queue, keys.fair_timeouts, keys.channel, keys.fair_waiters, keys.holder_identity,
         keys.fair_grants},
        {lease_ms, owner, "5000", std::to_string(client.runtime().wall_clock_ms()), "1",
         std::string(env().inspector().publish_command()), "0", "64", "300000", "1", "", acquisition, sent});
  }
  // The scripted waiter gives up (its wait ran out).
  Reply abandon_scripted_waiter(Client& client, const std::string& name, const std::string& owner,
                                const std::string& acquisition) {
    const KeyLayout keys = layout(name);
    return env().inspector().eval(
        scripts::fair_lock_abandon,
        {name, keys.fair_queue, keys.fair_timeouts, keys.channel, keys.fair_waiters, keys.holder_identity,
         keys.fair_grants},
        {owner, std::to_string(client.runtime().wall_clock_ms()), std::string(env().inspector().publish_command()), "0",
         "64", "300000", "5000", acquisition});
  }
};

// The waiter's acquisition costs the two tries that queued it (before and
// after subscribing) and nothing after the release: it returns on the
// message. Reentrancy and the release then behave as after any
// acquisition, and a Redisson client reading the hash sees the grantee.
TEST_P(FairHandoffTest, ReleaseGrantsTheTurnstileHeadAndTheMessageCarriesIt) {
  const std::string name = "handoff-grant";
  Client& holder = env().add_client();
  Client& waiter = env().add_client();
  Notes notes;
  std::uint64_t acquire_calls = 0;
  env().spawn(holder, [&] {
    FairLock lock = holder.fair_lock(name, kDirect);
    lock.lock();
    holder.runtime().sleep_for(milliseconds(200));  // the waiter queues at 20 ms
    ASSERT_TRUE(waiter_queued(holder, name, notes));
    notes.listen(env().inspector(), layout(name).waiter_channel(notes.waiter_owner));
    lock.unlock();
  });
  env().spawn(waiter, [&] {
    FairLock lock = waiter.fair_lock(name, kDirect);
    waiter.runtime().sleep_for(milliseconds(20));
    notes.tell_owner(lock.current_owner());
    const std::string& waiter_owner = notes.waiter_owner;
    const std::uint64_t before = waiter.metrics().script_round_trip.count;
    lock.lock();
    acquire_calls = waiter.metrics().script_round_trip.count - before;
    EXPECT_EQ(hash_field(name, waiter_owner), "1");  // what Redisson reads: the grantee holds it
    EXPECT_TRUE(queue(name).empty());
    EXPECT_EQ(lock.hold_count(), 1);
    lock.lock();
    EXPECT_EQ(lock.hold_count(), 2);
    lock.unlock();
    lock.unlock();
    EXPECT_FALSE(lock.is_locked());
    const std::vector<std::string> messages = notes.awaited(waiter);
    ASSERT_EQ(messages.size(), 1u);
    EXPECT_TRUE(messages[0].starts_with(kGrantPrefix)) << messages[0];
  });
  env().run();
  notes.heard.reset();
  EXPECT_EQ(acquire_calls, 2u);
  EXPECT_EQ(waiter.metrics().handoffs_received, 1u);
  EXPECT_FALSE(any_key_left(name));
}

// Handoff::announce keeps Redisson's way: "0" on the head's channel, and
// the woken waiter's own acquisition call.
TEST_P(FairHandoffTest, AnnounceTellsTheHeadAndItAcquiresItself) {
  const std::string name = "handoff-announce";
  const FairLockOptions options{.handoff = Handoff::announce};
  Client& holder = env().add_client();
  Client& waiter = env().add_client();
  Notes notes;
  std::uint64_t acquire_calls = 0;
  env().spawn(holder, [&] {
    FairLock lock = holder.fair_lock(name, options);
    lock.lock();
    holder.runtime().sleep_for(milliseconds(200));
    ASSERT_TRUE(waiter_queued(holder, name, notes));
    notes.listen(env().inspector(), layout(name).waiter_channel(notes.waiter_owner));
    lock.unlock();
  });
  env().spawn(waiter, [&] {
    FairLock lock = waiter.fair_lock(name, options);
    waiter.runtime().sleep_for(milliseconds(20));
    notes.tell_owner(lock.current_owner());
    const std::uint64_t before = waiter.metrics().script_round_trip.count;
    lock.lock();
    acquire_calls = waiter.metrics().script_round_trip.count - before;
    EXPECT_EQ(notes.awaited(waiter), std::vector<std::string>{"0"});
    lock.unlock();
  });
  env().run();
  notes.heard.reset();
  EXPECT_EQ(acquire_calls, 3u);
  EXPECT_FALSE(any_key_left(name));
}

// A Redisson waiter at the head (a queue entry without turnstile's offer)
// is told "0" on its channel as Redisson's unlock tells it; nothing is
// granted, and the turnstile waiter behind it keeps waiting its turn.
TEST_P(FairHandoffTest, RedissonWaiterAtTheHeadIsToldAsToday) {
  const std::string name = "handoff-redisson-head";
  const std::string redisson_owner = "5c3f5b1e-0000-4000-8000-000000000001:7";
  Client& holder = env().add_client();
  Client& waiter = env().add_client();
  std::optional<Heard> heard;
  bool waiter_acquired = true;
  env().spawn(holder, [&] {
    FairLock lock = holder.fair_lock(name, kDirect);
    lock.lock();
    const KeyLayout keys = layout(name);
    (void)inspect({"RPUSH", keys.fair_queue, redisson_owner});
    (void)inspect(
        {"ZADD", keys.fair_timeouts, std::to_string(holder.runtime().wall_clock_ms() + 600'000), redisson_owner});
    heard.emplace(env().inspector(), keys.waiter_channel(redisson_owner));
    holder.runtime().sleep_for(milliseconds(100));  // the turnstile waiter queues behind at 20 ms
    lock.unlock();
    EXPECT_EQ(heard->awaited(holder), std::vector<std::string>{"0"});
    EXPECT_EQ(inspect({"EXISTS", name}), Reply::integer(0));  // free, for the Redisson waiter to take
    EXPECT_EQ(queue(name).front(), redisson_owner);
  });
  env().spawn(waiter, [&] {
    FairLock lock = waiter.fair_lock(name, kDirect);
    waiter.runtime().sleep_for(milliseconds(20));
    waiter_acquired = lock.try_lock({.wait = milliseconds(400)});
  });
  env().run();
  heard.reset();
  EXPECT_FALSE(waiter_acquired);
  const KeyLayout keys = layout(name);
  (void)inspect({"DEL", keys.fair_queue, keys.fair_timeouts});
  EXPECT_FALSE(any_key_left(name));
}

// A grant its waiter never takes (it gave up: its wait ran out) is given
// back by its give-up script, which passes the lock on: here to a client
// waiting behind it, granted in turn.
TEST_P(FairHandoffTest, GrantNobodyTookIsGivenBackAndPassedOn) {
  const std::string name = "handoff-give-back";
  const std::string scripted = "5c3f5b1e-0000-4000-8000-000000000002:1";
  Client& holder = env().add_client();
  Client& next = env().add_client();
  std::atomic<bool> next_acquired = false;  // set on one client's thread, read on another's
  std::optional<Heard> heard;
  env().spawn(holder, [&] {
    FairLock lock = holder.fair_lock(name, kDirect);
    lock.lock();
    heard.emplace(env().inspector(), layout(name).waiter_channel(scripted));  // its process listens
    const Reply queued = queue_scripted_waiter(holder, name, scripted, "30000", "ab12", "5");
    ASSERT_TRUE(queued.is_array());
    EXPECT_EQ(queued.as_array().at(0), Reply::integer(0));
    holder.runtime().sleep_for(milliseconds(100));  // `next` queues behind it at 50 ms
    lock.unlock();
    EXPECT_EQ(heard->awaited(holder), std::vector<std::string>{std::string(kGrantPrefix) + "ab12:5"});
    EXPECT_EQ(hash_field(name, scripted), "1");
    EXPECT_EQ(hash_field(layout(name).fair_grants, scripted), "g:ab12");
    EXPECT_FALSE(next_acquired.load());
    // Its wait ran out: the give-up script releases the grant and passes
    // the lock on.
    EXPECT_EQ(abandon_scripted_waiter(holder, name, scripted, "ab12"), Reply::integer(1));
    EXPECT_FALSE(hash_field(name, scripted).has_value());
  });
  env().spawn(next, [&] {
    FairLock lock = next.fair_lock(name, kDirect);
    next.runtime().sleep_for(milliseconds(50));
    next_acquired = lock.try_lock({.wait = seconds(1)});
    if (next_acquired) lock.unlock();
  });
  env().run();
  heard.reset();
  EXPECT_TRUE(next_acquired.load());
  EXPECT_FALSE(any_key_left(name));
}

// A grant to a waiter that left without its give-up reaching Redis (its
// process died or was cut off while it listened) is held by nobody until
// its lease runs out: the next waiter gets it at its next keep-alive. The offers' key
// expires by itself within two waiter timeouts and a lease.
TEST_P(FairHandoffTest, GrantToADepartedWaiterRunsOutWithItsLease) {
  if (needs_virtual_time()) GTEST_SKIP() << "needs virtual time";
  const std::string name = "handoff-departed";
  const std::string scripted = "5c3f5b1e-0000-4000-8000-000000000003:1";
  Client& holder = env().add_client();
  Client& next = env().add_client();
  std::int64_t next_acquired_ms = -1;
  std::optional<Heard> heard;
  const Instant start = holder.runtime().now();
  env().spawn(holder, [&] {
    FairLock lock = holder.fair_lock(name, kDirect);
    lock.lock();
    heard.emplace(env().inspector(), layout(name).waiter_channel(scripted));
    (void)queue_scripted_waiter(holder, name, scripted, "300", "cd34", "9");
    holder.runtime().sleep_for(milliseconds(100));
    lock.unlock();  // granted to the departed waiter for 300 ms
    EXPECT_EQ(hash_field(name, scripted), "1");
  });
  env().spawn(next, [&] {
    FairLock lock = next.fair_lock(name, kDirect);
    next.runtime().sleep_for(milliseconds(50));
    lock.lock();
    next_acquired_ms = std::chrono::duration_cast<milliseconds>(next.runtime().now() - start).count();
    lock.unlock();
  });
  env().run();
  heard.reset();
  // Granted at 100 ms for 300 ms: free at 400 ms; `next` finds it so at
  // its next keep-alive, a third of its waiter timeout (5 s) after its
  // try at 50 ms.
  EXPECT_GE(next_acquired_ms, 400);
  EXPECT_LE(next_acquired_ms, 50 + 5000 / 3 + 20);
  // The untaken grant's marker is all that is left; its key expires by
  // itself, two waiter timeouts and a (30 s watchdog) lease after the
  // latest offer.
  EXPECT_EQ(hash_field(layout(name).fair_grants, scripted), "g:cd34");
  const std::int64_t grants_ttl_ms = inspect({"PTTL", layout(name).fair_grants}).as_integer();
  EXPECT_GT(grants_ttl_ms, 0);
  EXPECT_LE(grants_ttl_ms, 2 * 5000 + 30'000);
  (void)inspect({"DEL", layout(name).fair_grants});
  EXPECT_FALSE(any_key_left(name));
}

// The grantee's lease is timed from its own try's send instant
// (handoff_support.h).
TEST_P(FairHandoffTest, GranteeLeaseIsTimedFromItsTrysSendInstant) {
  const std::string name = "handoff-lease";
  expect_grantee_lease_timed_from_its_try(env(), name,
                                          [&name](Client& client) { return client.fair_lock(name, kDirect); });
}

INSTANTIATE_TEST_SUITE_P(Environments, FairHandoffTest, ::testing::ValuesIn(lock_environments()),
                         ::testing::PrintToStringParamName());

}  // namespace
}  // namespace turnstile::testing
