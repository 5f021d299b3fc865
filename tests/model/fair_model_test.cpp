// A reference model of the fair lock (Redisson RFairLock layout,
// lua/fair_lock_*.lua and lua/lib/fair_queue.lua) against its scripts on
// the fake (model/model_harness.h). The model keeps what the scripts'
// headers and fair_queue.lua's contract describe, in its own terms:
//   - the lock hash (reentrant holds, a lease), the holder's identity, the
//     unlock latches and, fenced, the token counter;
//   - the FIFO queue (a list), each entry's chained deadline (Redisson's
//     zset: a joiner chains after the tail; a leaver moves those behind
//     down by what it added, never to within the margin of now) and each
//     turnstile waiter's liveness deadline (now + its liveness timeout at
//     each retry: the waiter timeout in the first two places or while the
//     chain is kept, else the far timeout; the zset expires no earlier
//     than its latest deadline), told back in the reply;
//   - dead heads evicted, at most N per call, at their exact instant (a
//     deadline equal to now is dead), by every writing call;
//   - a far waiter that reaches the first two places after a call changed
//     the front told "0" and brought down to a waiter timeout from now;
//   - a queue of live turnstile waiters only keeping each waiter's own
//     deadline (nobody moved), and the chain kept as Redisson's once a
//     dead entry is queued;
//   - who is woken: the head's own channel, only when the lock is free.
// Operations: a waiting acquire (join, keep one's place, take the lock at
// the head, reentry), a single try, the watchdog's renewal, unlock with its
// latch, give up (abandon), force unlock and the status read. Observed
// after every operation: the hash and its PTTL, the list, both zsets with
// their scores, the liveness zset's PTTL, the identity, the latches, the
// counter, and every message published to a waiter's channel.
//
// kFairMutants is the fair scripts' mutation list: each mutant must be
// killed by the model (FairModelTest.EveryMutantOfTheFairScriptsIsKilled
// prints the seed that kills each).

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
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
using Messages = std::vector<std::pair<std::string, std::string>>;

// Four waiters of two processes, so a queue of three forms behind a holder.
const std::vector<std::string> kFairOwners = {
    "0c9a1e0e-7d52-4e44-9a8e-0123456789ab:1",
    "0c9a1e0e-7d52-4e44-9a8e-0123456789ab:2",
    "5b1f0a2c-1111-4e44-9a8e-fedcba987654:7",
    "5b1f0a2c-1111-4e44-9a8e-fedcba987654:8",
};
// Per run: the waiter timeout and the chain wait (FairLockOptions's
// waiter_timeout and redisson_wait), short enough to lapse in a sequence.
const std::vector<std::int64_t> kWaiterTimeoutsMs = {100, 400, 1500};
const std::vector<std::int64_t> kChainWaitsMs = {30, 300, 3000};
// The most dead heads one call evicts: 1 and 2 show the bound, 64 is the
// library's.
const std::vector<std::int64_t> kEvictionLimits = {1, 2, 64};
constexpr std::string_view kMessage = "0";
// lib/fair_queue.lua's NEAR_MESSAGE: a far waiter moved up.
constexpr std::string_view kNearMessage = "turnstile:near";

struct FairOptions {
  bool fenced = false;
};

class FairLockModel : public ExpiringModel {
 public:
  FairLockModel(ModelRun& run, FairOptions options)
      : ExpiringModel(run),
        fenced_(options.fenced),
        layout_(key_layout(Flavor::fair, "orders")),
        timeout_ms_(run.one_of(kWaiterTimeoutsMs)),
        wait_ms_(run.one_of(kChainWaitsMs)) {
    std::vector<std::string> channels;
    for (const std::string& owner : kFairOwners) channels.push_back(layout_.waiter_channel(owner));
    run.listen(channels);
    run.log("waiter timeout " + std::to_string(timeout_ms_) + " ms, chain wait " + std::to_string(wait_ms_) + " ms");
  }

  void step() {
    step_with({{4, [&] { acquire({.waits = true}); }},
               {1, [&] { acquire({.waits = false}); }},
               {1, [&] { renew(); }},
               {2, [&] { unlock(); }},
               {1, [&] { abandon(); }},
               {1, [&] { force_unlock(); }},
               {1, [&] { status(); }}},
              4);
  }

 private:
  struct AcquireMode {
    bool waits = false;
  };

  std::int64_t now() const { return run_.now_ms(); }
  bool held() const { return !holds_.empty(); }
  std::int64_t lock_pttl() const { return held() ? *lock_.deadline_ms - now() : -2; }
  std::int64_t limit() { return run_.one_of(kEvictionLimits); }
  std::optional<std::size_t> position(const std::string& owner) const {
    const auto found = std::find(queue_.begin(), queue_.end(), owner);
    if (found == queue_.end()) return std::nullopt;
    return static_cast<std::size_t>(found - queue_.begin());
  }
  std::optional<std::int64_t> chained(const std::string& owner) const {
    const auto found = chained_.find(owner);
    if (found == chained_.end()) return std::nullopt;
    return found->second;
  }
  void wake_head() { expected_messages_.emplace_back(layout_.waiter_channel(queue_.front()), kMessage); }
  // lib/fair_queue.lua's far_timeout.
  std::int64_t far_timeout() const { return std::min<std::int64_t>(8 * timeout_ms_, wait_ms_ + timeout_ms_); }

  // After a call changed the front: a far waiter (liveness beyond a waiter
  // timeout from now) in the first two places, other than `self`, is told
  // and brought down.
  void promote_near(const std::string* self) {
    for (std::size_t i = 0; i < std::min<std::size_t>(2, queue_.size()); ++i) {
      const std::string& member = queue_[i];
      const auto live = alive_.find(member);
      if ((self != nullptr && member == *self) || live == alive_.end() || live->second <= now() + timeout_ms_) continue;
      expected_messages_.emplace_back(layout_.waiter_channel(member), kNearMessage);
      live->second = now() + timeout_ms_;
    }
  }

  void expire() override {
    if (held() && !lock_.alive(now())) {
      holds_.clear();
      lock_.deadline_ms.reset();
    }
    if (!alive_.empty() && !alive_expiry_.alive(now())) alive_.clear();
    identity_.expire(now());
    for (auto& [key, latch] : latches_) latch.expire(now());
  }

  // A queued entry is dead once its liveness deadline (a turnstile
  // waiter's) or else its chained deadline is now or past; dead heads
  // leave, at most `limit` of them. With `promote`, a call that evicted
  // some promotes the new front (promote_near, `self` excepted).
  std::int64_t evict_dead_heads(std::int64_t limit, bool promote = false, const std::string* self = nullptr) {
    std::int64_t evicted = 0;
    while (evicted < limit && !queue_.empty()) {
      const std::string head = queue_.front();
      std::optional<std::int64_t> deadline = chained(head);
      if (const auto live = alive_.find(head); live != alive_.end()) deadline = live->second;
      if (deadline && *deadline > now()) break;
      queue_.erase(queue_.begin());
      chained_.erase(head);
      alive_.erase(head);
      ++evicted;
    }
    if (promote && evicted > 0) promote_near(self);
    return evicted;
  }

  // Every queued entry a live turnstile waiter (as many liveness deadlines
  // still ahead as entries).
  bool turnstile_only() const {
    const auto ahead =
        std::count_if(alive_.begin(), alive_.end(), [&](const auto& entry) { return entry.second > now(); });
    return static_cast<std::int64_t>(queue_.size()) <= ahead;
  }

  // Moves the chained deadlines of the entries from list index `from` by
  // `delta`; a move down never brings a turnstile waiter among them within
  // `margin` of now (nullopt: no such bound).
  void shift_from(std::size_t from, std::int64_t delta, std::optional<std::int64_t> margin) {
    if (delta < 0 && margin) {
      for (std::size_t i = from; i < queue_.size(); ++i) {
        const auto score = chained(queue_[i]);
        if (score && alive_.contains(queue_[i]))
          delta = -std::min(-delta, std::max<std::int64_t>(*score - now() - *margin, 0));
      }
    }
    for (std::size_t i = from; i < queue_.size(); ++i) {
      if (const auto found = chained_.find(queue_[i]); found != chained_.end()) found->second += delta;
    }
  }

  // How far a leaver that added `wait` to the chain moves the entry now at
  // list index `index` (and those behind it): down by `wait`, but not to
  // within `margin` of now.
  std::int64_t leave_shift(std::size_t index, std::int64_t wait, std::int64_t margin) const {
    if (index >= queue_.size()) return 0;
    const auto score = chained(queue_[index]);
    if (!score) return 0;
    return -std::min(std::max<std::int64_t>(wait, 0), std::max<std::int64_t>(*score - now() - margin, 0));
  }

  // The chained deadline a waiter behind the first `ahead` entries needs:
  // its predecessor's (at least `floor`) plus the largest wait ahead (a
  // dead or Redisson entry's: its distance to its predecessor; at least
  // the chain wait) plus the margin.
  std::int64_t needed_deadline(std::size_t ahead, std::int64_t floor, std::int64_t margin) const {
    std::int64_t largest = wait_ms_;
    std::optional<std::int64_t> previous;
    for (std::size_t i = 0; i < ahead; ++i) {
      const auto score = chained(queue_[i]);
      if (!score) continue;
      if (previous && !alive_.contains(queue_[i])) largest = std::max(largest, *score - *previous);
      previous = score;
    }
    return std::max(floor, previous.value_or(floor)) + largest + margin;
  }

  // A turnstile waiter's own chained deadline: the lock's expected release
  // plus the chain wait and the margin.
  std::int64_t own_deadline(std::int64_t pttl, std::int64_t margin) const {
    return now() + std::max<std::int64_t>(pttl, 0) + wait_ms_ + margin;
  }

  void mark_alive(const std::string& owner, std::int64_t liveness_ms) {
    alive_[owner] = now() + liveness_ms;
    std::int64_t latest = 0;
    for (const auto& [member, score] : alive_) latest = std::max(latest, score);
    std::int64_t lifetime = latest - now();
    for (const auto& [member, score] : chained_) lifetime = std::max(lifetime, score - now());
    alive_expiry_.deadline_ms = now() + std::max<std::int64_t>(lifetime, 1);
  }

  void acquire(AcquireMode mode) {
    const std::string& owner = run_.one_of(kFairOwners);
    const std::int64_t lease = run_.one_of(kModelLeasesMs);
    const std::int64_t evictions = limit();
    Argv keys{layout_.name, layout_.fair_queue, layout_.fair_timeouts, layout_.channel, layout_.fair_waiters};
    if (fenced_) keys.push_back(layout_.fencing_counter);
    keys.push_back(layout_.holder_identity);
    const Reply reply = run_.eval(scripts::fair_lock_acquire, keys,
                                  {std::to_string(lease), owner, std::to_string(timeout_ms_), std::to_string(now()),
                                   mode.waits ? "1" : "0", "PUBLISH", std::string(kMessage), std::to_string(evictions),
                                   std::to_string(wait_ms_), run_.chance(2) ? "0" : "1", "identity of " + owner});
    run_.expect("acquire reply", expected_acquire(owner, lease, evictions, mode), reply);
  }

  Reply expected_acquire(const std::string& owner, std::int64_t lease, std::int64_t evictions, AcquireMode mode) {
    const std::int64_t evicted = evict_dead_heads(evictions, true, &owner);
    const bool free = !held();
    const bool at_head = !queue_.empty() && queue_.front() == owner;
    if (holds_.contains(owner) || (free && (queue_.empty() || at_head))) {
      if (at_head) {
        const std::int64_t mine = chained(owner).value_or(now());
        const bool keep_chain = !turnstile_only();
        queue_.erase(queue_.begin());
        chained_.erase(owner);
        if (keep_chain) shift_from(0, leave_shift(0, mine - now(), timeout_ms_), timeout_ms_);
        promote_near(nullptr);
      }
      alive_.erase(owner);
      const std::int64_t count = ++holds_[owner];
      lock_.deadline_ms = now() + lease;
      if (count == 1) {
        identity_.set("identity of " + owner, now() + lease);
      } else {
        identity_.pexpire(now() + lease);
      }
      if (!fenced_) return integers({1, 0, 0});
      // Floored by the clock every time (lua/lib/fencing_counter.lua).
      counter_ = std::max(counter_.value_or(0), run_.now_us()) + 1;
      return integers({1, *counter_, 0});
    }
    if (free && evicted > 0) wake_head();
    const std::int64_t pttl = lock_pttl();
    const std::int64_t liveness = mode.waits ? join_or_keep_place(owner, pttl) : 0;
    return integers({0, pttl, liveness});
  }

  // Returns the liveness timeout the waiter was given.
  std::int64_t join_or_keep_place(const std::string& owner, std::int64_t pttl) {
    const std::int64_t margin = 2 * timeout_ms_;
    const std::optional<std::int64_t> current = chained(owner);
    bool only = false;
    if (!current) {
      alive_.erase(owner);
      only = turnstile_only();
      std::int64_t deadline = own_deadline(pttl, margin);
      if (!only) deadline = needed_deadline(queue_.size(), now() + std::max<std::int64_t>(pttl, 0), margin);
      chained_[owner] = deadline;
      queue_.push_back(owner);
    } else if ((only = turnstile_only())) {
      // Its own deadline, kept within a waiter timeout of where it belongs.
      const std::int64_t target = own_deadline(pttl, margin);
      if (*current < own_deadline(0, margin) - timeout_ms_ || *current > target + timeout_ms_) chained_[owner] = target;
    } else if (const auto place = position(owner)) {
      // The chain kept: lifted (with all behind it) once it falls a waiter
      // timeout short of what the shifts ahead could take away.
      const std::int64_t needed = needed_deadline(*place, now(), margin);
      if (*current < needed - timeout_ms_) shift_from(*place, needed - *current, std::nullopt);
    } else {
      queue_.push_back(owner);
    }
    // Near (the first two places, or the chain kept): a waiter timeout.
    const std::optional<std::size_t> place = position(owner);
    const std::int64_t liveness = !only || (place && *place < 2) ? timeout_ms_ : far_timeout();
    mark_alive(owner, liveness);
    return liveness;
  }

  void renew() {
    renew_holds(run_, scripts::reentrant_lock_renew, layout_.name, layout_.holder_identity, [&](std::int64_t lease) {
      const std::string& owner = run_.one_of(kFairOwners);
      const bool renewed = holds_.contains(owner);
      if (renewed) {
        lock_.deadline_ms = now() + lease;
        identity_.pexpire(now() + lease);
      }
      return std::pair(owner, renewed);
    });
  }

  void unlock() {
    const std::string& owner = run_.one_of(kFairOwners);
    const std::int64_t lease = run_.one_of(kModelLeasesMs);
    const std::int64_t evictions = limit();
    // Now and then a retry of the previous request (its latch).
    if (last_nonce_ == 0 || !run_.chance(4)) ++last_nonce_;
    const std::string latch_key = layout_.unlock_latch(std::to_string(last_nonce_));
    const Reply reply =
        run_.eval(scripts::fair_lock_unlock,
                  {layout_.name, layout_.fair_queue, layout_.fair_timeouts, layout_.channel, latch_key,
                   layout_.fair_waiters, layout_.holder_identity},
                  {std::string(kMessage), std::to_string(lease), owner, std::to_string(kModelLatchMs),
                   std::to_string(now()), "PUBLISH", std::to_string(evictions), std::to_string(timeout_ms_)});
    run_.expect("unlock reply", expected_unlock(owner, lease, evictions, latches_[latch_key]), reply);
  }

  Reply expected_unlock(const std::string& owner, std::int64_t lease, std::int64_t evictions, ModelKey& latch) {
    if (latch.value) return Reply::integer(std::stoll(*latch.value));
    evict_dead_heads(evictions, true);
    if (!holds_.contains(owner)) {
      // Nothing of the caller's; a free lock's head is told all the same.
      if (!queue_.empty() && !held()) wake_head();
      return Reply::nil();
    }
    if (--holds_[owner] > 0) {
      lock_.deadline_ms = now() + lease;
      identity_.pexpire(now() + lease);
      latch.set("0", now() + kModelLatchMs);
      return Reply::integer(0);
    }
    holds_.clear();
    lock_.deadline_ms.reset();
    identity_.clear();
    if (!queue_.empty()) wake_head();
    latch.set("1", now() + kModelLatchMs);
    return Reply::integer(1);
  }

  void abandon() {
    const std::string& owner = run_.one_of(kFairOwners);
    const std::int64_t evictions = limit();
    const Reply reply =
        run_.eval(scripts::fair_lock_abandon,
                  {layout_.name, layout_.fair_queue, layout_.fair_timeouts, layout_.channel, layout_.fair_waiters},
                  {owner, std::to_string(now()), "PUBLISH", std::string(kMessage), std::to_string(evictions),
                   std::to_string(wait_ms_), std::to_string(timeout_ms_)});
    run_.expect("abandon reply", expected_abandon(owner, evictions), reply);
  }

  Reply expected_abandon(const std::string& owner, std::int64_t evictions) {
    // Leaving a kept chain moves those behind down by what this waiter
    // added to it (its distance to its predecessor, or to now at the head).
    std::optional<std::size_t> place;
    if (!turnstile_only()) place = position(owner);
    std::int64_t gap = 0;
    if (place) {
      std::int64_t before = now();
      if (*place > 0) before = chained(queue_[*place - 1]).value_or(now());
      if (const auto mine = chained(owner)) gap = *mine - before;
    }
    const bool removed = chained_.erase(owner) == 1;
    alive_.erase(owner);
    if (removed || place) std::erase(queue_, owner);
    if (place) shift_from(*place, leave_shift(*place, gap, timeout_ms_), timeout_ms_);
    evict_dead_heads(evictions, true);
    if (removed) promote_near(nullptr);
    if (!queue_.empty() && !held()) wake_head();
    return Reply::integer(removed ? 1 : 0);
  }

  void force_unlock() {
    const std::int64_t evictions = limit();
    const Reply reply = run_.eval(scripts::fair_lock_force_unlock,
                                  {layout_.name, layout_.fair_queue, layout_.fair_timeouts, layout_.channel,
                                   layout_.fair_waiters, layout_.holder_identity},
                                  {std::string(kMessage), std::to_string(now()), "PUBLISH", std::to_string(evictions)});
    evict_dead_heads(evictions);
    const bool deleted = held();
    holds_.clear();
    lock_.deadline_ms.reset();
    identity_.clear();
    if (!queue_.empty()) wake_head();
    run_.expect("force unlock reply", Reply::integer(deleted ? 1 : 0), reply);
  }

  // A read: nothing is evicted, a dead waiter still counts.
  void status() {
    const std::string& owner = run_.one_of(kFairOwners);
    const Reply reply = run_.eval(scripts::fair_lock_status, {layout_.name, layout_.fair_queue}, {owner});
    const auto holds = holds_.find(owner);
    const auto place = position(owner);
    run_.expect("status reply",
                integers({held() ? 1 : 0, holds == holds_.end() ? 0 : holds->second, lock_pttl(),
                          static_cast<std::int64_t>(queue_.size()),
                          place ? static_cast<std::int64_t>(*place) : std::int64_t{-1}}),
                reply);
  }

  void advance() override {
    std::vector<std::int64_t> deadlines;
    if (lock_.deadline_ms) deadlines.push_back(*lock_.deadline_ms);
    for (const auto* scores : {&chained_, &alive_}) {
      for (const auto& [member, score] : *scores) deadlines.push_back(score);
    }
    if (!alive_.empty() && alive_expiry_.deadline_ms) deadlines.push_back(*alive_expiry_.deadline_ms);
    for (const auto& [key, latch] : latches_) {
      if (latch.value) deadlines.push_back(latch.deadline_ms);
    }
    run_.advance_near(deadlines, kModelMaxStepMs);
  }

  // A zset as ZRANGE WITHSCORES shows it (by score, then member), scores
  // as integers when they are whole (any other would be a mismatch).
  static Reply zset(const std::map<std::string, std::int64_t>& scores) {
    std::vector<std::pair<std::int64_t, std::string>> ordered;
    for (const auto& [member, score] : scores) ordered.emplace_back(score, member);
    std::sort(ordered.begin(), ordered.end());
    std::vector<Reply> flat;
    for (const auto& [score, member] : ordered) {
      flat.push_back(Reply::bulk(member));
      flat.push_back(Reply::integer(score));
    }
    return Reply::array(std::move(flat));
  }
  Reply read_zset(const std::string& key) {
    Reply actual = run_.command({"ZRANGE", key, "0", "-1", "WITHSCORES"});
    if (!actual.is_array()) return actual;
    for (std::size_t i = 1; i < actual.as_array().size(); i += 2) {
      Reply& score = actual.as_array()[i];
      const double value = std::stod(score.as_string());
      const auto whole = static_cast<std::int64_t>(value);
      if (static_cast<double>(whole) == value) score = Reply::integer(whole);
    }
    return actual;
  }

  void observe() override {
    std::vector<std::pair<std::string, std::string>> pairs;
    for (const auto& [owner, count] : holds_) pairs.emplace_back(owner, std::to_string(count));
    run_.expect("HGETALL lock", sorted_hash(std::move(pairs)), sorted_hash(run_.command({"HGETALL", layout_.name})));
    run_.expect("PTTL lock", Reply::integer(lock_pttl()), run_.command({"PTTL", layout_.name}));
    std::vector<Reply> listed;
    for (const std::string& owner : queue_) listed.push_back(Reply::bulk(owner));
    run_.expect("LRANGE queue", Reply::array(std::move(listed)),
                run_.command({"LRANGE", layout_.fair_queue, "0", "-1"}));
    run_.expect("ZRANGE chained deadlines", zset(chained_), read_zset(layout_.fair_timeouts));
    run_.expect("ZRANGE liveness", zset(alive_), read_zset(layout_.fair_waiters));
    run_.expect("PTTL liveness", Reply::integer(alive_.empty() ? -2 : *alive_expiry_.deadline_ms - now()),
                run_.command({"PTTL", layout_.fair_waiters}));
    run_.expect("GET identity", identity_.get(), run_.command({"GET", layout_.holder_identity}));
    run_.expect("PTTL identity", identity_.pttl(now()), run_.command({"PTTL", layout_.holder_identity}));
    for (const auto& [key, latch] : latches_) run_.expect("GET " + key, latch.get(), run_.command({"GET", key}));
    if (fenced_) {
      run_.expect("GET counter", counter_ ? Reply::bulk(std::to_string(*counter_)) : Reply::nil(),
                  run_.command({"GET", layout_.fencing_counter}));
    }
    run_.expect("wake-ups", messages(std::exchange(expected_messages_, {})), messages(run_.take_messages()));
  }
  static Reply messages(const Messages& published) {
    std::vector<Reply> flat;
    for (const auto& [channel, message] : published) {
      flat.push_back(Reply::bulk(channel));
      flat.push_back(Reply::bulk(message));
    }
    return Reply::array(std::move(flat));
  }

  bool fenced_;
  KeyLayout layout_;
  std::int64_t timeout_ms_;
  std::int64_t wait_ms_;
  std::map<std::string, std::int64_t> holds_;
  ModelExpiry lock_;
  ModelKey identity_;
  std::vector<std::string> queue_;
  std::map<std::string, std::int64_t> chained_;  // owner -> chained deadline, Unix ms
  std::map<std::string, std::int64_t> alive_;    // owner -> liveness deadline, Unix ms
  ModelExpiry alive_expiry_;                     // the liveness zset's own expiry
  std::map<std::string, ModelKey> latches_;
  std::optional<std::int64_t> counter_;
  Messages expected_messages_;
  int last_nonce_ = 0;
};

TEST(FairModelTest, FairLockScriptsFollowTheModel) { run_model<FairLockModel>("fair", FairOptions{}); }

TEST(FairModelTest, FencedFairLockScriptsFollowTheModel) {
  run_model<FairLockModel>("fenced fair", FairOptions{.fenced = true});
}

// The fair scripts' mutation list: one change each, as a slip in lua/
// would make it; the model must notice every one.
constexpr ScriptMutant kFairMutants[] = {
    // FIFO: a free lock taken by a waiter behind the head.
    {"free lock taken past the head", "(free and (head == false or head == ARGV[2]))", "free"},
    // Eviction at the exact instant: a deadline equal to now is dead.
    {"head evicted one ms late", "if deadline ~= false and tonumber(deadline) > now then break end",
     "if deadline ~= false and tonumber(deadline) >= now then break end"},
    // A dead head is never evicted (its waiters behind wait for ever).
    {"head not evicted", "    if deadline ~= false and tonumber(deadline) > now then break end",
     "    if true then break end"},
    // The bound on evictions per call ignored by one.
    {"one eviction past the limit", "evicted < limit do", "evicted <= limit do"},
    // A waiter whose liveness deadline is now still counts as live.
    {"liveness counted at its deadline", "redis.call('zcount', alive, string.format('(%d', now), '+inf')",
     "redis.call('zcount', alive, now, '+inf')"},
    // Taking the lock from the head: the chain behind not shifted.
    {"score chain not shifted on acquire", "  if chained then\n    shift_from(queue, deadlines, 0,",
     "  if false then\n    shift_from(queue, deadlines, 0,"},
    // Giving up: the chain behind not shifted.
    {"score chain not shifted on give-up",
     "  shift_from(KEYS[2], KEYS[3], position, leave_shift(KEYS[2], KEYS[3], position, gap, now, margin), KEYS[5], "
     "now,",
     "  shift_from(KEYS[2], KEYS[3], position, 0, KEYS[5], now,"},
    // The shift clamped by the margin no more: live waiters pushed near now.
    {"shift not clamped by the margin", "delta = -math.min(-delta, math.max(scores[member] - now - margin, 0))",
     "delta = delta"},
    // A joiner chained without the margin.
    {"own deadline without margin", "return now + math.max(pttl, 0) + wait + margin",
     "return now + math.max(pttl, 0) + wait"},
    // A joiner behind dead entries chained on the largest wait ahead by one less.
    {"needed deadline one short", "return math.max(floor, previous or floor) + largest + margin",
     "return math.max(floor, previous or floor) + largest + margin - 1"},
    // A waiter's kept place never lifted.
    {"place not lifted", "if current < needed - timeout then", "if false then"},
    // The liveness zset's expiry not covering the latest chained deadline.
    {"liveness zset expires early", "lifetime = math.max(lifetime, tonumber(chained[2]) - now)", "lifetime = lifetime"},
    // A liveness deadline not renewed on a retry.
    {"liveness not renewed", "redis.call('zadd', alive, now + timeout, owner)",
     "redis.call('zadd', alive, 'nx', now + timeout, owner)"},
    // A full unlock wakes the tail, not the head.
    {"unlock wakes the tail", "redis.call('hdel', grants, ARGV[3]) end\npass_on(queue, head,",
     "redis.call('hdel', grants, ARGV[3]) end\npass_on(queue, redis.call('lindex', KEYS[2], -1),"},
    // A waiter that gives up is not removed from the list.
    {"give-up leaves the list entry", "  redis.call('lrem', KEYS[2], 0, ARGV[1])\n  local margin", "  local margin"},
    // Near and far: a far waiter reaching the front is not told.
    {"far waiter at the front not promoted",
     "if member ~= wake.self and live ~= nil and live > now + wake.timeout then", "if false then"},
    // ... told, but its far liveness kept.
    {"promoted waiter keeps its far liveness", "      redis.call('zadd', alive, now + wake.timeout, member)\n", ""},
    // The second place kept far (the head's death seen by nobody near).
    {"second place far", "redis.call('lindex', KEYS[2], 1) ~= ARGV[2]", "true"},
    // A far liveness beyond the chained deadline (a short chain wait).
    {"far timeout not capped by the chain", "return math.min(FAR_FACTOR * timeout, wait + timeout)",
     "return FAR_FACTOR * timeout"},
};

TEST(FairModelTest, EveryMutantOfTheFairScriptsIsKilled) {
  // Enough sequences to kill each mutant (most die within a few dozen; the
  // unclamped shift needs a live waiter behind a dead one with a nearer
  // deadline, about one sequence in 1,500); the first killing seed is shown.
  constexpr int kSequencesPerMutant = 4000;
  const std::initializer_list<const Script*> fair_scripts = {&scripts::fair_lock_acquire, &scripts::fair_lock_unlock,
                                                             &scripts::fair_lock_abandon,
                                                             &scripts::fair_lock_force_unlock};
  for (const ScriptMutant& mutant : kFairMutants) {
    ASSERT_TRUE(MutantScope::changes_any(mutant, fair_scripts)) << "mutant '" << mutant.name << "' changes no script";
    MutantScope scope(mutant);
    std::optional<ModelMismatch> killed;
    for (const FairOptions options : {FairOptions{}, FairOptions{.fenced = true}}) {
      killed = first_mismatch("fair", model_sequence<FairLockModel>(options), kSequencesPerMutant);
      if (killed) break;
    }
    EXPECT_TRUE(killed.has_value()) << "mutant '" << mutant.name << "' survived " << kSequencesPerMutant
                                    << " sequences";
    if (killed) {
      const std::string first_line = killed->report.substr(0, killed->report.find('\n'));
      std::printf("mutant '%s' killed: %s\n", std::string(mutant.name).c_str(), first_line.c_str());
    }
  }
}

}  // namespace
}  // namespace turnstile::testing
