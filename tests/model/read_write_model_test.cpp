// A reference model of the read-write lock (Redisson RReadWriteLock layout,
// lua/read_write_lock_*.lua) against its scripts on the fake
// (model/model_harness.h): read and write acquisitions (shared reads,
// exclusive writes, a writer reading through its write hold, the refused
// upgrade), each read hold's own timeout key, unlocks of both halves with
// their latches, the lock's ttl after a read unlock (the longest read hold
// left, never below the write lease in write mode; a read field none of
// whose timeout keys is left dropped), renewals of read and
// write holds, force unlock by mode, the writer's identity, and expiry by
// virtual time. Observed after every operation: the hash, its PTTL, every
// read-hold timeout key's PTTL, the identity and the latches.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "lua_scripts.h"
#include "model_harness.h"
#include "turnstile/key_layout.h"

namespace turnstile::testing {
namespace {

using Argv = std::vector<std::string>;

class ReadWriteLockModel : public ExpiringModel {
 public:
  explicit ReadWriteLockModel(ModelRun& run) : ExpiringModel(run), layout_(key_layout(Flavor::read_write, "ledger")) {
    with_identity_ = run.pick(3) != 0;
  }

  void step() {
    step_with({{2, [&] { read_acquire(); }},
               {2, [&] { write_acquire(); }},
               {2, [&] { read_unlock(); }},
               {1, [&] { write_unlock(); }},
               {1, [&] { renew(); }},
               {1, [&] { force_unlock(); }}},
              3);
  }

 private:
  std::int64_t now() const { return run_.now_ms(); }
  bool held() const { return !fields_.empty(); }
  std::int64_t lock_pttl() const { return held() ? deadline_ms_ - now() : -2; }
  std::string write_field(const std::string& owner) const { return layout_.write_field(owner); }
  std::string timeout_key(const std::string& owner, std::int64_t hold) const {
    return layout_.read_timeouts(owner) + ":" + std::to_string(hold);
  }
  std::int64_t count(const std::string& field) const {
    const auto found = fields_.find(field);
    return found == fields_.end() ? 0 : found->second;
  }
  void set_timed(ModelKey& key, std::string value, std::int64_t ttl_ms) { key.set(std::move(value), now() + ttl_ms); }

  void expire() override {
    if (held() && now() > deadline_ms_) {
      fields_.clear();
      mode_.clear();
    }
    for (auto* keys : {&timeouts_, &latches_}) {
      for (auto& [key, timed] : *keys) timed.expire(now());
    }
    identity_.expire(now());
  }

  void read_acquire() {
    const std::string& owner = run_.one_of(kModelOwners);
    const std::int64_t lease = run_.one_of(kModelLeasesMs);
    const bool believes_write = count(write_field(owner)) > 0 ? run_.pick(4) != 0 : run_.chance(4);
    const Reply reply = run_.eval(
        scripts::read_write_lock_read_acquire, {layout_.name, layout_.read_timeouts(owner)},
        {std::to_string(lease), owner, write_field(owner), believes_write ? "1" : "0", run_.chance(2) ? "0" : "1"});
    Reply expected = Reply::nil();
    if (!held()) {
      mode_ = "read";
      fields_[owner] = 1;
      set_timed(timeouts_[timeout_key(owner, 1)], "1", lease);
      deadline_ms_ = now() + lease;
    } else if (mode_ == "read" || (believes_write && count(write_field(owner)) > 0)) {
      const std::int64_t holds = ++fields_[owner];
      set_timed(timeouts_[timeout_key(owner, holds)], "1", lease);
      deadline_ms_ = now() + std::max(lock_pttl(), lease);
    } else {
      expected = Reply::integer(lock_pttl());
    }
    run_.expect("read acquire reply", expected, reply);
  }

  void write_acquire() {
    const std::string& owner = run_.one_of(kModelOwners);
    const std::int64_t lease = run_.one_of(kModelLeasesMs);
    Argv keys{layout_.name};
    Argv args{std::to_string(lease), write_field(owner), owner, run_.chance(2) ? "0" : "1"};
    if (with_identity_) {
      keys.push_back(layout_.holder_identity);
      args.push_back("identity of " + owner);
    }
    const Reply reply = run_.eval(scripts::read_write_lock_write_acquire, keys, args);
    Reply expected = Reply::nil();
    if (!held()) {
      mode_ = "write";
      fields_[write_field(owner)] = 1;
      deadline_ms_ = now() + lease;
      if (with_identity_) set_timed(identity_, "identity of " + owner, lease);
    } else if (mode_ == "read" && count(owner) > 0) {
      expected = Reply::integer(-3);  // no upgrade
    } else if (mode_ == "write" && count(write_field(owner)) > 0) {
      ++fields_[write_field(owner)];
      const std::int64_t ttl = lock_pttl() + lease;
      deadline_ms_ = now() + ttl;
      identity_.pexpire(now() + ttl);
    } else {
      expected = Reply::integer(lock_pttl());
    }
    run_.expect("write acquire reply", expected, reply);
  }

  // Now and then a retry of the previous request (its latch).
  ModelKey& latch(std::string& key) {
    if (last_nonce_ == 0 || !run_.chance(4)) ++last_nonce_;
    key = layout_.unlock_latch(std::to_string(last_nonce_));
    return latches_[key];
  }

  void read_unlock() {
    const std::string& owner = run_.one_of(kModelOwners);
    std::string latch_key;
    ModelKey& remembered = latch(latch_key);
    const Reply reply =
        run_.eval(scripts::read_write_lock_read_unlock,
                  {layout_.name, layout_.channel, layout_.read_timeouts(owner), layout_.hash_tag, latch_key},
                  {"0", owner, std::to_string(kModelLatchMs), "PUBLISH"});
    run_.expect("read unlock reply", expected_read_unlock(owner, remembered), reply);
  }

  Reply expected_read_unlock(const std::string& owner, ModelKey& remembered) {
    if (remembered.value) return Reply::integer(std::stoll(*remembered.value));
    if (count(owner) == 0) return Reply::nil();
    const std::int64_t holds = --fields_[owner];
    if (holds == 0) fields_.erase(owner);
    timeouts_[timeout_key(owner, holds + 1)].clear();
    const std::int64_t released = holds == 0 ? 1 : 0;
    if (!fields_.empty()) {
      // The longest read hold left (a write field's "timeouts" never exist).
      std::int64_t longest = -3;
      for (auto it = fields_.begin(); it != fields_.end();) {
        std::int64_t own = -3;
        for (std::int64_t k = it->second; k >= 1; --k) {
          const auto found = timeouts_.find(timeout_key(it->first, k));
          own = std::max<std::int64_t>(own, found == timeouts_.end() ? -2 : found->second.pttl_ms(now()));
        }
        longest = std::max(longest, own);
        // A read field none of whose timeout keys is left is dropped.
        const bool stale_read = own == -2 && !it->first.ends_with(":write");
        it = stale_read ? fields_.erase(it) : std::next(it);
      }
      if (mode_ == "write") longest = std::max(longest, lock_pttl());
      if (longest > 0 || mode_ == "write") {
        if (longest > 0) deadline_ms_ = now() + longest;
        set_timed(remembered, std::to_string(released), kModelLatchMs);
        return Reply::integer(released);
      }
    }
    fields_.clear();
    mode_.clear();
    set_timed(remembered, "1", kModelLatchMs);
    return Reply::integer(1);
  }

  void write_unlock() {
    const std::string& owner = run_.one_of(kModelOwners);
    const std::int64_t lease = run_.one_of(kModelLeasesMs);
    std::string latch_key;
    ModelKey& remembered = latch(latch_key);
    Argv keys{layout_.name, layout_.channel, latch_key};
    if (with_identity_) keys.push_back(layout_.holder_identity);
    const Reply reply =
        run_.eval(scripts::read_write_lock_write_unlock, keys,
                  {"1", std::to_string(lease), write_field(owner), std::to_string(kModelLatchMs), "PUBLISH"});
    Reply expected;
    if (remembered.value) {
      expected = Reply::integer(std::stoll(*remembered.value));
    } else if (mode_ != "write" || count(write_field(owner)) == 0) {
      expected = Reply::nil();
    } else if (--fields_[write_field(owner)] > 0) {
      const std::int64_t ttl = std::max(lock_pttl(), lease);
      deadline_ms_ = now() + ttl;
      identity_.pexpire(now() + ttl);
      set_timed(remembered, "0", kModelLatchMs);
      expected = Reply::integer(0);
    } else {
      fields_.erase(write_field(owner));
      identity_.clear();
      if (fields_.empty()) {
        mode_.clear();
      } else {
        mode_ = "read";  // the writer still reads: downgraded
      }
      set_timed(remembered, "1", kModelLatchMs);
      expected = Reply::integer(1);
    }
    run_.expect("write unlock reply", expected, reply);
  }

  void renew() {
    const std::optional<std::string> identity = with_identity_ ? std::optional(layout_.holder_identity) : std::nullopt;
    renew_holds(run_, scripts::read_write_lock_renew, layout_.name, identity, [&](std::int64_t lease) {
      const std::string& owner = run_.one_of(kModelOwners);
      const bool write = run_.chance(2);
      std::string field = write ? write_field(owner) : owner;
      const std::int64_t held_count = count(field);
      if (held_count == 0) return std::pair(std::move(field), false);
      if (!write) {
        for (std::int64_t k = 1; k <= held_count; ++k) timeouts_[timeout_key(owner, k)].pexpire(now() + lease);
      }
      const std::int64_t ttl = std::max(lock_pttl(), lease);
      deadline_ms_ = now() + ttl;
      if (write) identity_.pexpire(now() + ttl);
      return std::pair(std::move(field), true);
    });
  }

  void force_unlock() {
    const std::string mode = run_.one_of(std::vector<std::string>{"read", "write", "any"});
    Argv keys{layout_.name, layout_.channel};
    if (with_identity_) keys.push_back(layout_.holder_identity);
    const Reply reply = run_.eval(scripts::read_write_lock_force_unlock, keys, {mode, "PUBLISH"});
    const bool deleted = held() && (mode == "any" || mode == mode_);
    if (deleted) {
      fields_.clear();
      mode_.clear();
      identity_.clear();
    }
    run_.expect("force unlock reply", Reply::integer(deleted ? 1 : 0), reply);
  }

  void advance() override {
    std::vector<std::int64_t> deadlines;
    if (held()) deadlines.push_back(deadline_ms_);
    for (const auto* keys : {&timeouts_, &latches_}) {
      for (const auto& [key, timed] : *keys) {
        if (timed.value) deadlines.push_back(timed.deadline_ms);
      }
    }
    run_.advance_near(deadlines, kModelMaxStepMs);
  }

  void observe() override {
    std::vector<std::pair<std::string, std::string>> pairs;
    if (held()) pairs.emplace_back("mode", mode_);
    for (const auto& [field, holds] : fields_) pairs.emplace_back(field, std::to_string(holds));
    run_.expect("HGETALL lock", sorted_hash(std::move(pairs)), sorted_hash(run_.command({"HGETALL", layout_.name})));
    run_.expect("PTTL lock", Reply::integer(lock_pttl()), run_.command({"PTTL", layout_.name}));
    for (const auto& [key, timed] : timeouts_) {
      run_.expect("PTTL " + key, timed.pttl(now()), run_.command({"PTTL", key}));
    }
    for (const auto& [key, timed] : latches_) {
      run_.expect("GET " + key, timed.get(), run_.command({"GET", key}));
    }
    if (with_identity_) {
      run_.expect("GET identity", identity_.get(), run_.command({"GET", layout_.holder_identity}));
      run_.expect("PTTL identity", identity_.pttl(now()), run_.command({"PTTL", layout_.holder_identity}));
    }
  }

  KeyLayout layout_;
  bool with_identity_ = false;
  std::string mode_;                            // "read" or "write" while held
  std::map<std::string, std::int64_t> fields_;  // owner (reads) or "<owner>:write" -> holds
  std::int64_t deadline_ms_ = 0;
  std::map<std::string, ModelKey> timeouts_;  // every read hold's timeout key ever made
  std::map<std::string, ModelKey> latches_;
  ModelKey identity_;
  int last_nonce_ = 0;
};

TEST(ReadWriteModelTest, ReadWriteLockScriptsFollowTheModel) { run_model<ReadWriteLockModel>("read-write"); }

}  // namespace
}  // namespace turnstile::testing
