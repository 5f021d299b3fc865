// A wait's give-up call (leaving the fleet wake registry, the reentrant
// lock's abandon with its offer, the fair lock's abandon) is bounded by
// kGiveUpGraceMs after the wait ends (locks/engine/give_up.h), on the fake in
// virtual time: the waiter's link hangs as its give-up goes out (subscribed,
// its tries answered), and try_lock_for(100ms) returns false exactly the grace
// after its deadline, not a command timeout (2 s in this world) later; the
// give-up's pending reply is dropped unread; what it would have removed is
// still there, and is cleaned or expires once the link is healed.
// tests/locks/subscribe_bound_redis_test.cpp: a SIGSTOPped redis-server.

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "locks/engine/give_up.h"
#include "turnstile/backend.h"
#include "turnstile/client.h"
#include "turnstile/fair_lock.h"
#include "turnstile/key_layout.h"
#include "turnstile/lock.h"
#include "turnstile/semaphore.h"
#include "turnstile/sim/world.h"

namespace turnstile {
namespace {

using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::seconds;

constexpr std::uint64_t kSeed = 35;
constexpr auto kGrace = milliseconds(detail::kGiveUpGraceMs);

// Hangs the client's link as the first call sent with a bound (a
// give-up's: send_eval_within) goes out; counts those calls, and those
// whose pending reply was dropped before its outcome was read.
class GiveUpWatch final : public ForwardingBackend {
 public:
  GiveUpWatch(std::shared_ptr<Backend> inner, sim::World& world, sim::SimClient& client)
      : ForwardingBackend(std::move(inner)), world_(world), client_(client) {}

  std::unique_ptr<PendingReply> send_eval_within(const Script& script, const std::vector<std::string>& keys,
                                                 const std::vector<std::string>& args, EvalSync sync,
                                                 const EvalOptions& options) override {
    if (sent++ == 0) world_.partition(client_, 0);
    return std::make_unique<Watched>(inner().send_eval_within(script, keys, args, sync, options), *this);
  }

  int sent = 0;
  int dropped_unread = 0;

 private:
  class Watched final : public PendingReply {
   public:
    Watched(std::unique_ptr<PendingReply> inner, GiveUpWatch& watch) : inner_(std::move(inner)), watch_(watch) {}
    ~Watched() override {
      if (!read_) ++watch_.dropped_unread;
    }
    Watched(const Watched&) = delete;
    Watched& operator=(const Watched&) = delete;
    bool wait_for(std::chrono::nanoseconds timeout) override { return inner_->wait_for(timeout); }
    SyncedReply get() override {
      read_ = true;
      return inner_->get();
    }

   private:
    std::unique_ptr<PendingReply> inner_;
    GiveUpWatch& watch_;
    bool read_ = false;
  };

  sim::World& world_;
  sim::SimClient& client_;
};

// One give-up kind: how a name is held and waited for, and what its
// give-up would have removed.
struct Case {
  ClientOptions waiter_options;
  // Takes the name on `client` and returns what releases it.
  std::function<std::function<void()>(Client&)> hold;
  // Waits up to `wait` on `client`; a success is released before returning.
  std::function<bool(Client&, Duration)> wait;
  // Whether the waiter's traces are on the server (read from `backend`).
  std::function<bool(Backend&)> waiter_left_behind;
};

std::int64_t count_reply(Backend& backend, const std::vector<std::string>& argv) {
  const Reply reply = backend.command(argv);
  if (reply.is_integer()) return reply.as_integer();
  return reply.is_array() ? static_cast<std::int64_t>(reply.as_array().size()) : 0;
}

// A process registered in the wake registry (score >= 1; the holder record
// is 0).
std::function<bool(Backend&)> registered(Flavor flavor, const std::string& name) {
  return [registry = key_layout(flavor, name).wake_registry](Backend& backend) {
    return count_reply(backend, {"ZCOUNT", registry, "1", "+inf"}) > 0;
  };
}

void expect_the_give_up_ends_within_its_grace(const Case& test_case) {
  sim::World world(kSeed);
  sim::SimClient& holder = world.add_client("holder");
  sim::SimClient& waiter = world.add_client("waiter");
  const auto watch = std::make_shared<GiveUpWatch>(waiter.backend_ptr(), world, waiter);
  constexpr auto kHeldFor = seconds(5);
  bool timed_out_acquired = true;
  bool left_behind = false;
  bool next_acquired = false;
  bool left_at_end = true;
  int sent_before = 0;
  int sent_by_wait = 0;
  int dropped_by_wait = 0;
  Instant deadline{};
  Instant waited_until{};
  Instant released_at{};
  Instant next_acquired_at{};
  world.spawn(holder, [&] {
    Client client(holder.backend_ptr(), holder.runtime_ptr());
    const std::function<void()> release = test_case.hold(client);
    holder.runtime().sleep_for(kHeldFor);
    released_at = holder.runtime().now();
    release();
    // Long past every leftover's expiry (the registry's margin, an offer's
    // key, a fair waiter's liveness) and the waiter's own release.
    holder.runtime().sleep_for(minutes(3));
    left_at_end = test_case.waiter_left_behind(holder.backend());
  });
  world.spawn(waiter, [&] {
    Client client(watch, waiter.runtime_ptr(), test_case.waiter_options);
    waiter.runtime().sleep_for(milliseconds(10));  // the holder is in
    deadline = waiter.runtime().now() + milliseconds(100);
    sent_before = watch->sent;
    timed_out_acquired = test_case.wait(client, milliseconds(100));
    waited_until = waiter.runtime().now();
    sent_by_wait = watch->sent - sent_before;
    dropped_by_wait = watch->dropped_unread;
    left_behind = test_case.waiter_left_behind(holder.backend());
    world.heal(waiter, 0);
    next_acquired = test_case.wait(client, seconds(30));
    next_acquired_at = waiter.runtime().now();
  });
  world.run_until_idle();

  EXPECT_FALSE(timed_out_acquired);
  // Exactly the grace after the deadline: the give-up went out at the
  // deadline and its reply was not waited for longer.
  EXPECT_EQ(waited_until, deadline + kGrace);
  EXPECT_EQ(sent_by_wait, 1) << "one give-up call";
  EXPECT_EQ(dropped_by_wait, 1) << "the give-up's late reply was read";
  EXPECT_TRUE(left_behind) << "the give-up ran on a hanging link";
  // Healed: the next wait is served by the release, and what the lost
  // give-up left is cleaned or expires.
  EXPECT_TRUE(next_acquired);
  EXPECT_GE(next_acquired_at, released_at);
  EXPECT_LT(next_acquired_at, released_at + seconds(1));
  EXPECT_FALSE(left_at_end);
}

std::function<std::function<void()>(Client&)> hold_lock(std::function<Lock(Client&)> make) {
  return [make](Client& client) {
    auto lock = std::make_shared<Lock>(make(client));
    lock->lock();
    return [lock] { lock->unlock(); };
  };
}

std::function<bool(Client&, Duration)> wait_lock(std::function<Lock(Client&)> make) {
  return [make](Client& client, Duration wait) {
    Lock lock = make(client);
    if (!lock.try_lock_for(wait)) return false;
    lock.unlock();
    return true;
  };
}

Case lock_case(Flavor flavor, const std::string& name, std::function<Lock(Client&)> make) {
  return Case{.waiter_options = {},
              .hold = hold_lock(make),
              .wait = wait_lock(make),
              .waiter_left_behind = registered(flavor, name)};
}

TEST(GiveUpBoundTest, AReentrantLocksRegistryLeaveEndsWithinItsGrace) {
  Case test_case = lock_case(Flavor::reentrant, "leave-reentrant",
                             [](Client& client) -> Lock { return client.lock("leave-reentrant"); });
  test_case.waiter_options.fleet_handoff = Handoff::announce;  // the registry leave, no offer
  expect_the_give_up_ends_within_its_grace(test_case);
}

TEST(GiveUpBoundTest, ATokenLocksRegistryLeaveEndsWithinItsGrace) {
  expect_the_give_up_ends_within_its_grace(
      lock_case(Flavor::token, "leave-token", [](Client& client) -> Lock { return client.token_lock("leave-token"); }));
}

TEST(GiveUpBoundTest, AReentrantAbandonWithItsOfferEndsWithinItsGrace) {
  // The default direct handoff: the give-up withdraws the process's offer.
  const std::string name = "abandon-reentrant";
  Case test_case = lock_case(Flavor::reentrant, name, [name](Client& client) -> Lock { return client.lock(name); });
  const std::function<bool(Backend&)> is_registered = test_case.waiter_left_behind;
  test_case.waiter_left_behind = [is_registered,
                                  grants = key_layout(Flavor::reentrant, name).fair_grants](Backend& backend) {
    return is_registered(backend) || count_reply(backend, {"EXISTS", grants}) > 0;
  };
  expect_the_give_up_ends_within_its_grace(test_case);
}

TEST(GiveUpBoundTest, AFairAbandonEndsWithinItsGrace) {
  const std::string name = "abandon-fair";
  const KeyLayout layout = key_layout(Flavor::fair, name);
  expect_the_give_up_ends_within_its_grace(Case{
      .waiter_options = {},
      .hold = hold_lock([name](Client& client) -> Lock { return client.fair_lock(name); }),
      .wait = wait_lock([name](Client& client) -> Lock { return client.fair_lock(name); }),
      // Its queue entry (and its offer).
      .waiter_left_behind =
          [layout](Backend& backend) {
            return count_reply(backend, {"LLEN", layout.fair_queue}) > 0 ||
                   count_reply(backend, {"EXISTS", layout.fair_grants}) > 0;
          },
  });
}

TEST(GiveUpBoundTest, ASemaphoresRegistryLeaveEndsWithinItsGrace) {
  const std::string name = "leave-semaphore";
  expect_the_give_up_ends_within_its_grace(Case{
      .waiter_options = {},
      .hold =
          [name](Client& client) {
            auto semaphore = std::make_shared<CountingSemaphore>(client.counting_semaphore(name));
            EXPECT_TRUE(semaphore->try_set_permits(1));
            EXPECT_TRUE(semaphore->try_acquire());
            return std::function<void()>([semaphore] { semaphore->release(); });
          },
      .wait =
          [name](Client& client, Duration wait) {
            CountingSemaphore semaphore = client.counting_semaphore(name);
            if (!semaphore.try_acquire_for(wait)) return false;
            semaphore.release();
            return true;
          },
      .waiter_left_behind = registered(Flavor::counting_semaphore, name),
  });
}

}  // namespace
}  // namespace turnstile
