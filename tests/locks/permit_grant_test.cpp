// The crash-safe semaphore's direct handoff to registered processes
// (fleet-wide wake-ups, ClientOptions::permit_handoff;
// lua/lib/wake_registry.lua, lua/permit_semaphore.lua), on the fake in
// virtual time and against a real redis-server: a release of n permits
// grants up to n of them to the oldest registered processes' offers and
// the messages carry the grants; a granted permit is stored as any
// acquired one (what Redisson's RPermitExpirableSemaphore reads) and the
// shared channel still hears the count; a grant to a task that has gone is
// given back and passed on; the grantee's lease is timed from its own try.

#include <gtest/gtest.h>

#include <atomic>
#include <optional>
#include <string>
#include <vector>

#include "handoff_support.h"
#include "lock_environment.h"
#include "locks/engine/wake_registry.h"
#include "lua_scripts.h"
#include "turnstile/key_layout.h"
#include "turnstile/semaphore.h"

namespace turnstile::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr std::string_view kGrantPrefix = "turnstile:grant:";

ClientOptions direct() { return ClientOptions{.permit_handoff = Handoff::direct}; }

// Sets the semaphore `name` to one permit, holds it for `hold` and
// releases it (which grants it on).
void hold_the_only_permit(Client& client, const std::string& name, milliseconds hold) {
  PermitSemaphore semaphore = client.permit_semaphore(name);
  ASSERT_TRUE(semaphore.try_set_permits(1));
  const PermitId permit = semaphore.acquire();
  client.runtime().sleep_for(hold);
  semaphore.release(permit);
}

class PermitGrantTest : public LockTest {
 protected:
  static KeyLayout layout(const std::string& name) { return key_layout(Flavor::semaphore, name); }

  // Grants are made only where a script's PUBLISH counts every subscriber
  // it reaches: not on a Redis Cluster with classic pub/sub (Redis 6.2;
  // tests/locks/classic_cluster_handoff_test.cpp).
  bool grants_made() { return detail::publish_counts_every_receiver(env().inspector()); }

  // The expiry score of permit `permit`, or nullopt if it is not held.
  std::optional<std::int64_t> expiry_of(const std::string& name, const PermitId& permit) {
    const Reply reply = inspect({"ZSCORE", layout(name).permit_timeouts, permit.bytes()});
    if (reply.is_nil()) return std::nullopt;
    return std::stoll(reply.as_string());
  }

  // The permit script with the wake registry and the grants, operation
  // `operation`, then `more` arguments.
  Reply script(Client& client, const std::string& name, const std::string& operation,
               const std::vector<std::string>& more) {
    const KeyLayout keys = layout(name);
    std::vector<std::string> args{std::to_string(client.runtime().wall_clock_ms()),
                                  std::string(env().inspector().publish_command()), "100", operation};
    args.insert(args.end(), more.begin(), more.end());
    return env().inspector().eval(scripts::permit_semaphore,
                                  {name, keys.permit_timeouts, keys.channel, keys.wake_registry, keys.fair_grants},
                                  args);
  }
  // A waiting task played at the script level: process `uuid` (whose wake
  // channel the inspector listens on) tries for permit `permit`, registers
  // and offers it for 30 s, sent at instant 5.
  Reply offer_scripted(Client& client, const std::string& name, const std::string& uuid, const PermitId& permit) {
    const std::string now = std::to_string(client.runtime().wall_clock_ms());
    return script(client, name, "acquire",
                  {"1", std::to_string(client.runtime().wall_clock_ms() + 30000),
                   std::to_string(PermitSemaphore::kNeverExpiresMs), permit.bytes(), layout(name).wake_channel(uuid),
                   now, "1", "0", "10000", permit.hex(), "5", "30000"});
  }
  // The scripted task gives up (its wait ran out), its process's last.
  Reply give_back_scripted(Client& client, const std::string& name, const std::string& uuid, const PermitId& permit) {
    return script(client, name, "give_back", {permit.bytes(), permit.hex(), layout(name).wake_channel(uuid), "1"});
  }
};

// The waiter's acquisition costs the two tries that registered it (before
// and after subscribing) and nothing after the release: it returns on the
// message. The granted permit is an ordinary held permit (raw id, expiry
// score), the count went down, and a Redisson waiter on the shared channel
// still heard the release's count.
TEST_P(PermitGrantTest, ReleaseGrantsThePermitAndTheMessageCarriesIt) {
  if (!grants_made()) GTEST_SKIP() << "no direct handoff on a cluster with classic pub/sub";
  const std::string name = "permit-grant";
  Client& holder = env().add_client(direct());
  Client& waiter = env().add_client(direct());
  Heard redisson_waiter(env().inspector(), layout(name).channel);
  std::uint64_t waiter_calls = 0;
  std::optional<std::int64_t> expiry;
  std::int64_t granted_at_ms = 0;
  Reply count_then = Reply::nil();
  env().spawn(holder, [&] { hold_the_only_permit(holder, name, milliseconds(400)); });
  env().spawn(waiter, [&] {
    PermitSemaphore semaphore = waiter.permit_semaphore(name);
    waiter.runtime().sleep_for(milliseconds(20));
    const std::uint64_t before = waiter.metrics().script_round_trip.count;
    const std::optional<PermitId> permit = semaphore.try_acquire({.wait = seconds(5)});
    ASSERT_TRUE(permit.has_value());
    waiter_calls = waiter.metrics().script_round_trip.count - before;
    granted_at_ms = waiter.runtime().wall_clock_ms();
    expiry = expiry_of(name, *permit);
    count_then = inspect({"GET", name});
    semaphore.release(*permit);
  });
  env().run();
  EXPECT_EQ(waiter_calls, 2u);
  ASSERT_TRUE(expiry.has_value());
  EXPECT_GT(*expiry, granted_at_ms);
  EXPECT_LE(*expiry, granted_at_ms + 30000);  // the watchdog's lease from the grant
  EXPECT_EQ(count_then, Reply::bulk("0"));
  EXPECT_FALSE(redisson_waiter.awaited(holder).empty());
  EXPECT_EQ(inspect({"GET", name}), Reply::bulk("1"));
  EXPECT_EQ(inspect({"HLEN", layout(name).fair_grants}), Reply::integer(0));
}

// A release of two permits grants both: to the two oldest registered
// processes, each of whose tasks returns on its message.
TEST_P(PermitGrantTest, TwoPermitsReleasedAtOnceMakeTwoGrants) {
  if (!grants_made()) GTEST_SKIP() << "no direct handoff on a cluster with classic pub/sub";
  const std::string name = "permit-grant-two";
  Client& holder = env().add_client(direct());
  Client& first = env().add_client(direct());
  Client& second = env().add_client(direct());
  std::vector<std::uint64_t> calls(2, 0);
  const auto wait_for_grant = [&](Client& client, std::size_t index, milliseconds wait_at) {
    PermitSemaphore semaphore = client.permit_semaphore(name);
    client.runtime().sleep_for(wait_at);
    const std::uint64_t before = client.metrics().script_round_trip.count;
    const std::optional<PermitId> permit = semaphore.try_acquire({.wait = seconds(5)});
    ASSERT_TRUE(permit.has_value());
    calls[index] = client.metrics().script_round_trip.count - before;
    client.runtime().sleep_for(milliseconds(100));  // both hold at once
    semaphore.release(*permit);
  };
  env().spawn(holder, [&] {
    PermitSemaphore semaphore = holder.permit_semaphore(name);
    ASSERT_TRUE(semaphore.try_set_permits(2));
    const std::vector<PermitId> permits = semaphore.acquire_many(2);
    holder.runtime().sleep_for(milliseconds(400));
    semaphore.release(permits);
  });
  env().spawn(first, [&] { wait_for_grant(first, 0, milliseconds(20)); });
  env().spawn(second, [&] { wait_for_grant(second, 1, milliseconds(30)); });
  env().run();
  EXPECT_EQ(calls, (std::vector<std::uint64_t>{2, 2}));
  EXPECT_EQ(inspect({"GET", name}), Reply::bulk("2"));
}

// A grant its task never takes (its wait ran out as the grant was made) is
// given back by the task's give-back, which passes the permit on: here to
// a process registered behind it, woken in turn (a give-back wakes, it
// does not grant).
TEST_P(PermitGrantTest, GrantToATaskThatTimedOutIsGivenBackAndPassedOn) {
  if (!grants_made()) GTEST_SKIP() << "no direct handoff on a cluster with classic pub/sub";
  const std::string name = "permit-give-back";
  const std::string uuid = "5c3f5b1e-0000-4000-8000-000000000013";
  const PermitId scripted("00112233445566778899aabbccddeeff");
  Client& holder = env().add_client(direct());
  Client& next = env().add_client(direct());
  std::atomic<bool> next_acquired = false;  // set on one client's thread, read on another's
  std::optional<Heard> heard;
  env().spawn(holder, [&] {
    PermitSemaphore semaphore = holder.permit_semaphore(name);
    ASSERT_TRUE(semaphore.try_set_permits(1));
    const PermitId permit = semaphore.acquire();
    heard.emplace(env().inspector(), layout(name).wake_channel(uuid));  // its process listens
    const Reply offered = offer_scripted(holder, name, uuid, scripted);
    ASSERT_TRUE(offered.is_array());
    holder.runtime().sleep_for(milliseconds(100));  // `next` registers behind it at 50 ms
    semaphore.release(permit);
    EXPECT_EQ(heard->awaited(holder), std::vector<std::string>{std::string(kGrantPrefix) + scripted.hex() + ":5"});
    EXPECT_TRUE(expiry_of(name, scripted).has_value());
    EXPECT_FALSE(next_acquired.load());
    // Its wait ran out: the give-back releases the permit and wakes the
    // next registered process.
    EXPECT_EQ(give_back_scripted(holder, name, uuid, scripted), Reply::integer(1));
    EXPECT_FALSE(expiry_of(name, scripted).has_value());
    // A second give-back (a retry) gives nothing back.
    EXPECT_EQ(give_back_scripted(holder, name, uuid, scripted), Reply::integer(0));
  });
  env().spawn(next, [&] {
    PermitSemaphore semaphore = next.permit_semaphore(name);
    next.runtime().sleep_for(milliseconds(50));
    const std::optional<PermitId> permit = semaphore.try_acquire({.wait = seconds(1)});
    next_acquired = permit.has_value();
    if (permit) semaphore.release(*permit);
  });
  env().run();
  heard.reset();
  EXPECT_TRUE(next_acquired.load());
  EXPECT_EQ(inspect({"GET", name}), Reply::bulk("1"));
  EXPECT_EQ(inspect({"ZCARD", layout(name).permit_timeouts}), Reply::integer(0));
}

// A task whose wait runs out while the permit is granted to it gives it
// back at once: the next waiter gets it long before the grant's lease
// would run out.
TEST_P(PermitGrantTest, TaskTimingOutAsItIsGrantedGivesItBack) {
  if (!grants_made()) GTEST_SKIP() << "no direct handoff on a cluster with classic pub/sub";
  if (needs_virtual_time()) GTEST_SKIP() << "needs virtual time";
  const std::string name = "permit-timed-out";
  Client& holder = env().add_client(direct());
  Client& quitter = env().add_client(direct());
  Client& next = env().add_client(direct());
  bool quitter_acquired = true;
  std::int64_t next_acquired_ms = -1;
  const Instant start = holder.runtime().now();
  env().spawn(holder, [&] { hold_the_only_permit(holder, name, milliseconds(300)); });
  env().spawn(quitter, [&] {
    PermitSemaphore semaphore = quitter.permit_semaphore(name);
    quitter.runtime().sleep_for(milliseconds(10));
    const std::optional<PermitId> permit = semaphore.try_acquire({.wait = milliseconds(290)});
    quitter_acquired = permit.has_value();
    if (permit) semaphore.release(*permit);
  });
  env().spawn(next, [&] {
    PermitSemaphore semaphore = next.permit_semaphore(name);
    next.runtime().sleep_for(milliseconds(20));
    const PermitId permit = semaphore.acquire();
    next_acquired_ms = std::chrono::duration_cast<milliseconds>(next.runtime().now() - start).count();
    semaphore.release(permit);
  });
  env().run();
  // Whichever came first on the server (the grant or the give-back), the
  // next waiter got the permit within a few round trips of 300 ms.
  EXPECT_GE(next_acquired_ms, 300);
  EXPECT_LT(next_acquired_ms, 1000);
  EXPECT_EQ(inspect({"GET", name}), Reply::bulk("1"));
  EXPECT_EQ(inspect({"HLEN", layout(name).fair_grants}), Reply::integer(0));
}

// The grantee believes its lease from the send instant of its own try that
// the grant followed, never from the message's arrival: with a fixed
// lease of 1 s, waiting from 20 ms and granted at 400 ms, its hold is over
// by 1,100 ms, while the server keeps the permit until about 1,400 ms.
TEST_P(PermitGrantTest, GranteeLeaseIsTimedFromItsTrysSendInstant) {
  if (!grants_made()) GTEST_SKIP() << "no direct handoff on a cluster with classic pub/sub";
  if (needs_virtual_time()) GTEST_SKIP() << "needs virtual time";
  const std::string name = "permit-grant-lease";
  ClientOptions exact = direct();
  exact.clock_drift_factor = 0;
  exact.stop_margin = Duration::zero();
  Client& holder = env().add_client(direct());
  Client& waiter = env().add_client(exact);
  std::uint64_t calls = 0;
  bool held_at_900 = false;
  bool held_at_1100 = true;
  std::int64_t server_left_at_1100_ms = -1;
  const Instant start = holder.runtime().now();
  env().spawn(holder, [&] { hold_the_only_permit(holder, name, milliseconds(400)); });
  env().spawn(waiter, [&] {
    PermitSemaphore semaphore = waiter.permit_semaphore(name);
    waiter.runtime().sleep_for(milliseconds(20));
    const std::uint64_t before = waiter.metrics().script_round_trip.count;
    LockHold hold = semaphore.try_acquire_hold({.wait = seconds(5), .lease = milliseconds(1000)});
    ASSERT_TRUE(hold.held());
    calls = waiter.metrics().script_round_trip.count - before;
    const PermitId permit(hold.owner());
    waiter.runtime().sleep_until(start + milliseconds(900));
    held_at_900 = hold.held();
    waiter.runtime().sleep_until(start + milliseconds(1100));
    held_at_1100 = hold.held();
    if (const std::optional<std::int64_t> expiry = expiry_of(name, permit)) {
      server_left_at_1100_ms = *expiry - waiter.runtime().wall_clock_ms();
    }
  });
  env().run();
  EXPECT_EQ(calls, 2u);
  EXPECT_TRUE(held_at_900);
  EXPECT_FALSE(held_at_1100);
  EXPECT_GE(server_left_at_1100_ms, 200);
}

INSTANTIATE_TEST_SUITE_P(Environments, PermitGrantTest, ::testing::ValuesIn(lock_environments()),
                         ::testing::PrintToStringParamName());

}  // namespace
}  // namespace turnstile::testing
