// Reference models of the single-holder locks against their scripts on the
// fake (model/model_harness.h): the reentrant lock (Redisson RLock layout),
// the fenced lock (the same, with a fencing token per acquisition) and the
// token lock (SET NX PX). Each model is the scripts' contract as their
// headers state it: acquire (new, reentrant, refused with the holder's
// pttl), watchdog renewal, unlock with its latch (a retry of a request
// answers the first result), force unlock, the holder's identity side key
// and expiry by virtual time. Observed after every operation: the lock's
// contents and PTTL, the identity's value and PTTL, every latch, the
// fencing counter.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "lua_scripts.h"
#include "model_harness.h"
#include "turnstile/key_layout.h"

namespace turnstile::testing {
namespace {

using Argv = std::vector<std::string>;

const std::vector<std::string> kTokens = {
    "0c9a1e0e-7d52-4e44-9a8e-0123456789ab:00112233445566778899aabbccddeeff",
    "0c9a1e0e-7d52-4e44-9a8e-0123456789ab:ffeeddccbbaa99887766554433221100",
    "5b1f0a2c-1111-4e44-9a8e-fedcba987654:0123456789abcdef0123456789abcdef",
};

// What both lock models share: the holder's identity and the latches.
struct SideKeys {
  bool with_identity = false;
  ModelKey identity;
  std::map<std::string, ModelKey> latches;  // by key

  std::optional<std::string> identity_key(const KeyLayout& layout) const {
    return with_identity ? std::optional(layout.holder_identity) : std::nullopt;
  }
  void expire(std::int64_t now_ms) {
    identity.expire(now_ms);
    for (auto& [key, latch] : latches) latch.expire(now_ms);
  }
  void observe(ModelRun& run, const KeyLayout& layout) {
    if (with_identity) {
      run.expect("GET identity", identity.get(), run.command({"GET", layout.holder_identity}));
      run.expect("PTTL identity", identity.pttl(run.now_ms()), run.command({"PTTL", layout.holder_identity}));
    }
    for (const auto& [key, latch] : latches) run.expect("GET " + key, latch.get(), run.command({"GET", key}));
  }
};

// ---- reentrant and fenced ----------------------------------------------------

struct Fencing {
  bool fenced = false;
};

class HashLockModel : public ExpiringModel {
 public:
  HashLockModel(ModelRun& run, Fencing fencing)
      : ExpiringModel(run), fenced_(fencing.fenced), layout_(key_layout(Flavor::reentrant, "orders")) {
    side_.with_identity = run.pick(3) != 0;
  }

  void step() {
    step_with({{3, [&] { acquire(); }}, {1, [&] { renew(); }}, {2, [&] { unlock(); }}, {1, [&] { force_unlock(); }}},
              3);
  }

 private:
  void expire() override {
    const std::int64_t now = run_.now_ms();
    if (!holds_.empty() && !lock_.alive(now)) {
      holds_.clear();
      lock_.deadline_ms.reset();
    }
    side_.expire(now);
  }

  void acquire() {
    const std::string& owner = run_.one_of(kModelOwners);
    const std::int64_t lease = run_.one_of(kModelLeasesMs);
    Argv keys{layout_.name};
    if (fenced_) keys.push_back(layout_.fencing_counter);
    Argv args{std::to_string(lease), owner, run_.chance(2) ? "0" : "1"};
    if (side_.with_identity) {
      keys.push_back(layout_.holder_identity);
      args.push_back("identity of " + owner);
    }
    const Reply reply = run_.eval(fenced_ ? scripts::fenced_lock_acquire : scripts::reentrant_lock_acquire, keys, args);
    const std::int64_t now = run_.now_ms();
    Reply expected;
    if (holds_.empty() || holds_.contains(owner)) {
      const std::int64_t count = ++holds_[owner];
      lock_.deadline_ms = now + lease;
      if (count == 1) {
        if (side_.with_identity) side_.identity.set("identity of " + owner, now + lease);
      } else {
        side_.identity.pexpire(now + lease);
      }
      if (fenced_) {
        // Floored by the clock every time (lua/lib/fencing_counter.lua).
        counter_ = std::max(counter_.value_or(0), run_.now_us()) + 1;
        expected = integers({1, *counter_});
      }
    } else {
      const std::int64_t pttl = *lock_.deadline_ms - now;
      expected = fenced_ ? integers({0, pttl}) : Reply::integer(pttl);
    }
    run_.expect("acquire reply", expected, reply);
  }

  void renew() {
    renew_holds(run_, scripts::reentrant_lock_renew, layout_.name, side_.identity_key(layout_),
                [&](std::int64_t lease) {
                  const std::string& owner = run_.one_of(kModelOwners);
                  const bool held = holds_.contains(owner);
                  if (held) {
                    lock_.deadline_ms = run_.now_ms() + lease;
                    side_.identity.pexpire(run_.now_ms() + lease);
                  }
                  return std::pair(owner, held);
                });
  }

  void unlock() {
    const std::string& owner = run_.one_of(kModelOwners);
    const std::int64_t lease = run_.one_of(kModelLeasesMs);
    // Now and then a retry of the previous request (its latch).
    if (last_nonce_ == 0 || !run_.chance(4)) ++last_nonce_;
    const std::string latch_key = layout_.unlock_latch(std::to_string(last_nonce_));
    Argv keys{layout_.name, layout_.channel, latch_key};
    if (side_.with_identity) keys.push_back(layout_.holder_identity);
    const Reply reply = run_.eval(scripts::reentrant_lock_unlock, keys,
                                  {"0", std::to_string(lease), owner, std::to_string(kModelLatchMs), "PUBLISH"});
    const std::int64_t now = run_.now_ms();
    ModelKey& latch = side_.latches[latch_key];
    Reply expected;
    if (latch.value) {
      expected = Reply::integer(std::stoll(*latch.value));
    } else if (!holds_.contains(owner)) {
      expected = Reply::nil();
    } else if (--holds_[owner] > 0) {
      lock_.deadline_ms = now + lease;
      side_.identity.pexpire(now + lease);
      latch.set("0", now + kModelLatchMs);
      expected = Reply::integer(0);
    } else {
      holds_.clear();
      lock_.deadline_ms.reset();
      side_.identity.clear();
      latch.set("1", now + kModelLatchMs);
      expected = Reply::integer(1);
    }
    run_.expect("unlock reply", expected, reply);
  }

  void force_unlock() {
    Argv keys{layout_.name, layout_.channel};
    if (side_.with_identity) keys.push_back(layout_.holder_identity);
    const Reply reply = run_.eval(scripts::lock_force_unlock, keys, {"0", "hash", "PUBLISH"});
    const bool held = !holds_.empty();
    holds_.clear();
    lock_.deadline_ms.reset();
    if (held) side_.identity.clear();
    run_.expect("force unlock reply", Reply::integer(held ? 1 : 0), reply);
  }

  void advance() override {
    std::vector<std::int64_t> deadlines;
    if (lock_.deadline_ms) deadlines.push_back(*lock_.deadline_ms);
    for (const auto& [key, latch] : side_.latches) {
      if (latch.value) deadlines.push_back(latch.deadline_ms);
    }
    run_.advance_near(deadlines, kModelMaxStepMs);
  }

  void observe() override {
    std::vector<std::pair<std::string, std::string>> pairs;
    for (const auto& [owner, count] : holds_) pairs.emplace_back(owner, std::to_string(count));
    run_.expect("HGETALL lock", sorted_hash(std::move(pairs)), sorted_hash(run_.command({"HGETALL", layout_.name})));
    run_.expect("PTTL lock", holds_.empty() ? Reply::integer(-2) : lock_.pttl(run_.now_ms()),
                run_.command({"PTTL", layout_.name}));
    side_.observe(run_, layout_);
    if (fenced_) {
      run_.expect("GET counter", counter_ ? Reply::bulk(std::to_string(*counter_)) : Reply::nil(),
                  run_.command({"GET", layout_.fencing_counter}));
    }
  }

  bool fenced_;
  KeyLayout layout_;
  std::map<std::string, std::int64_t> holds_;
  ModelExpiry lock_;
  SideKeys side_;
  std::optional<std::int64_t> counter_;
  int last_nonce_ = 0;
};

TEST(LockModelTest, ReentrantLockScriptsFollowTheModel) { run_model<HashLockModel>("reentrant", Fencing{}); }

TEST(LockModelTest, FencedLockScriptsFollowTheModel) { run_model<HashLockModel>("fenced", Fencing{.fenced = true}); }

// ---- token ------------------------------------------------------------------

class TokenLockModel : public ExpiringModel {
 public:
  explicit TokenLockModel(ModelRun& run) : ExpiringModel(run), layout_(key_layout(Flavor::token, "jobs")) {
    side_.with_identity = run.pick(3) != 0;
  }

  void step() {
    step_with({{3, [&] { acquire(); }}, {1, [&] { renew(); }}, {2, [&] { release(); }}, {1, [&] { force_unlock(); }}},
              2);
  }

 private:
  void expire() override {
    lock_.expire(run_.now_ms());
    side_.expire(run_.now_ms());
  }

  void acquire() {
    const std::string& token = run_.one_of(kTokens);
    const std::int64_t lease = run_.one_of(kModelLeasesMs);
    Argv keys{layout_.name};
    Argv args{token, std::to_string(lease), run_.chance(2) ? "0" : "1"};
    if (side_.with_identity) {
      keys.push_back(layout_.holder_identity);
      args.push_back("identity of " + token);
    }
    const Reply reply = run_.eval(scripts::token_lock_acquire, keys, args);
    const std::int64_t now = run_.now_ms();
    Reply expected = Reply::nil();
    if (!lock_.value || token_of(*lock_.value) == token) {
      // New, or a retry of a call whose reply was lost: ours (its waiters
      // mark kept), re-armed.
      lock_.set(lock_.value.value_or(token), now + lease);
      if (side_.with_identity) side_.identity.set("identity of " + token, now + lease);
    } else {
      expected = Reply::integer(lock_.deadline_ms - now);
      // Somebody may wait now: the value is marked, its expiry kept.
      if (!lock_.value->ends_with(kTokenWaitersMark)) lock_.value = *lock_.value + std::string(kTokenWaitersMark);
    }
    run_.expect("acquire reply", expected, reply);
  }

  void renew() {
    renew_holds(run_, scripts::token_lock_renew, layout_.name, side_.identity_key(layout_), [&](std::int64_t lease) {
      const std::string& token = run_.one_of(kTokens);
      const bool held = lock_.value && token_of(*lock_.value) == token;
      if (held) {
        lock_.pexpire(run_.now_ms() + lease);
        side_.identity.pexpire(run_.now_ms() + lease);
      }
      return std::pair(token, held);
    });
  }

  void release() {
    const std::string& token = run_.one_of(kTokens);
    Argv keys{layout_.name, layout_.channel};
    if (side_.with_identity) keys.push_back(layout_.holder_identity);
    const Reply reply = run_.eval(scripts::token_lock_release, keys, {token, "0", "PUBLISH"});
    const bool held = lock_.value && token_of(*lock_.value) == token;
    if (held) {
      lock_.clear();
      side_.identity.clear();
    }
    run_.expect("release reply", Reply::integer(held ? 1 : 0), reply);
  }

  void force_unlock() {
    Argv keys{layout_.name, layout_.channel};
    if (side_.with_identity) keys.push_back(layout_.holder_identity);
    const Reply reply = run_.eval(scripts::lock_force_unlock, keys, {"0", "string", "PUBLISH"});
    const bool held = lock_.value.has_value();
    if (held) {
      lock_.clear();
      side_.identity.clear();
    }
    run_.expect("force unlock reply", Reply::integer(held ? 1 : 0), reply);
  }

  void advance() override {
    std::vector<std::int64_t> deadlines;
    if (lock_.value) deadlines.push_back(lock_.deadline_ms);
    run_.advance_near(deadlines, kModelMaxStepMs);
  }

  void observe() override {
    run_.expect("GET lock", lock_.get(), run_.command({"GET", layout_.name}));
    run_.expect("PTTL lock", lock_.pttl(run_.now_ms()), run_.command({"PTTL", layout_.name}));
    side_.observe(run_, layout_);
  }

  KeyLayout layout_;
  ModelKey lock_;
  SideKeys side_;
};

TEST(LockModelTest, TokenLockScriptsFollowTheModel) { run_model<TokenLockModel>("token"); }

}  // namespace
}  // namespace turnstile::testing
