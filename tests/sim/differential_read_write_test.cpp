// The read-write lock's scripts on the fake Redis and on a real
// redis-server: turnstile's (lua/read_write_lock_*.lua) and Redisson's
// (support/redisson_scripts.h) on the same locks, first in hand-written
// cases (sharing, downgrades, the refused upgrade, latches, renewals,
// force unlocks, keys of other types and shapes), then in seeded random
// sequences of calls by two turnstile and two Redisson owners on two names
// (one with a hash tag of its own), with timeout keys and locks expiring
// (deleted) between calls. After every call: the same reply (a ttl within
// the tolerance) and the same keys, types, contents and ttls.
//
// The fake's clock stands still while the real server's runs: leases are
// a minute or more, so nothing expires by time during a test, and ttls are
// compared within kTtlToleranceMs. Expiry is played by deleting the key on
// both. TURNSTILE_RW_SEED=<n> replays another seed; a mismatch prints the
// seed, the sequence and the step.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "differential.h"
#include "fake_redis/keyspace.h"
#include "lua_scripts.h"
#include "redisson_scripts.h"
#include "turnstile/key_layout.h"

namespace turnstile::testing {
namespace {

using Argv = std::vector<std::string>;

constexpr std::uint64_t kDefaultSeed = 20261125;
constexpr int kSequences = 40;         // TURNSTILE_RW_SEQUENCES for a longer run
constexpr int kStepsPerSequence = 60;  // TURNSTILE_RW_STEPS
constexpr int kMaxReportedMismatches = 5;
constexpr const char* kLatchMs = "100000";
const std::vector<std::string> kLeases = {"60000", "90000", "120000", "150000"};

const std::string kTurnstile0 = "0a0a0a0a-0000-4000-8000-00000000000a:1";
const std::string kTurnstile1 = "1b1b1b1b-1111-4111-8111-11111111111b:2";
const std::string kRedisson0 = "2c2c2c2c-2222-4222-8222-22222222222c:41";
const std::string kRedisson1 = "3d3d3d3d-3333-4333-8333-33333333333d:42";

class DifferentialReadWriteTest : public DifferentialTest {
 public:
  // Runs the script on both and compares the replies (integers above a
  // second are ttls: within the tolerance) and then the whole keyspace.
  // Returns the fake's reply.
  Reply step(const std::string& source, const Argv& keys, const Argv& args) {
    const Argv argv = eval_argv(source, keys, args);
    const Reply on_real = real(argv);
    const Reply on_fake = fake(argv);
    ++reply_types[on_real.type()];
    if (!script_replies_match(on_real, on_fake)) {
      mismatch("reply of " + describe(keys) + " " + describe(args) + ": real " + on_real.to_string() + ", fake " +
               on_fake.to_string() + "\n" + source);
    }
    expect_same_keyspace();
    return on_fake;
  }
  // Runs a plain command on both (set-up, played expiry).
  void both(const Argv& argv) {
    if (const std::string difference = run_on_both(argv); !difference.empty()) mismatch(difference);
  }

  // The same keys with the same types, contents and ttls.
  void expect_same_keyspace() {
    for (const std::string& difference : keyspace_differences()) mismatch(difference);
  }

  std::vector<std::string> keys_matching(const std::string& pattern) { return sorted_keys(real({"KEYS", pattern})); }

  // Where a failure is reported from: the seed, the sequence, the step.
  std::string context;
  int mismatches = 0;
  std::map<Reply::Type, int> reply_types;  // of the scripts, to see the sequences reach every kind

 private:
  void mismatch(const std::string& what) {
    if (++mismatches <= kMaxReportedMismatches) ADD_FAILURE() << context << ": " << what;
  }
};

// How turnstile's calls are made: plain (Redisson's shape), or with the
// writer's identity and the wake registry (ClientOptions::wake_scope fleet,
// lua/lib/read_write_wake.lua), as the library makes them.
struct CallsOptions {
  bool wake_registry = false;
};

// The owner id's client uuid (its wake channel's suffix).
std::string uuid_of(const std::string& owner) { return owner.substr(0, owner.rfind(':')); }

// One lock name's calls, as each library makes them.
class Calls {
 public:
  explicit Calls(std::string name, CallsOptions options = {})
      : layout_(key_layout(Flavor::read_write, name)), options_(options) {}
  const std::string& name() const { return layout_.name; }

  // turnstile (src/locks/flavors/read_write_lock.cpp's keys and arguments).
  // The owner believes in its write holds here ("1": a downgrade may read
  // through them), as the library does for the holds it took.
  // With the registry: its key last, and an acquisition's arguments
  // (channel, a fixed clock, waits, no others; a read's publish command).
  std::pair<Argv, Argv> read_acquire(const std::string& owner, const std::string& lease) const {
    if (!options_.wake_registry) {
      return {{name(), layout_.read_timeouts(owner)}, {lease, owner, layout_.write_field(owner), "1"}};
    }
    return {{name(), layout_.read_timeouts(owner), layout_.wake_registry},
            {lease, owner, layout_.write_field(owner), "1", "1", layout_.wake_channel(uuid_of(owner)), "1000", "1", "0",
             "PUBLISH"}};
  }
  std::pair<Argv, Argv> write_acquire(const std::string& owner, const std::string& lease) const {
    if (!options_.wake_registry) return {{name()}, {lease, layout_.write_field(owner), owner}};
    return {{name(), layout_.holder_identity, layout_.wake_registry},
            {lease, layout_.write_field(owner), owner, "1", "identity of " + owner,
             layout_.wake_channel(uuid_of(owner)), "1000", "1", "0"}};
  }
  std::pair<Argv, Argv> read_unlock(const std::string& owner, const std::string& latch) const {
    Argv keys{name(), layout_.channel, layout_.read_timeouts(owner), layout_.hash_tag, layout_.unlock_latch(latch)};
    if (options_.wake_registry) keys.push_back(layout_.wake_registry);
    return {keys, {"0", owner, kLatchMs, "PUBLISH"}};
  }
  std::pair<Argv, Argv> write_unlock(const std::string& owner, const std::string& lease,
                                     const std::string& latch) const {
    Argv keys{name(), layout_.channel, layout_.unlock_latch(latch)};
    if (options_.wake_registry) keys.insert(keys.end(), {layout_.holder_identity, layout_.wake_registry});
    return {keys, {"1", lease, layout_.write_field(owner), kLatchMs, "PUBLISH"}};
  }
  std::pair<Argv, Argv> force_unlock(const std::string& mode) const {
    Argv keys{name(), layout_.channel};
    if (options_.wake_registry) keys.insert(keys.end(), {layout_.holder_identity, layout_.wake_registry});
    return {keys, {mode, "PUBLISH"}};
  }

  // Redisson (support/redisson_scripts.h).
  std::pair<Argv, Argv> redisson_read_acquire(const std::string& owner, const std::string& lease) const {
    return {{name(), timeouts(owner)}, {lease, owner, owner + ":write"}};
  }
  std::pair<Argv, Argv> redisson_write_acquire(const std::string& owner, const std::string& lease) const {
    return {{name()}, {lease, owner + ":write"}};
  }
  std::pair<Argv, Argv> redisson_read_unlock(const std::string& owner, const std::string& latch) const {
    return {{name(), layout_.channel, timeouts(owner), tag(), latch_key(latch)}, {"0", owner, kLatchMs}};
  }
  std::pair<Argv, Argv> redisson_write_unlock(const std::string& owner, const std::string& lease,
                                              const std::string& latch) const {
    return {{name(), layout_.channel, latch_key(latch)}, {"1", lease, owner + ":write", kLatchMs}};
  }
  std::pair<Argv, Argv> redisson_read_renew(const std::vector<std::string>& owners, const std::string& lease) const {
    Argv args{lease};
    args.insert(args.end(), owners.begin(), owners.end());
    return {{name(), tag()}, args};
  }
  std::pair<Argv, Argv> redisson_write_renew(const std::string& owner, const std::string& lease) const {
    return {{name()}, {lease, owner + ":write"}};
  }
  std::pair<Argv, Argv> redisson_force_unlock(bool write) const {
    return {{name(), layout_.channel}, {write ? "write" : "read", write ? "1" : "0"}};
  }

  // Redisson's own spelling of the tag rule, next to turnstile's layout.
  std::string tag() const { return name().find('{') == std::string::npos ? "{" + name() + "}" : name(); }
  std::string timeouts(const std::string& owner) const { return tag() + ":" + owner + ":rwlock_timeout"; }
  std::string latch_key(const std::string& latch) const { return "redisson_unlock_latch:" + tag() + ":" + latch; }

 private:
  KeyLayout layout_;
  CallsOptions options_;
};

std::string turnstile_source(const Script& script) { return std::string(script.source); }

class ReadWriteSteps {
 public:
  ReadWriteSteps(DifferentialReadWriteTest& test, const Calls& lock) : test_(test), lock_(lock) {}

  Reply read(const std::string& owner, const std::string& lease) {
    return run(scripts::read_write_lock_read_acquire, lock_.read_acquire(owner, lease));
  }
  Reply write(const std::string& owner, const std::string& lease) {
    return run(scripts::read_write_lock_write_acquire, lock_.write_acquire(owner, lease));
  }
  Reply read_unlock(const std::string& owner, const std::string& latch) {
    return run(scripts::read_write_lock_read_unlock, lock_.read_unlock(owner, latch));
  }
  Reply write_unlock(const std::string& owner, const std::string& lease, const std::string& latch) {
    return run(scripts::read_write_lock_write_unlock, lock_.write_unlock(owner, lease, latch));
  }
  Reply force(const std::string& mode) { return run(scripts::read_write_lock_force_unlock, lock_.force_unlock(mode)); }
  Reply renew(const std::vector<std::pair<const Calls*, std::string>>& holds, const std::string& lease) {
    Argv keys;
    Argv args{lease};
    for (const auto& [calls, field] : holds) {
      keys.push_back(calls->name());
      args.push_back(field);
    }
    return test_.step(turnstile_source(scripts::read_write_lock_renew), keys, args);
  }

  Reply redisson_read(const std::string& owner, const std::string& lease) {
    return run(redisson::kReadLockAcquire, lock_.redisson_read_acquire(owner, lease));
  }
  Reply redisson_write(const std::string& owner, const std::string& lease) {
    return run(redisson::kWriteLockAcquire, lock_.redisson_write_acquire(owner, lease));
  }
  Reply redisson_read_unlock(const std::string& owner, const std::string& latch) {
    return run(redisson::kReadLockUnlock, lock_.redisson_read_unlock(owner, latch));
  }
  Reply redisson_write_unlock(const std::string& owner, const std::string& lease, const std::string& latch) {
    return run(redisson::kWriteLockUnlock, lock_.redisson_write_unlock(owner, lease, latch));
  }
  Reply redisson_read_renew(const std::vector<std::string>& owners, const std::string& lease) {
    return run(redisson::kReadLockRenew, lock_.redisson_read_renew(owners, lease));
  }
  Reply redisson_write_renew(const std::string& owner, const std::string& lease) {
    return run(redisson::kWriteLockRenew, lock_.redisson_write_renew(owner, lease));
  }
  Reply redisson_force(bool write) { return run(redisson::kReadWriteForceUnlock, lock_.redisson_force_unlock(write)); }

 private:
  Reply run(const Script& script, const std::pair<Argv, Argv>& call) {
    return test_.step(turnstile_source(script), call.first, call.second);
  }
  Reply run(const char* source, const std::pair<Argv, Argv>& call) {
    return test_.step(source, call.first, call.second);
  }

  DifferentialReadWriteTest& test_;
  const Calls& lock_;
};

TEST_F(DifferentialReadWriteTest, SharingDowngradesUpgradesAndLatches) {
  context = "hand-written";
  const Calls lock("rw");
  ReadWriteSteps calls(*this, lock);
  // Readers of both libraries share it; writers wait.
  EXPECT_TRUE(calls.read(kTurnstile0, "60000").is_nil());
  EXPECT_TRUE(calls.redisson_read(kRedisson0, "120000").is_nil());
  EXPECT_TRUE(calls.read(kTurnstile0, "90000").is_nil());
  EXPECT_TRUE(calls.write(kTurnstile1, "60000").is_integer());
  EXPECT_TRUE(calls.redisson_write(kRedisson1, "60000").is_integer());
  EXPECT_EQ(calls.write(kTurnstile0, "60000"), Reply::integer(-3));  // upgrade refused
  // Each side's release reads the other's timeout keys.
  EXPECT_EQ(calls.redisson_read_unlock(kRedisson0, "a"), Reply::integer(0));
  EXPECT_EQ(calls.redisson_read_unlock(kRedisson0, "a"), Reply::integer(0));  // the latch remembers
  EXPECT_TRUE(calls.redisson_read_unlock(kRedisson0, "b").is_nil());
  EXPECT_EQ(calls.read_unlock(kTurnstile0, "c"), Reply::integer(0));
  EXPECT_EQ(calls.read_unlock(kTurnstile0, "c"), Reply::integer(0));
  EXPECT_EQ(calls.read_unlock(kTurnstile0, "d"), Reply::integer(1));
  EXPECT_TRUE(calls.read_unlock(kTurnstile0, "e").is_nil());          // gone: publishes anyway
  EXPECT_TRUE(calls.redisson_read_unlock(kRedisson0, "f").is_nil());  // likewise

  // Redisson's downgrade, a turnstile reader beside it, Redisson's release.
  EXPECT_TRUE(calls.redisson_write(kRedisson0, "120000").is_nil());
  EXPECT_TRUE(calls.redisson_write(kRedisson0, "60000").is_nil());  // additive
  EXPECT_TRUE(calls.redisson_read(kRedisson0, "60000").is_nil());
  EXPECT_TRUE(calls.read(kTurnstile0, "60000").is_integer());
  EXPECT_EQ(calls.redisson_write_unlock(kRedisson0, "90000", "g"), Reply::integer(0));
  EXPECT_EQ(calls.redisson_write_unlock(kRedisson0, "90000", "h"), Reply::integer(1));
  EXPECT_TRUE(calls.read(kTurnstile0, "90000").is_nil());
  EXPECT_EQ(calls.redisson_read_unlock(kRedisson0, "i"), Reply::integer(0));
  EXPECT_EQ(calls.read_unlock(kTurnstile0, "j"), Reply::integer(1));

  // turnstile's downgrade, a Redisson reader after it.
  EXPECT_TRUE(calls.write(kTurnstile1, "150000").is_nil());
  EXPECT_TRUE(calls.write(kTurnstile1, "60000").is_nil());
  EXPECT_TRUE(calls.read(kTurnstile1, "60000").is_nil());
  EXPECT_TRUE(calls.redisson_read(kRedisson1, "60000").is_integer());
  EXPECT_EQ(calls.write_unlock(kTurnstile1, "60000", "k"), Reply::integer(0));
  EXPECT_EQ(calls.write_unlock(kTurnstile1, "60000", "l"), Reply::integer(1));
  EXPECT_TRUE(calls.redisson_read(kRedisson1, "60000").is_nil());
  EXPECT_EQ(calls.redisson_read_unlock(kRedisson1, "m"), Reply::integer(0));
  EXPECT_TRUE(calls.write_unlock(kTurnstile1, "60000", "n").is_nil());  // read mode: not a writer's

  // Renewals: turnstile's batch over both names and a gone hold; Redisson's.
  const Calls braced("rw:{b}");
  ReadWriteSteps other(*this, braced);
  EXPECT_TRUE(other.redisson_write(kRedisson0, "60000").is_nil());
  EXPECT_TRUE(other.redisson_read(kRedisson0, "90000").is_nil());
  EXPECT_TRUE(calls.redisson_read(kRedisson1, "60000").is_nil());
  calls.renew({{&lock, kTurnstile1}, {&braced, kRedisson0 + ":write"}, {&lock, kTurnstile0}, {&braced, kRedisson0}},
              "120000");
  EXPECT_EQ(calls.redisson_read_renew({kRedisson1, kTurnstile1, kTurnstile0}, "60000"), Reply::integer(1));
  EXPECT_EQ(other.redisson_write_renew(kRedisson0, "60000"), Reply::integer(1));
  EXPECT_EQ(other.redisson_write_renew(kRedisson1, "60000"), Reply::integer(0));
  EXPECT_EQ(other.redisson_read_renew({kRedisson1}, "60000"), Reply::integer(0));

  // Force unlocks of each half and of the whole lock.
  EXPECT_EQ(other.redisson_force(false), Reply::integer(0));
  EXPECT_EQ(other.force("read"), Reply::integer(0));
  EXPECT_EQ(other.force("write"), Reply::integer(1));
  EXPECT_EQ(other.force("any"), Reply::integer(0));
  EXPECT_EQ(calls.force("write"), Reply::integer(0));
  EXPECT_EQ(calls.redisson_force(true), Reply::integer(0));
  EXPECT_EQ(calls.redisson_force(false), Reply::integer(1));
  EXPECT_TRUE(calls.write(kTurnstile0, "60000").is_nil());
  EXPECT_EQ(calls.force("any"), Reply::integer(1));
  EXPECT_EQ(mismatches, 0);
}

TEST_F(DifferentialReadWriteTest, KeysThatAreNotReadWriteLocks) {
  context = "not a lock";
  const Calls lock("odd");
  ReadWriteSteps calls(*this, lock);
  const std::vector<Argv> shapes = {
      {"SET", "odd", "text"},
      {"RPUSH", "odd", "a", "b"},
      {"ZADD", "odd", "1", "m"},
      {"HSET", "odd", "field", "value"},
      {"HSET", "odd", kTurnstile0, "1"},  // a reentrant lock's hash
      {"HSET", "odd", "mode", "read", "not an owner", "1"},
      {"HSET", "odd", "mode", "read", kTurnstile0, "0"},
      {"HSET", "odd", "mode", "upgrade", kTurnstile0, "1"},
      {"HSET", "odd", "mode", "write"},
  };
  int latch = 0;
  for (const Argv& shape : shapes) {
    context = "not a lock: " + describe(shape);
    both({"DEL", "odd"});
    both(shape);
    both({"PEXPIRE", "odd", "100000"});
    calls.read(kTurnstile0, "60000");
    calls.write(kTurnstile0, "60000");
    calls.read_unlock(kTurnstile0, std::to_string(++latch));
    calls.write_unlock(kTurnstile0, "60000", std::to_string(++latch));
    calls.renew({{&lock, kTurnstile0}, {&lock, kTurnstile0 + ":write"}}, "60000");
    calls.force("any");
    // Redisson's scripts do not look: whatever Redis does with them.
    both({"DEL", "odd"});
    both(shape);
    calls.redisson_read(kRedisson0, "60000");
    calls.redisson_write(kRedisson0, "60000");
    calls.redisson_read_unlock(kRedisson0, std::to_string(++latch));
    calls.redisson_write_unlock(kRedisson0, "60000", std::to_string(++latch));
    calls.redisson_read_renew({kRedisson0}, "60000");
    calls.redisson_write_renew(kRedisson0, "60000");
    calls.redisson_force(false);
    calls.redisson_force(true);
  }
  EXPECT_EQ(mismatches, 0);
}

// ---- seeded random sequences ----------------------------------------------------

std::uint64_t read_write_seed() { return seed_from_environment("TURNSTILE_RW_SEED", kDefaultSeed); }

// The seeded sequences of turnstile's calls made with `options`.
void run_seeded_sequences(DifferentialReadWriteTest& test, CallsOptions options);

TEST_F(DifferentialReadWriteTest, SeededRandomSequences) { run_seeded_sequences(*this, {}); }

// The same with the writer's identity and the wake registry: the
// registrations, the holder records and their forgetting alike.
TEST_F(DifferentialReadWriteTest, SeededRandomSequencesWithTheWakeRegistry) {
  run_seeded_sequences(*this, {.wake_registry = true});
}

void run_seeded_sequences(DifferentialReadWriteTest& test, CallsOptions options) {
  const std::uint64_t seed = read_write_seed();
  std::mt19937_64 random(seed);
  const auto pick = [&](std::size_t n) { return static_cast<std::size_t>(random() % n); };
  const Calls plain("rw", options);
  const Calls braced("rw:{b}", options);
  const std::vector<const Calls*> locks = {&plain, &braced};
  const std::vector<std::string> turnstile_owners = {kTurnstile0, kTurnstile1};
  const std::vector<std::string> redisson_owners = {kRedisson0, kRedisson1};
  const std::vector<Argv> odd_values = {
      {"SET", "", "text"}, {"RPUSH", "", "a"}, {"HSET", "", "field", "1"}, {"HSET", "", "mode", "read", "x", "1"}};
  std::vector<std::string> ran;  // the sequence so far, for a failure's context
  int latch = 0;
  const int sequences = count_from_environment("TURNSTILE_RW_SEQUENCES", kSequences);
  const int steps = count_from_environment("TURNSTILE_RW_STEPS", kStepsPerSequence);
  for (int sequence = 0; sequence < sequences; ++sequence) {
    test.both({"FLUSHALL"});
    ran.clear();
    for (int step_index = 0; step_index < steps; ++step_index) {
      const Calls& lock = *locks[pick(locks.size())];
      ReadWriteSteps calls(test, lock);
      const std::string& mine = turnstile_owners[pick(2)];
      const std::string& theirs = redisson_owners[pick(2)];
      const std::string& lease = kLeases[pick(kLeases.size())];
      // Now and then an unlock repeats the previous one's latch.
      const std::string nonce = std::to_string(pick(6) == 0 ? latch : ++latch);
      const std::size_t choice = pick(18);
      const std::vector<std::string> operations = {
          "read",    "write",       "read_unlock",   "write_unlock",   "renew",        "force",
          "r_read",  "r_write",     "r_read_unlock", "r_write_unlock", "r_read_renew", "r_write_renew",
          "r_force", "expire_hold", "expire_lock",   "read",           "r_read",       "odd_value"};
      const bool redisson_call = operations[choice].starts_with("r_");
      ran.push_back(operations[choice] + " " + lock.name() + " " + (redisson_call ? theirs : mine));
      test.context = "seed " + std::to_string(seed) + ", sequence " + std::to_string(sequence) + ", step " +
                     std::to_string(step_index) + ":\n  " + describe(ran);
      switch (choice) {
        case 0:
        case 15:
          calls.read(mine, lease);
          break;
        case 1:
          calls.write(mine, lease);
          break;
        case 2:
          calls.read_unlock(mine, nonce);
          break;
        case 3:
          calls.write_unlock(mine, lease, nonce);
          break;
        case 4: {
          std::vector<std::pair<const Calls*, std::string>> holds;
          const std::size_t count = 1 + pick(3);
          for (std::size_t i = 0; i < count; ++i) {
            const std::string& owner = turnstile_owners[pick(2)];
            holds.emplace_back(locks[pick(2)], pick(2) == 0 ? owner : owner + ":write");
          }
          calls.renew(holds, lease);
          break;
        }
        case 5:
          calls.force(std::vector<std::string>{"read", "write", "any"}[pick(3)]);
          break;
        case 6:
        case 16:
          calls.redisson_read(theirs, lease);
          break;
        case 7:
          calls.redisson_write(theirs, lease);
          break;
        case 8:
          calls.redisson_read_unlock(theirs, nonce);
          break;
        case 9:
          calls.redisson_write_unlock(theirs, lease, nonce);
          break;
        case 10:
          calls.redisson_read_renew(pick(2) == 0 ? redisson_owners : std::vector<std::string>{theirs}, lease);
          break;
        case 11:
          calls.redisson_write_renew(theirs, lease);
          break;
        case 12:
          calls.redisson_force(pick(2) == 0);
          break;
        case 13: {  // one read hold's lease runs out
          const std::vector<std::string> holds = test.keys_matching("*rwlock_timeout*");
          if (!holds.empty()) test.both({"DEL", holds[pick(holds.size())]});
          break;
        }
        case 14:  // the lock's ttl runs out
          test.both({"DEL", lock.name()});
          break;
        default: {  // rarely: the name holds something else
          if (pick(3) != 0) break;
          Argv odd = odd_values[pick(odd_values.size())];
          odd[1] = lock.name();
          test.both({"DEL", lock.name()});
          test.both(odd);
          break;
        }
      }
      test.expect_same_keyspace();
    }
  }
  EXPECT_EQ(test.mismatches, 0) << "seed " << seed;
  std::string coverage;
  for (const auto& [type, count] : test.reply_types)
    coverage += std::string(to_string(type)) + "=" + std::to_string(count) + " ";
  ::testing::Test::RecordProperty("reply_types", coverage);
  // Taken (nil), refused or released (integers), batches (arrays), keys of
  // another type (errors): each many times.
  for (const Reply::Type type : {Reply::Type::nil, Reply::Type::integer, Reply::Type::array, Reply::Type::error}) {
    EXPECT_GE(test.reply_types[type], sequences) << "too few " << to_string(type) << " replies: " << coverage;
  }
}

}  // namespace
}  // namespace turnstile::testing
