// The flavor seam (turnstile/flavor.h, key_layout.h): every flavor made by
// name through Client::holdable() keeps one contract, and every flavor's
// keys are named by the one key layout, Redisson's hash-tag rule included.
// Run in simulation and against a real redis-server.

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "lock_environment.h"
#include "turnstile/client.h"
#include "turnstile/errors.h"
#include "turnstile/flavor.h"
#include "turnstile/key_layout.h"

namespace turnstile::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// The flavors one server can hold (the composite locks of one node too):
// every one.
constexpr auto kOneServerFlavors = kAllFlavors;

HoldableOptions exclusive(Flavor flavor) {
  HoldableOptions options;
  if (is_semaphore(flavor)) options.permits = 1;
  return options;
}

TEST(FlavorTest, EveryFlavorHasOneSpellingThatRoundTrips) {
  for (const Flavor flavor : kAllFlavors) {
    EXPECT_EQ(parse_flavor(flavor_name(flavor)), flavor) << flavor_name(flavor);
  }
  EXPECT_EQ(flavor_name(Flavor::semaphore), "semaphore");  // the crash-safe one
  EXPECT_EQ(flavor_name(Flavor::counting_semaphore), "counting-semaphore");
  EXPECT_EQ(parse_flavor("permit_semaphore"), std::nullopt);
  EXPECT_EQ(parse_flavor("Reentrant"), std::nullopt);
  EXPECT_EQ(parse_flavor(""), std::nullopt);
  EXPECT_EQ(flavor_names(), "reentrant, token, fair, semaphore, counting-semaphore, redlock, multilock, read-write");
}

// Each flavor's title is its own (benchmarks/report.py reads the titles
// from the table's source; bench-harness checks it does).
TEST(FlavorTest, EveryFlavorHasATitleOfItsOwn) {
  std::set<std::string_view> titles;
  for (const FlavorTraits& traits : kFlavorTable) {
    EXPECT_FALSE(traits.title.empty()) << traits.name;
    EXPECT_TRUE(titles.insert(traits.title).second) << traits.title;
  }
  EXPECT_EQ(flavor_traits(Flavor::semaphore).title, "crash-safe semaphore");
  EXPECT_EQ(flavor_traits(Flavor::counting_semaphore).title, "counting semaphore");
}

// The quorum rule, written once (the table), for the composite locks, the
// simulator's checkers and its belief deadlines alike.
TEST(FlavorTest, TheQuorumIsTheTables) {
  EXPECT_EQ(required_nodes(Flavor::redlock, 5), 3u);
  EXPECT_EQ(required_nodes(Flavor::redlock, 4), 3u);
  EXPECT_EQ(required_nodes(Flavor::redlock, 1), 1u);
  EXPECT_EQ(required_nodes(Flavor::multilock, 4), 4u);
  for (const Flavor flavor : kAllFlavors) {
    if (!is_composite(flavor)) {
      EXPECT_EQ(required_nodes(flavor, 5), 1u) << flavor_name(flavor);
    }
  }
}

// kFlavorTable answers every question about a flavor.
TEST(FlavorTest, ThePredicatesReadTheTable) {
  EXPECT_EQ(kAllFlavors.size(), kFlavorTable.size());
  for (const Flavor flavor : kAllFlavors) EXPECT_EQ(flavor_traits(flavor).flavor, flavor);
  std::vector<std::string> fenced;
  std::vector<std::string> in_policy;
  for (const Flavor flavor : kAllFlavors) {
    if (can_be_fenced(flavor)) fenced.emplace_back(flavor_name(flavor));
    if (flavor_traits(flavor).in_policy) in_policy.emplace_back(flavor_name(flavor));
  }
  EXPECT_EQ(fenced, (std::vector<std::string>{"reentrant", "fair"}));
  EXPECT_EQ(in_policy, (std::vector<std::string>{"reentrant", "token", "fair", "semaphore", "read-write"}));
  EXPECT_TRUE(is_semaphore(Flavor::counting_semaphore));
  EXPECT_FALSE(has_lease(Flavor::counting_semaphore));
  EXPECT_TRUE(is_composite(Flavor::multilock));
  EXPECT_EQ(flavor_traits(Flavor::token).key_type, KeyType::string);
  EXPECT_EQ(flavor_traits(Flavor::read_write).status_kind, StatusKind::read_write_hash);
}

// A lock hash's fields read back, and its shapes (key_layout.h): any owner
// with hold counts is held; only "<uuid>:..." owners make a lock that may
// be force-unlocked.
TEST(KeyLayoutTest, FieldsAndShapesOfLockHashes) {
  const KeyLayout read_write = key_layout(Flavor::read_write, "rw");
  const std::string owner = "0c9a1e0e-7d52-4e44-9a8e-0123456789ab:7";
  EXPECT_EQ(read_write.parse_field(read_write.write_field(owner)).owner, owner);
  EXPECT_TRUE(read_write.parse_field(read_write.write_field(owner)).writes);
  EXPECT_FALSE(read_write.parse_field(owner).writes);
  EXPECT_TRUE(read_write.parse_field("mode").mode);
  const KeyLayout reentrant = key_layout(Flavor::reentrant, "r");
  EXPECT_EQ(reentrant.parse_field(owner + ":write").owner, owner + ":write");  // only read-write has write holds
  EXPECT_FALSE(reentrant.parse_field("mode").mode);

  const std::string node_redisson = "0c9a1e0e-7d52-4e44-9a8e-0123456789ab:6d1f3c2a-9b8e-4f70-a1b2-c3d4e5f60718";
  EXPECT_FALSE(is_owner_id(node_redisson));
  EXPECT_TRUE(is_client_owned(node_redisson));
  EXPECT_TRUE(is_client_owned(owner));
  EXPECT_FALSE(is_client_owned("views"));
  EXPECT_FALSE(is_client_owned("0c9a1e0e-7d52-4e44-9a8e-0123456789ab:"));

  using Flat = std::vector<std::string>;
  EXPECT_TRUE(is_lock_hash(reentrant, Flat{owner, "2", node_redisson, "1"}));
  EXPECT_TRUE(is_held_lock_hash(reentrant, Flat{"views", "3"}));
  EXPECT_FALSE(is_lock_hash(reentrant, Flat{"views", "3"}));
  for (const Flat& flat : {Flat{}, Flat{owner, "0"}, Flat{owner, "01"}, Flat{owner, "-1"}, Flat{owner, "x"},
                           Flat{"mode", "write", owner + ":write", "1"}}) {
    EXPECT_FALSE(is_held_lock_hash(reentrant, flat)) << flat.size();
  }
  EXPECT_TRUE(is_lock_hash(read_write, Flat{"mode", "write", node_redisson + ":write", "1"}));
  EXPECT_TRUE(is_held_lock_hash(read_write, Flat{"mode", "read", "reader", "2"}));
  EXPECT_FALSE(is_lock_hash(read_write, Flat{"mode", "read", "reader", "2"}));
  EXPECT_FALSE(is_held_lock_hash(read_write, Flat{owner, "1"}));  // no mode
  EXPECT_FALSE(is_held_lock_hash(read_write, Flat{"mode", "both", owner, "1"}));
}

TEST(KeyLayoutTest, SideKeysFollowRedissonsHashTagRule) {
  const KeyLayout plain = key_layout(Flavor::fair, "orders");
  EXPECT_EQ(plain.name, "orders");
  EXPECT_EQ(plain.channel, "redisson_lock__channel:{orders}");
  EXPECT_EQ(plain.fencing_counter, "redisson_lock_token:{orders}");
  EXPECT_EQ(plain.fair_queue, "redisson_lock_queue:{orders}");
  EXPECT_EQ(plain.fair_timeouts, "redisson_lock_timeout:{orders}");
  EXPECT_EQ(plain.fair_waiters, "turnstile_lock_waiters:{orders}");
  EXPECT_EQ(plain.waiter_channel("u:1"), "redisson_lock__channel:{orders}:u:1");
  EXPECT_EQ(plain.unlock_latch("n"), "redisson_unlock_latch:{orders}:n");
  // A name with its own hash tag is used as it is, prefix or suffix.
  const KeyLayout tagged = key_layout(Flavor::fair, "{shop}:orders");
  EXPECT_EQ(tagged.fair_queue, "redisson_lock_queue:{shop}:orders");
  EXPECT_EQ(key_layout(Flavor::semaphore, "pool").permit_timeouts, "{pool}:timeout");
  EXPECT_EQ(key_layout(Flavor::semaphore, "{shop}:pool").permit_timeouts, "{shop}:pool:timeout");
  EXPECT_EQ(key_layout(Flavor::semaphore, "pool").channel, "redisson_sc:{pool}");
  EXPECT_EQ(key_layout(Flavor::counting_semaphore, "pool").channel, "redisson_sc:{pool}");
  EXPECT_EQ(key_layout(Flavor::token, "t").channel, "turnstile_lock__channel:{t}");
  EXPECT_EQ(fence_key("account"), "turnstile_fence:{account}");
  // Only the keys a flavor uses are named.
  EXPECT_EQ(key_layout(Flavor::token, "t").side_keys(), std::vector<std::string>{"turnstile_lock_wake:{t}"});
  const KeyLayout reentrant = key_layout(Flavor::reentrant, "orders");
  EXPECT_EQ(reentrant.wake_registry, "turnstile_lock_wake:{orders}");
  EXPECT_EQ(reentrant.wake_channel("u"), "turnstile_lock_wake:{orders}:u");
  EXPECT_TRUE(plain.wake_registry.empty());  // a fair waiter has a channel of its own
  EXPECT_EQ(key_layout(Flavor::semaphore, "p").side_keys(),
            (std::vector<std::string>{"turnstile_lock_wake:{p}", "turnstile_lock_grants:{p}", "{p}:timeout"}));
  EXPECT_EQ(key_layout(Flavor::counting_semaphore, "pool").side_keys(),
            std::vector<std::string>{"turnstile_lock_wake:{pool}"});
  EXPECT_EQ(plain.fair_grants, "turnstile_lock_grants:{orders}");
  EXPECT_EQ(plain.side_keys().size(), 5u);
}

class HoldableTest : public LockTest {};

// Every flavor, by name: a hold excludes another client's until it is
// released; what the hold reports is what the flavor took. (Timed by
// virtual sleeps: simulation only; each flavor's exclusion on a real
// server has tests of its own.)
TEST_P(HoldableTest, EveryFlavorHoldsReleasesAndExcludes) {
  TURNSTILE_SIM_ONLY();
  Client& alice = env().add_client();
  Client& bob = env().add_client();
  for (const Flavor flavor : kOneServerFlavors) {
    const std::string name = "held:" + std::string(flavor_name(flavor));
    env().spawn(alice, [&, flavor, name] {
      std::unique_ptr<Holdable> mine = alice.holdable(flavor, name, exclusive(flavor));
      EXPECT_EQ(mine->flavor(), flavor);
      EXPECT_EQ(mine->name(), name);
      LockHold hold = mine->try_acquire_hold({.wait = seconds(5), .lease = {}, .stop = {}});
      ASSERT_TRUE(hold.owns_hold()) << name;
      if (flavor == Flavor::semaphore) {
        ASSERT_EQ(hold.permit_ids().size(), 1u);
        EXPECT_EQ(hold.owner(), hold.permit_ids()[0]);
        EXPECT_EQ(hold.owner().size(), 32u);
      } else {
        EXPECT_TRUE(hold.permit_ids().empty());
        EXPECT_TRUE(hold.owner().starts_with(alice.id() + ":")) << hold.owner();
      }
      EXPECT_EQ(hold.fencing_token(), std::nullopt);  // not fenced
      alice.runtime().sleep_for(seconds(2));
      hold.release_or_throw();
    });
    env().spawn(bob, [&, flavor, name] {
      bob.runtime().sleep_for(seconds(1));
      std::unique_ptr<Holdable> theirs = bob.holdable(flavor, name, exclusive(flavor));
      EXPECT_FALSE(theirs->try_acquire_hold({}).owns_hold()) << name << " was held twice";
      LockHold after = theirs->try_acquire_hold({.wait = seconds(5), .lease = {}, .stop = {}});
      ASSERT_TRUE(after.owns_hold()) << name << " was not handed over";
      after.release_or_throw();
    });
    env().run();
  }
}

TEST_P(HoldableTest, AHoldIsReleasedOnceAndCanBeTakenAgain) {
  Client& alice = env().add_client();
  Client& bob = env().add_client();
  for (const Flavor flavor : kOneServerFlavors) {
    const std::string name = "again:" + std::string(flavor_name(flavor));
    env().spawn(alice, [&] {
      std::unique_ptr<Holdable> mine = alice.holdable(flavor, name, exclusive(flavor));
      LockHold hold = mine->try_acquire_hold({});
      ASSERT_TRUE(hold.owns_hold()) << name;
      hold.release_or_throw();
    });
    env().run();
    env().spawn(bob, [&] {
      std::unique_ptr<Holdable> theirs = bob.holdable(flavor, name, exclusive(flavor));
      LockHold hold = theirs->try_acquire_hold({});
      ASSERT_TRUE(hold.owns_hold()) << name << " was not given back";
      hold.release_or_throw();
      // Released once: a second release does nothing, and the hold is empty.
      EXPECT_FALSE(hold.owns_hold()) << name;
      EXPECT_NO_THROW(hold.release_or_throw()) << name;
      EXPECT_FALSE(hold.held()) << name;
    });
    env().run();
  }
}

TEST_P(HoldableTest, FencedLocksReportTheirTokenInTheHold) {
  Client& alice = env().add_client();
  env().spawn(alice, [&] {
    for (const Flavor flavor : {Flavor::reentrant, Flavor::fair}) {
      const std::string name = "fenced:" + std::string(flavor_name(flavor));
      std::unique_ptr<Holdable> lock = alice.holdable(flavor, name, {.fenced = true});
      LockHold first = lock->try_acquire_hold({});
      ASSERT_TRUE(first.owns_hold());
      const std::optional<std::int64_t> first_token = first.fencing_token();
      ASSERT_TRUE(first_token.has_value());
      first.release_or_throw();
      LockHold second = lock->try_acquire_hold({});
      ASSERT_TRUE(second.owns_hold());
      EXPECT_GT(second.fencing_token().value_or(0), *first_token);
      EXPECT_EQ(inspect({"GET", key_layout(flavor, name).fencing_counter}).as_string(),
                std::to_string(second.fencing_token().value_or(0)));
      second.release_or_throw();
    }
  });
  env().run();
}

TEST_P(HoldableTest, OptionsThatDoNotFitTheFlavorAreRefused) {
  Client& alice = env().add_client();
  Client& node = env().add_client();
  env().spawn(alice, [&] {
    EXPECT_THROW((void)alice.holdable(Flavor::token, "x", {.fenced = true}), InvalidArgumentError);
    EXPECT_THROW((void)alice.holdable(Flavor::semaphore, "x", {.fenced = true}), InvalidArgumentError);
    EXPECT_THROW((void)alice.holdable(Flavor::reentrant, "x", {.permits = 3}), InvalidArgumentError);
    EXPECT_THROW((void)alice.holdable(Flavor::fair, "x", {.nodes = {&node}}), InvalidArgumentError);
    EXPECT_THROW((void)alice.holdable(Flavor::redlock, "x", {.nodes = {nullptr}}), InvalidArgumentError);
    // The counting semaphore's permits have no lease.
    std::unique_ptr<Holdable> count = alice.holdable(Flavor::counting_semaphore, "count", {.permits = 2});
    EXPECT_THROW((void)count->try_acquire_hold({.wait = {}, .lease = seconds(5), .stop = {}}), InvalidArgumentError);
    // Nothing was written by a refusal.
    EXPECT_EQ(inspect({"EXISTS", "x", "count"}), Reply::integer(0));
  });
  env().run();
}

TEST_P(HoldableTest, EveryUserOfASemaphoreMustAgreeOnItsTotal) {
  Client& alice = env().add_client();
  Client& bob = env().add_client();
  env().spawn(alice, [&] {
    std::unique_ptr<Holdable> three = alice.holdable(Flavor::semaphore, "agree", {.permits = 3});
    LockHold hold = three->try_acquire_hold({});
    ASSERT_TRUE(hold.owns_hold());
    hold.release_or_throw();
  });
  env().run();
  env().spawn(bob, [&] {
    std::unique_ptr<Holdable> two = bob.holdable(Flavor::semaphore, "agree", {.permits = 2});
    EXPECT_THROW((void)two->try_acquire_hold({}), MismatchError);
    std::unique_ptr<Holdable> same = bob.holdable(Flavor::semaphore, "agree", {.permits = 3});
    LockHold hold = same->try_acquire_hold({});
    ASSERT_TRUE(hold.owns_hold());
    EXPECT_EQ(inspect({"GET", "agree"}).as_string(), "2");
    EXPECT_EQ(inspect({"ZCARD", "{agree}:timeout"}), Reply::integer(1));
    hold.release_or_throw();
  });
  env().run();
}

TEST_P(HoldableTest, ALostHoldIsToldWithItsOwner) {
  TURNSTILE_SIM_ONLY();
  Client& alice = env().add_client();
  for (const Flavor flavor : {Flavor::reentrant, Flavor::semaphore}) {
    const std::string name = "lost:" + std::string(flavor_name(flavor));
    std::optional<std::string> lost_owner;
    std::string hold_owner;
    env().spawn(alice, [&] {
      std::unique_ptr<Holdable> held = alice.holdable(flavor, name, exclusive(flavor));
      held->set_lost_handler([&](const LockLost& lost) {
        EXPECT_EQ(lost.lock_name, name);
        EXPECT_EQ(lost.reason, LockLostReason::gone);
        lost_owner = std::string(lost.owner);
      });
      LockHold hold = held->try_acquire_hold({});
      ASSERT_TRUE(hold.owns_hold());
      hold_owner = hold.owner();
      // Deleted behind the holder's back: the watchdog's next renewal finds
      // it gone.
      std::vector<std::string> del = {"DEL", name};
      const KeyLayout layout = key_layout(flavor, name);
      if (!layout.permit_timeouts.empty()) del.push_back(layout.permit_timeouts);
      (void)inspect(del);
      alice.runtime().sleep_for(seconds(30));
    });
    env().run();
    ASSERT_FALSE(hold_owner.empty());
    EXPECT_EQ(lost_owner, hold_owner) << name;
  }
}

INSTANTIATE_TEST_SUITE_P(Environments, HoldableTest, ::testing::ValuesIn(lock_environments()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace turnstile::testing
