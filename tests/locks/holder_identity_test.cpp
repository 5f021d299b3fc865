// The holder's identity beside a lock (key_layout.h, "The holder's
// identity"): written by every acquisition of a flavor with one holder,
// read back by inspect(), re-armed with each renewal and extend(), gone
// with the release; a reader has none. In virtual time: it lapses with the
// lease of a crashed holder, and never outlives a renewed one. Bodies run
// on the fake and against a real redis-server.

#include <unistd.h>

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "lock_environment.h"
#include "turnstile/client.h"
#include "turnstile/fair_lock.h"
#include "turnstile/inspection.h"
#include "turnstile/key_layout.h"
#include "turnstile/lock.h"
#include "turnstile/read_write_lock.h"

namespace turnstile::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

const ClientOptions kNamed{.holder_command = "nightly-job --all", .holder_label = "ticket 42"};

struct Case {
  Flavor flavor;
  std::function<std::unique_ptr<Lock>(Client&, const std::string&)> make;
};

std::vector<Case> single_holder_cases() {
  return {
      {Flavor::reentrant, [](Client& c, const std::string& n) { return std::make_unique<ReentrantLock>(c.lock(n)); }},
      {Flavor::reentrant,
       [](Client& c, const std::string& n) { return std::make_unique<ReentrantLock>(c.fenced_lock(n)); }},
      {Flavor::fair, [](Client& c, const std::string& n) { return std::make_unique<FairLock>(c.fair_lock(n)); }},
      {Flavor::token, [](Client& c, const std::string& n) { return std::make_unique<TokenLock>(c.token_lock(n)); }},
      {Flavor::read_write,
       [](Client& c, const std::string& n) {
         ReadWriteLock halves = c.read_write_lock(n);
         return std::make_unique<WriteLock>(std::move(halves.write()));
       }},
  };
}

class HolderIdentityTest : public LockTest {
 protected:
  std::int64_t pttl(const std::string& key) { return inspect({"PTTL", key}).as_integer(); }

  // Set by one script, the identity expires when the lock does, never
  // later (the lock's read first: time runs on between the two reads).
  void expect_expires_with_lock(const std::string& side, const std::string& name) {
    const std::int64_t lock_ttl = pttl(name);
    const std::int64_t side_ttl = pttl(side);
    EXPECT_GT(side_ttl, 0) << name;
    EXPECT_LE(side_ttl, lock_ttl) << name;
  }

  // The identity inspect() gives the one holder of `name`.
  std::optional<HolderIdentity> identity_of(const std::string& name, Flavor flavor) {
    const Inspection seen = turnstile::inspect(env().inspector(), name, {.flavor = flavor});
    if (seen.holders.size() != 1) return std::nullopt;
    return seen.holders[0].identity;
  }

  void shown_while_held_gone_after_release(const ClientOptions& options);
};

// With fleet-wide wake-ups the scripts take the registry after the
// identity (lua/lib/holder_identity.lua, "The one order"): both are kept.
void HolderIdentityTest::shown_while_held_gone_after_release(const ClientOptions& options) {
  Client& client = env().add_client(options);
  env().spawn(client, [&] {
    int index = 0;
    for (const Case& flavor : single_holder_cases()) {
      const std::string name = "identity:" + std::to_string(index++);
      const std::string side = key_layout(flavor.flavor, name).holder_identity;
      const std::unique_ptr<Lock> lock = flavor.make(client, name);
      lock->lock();
      const std::optional<HolderIdentity> seen = identity_of(name, flavor.flavor);
      ASSERT_TRUE(seen) << name;
      EXPECT_EQ(seen->pid, getpid());
      EXPECT_EQ(seen->command, "nightly-job --all");
      EXPECT_EQ(seen->label, "ticket 42");
      EXPECT_FALSE(seen->host.empty());
      EXPECT_GT(seen->started_at_epoch_ms, 0);
      expect_expires_with_lock(side, name);
      const std::string registry = key_layout(flavor.flavor, name).wake_registry;
      // A holder whose release wakes the registry says so in its identity
      // (lua/lib/holder_identity.lua): nothing is written to the registry
      // when nobody waits.
      if (flavor.flavor == Flavor::reentrant) {
        const bool marked = inspect({"GET", side}).as_string().find("\nwakes=registry") != std::string::npos;
        EXPECT_EQ(marked, options.wake_scope == WakeScope::fleet) << name;
        EXPECT_EQ(inspect({"EXISTS", registry}).as_integer(), 0) << name;
      }
      if (flavor.flavor != Flavor::token) {  // reentrant: the identity stays while a hold does
        lock->lock();
        lock->unlock();
        EXPECT_EQ(inspect({"EXISTS", side}).as_integer(), 1) << name;
      }
      lock->unlock();
      EXPECT_EQ(inspect({"EXISTS", side}).as_integer(), 0) << name;
      if (!registry.empty()) {
        EXPECT_EQ(inspect({"ZCOUNT", registry, "0", "0"}).as_integer(), 0) << name;
      }
    }
  });
  env().run();
}

TEST_P(HolderIdentityTest, ShownWhileHeldGoneAfterRelease) { shown_while_held_gone_after_release(kNamed); }

// Fleet-wide wake-ups are the default (above); the process scope writes
// no registry, the identity alike.
TEST_P(HolderIdentityTest, KeptWithProcessWideWakeUps) {
  ClientOptions process = kNamed;
  process.wake_scope = WakeScope::process;
  shown_while_held_gone_after_release(process);
}

// A reader's identity is the value of its holds' timeout keys (where
// Redisson writes 1): no key of its own, none left by the release.
TEST_P(HolderIdentityTest, AReaderHasItsOwnInItsHoldsTimeoutKeys) {
  Client& client = env().add_client(kNamed);
  env().spawn(client, [&] {
    ReadWriteLock lock = client.read_write_lock("identity:read");
    lock.read().lock();
    lock.read().lock();  // a second hold: its own timeout key, the same identity
    const KeyLayout layout = key_layout(Flavor::read_write, "identity:read");
    const Inspection seen = turnstile::inspect(env().inspector(), "identity:read");
    ASSERT_EQ(seen.holders.size(), 1u);
    ASSERT_TRUE(seen.holders[0].identity);
    EXPECT_EQ(seen.holders[0].identity->owner, seen.holders[0].owner);
    EXPECT_EQ(seen.holders[0].identity->command, kNamed.holder_command);
    EXPECT_EQ(seen.holders[0].identity->label, kNamed.holder_label);
    const std::string timeouts = layout.read_timeouts(seen.holders[0].owner);
    const std::optional<HolderIdentity> second = parse_holder_identity(inspect({"GET", timeouts + ":2"}).as_string());
    ASSERT_TRUE(second);
    EXPECT_EQ(second->owner, seen.holders[0].owner);
    EXPECT_EQ(second->label, kNamed.holder_label);
    EXPECT_EQ(inspect({"EXISTS", layout.holder_identity}).as_integer(), 0);  // the writer's, not a reader's
    lock.read().unlock();
    lock.read().unlock();
    EXPECT_EQ(inspect({"EXISTS", timeouts + ":1", timeouts + ":2"}).as_integer(), 0);
  });
  env().run();
}

// A shorter lease by extend() cuts the identity's too.
TEST_P(HolderIdentityTest, ExtendRearmsIt) {
  Client& client = env().add_client();
  env().spawn(client, [&] {
    ReentrantLock lock = client.lock("identity:extend");
    lock.lock();
    lock.extend(seconds(5));
    const std::string side = key_layout(Flavor::reentrant, "identity:extend").holder_identity;
    EXPECT_LE(pttl(side), 5'000);
    EXPECT_GT(pttl(side), 0);
    lock.unlock();
  });
  env().run();
}

// Renewed by the watchdog with the lock, for as long as it is held; a
// crashed holder's lapses with its lease.
TEST_P(HolderIdentityTest, FollowsTheLeaseInVirtualTime) {
  TURNSTILE_SIM_ONLY();
  Client& holder = env().add_client(ClientOptions{.lease = milliseconds(3'000)});
  Client& watcher = env().add_client();
  int index = 0;
  for (const Case& flavor : single_holder_cases()) {
    const std::string name = "identity:lease:" + std::to_string(index++);
    const std::string side = key_layout(flavor.flavor, name).holder_identity;
    env().spawn(holder, [&] {
      const std::unique_ptr<Lock> lock = flavor.make(holder, name);
      lock->lock();
      for (int i = 0; i < 10; ++i) {  // 10 s: renewed every second
        holder.runtime().sleep_for(seconds(1));
        expect_expires_with_lock(side, name);
      }
      lock->unlock();
      EXPECT_EQ(inspect({"EXISTS", side}).as_integer(), 0) << name;
      lock->lock(seconds(2));  // a fixed lease: never renewed
      holder.runtime().sleep_for(milliseconds(1'500));
      EXPECT_TRUE(identity_of(name, flavor.flavor)) << name;
      holder.runtime().sleep_for(milliseconds(600));
      EXPECT_EQ(inspect({"EXISTS", side}).as_integer(), 0) << name;
      EXPECT_EQ(inspect({"EXISTS", name}).as_integer(), 0) << name;
    });
    env().run();
  }
  // A crashed holder: nothing released, nothing renewed.
  Client& doomed = env().add_client();
  env().spawn(doomed, [&] {
    ReentrantLock lock = doomed.lock("identity:crashed");
    lock.lock();
    env().crash(doomed);
  });
  env().spawn(watcher, [&] {
    watcher.runtime().sleep_for(seconds(1));
    EXPECT_TRUE(identity_of("identity:crashed", Flavor::reentrant));
    watcher.runtime().sleep_for(seconds(30));
    EXPECT_EQ(inspect({"EXISTS", key_layout(Flavor::reentrant, "identity:crashed").holder_identity}).as_integer(), 0);
  });
  env().run();
}

INSTANTIATE_TEST_SUITE_P(Environments, HolderIdentityTest, ::testing::ValuesIn(lock_environments()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace turnstile::testing
