// A waiting acquisition's SUBSCRIBE before its second try is bounded by the
// wait's deadline (Backend::subscribe_within, SubscribeOptions::
// confirm_within), on the fake in virtual time: the link hangs as the
// SUBSCRIBE goes out (its first try has its answer), and try_lock_for
// returns false at its deadline, not a command timeout later, with nothing
// held and nothing subscribed; healed, the next acquisition is woken by the
// release. tests/locks/subscribe_bound_redis_test.cpp: the same against a
// SIGSTOPped redis-server.

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "sim/fake_backend.h"
#include "turnstile/backend.h"
#include "turnstile/client.h"
#include "turnstile/errors.h"
#include "turnstile/lock.h"
#include "turnstile/sim/world.h"

namespace turnstile {
namespace {

using std::chrono::milliseconds;
using std::chrono::nanoseconds;
using std::chrono::seconds;

constexpr std::uint64_t kSeed = 34;

// Hangs the client's link as its first subscription goes out and records
// each subscription's bound; with `heal_after`, heals the link once that
// subscription ended (the fleet scope's give-up then reaches the server).
class HangingSubscribeBackend final : public ForwardingBackend {
 public:
  HangingSubscribeBackend(std::shared_ptr<Backend> inner, sim::World& world, sim::SimClient& client, bool heal_after)
      : ForwardingBackend(std::move(inner)), world_(world), client_(client), heal_after_(heal_after) {}

  Subscription subscribe_within(std::string_view channel, PubSubHandler handler,
                                const SubscribeOptions& options) override {
    bounds.push_back({client_.runtime().now(), options.confirm_within});
    if (!hang_next) return inner().subscribe_within(channel, std::move(handler), options);
    hang_next = false;
    world_.partition(client_, 0);
    try {
      Subscription subscription = inner().subscribe_within(channel, std::move(handler), options);
      ADD_FAILURE() << "a hanging link confirmed a subscription";
      return subscription;
    } catch (const TimeoutError&) {
      if (heal_after_) world_.heal(client_, 0);
      throw;
    }
  }

  struct Bound {
    Instant at;
    std::optional<nanoseconds> confirm_within;
  };
  std::vector<Bound> bounds;
  bool hang_next = true;

 private:
  sim::World& world_;
  sim::SimClient& client_;
  const bool heal_after_;
};

void expect_the_deadline_ends_the_wait(WakeScope scope) {
  sim::World world(kSeed);
  sim::SimClient& holder = world.add_client("holder");
  sim::SimClient& waiter = world.add_client("waiter");
  // The fleet scope's give-up leaves the wake registry with a call after
  // the deadline: the link is healed for it as the SUBSCRIBE ends.
  const bool heal_after = scope == WakeScope::fleet;
  const auto hanging = std::make_shared<HangingSubscribeBackend>(waiter.backend_ptr(), world, waiter, heal_after);
  constexpr auto kHeldFor = seconds(5);
  bool timed_out_acquired = true;
  bool held_by_holder = false;
  bool next_acquired = false;
  Instant deadline{};
  Instant waited_until{};
  Instant released_at{};
  Instant next_acquired_at{};
  world.spawn(holder, [&] {
    Client client(holder.backend_ptr(), holder.runtime_ptr());
    ReentrantLock lock = client.lock("bounded-subscribe");
    lock.lock();
    holder.runtime().sleep_for(kHeldFor);
    released_at = holder.runtime().now();
    lock.unlock();
  });
  world.spawn(waiter, [&] {
    ClientOptions options;
    options.wake_scope = scope;
    Client client(hanging, waiter.runtime_ptr(), options);
    ReentrantLock lock = client.lock("bounded-subscribe");
    waiter.runtime().sleep_for(milliseconds(10));  // the holder is in
    deadline = waiter.runtime().now() + milliseconds(100);
    timed_out_acquired = lock.try_lock_for(milliseconds(100));
    waited_until = waiter.runtime().now();
    EXPECT_EQ(waiter.link(0).channel_count(), 0U) << "a subscription the wait gave up on stayed";
    world.heal(waiter, 0);
    held_by_holder = lock.is_locked() && !lock.is_held_by_current_thread();
    next_acquired = lock.try_lock_for(seconds(30));
    next_acquired_at = waiter.runtime().now();
    if (next_acquired) lock.unlock();
  });
  world.run_until_idle();

  EXPECT_FALSE(timed_out_acquired);
  // At the deadline exactly: nothing after it waited for a command timeout
  // (2 s in this world).
  EXPECT_EQ(waited_until, deadline);
  ASSERT_FALSE(hanging->bounds.empty());
  const HangingSubscribeBackend::Bound& cut = hanging->bounds.front();
  ASSERT_TRUE(cut.confirm_within.has_value());
  EXPECT_EQ(*cut.confirm_within, deadline - cut.at);
  EXPECT_TRUE(held_by_holder);
  // Woken by the release, not at the end of the holder's watchdog lease
  // (30 s, renewed).
  EXPECT_TRUE(next_acquired);
  EXPECT_GE(next_acquired_at, released_at);
  EXPECT_LT(next_acquired_at, released_at + seconds(1));
}

TEST(SubscribeBoundTest, AnUnconfirmedSubscribeEndsAProcessScopeWaitAtItsDeadline) {
  expect_the_deadline_ends_the_wait(WakeScope::process);
}

TEST(SubscribeBoundTest, AnUnconfirmedSubscribeEndsAFleetScopeWaitAtItsDeadline) {
  expect_the_deadline_ends_the_wait(WakeScope::fleet);
}

}  // namespace
}  // namespace turnstile
