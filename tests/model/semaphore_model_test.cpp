// Reference models of both semaphores against their scripts on the fake
// (model/model_harness.h): the counting semaphore (Redisson RSemaphore,
// lua/counting_semaphore.lua: try_acquire, add, try_set_permits, drain, available,
// set_permits, reset) and the crash-safe semaphore (Redisson
// RPermitExpirableSemaphore, lua/permit_semaphore.lua and
// lua/permit_semaphore_renew.lua: acquire and its retry, release,
// update_lease, status, init_permits, set_permits, reset, the watchdog's
// renewal; expired permits reclaimed at most `limit` per call, oldest
// first, an expiry equal to now being expired). Observed after every
// operation: the count and the held permits with their expiries.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "lua_scripts.h"
#include "model_harness.h"
#include "turnstile/key_layout.h"
#include "turnstile/semaphore.h"

namespace turnstile::testing {
namespace {

using Argv = std::vector<std::string>;

// ---- counting ---------------------------------------------------------------

class CountingSemaphoreModel {
 public:
  explicit CountingSemaphoreModel(ModelRun& run) : run_(run), layout_(key_layout(Flavor::counting_semaphore, "pool")) {}

  void step() {
    const std::int64_t available = count_.value_or(0);
    const std::int64_t n = run_.pick(4);
    Reply expected;
    std::string operation;
    switch (run_.pick(8)) {
      case 0:
      case 1:
        operation = "try_acquire";
        expected = Reply::integer(available >= n + 1 ? 1 : 0);
        if (available >= n + 1) count_ = available - (n + 1);
        call(operation, std::to_string(n + 1), expected);
        return observe();
      case 2: {
        const std::int64_t added = run_.pick(9) - 3;
        count_ = available + added;
        call("add", std::to_string(added), Reply::integer(*count_));
        return observe();
      }
      case 3:
        expected = Reply::integer(count_ ? 0 : 1);
        if (!count_) count_ = n;
        call("try_set_permits", std::to_string(n), expected);
        return observe();
      case 4:
        expected = Reply::integer(available > 0 ? available : 0);
        if (available > 0) count_ = 0;
        call("drain", "", expected);
        return observe();
      case 5:
        call("available", "", Reply::integer(available));
        return observe();
      case 6:
        count_ = n;
        call("set_permits", std::to_string(n), Reply::integer(available));
        return observe();
      default:
        expected = Reply::integer(count_ ? 1 : 0);
        count_.reset();
        call("reset", "", expected);
        return observe();
    }
  }

 private:
  void call(const std::string& operation, const std::string& argument, const Reply& expected) {
    Argv args{operation};
    if (!argument.empty()) args.push_back(argument);
    if (operation == "add" || operation == "try_set_permits" || operation == "set_permits") {
      args.push_back("PUBLISH");
    }
    run_.expect(operation + " reply", expected,
                run_.eval(scripts::counting_semaphore, {layout_.name, layout_.channel}, args));
  }
  void observe() {
    run_.expect("GET count", count_ ? Reply::bulk(std::to_string(*count_)) : Reply::nil(),
                run_.command({"GET", layout_.name}));
  }

  ModelRun& run_;
  KeyLayout layout_;
  std::optional<std::int64_t> count_;
};

TEST(SemaphoreModelTest, CountingSemaphoreScriptFollowsTheModel) {
  run_model<CountingSemaphoreModel>("counting semaphore");
}

// ---- crash-safe (permits expire) ----------------------------------------------

class PermitSemaphoreModel {
 public:
  static constexpr std::int64_t kNever = PermitSemaphore::kNeverExpiresMs;

  explicit PermitSemaphoreModel(ModelRun& run) : run_(run), layout_(key_layout(Flavor::semaphore, "crew")) {}

  void step() {
    const bool performed = run_.perform({{3, [&] { acquire(); }},
                                         {2, [&] { release(); }},
                                         {1, [&] { update_lease(); }},
                                         {1, [&] { status(); }},
                                         {2, [&] { set_total(run_.chance(2) ? "init_permits" : "set_permits"); }},
                                         {1, [&] { reset(); }},
                                         {1, [&] { renew(); }}},
                                        3);
    if (performed) return;
    std::vector<std::int64_t> deadlines;
    for (const auto& [id, expiry] : held_) {
      if (expiry < kNever) deadlines.push_back(expiry);
    }
    run_.advance_near(deadlines, kModelMaxStepMs);
  }

 private:
  // Held permits as the zset orders them: by expiry, then by id.
  std::vector<std::pair<std::int64_t, std::string>> ordered() const {
    std::vector<std::pair<std::int64_t, std::string>> permits;
    for (const auto& [id, expiry] : held_) permits.emplace_back(expiry, id);
    std::sort(permits.begin(), permits.end());
    return permits;
  }
  bool held(const std::string& id) const {
    const auto found = held_.find(id);
    return found != held_.end() && found->second > run_.now_ms();
  }
  std::int64_t expiry() { return run_.chance(6) ? kNever : run_.now_ms() + run_.one_of(kModelLeasesMs); }
  // "permit-id-000001", ...: 16 bytes, as Redisson's ids.
  std::string new_id() {
    const std::string digits = std::to_string(++ids_drawn_);
    issued_.push_back("permit-id-" + std::string(digits.size() < 6 ? 6 - digits.size() : 0, '0') + digits);
    return issued_.back();
  }

  // Every operation but the renewal first reclaims at most `limit`
  // expired permits, oldest first; returns the count then available.
  std::int64_t reclaim(int limit) {
    std::int64_t available = count_.value_or(0);
    const auto permits = ordered();
    if (permits.empty() || permits.front().first > run_.now_ms()) return available;
    int reclaimed = 0;
    for (const auto& [when, id] : permits) {
      if (when > run_.now_ms() || reclaimed == limit) break;
      held_.erase(id);
      ++reclaimed;
    }
    available += reclaimed;
    count_ = available;
    return available;
  }

  Reply call(const std::string& operation, int limit, const Argv& operands) {
    Argv args{std::to_string(run_.now_ms()), "PUBLISH", std::to_string(limit), operation};
    args.insert(args.end(), operands.begin(), operands.end());
    return run_.eval(scripts::permit_semaphore, {layout_.name, layout_.permit_timeouts, layout_.channel}, args);
  }

  void acquire() {
    const int limit = 1 + run_.pick(3);
    const bool retry = !last_ids_.empty() && run_.chance(5);
    if (!retry) {
      last_ids_.clear();
      const int wanted = 1 + run_.pick(2);
      for (int i = 0; i < wanted; ++i) last_ids_.push_back(new_id());
    }
    const std::int64_t new_expiry = expiry();
    Argv operands{std::to_string(last_ids_.size()), std::to_string(new_expiry), std::to_string(kNever)};
    operands.insert(operands.end(), last_ids_.begin(), last_ids_.end());
    const Reply reply = call("acquire", limit, operands);
    const std::int64_t available = reclaim(limit);
    const auto wanted = static_cast<std::int64_t>(last_ids_.size());
    Reply expected = integers({1, 0});
    if (held_.contains(last_ids_.front())) {
      for (const std::string& id : last_ids_) {
        if (held_.contains(id)) held_[id] = new_expiry;
      }
    } else if (available >= wanted) {
      count_ = available - wanted;
      for (const std::string& id : last_ids_) held_[id] = new_expiry;
    } else {
      const auto permits = ordered();
      if (permits.empty() || permits.front().first >= kNever) {
        expected = integers({0, -1});
      } else {
        expected = integers({0, std::max<std::int64_t>(permits.front().first - run_.now_ms(), 0)});
      }
    }
    run_.expect("acquire reply", expected, reply);
    observe();
  }

  // 1 or 2 ids: held ones mostly, now and then released, unknown or twice.
  Argv some_ids() {
    Argv ids;
    const int count = 1 + run_.pick(2);
    for (int i = 0; i < count; ++i) {
      if (!held_.empty() && run_.pick(3) != 0) {
        auto it = held_.begin();
        std::advance(it, run_.pick(static_cast<int>(held_.size())));
        ids.push_back(it->first);
      } else if (!issued_.empty() && run_.chance(2)) {
        ids.push_back(run_.one_of(issued_));
      } else {
        ids.push_back("unknown-permit-0");
      }
    }
    return ids;
  }

  void release() {
    const int limit = 1 + run_.pick(3);
    const Argv ids = some_ids();
    const Reply reply = call("release", limit, ids);
    const std::int64_t available = reclaim(limit);
    std::set<std::string> seen;
    std::optional<Reply> expected;
    for (std::size_t i = 0; i < ids.size() && !expected; ++i) {
      if (!seen.insert(ids[i]).second) {
        expected = Reply::error("ERR permit id " + ids[i] + " is listed twice");
      } else if (!held(ids[i])) {
        expected = integers({0, static_cast<std::int64_t>(i + 1)});
      }
    }
    if (!expected) {
      count_ = available + static_cast<std::int64_t>(ids.size());
      for (const std::string& id : ids) held_.erase(id);
      expected = integers({1, static_cast<std::int64_t>(ids.size())});
    }
    run_.expect("release reply", *expected, reply);
    observe();
  }

  void update_lease() {
    const int limit = 1 + run_.pick(3);
    const std::string id = some_ids().front();
    const std::int64_t new_expiry = expiry();
    const Reply reply = call("update_lease", limit, {id, std::to_string(new_expiry)});
    reclaim(limit);
    const bool was_held = held(id);
    if (was_held) held_[id] = new_expiry;
    run_.expect("update_lease reply", Reply::integer(was_held ? 1 : 0), reply);
    observe();
  }

  void status() {
    const int limit = 1 + run_.pick(3);
    const int listed = run_.pick(3);
    const Reply reply = call("status", limit, {std::to_string(listed), std::to_string(kNever)});
    const std::int64_t available = reclaim(limit);
    std::vector<Reply> expected{Reply::integer(available), Reply::integer(static_cast<std::int64_t>(held_.size()))};
    int shown = 0;
    for (const auto& [when, id] : ordered()) {
      if (shown++ == listed) break;
      expected.push_back(Reply::bulk(id));
      expected.push_back(Reply::integer(when >= kNever ? -1 : std::max<std::int64_t>(when - run_.now_ms(), 0)));
    }
    run_.expect("status reply", Reply::array(std::move(expected)), reply);
    observe();
  }

  void set_total(const std::string& operation) {
    const int limit = 1 + run_.pick(3);
    const std::int64_t total = run_.pick(4);
    const Reply reply = call(operation, limit, {std::to_string(total)});
    const bool count_existed = count_.has_value();  // read before the reclaim
    const std::int64_t available = reclaim(limit);
    const auto held_count = static_cast<std::int64_t>(held_.size());
    const bool exists = count_existed || held_count > 0;
    Reply expected = integers({1, total});
    if (exists && (operation == "init_permits" || available + held_count == total)) {
      expected = integers({0, available + held_count});
    } else {
      count_ = total - held_count;
    }
    run_.expect(operation + " reply", expected, reply);
    observe();
  }

  void reset() {
    const int limit = 1 + run_.pick(3);
    const Reply reply = call("reset", limit, {});
    reclaim(limit);
    const bool existed = count_.has_value() || !held_.empty();
    count_.reset();
    held_.clear();
    run_.expect("reset reply", Reply::integer(existed ? 1 : 0), reply);
    observe();
  }

  // The watchdog's renewal: no reclaim; a held, unexpired permit's expiry
  // becomes now + lease.
  void renew() {
    const Argv ids = some_ids();
    const std::int64_t lease = run_.one_of(kModelLeasesMs);
    Argv args{std::to_string(lease), std::to_string(run_.now_ms())};
    args.insert(args.end(), ids.begin(), ids.end());
    const Reply reply = run_.eval(scripts::permit_semaphore_renew, Argv(ids.size(), layout_.permit_timeouts), args);
    std::vector<Reply> expected;
    for (const std::string& id : ids) {
      const bool renewed = held(id);
      if (renewed) held_[id] = run_.now_ms() + lease;
      expected.push_back(Reply::integer(renewed ? 1 : 0));
    }
    run_.expect("renew reply", Reply::array(std::move(expected)), reply);
    observe();
  }

  void observe() {
    run_.expect("GET count", count_ ? Reply::bulk(std::to_string(*count_)) : Reply::nil(),
                run_.command({"GET", layout_.name}));
    std::vector<Reply> expected;
    for (const auto& [when, id] : ordered()) {
      expected.push_back(Reply::bulk(id));
      expected.push_back(Reply::integer(when));
    }
    // Scores as integers (Redis prints them as doubles).
    Reply actual = run_.command({"ZRANGE", layout_.permit_timeouts, "0", "-1", "WITHSCORES"});
    if (actual.is_array()) {
      for (std::size_t i = 1; i < actual.as_array().size(); i += 2) {
        Reply& score = actual.as_array()[i];
        score = Reply::integer(static_cast<std::int64_t>(std::stod(score.as_string())));
      }
    }
    run_.expect("ZRANGE held permits", Reply::array(std::move(expected)), actual);
  }

  ModelRun& run_;
  KeyLayout layout_;
  std::optional<std::int64_t> count_;
  std::map<std::string, std::int64_t> held_;  // id -> expiry, Unix ms
  std::vector<std::string> issued_;
  std::vector<std::string> last_ids_;
  int ids_drawn_ = 0;
};

TEST(SemaphoreModelTest, PermitSemaphoreScriptsFollowTheModel) {
  run_model<PermitSemaphoreModel>("crash-safe semaphore");
}

}  // namespace
}  // namespace turnstile::testing
