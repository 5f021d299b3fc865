// Every lock script with the arguments the library gives it (issue #34,
// item 6), on the fake Redis and on a real redis-server: short stories of
// each flavor (take, take again, refuse another owner who then waits,
// status, renew, unlock with its latch and a retry of it, hand over, force
// unlock), each told three times: without the optional extras, with the
// holder's identity, and with the identity and the fleet-wide wake
// registry (lib/holder_identity.lua: "The one order"). After every call:
// the same reply (ttls within the tolerance) and the same keyspace.
//
// The read-write lock's scripts have their own such suite
// (differential_read_write_test.cpp); every other embedded script must
// appear here (checked after the last story), so a new script comes with
// its calls.

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "differential.h"
#include "lua_scripts.h"
#include "turnstile/key_layout.h"
#include "turnstile/script.h"
#include "turnstile/semaphore.h"

namespace turnstile::testing {
namespace {

// A fencing counter beyond every clock reading in microseconds (about
// 1.8e15 today; below 2^53, which Lua counts exactly): every token is
// floored by the server's clock (lua/lib/fencing_counter.lua), so only a
// counter ahead of both clocks draws the same tokens on both servers.
constexpr const char* kCounterAheadOfClocks = "9000000000000000";

using Argv = std::vector<std::string>;

constexpr int kMaxReportedMismatches = 10;
const std::string kLease = "30000";
const std::string kLatchMs = "10000";
const std::string kUuidA = "0a0a0a0a-0000-4000-8000-00000000000a";
const std::string kUuidB = "1b1b1b1b-1111-4111-8111-11111111111b";
const std::string kOwnerA = kUuidA + ":1";
const std::string kOwnerB = kUuidB + ":7";
const std::string kTokenA = kUuidA + ":00112233445566778899aabbccddeeff";
const std::string kTokenB = kUuidB + ":ffeeddccbbaa99887766554433221100";

// Which optional trailing keys and arguments a story passes.
enum class Extras { none, identity, identity_and_registry };

std::set<std::string>& scripts_run() {
  static std::set<std::string> names;
  return names;
}
int stories_run = 0;
constexpr int kStories = 4 * 3;  // the TEST_Ps below, each with the three Extras

class DifferentialLockScriptsTest : public DifferentialTest, public ::testing::WithParamInterface<Extras> {
 protected:
  // Runs `script` on both; compares the replies and the keyspaces after.
  Reply call(const Script& script, const Argv& keys, const Argv& args) {
    scripts_run().insert(std::string(script.name));
    const Argv argv = eval_argv(script.source, keys, args);
    const Reply on_real = real(argv);
    const Reply on_fake = fake(argv);
    const std::string where = std::string(script.name) + " keys " + describe(keys) + " args " + describe(args);
    if (!script_replies_match(on_real, on_fake)) {
      mismatch(where + ": real " + on_real.to_string() + ", fake " + on_fake.to_string());
    }
    for (const std::string& difference : keyspace_differences()) mismatch("after " + where + ": " + difference);
    return on_fake;
  }
  void both(const Argv& argv) {
    if (const std::string difference = run_on_both(argv); !difference.empty()) mismatch(difference);
  }
  void mismatch(const std::string& what) {
    if (++mismatches_ <= kMaxReportedMismatches) ADD_FAILURE() << what;
  }
  void TearDown() override {
    EXPECT_EQ(mismatches_, 0);
    ++stories_run;
    DifferentialTest::TearDown();
  }
  // After every story (unless a filter left some out): every embedded
  // script but the read-write lock's (differential_read_write_test.cpp)
  // was called.
  static void TearDownTestSuite() {
    if (stories_run != kStories) return;
    for (const Script* script : embedded_scripts()) {
      const std::string name(script->name);
      if (name.starts_with("read_write_lock_")) continue;
      EXPECT_TRUE(scripts_run().contains(name)) << name << " is never called with real arguments";
    }
  }

  bool identity() const { return GetParam() != Extras::none; }
  bool registry() const { return GetParam() == Extras::identity_and_registry; }
  // The caller's wall clock (the fake's, started at the real time).
  std::string now() { return std::to_string(clock().unix_time_ms()); }

  // The extras of an acquisition: keys after the script's own, arguments
  // after its own (identity value; wake channel, clock, waits, others).
  void add_acquire_extras(const KeyLayout& layout, const std::string& uuid, bool waits, Argv& keys, Argv& args) {
    if (!identity()) return;
    keys.push_back(layout.holder_identity);
    args.push_back("host=differential pid=" + uuid.substr(0, 4));
    if (!registry()) return;
    keys.push_back(layout.wake_registry);
    args.insert(args.end(), {layout.wake_channel(uuid), now(), waits ? "1" : "0", "0"});
  }
  // The extras of a release or force unlock: keys only.
  void add_release_extras(const KeyLayout& layout, Argv& keys) {
    if (identity()) keys.push_back(layout.holder_identity);
    if (registry()) keys.push_back(layout.wake_registry);
  }

 private:
  int mismatches_ = 0;
};

// ---- reentrant and fenced ----------------------------------------------------

TEST_P(DifferentialLockScriptsTest, ReentrantAndFencedLocks) {
  for (const bool fenced : {false, true}) {
    const KeyLayout layout = key_layout(Flavor::reentrant, fenced ? "fenced" : "orders");
    // Far ahead of both clocks (µs): TIME's floor differs between the two,
    // and tokens then count on from the counter on both.
    if (fenced) both({"SET", layout.fencing_counter, kCounterAheadOfClocks});
    const Script& acquire_script = fenced ? scripts::fenced_lock_acquire : scripts::reentrant_lock_acquire;
    // The reentrant lock's direct handoff (lib/wake_registry.lua): its
    // grants after the registry (nobody listens here: no grant is made).
    const bool grants = registry() && !fenced;
    auto acquire = [&](const std::string& owner, const std::string& uuid, bool waits) {
      Argv keys{layout.name};
      if (fenced) keys.push_back(layout.fencing_counter);
      Argv args{kLease, owner, "1"};
      add_acquire_extras(layout, uuid, waits, keys, args);
      if (grants) {
        keys.push_back(layout.fair_grants);
        args.insert(args.end(), {"ab12", "5"});
      }
      return call(acquire_script, keys, args);
    };
    auto unlock = [&](const std::string& owner, const std::string& nonce) {
      Argv keys{layout.name, layout.channel, layout.unlock_latch(nonce)};
      add_release_extras(layout, keys);
      Argv args{"0", kLease, owner, kLatchMs, "PUBLISH"};
      if (grants) {
        keys.push_back(layout.fair_grants);
        args.push_back(now());
      }
      return call(scripts::reentrant_lock_unlock, keys, args);
    };
    auto status = [&](const std::string& owner) { call(scripts::reentrant_lock_status, {layout.name}, {owner}); };
    acquire(kOwnerA, kUuidA, false);  // taken
    acquire(kOwnerA, kUuidA, false);  // again: two holds
    acquire(kOwnerB, kUuidB, true);   // refused; B's process waits (registered)
    status(kOwnerA);
    status(kOwnerB);
    Argv renew_keys{layout.name, layout.name};
    if (identity()) renew_keys.insert(renew_keys.end(), {layout.holder_identity, layout.holder_identity});
    call(scripts::reentrant_lock_renew, renew_keys, {kLease, kOwnerA, kOwnerB});  // {1, 0}
    unlock(kOwnerA, "1");                                                         // one hold left
    unlock(kOwnerA, "1");                                                         // a retry: the latch answers
    unlock(kOwnerB, "2");                                                         // not the owner
    unlock(kOwnerA, "3");                                                         // released: B's process woken
    acquire(kOwnerB, kUuidB, false);
    if (grants) {
      acquire(kOwnerA, kUuidA, true);  // refused: A's offer
      const Argv abandon_keys{layout.name, layout.channel, layout.holder_identity, layout.wake_registry,
                              layout.fair_grants};
      call(scripts::reentrant_lock_abandon, abandon_keys,
           {kOwnerA, "ab12", layout.wake_channel(kUuidA), "1", "0", "PUBLISH", now()});  // 0: nothing granted
    }
    if (registry())
      call(scripts::wake_registry_leave, {layout.wake_registry}, {"", "PUBLISH", layout.wake_channel(kUuidA)});
    Argv force_keys{layout.name, layout.channel};
    add_release_extras(layout, force_keys);
    call(scripts::lock_force_unlock, force_keys, {"0", "hash", "PUBLISH"});  // 1
    call(scripts::lock_force_unlock, force_keys, {"0", "hash", "PUBLISH"});  // 0
    status(kOwnerB);
  }
  // A fenced resource, written with the tokens drawn above.
  const Argv fence{"{res}value", "turnstile_fence:{res}"};
  call(scripts::fenced_write, fence, {"42", "first"});
  call(scripts::fenced_write, fence, {"41", "stale"});
  call(scripts::fenced_write, fence, {"43", "second"});
}

// ---- token --------------------------------------------------------------------

TEST_P(DifferentialLockScriptsTest, TokenLock) {
  const KeyLayout layout = key_layout(Flavor::token, "jobs");
  auto acquire = [&](const std::string& token, const std::string& uuid, bool waits, const std::string& shape) {
    Argv keys{layout.name};
    Argv args{token, kLease, shape};
    add_acquire_extras(layout, uuid, waits, keys, args);
    return call(scripts::token_lock_acquire, keys, args);
  };
  auto release = [&](const std::string& token) {
    Argv keys{layout.name, layout.channel};
    add_release_extras(layout, keys);
    return call(scripts::token_lock_release, keys, {token, "0", "PUBLISH"});
  };
  auto status = [&](const std::string& token) { call(scripts::token_lock_status, {layout.name}, {token}); };
  acquire(kTokenA, kUuidA, false, "1");
  acquire(kTokenA, kUuidA, false, "1");  // a retry of a lost reply: ours, re-armed
  acquire(kTokenB, kUuidB, true, "1");   // refused: B waits
  acquire(kTokenB, kUuidB, true, "0");   // a later try: the shape is not read again
  status(kTokenA);
  status(kTokenB);
  status("");
  Argv renew_keys{layout.name, layout.name};
  if (identity()) renew_keys.insert(renew_keys.end(), {layout.holder_identity, layout.holder_identity});
  call(scripts::token_lock_renew, renew_keys, {kLease, kTokenA, kTokenB});
  release(kTokenB);  // 0: not the holder
  release(kTokenA);  // 1: B's process woken
  release(kTokenA);  // 0: a retry
  acquire(kTokenB, kUuidB, false, "1");
  if (registry())
    call(scripts::wake_registry_leave, {layout.wake_registry}, {"", "PUBLISH", layout.wake_channel(kUuidB)});
  Argv force_keys{layout.name, layout.channel};
  add_release_extras(layout, force_keys);
  call(scripts::lock_force_unlock, force_keys, {"0", "string", "PUBLISH"});
  call(scripts::lock_force_unlock, force_keys, {"0", "string", "PUBLISH"});
}

// ---- fair ---------------------------------------------------------------------

// fair_lock_*.lua take the identity (not the wake registry): the identity
// variants pass it, the others none.
TEST_P(DifferentialLockScriptsTest, FairLock) {
  for (const bool fenced : {false, true}) {
    const KeyLayout layout = key_layout(Flavor::fair, fenced ? "fair-fenced" : "fair");
    if (fenced) both({"SET", layout.fencing_counter, kCounterAheadOfClocks});
    const Argv queue_keys{layout.name, layout.fair_queue, layout.fair_timeouts, layout.channel};
    auto acquire = [&](const std::string& owner, bool waits) {
      Argv keys = queue_keys;
      keys.push_back(layout.fair_waiters);
      if (fenced) keys.push_back(layout.fencing_counter);
      Argv args{kLease, owner, "300000", now(), waits ? "1" : "0", "PUBLISH", "0", "64", "5000", "1"};
      if (identity()) {
        keys.push_back(layout.holder_identity);
        args.push_back("host=differential owner=" + owner.substr(0, 4));
      }
      return call(scripts::fair_lock_acquire, keys, args);
    };
    auto unlock = [&](const std::string& owner, const std::string& nonce) {
      Argv keys = queue_keys;
      keys.insert(keys.end(), {layout.unlock_latch(nonce), layout.fair_waiters});
      if (identity()) keys.push_back(layout.holder_identity);
      return call(scripts::fair_lock_unlock, keys, {"0", kLease, owner, kLatchMs, now(), "PUBLISH", "64"});
    };
    auto status = [&](const std::string& owner) {
      call(scripts::fair_lock_status, {layout.name, layout.fair_queue}, {owner});
    };
    Argv abandon_keys = queue_keys;
    abandon_keys.push_back(layout.fair_waiters);
    acquire(kOwnerA, true);   // taken
    acquire(kOwnerB, true);   // queued
    acquire(kOwnerB, false);  // a single try: refused, keeps its place
    status(kOwnerA);
    status(kOwnerB);
    unlock(kOwnerA, "1");  // released: B told
    unlock(kOwnerA, "1");  // a retry: the latch answers
    acquire(kOwnerB, true);
    acquire(kOwnerA, true);  // queued behind B's hold
    call(scripts::fair_lock_abandon, abandon_keys, {kOwnerA, now(), "PUBLISH", "0", "64", "5000", "300000"});
    call(scripts::fair_lock_abandon, abandon_keys, {kOwnerA, now(), "PUBLISH", "0", "64", "5000", "300000"});
    Argv force_keys = abandon_keys;
    if (identity()) force_keys.push_back(layout.holder_identity);
    call(scripts::fair_lock_force_unlock, force_keys, {"0", now(), "PUBLISH", "64"});
    call(scripts::fair_lock_force_unlock, force_keys, {"0", now(), "PUBLISH", "64"});
  }
}

// ---- semaphores -------------------------------------------------------------------

TEST_P(DifferentialLockScriptsTest, Semaphores) {
  if (GetParam() != Extras::none) GTEST_SKIP() << "semaphores take no identity nor wake registry";
  const KeyLayout counting = key_layout(Flavor::counting_semaphore, "pool");
  const Argv counting_keys{counting.name, counting.channel};
  for (const Argv& args : std::vector<Argv>{{"available"},
                                            {"try_set_permits", "3", "PUBLISH"},
                                            {"try_set_permits", "5", "PUBLISH"},
                                            {"try_acquire", "2"},
                                            {"try_acquire", "2"},
                                            {"add", "1", "PUBLISH"},
                                            {"drain"},
                                            {"set_permits", "5", "PUBLISH"},
                                            {"add", "-7", "PUBLISH"},
                                            {"drain"},
                                            {"reset"},
                                            {"reset"}}) {
    call(scripts::counting_semaphore, counting_keys, args);
  }

  const KeyLayout crash_safe = key_layout(Flavor::semaphore, "crew");
  const Argv keys{crash_safe.name, crash_safe.permit_timeouts, crash_safe.channel};
  const std::string never = std::to_string(PermitSemaphore::kNeverExpiresMs);
  const std::string first(16, '\x01');
  const std::string second = std::string("\x00\xff", 2) + std::string(14, 'b');
  const std::string third(16, '\x7f');
  const std::int64_t start = clock().unix_time_ms();
  auto permit = [&](std::int64_t at, Argv operation) {
    Argv args{std::to_string(start + at), "PUBLISH", "100"};
    args.insert(args.end(), operation.begin(), operation.end());
    return call(scripts::permit_semaphore, keys, args);
  };
  const std::string expiry = std::to_string(start + 30'000);
  permit(0, {"init_permits", "2"});
  permit(0, {"acquire", "1", expiry, never, first});
  permit(0, {"acquire", "1", expiry, never, first});          // a retry: re-armed
  permit(0, {"acquire", "2", expiry, never, second, third});  // refused: {0, 30000}
  permit(0, {"acquire", "1", never, never, second});          // one that never expires
  permit(0, {"status", "10", never});
  permit(0, {"update_lease", first, std::to_string(start + 20'000)});
  call(scripts::permit_semaphore_renew, {crash_safe.permit_timeouts, crash_safe.permit_timeouts},
       {"40000", std::to_string(start), first, third});
  permit(0, {"release", first, first});  // listed twice
  permit(0, {"release", first});
  permit(0, {"release", first});  // gone
  permit(0, {"set_permits", "4"});
  permit(0, {"status", "0", never});
  permit(50'000, {"acquire", "1", std::to_string(start + 80'000), never, third});
  permit(0, {"reset"});
  permit(0, {"reset"});
}

// The crash-safe semaphore with the wake registry and its direct handoff
// (lib/wake_registry.lua): offers left and withdrawn, a release that finds
// the offering process not listening (nobody listens here: no grant is
// made) and wakes on, the give-back of an acquisition that got nothing.
TEST_P(DifferentialLockScriptsTest, PermitSemaphoreDirectHandoff) {
  if (!registry()) GTEST_SKIP() << "the handoff needs the wake registry";
  const KeyLayout layout = key_layout(Flavor::semaphore, "crew-grants");
  const Argv keys{layout.name, layout.permit_timeouts, layout.channel, layout.wake_registry, layout.fair_grants};
  const std::string never = std::to_string(PermitSemaphore::kNeverExpiresMs);
  const std::string first(16, '\x01');
  const std::string second(16, '\x02');
  const std::string first_hex = "01010101010101010101010101010101";
  const std::string second_hex = "02020202020202020202020202020202";
  const std::int64_t start = clock().unix_time_ms();
  auto permit = [&](Argv operation) {
    Argv args{std::to_string(start), "PUBLISH", "100"};
    args.insert(args.end(), operation.begin(), operation.end());
    return call(scripts::permit_semaphore, keys, args);
  };
  const std::string expiry = std::to_string(start + 30'000);
  auto acquire = [&](const std::string& id, const std::string& hex, const std::string& uuid, bool waits) {
    permit({"acquire", "1", expiry, never, id, layout.wake_channel(uuid), std::to_string(start), waits ? "1" : "0", "0",
            "10000", hex, "5", "30000"});
  };
  permit({"init_permits", "1"});
  acquire(first, first_hex, kUuidA, false);   // taken
  acquire(second, second_hex, kUuidB, true);  // refused: B registers and offers
  acquire(second, second_hex, kUuidB, true);  // again: its offer renewed
  both({"HGETALL", layout.fair_grants});
  permit({"release", first});  // B's offer tried: nobody listens, no grant
  permit({"give_back", second, second_hex, layout.wake_channel(kUuidB), "1"});  // 0: nothing granted
  acquire(first, first_hex, kUuidA, true);                                      // taken: no offer left behind
  permit({"status", "10", never});
  permit({"give_back", first, first_hex, layout.wake_channel(kUuidA), "1"});  // 1: a held permit given back
  permit({"status", "10", never});
}

INSTANTIATE_TEST_SUITE_P(Extras, DifferentialLockScriptsTest,
                         ::testing::Values(Extras::none, Extras::identity, Extras::identity_and_registry),
                         [](const ::testing::TestParamInfo<Extras>& info) {
                           switch (info.param) {
                             case Extras::none:
                               return std::string("plain");
                             case Extras::identity:
                               return std::string("identity");
                             case Extras::identity_and_registry:
                               return std::string("identity_and_registry");
                           }
                           return std::string("unknown");
                         });

}  // namespace
}  // namespace turnstile::testing
