#include "locks/watchdog.h"

#include <cassert>
#include <utility>

#include "turnstile/errors.h"

namespace turnstile::detail {

Watchdog::Watchdog(Backend& backend, Runtime& runtime, Duration lease,
                   std::function<void(std::exception_ptr)> on_error)
    : backend_(backend), runtime_(runtime), lease_(lease), on_error_(std::move(on_error)) {
  assert(lease_ > Duration::zero());
}

std::uint64_t Watchdog::watch(Target target) {
  assert(target.renew_script != nullptr);
  assert(!target.key.empty());
  std::lock_guard guard(mutex_);
  const std::uint64_t id = next_id_++;
  entries_.emplace(id, Entry{std::move(target), runtime_.now()});
  arm_locked();
  return id;
}

void Watchdog::unwatch(std::uint64_t id) {
  // The timer stays armed: a tick that finds nothing does not re-arm, and
  // lock/unlock in a loop then costs no timer work at all.
  std::lock_guard guard(mutex_);
  entries_.erase(id);
}

void Watchdog::begin_release(std::uint64_t id) {
  std::lock_guard guard(mutex_);
  auto it = entries_.find(id);
  if (it != entries_.end()) it->second.releasing = true;
}

void Watchdog::end_release(std::uint64_t id) {
  std::optional<LockLostReason> lost;
  {
    std::lock_guard guard(mutex_);
    auto it = entries_.find(id);
    if (it == entries_.end()) return;
    it->second.releasing = false;
    lost = it->second.lost_while_releasing;
  }
  if (lost) lose(id, *lost);
}

void Watchdog::stop() {
  std::optional<Runtime::TimerId> timer;
  {
    std::lock_guard guard(mutex_);
    stopped_ = true;
    entries_.clear();
    timer = std::exchange(timer_, std::nullopt);
  }
  if (timer) runtime_.cancel(*timer);
}

std::size_t Watchdog::watched_count() const {
  std::lock_guard guard(mutex_);
  return entries_.size();
}

void Watchdog::arm_locked() {
  if (timer_ || stopped_ || entries_.empty()) return;
  // The callback holds the watchdog alive; stop() cancels it.
  timer_ = runtime_.schedule_after(lease_ / 3, [self = shared_from_this()] { self->tick(); });
}

void Watchdog::tick() {
  // Snapshot under the lock, renew without it: renewals block on Redis.
  struct Group {
    const Script* script = nullptr;
    bool pass_wall_clock_ms = false;
    std::vector<std::uint64_t> ids;
  };
  std::map<std::string_view, Group> by_script;
  std::map<std::uint64_t, std::pair<std::string, std::string>> targets;
  {
    std::lock_guard guard(mutex_);
    timer_.reset();
    if (stopped_) return;
    for (const auto& [id, entry] : entries_) {
      if (entry.lost_while_releasing) continue;  // gone; its release decides
      Group& group = by_script[entry.target.renew_script->name];
      assert(group.ids.empty() || group.pass_wall_clock_ms == entry.target.pass_wall_clock_ms);
      group.script = entry.target.renew_script;
      group.pass_wall_clock_ms = entry.target.pass_wall_clock_ms;
      group.ids.push_back(id);
      targets.emplace(id, std::make_pair(entry.target.key, entry.target.holder));
    }
  }
  for (auto& [name, group] : by_script) {
    const std::vector<std::uint64_t>& ids = group.ids;
    for (std::size_t begin = 0; begin < ids.size(); begin += kMaxLocksPerRenewal) {
      const std::size_t end = std::min(ids.size(), begin + kMaxLocksPerRenewal);
      std::vector<std::uint64_t> batch(ids.begin() + begin, ids.begin() + end);
      std::vector<std::string> keys;
      std::vector<std::string> holders;
      for (std::uint64_t id : batch) {
        keys.push_back(targets[id].first);
        holders.push_back(targets[id].second);
      }
      renew_batch(*group.script, group.pass_wall_clock_ms, batch, std::move(keys), std::move(holders));
    }
  }
  std::lock_guard guard(mutex_);
  arm_locked();
}

void Watchdog::renew_batch(const Script& script, bool pass_wall_clock_ms, const std::vector<std::uint64_t>& ids,
                           std::vector<std::string> keys, std::vector<std::string> holders) {
  assert(ids.size() == keys.size() && keys.size() == holders.size());
  assert(!ids.empty() && ids.size() <= kMaxLocksPerRenewal);
  std::vector<std::string> args;
  args.reserve(2 + holders.size());
  args.push_back(std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(lease_).count()));
  if (pass_wall_clock_ms) args.push_back(std::to_string(runtime_.wall_clock_ms()));
  for (std::string& holder : holders) args.push_back(std::move(holder));

  Reply reply;
  try {
    reply = backend_.eval(script, keys, args);
    if (!reply.is_array() || reply.as_array().size() != ids.size()) {
      throw ProtocolError(std::string(script.name) + " answered " + reply.to_string() +
                          ", expected one flag per lock");
    }
  } catch (const Error&) {
    // Keep trying at the next tick while the lease may still be alive; once
    // a whole lease passed without a renewal, the lock has expired.
    on_error_(std::current_exception());
    const Instant now = runtime_.now();
    std::vector<std::uint64_t> expired;
    {
      std::lock_guard guard(mutex_);
      for (std::uint64_t id : ids) {
        auto it = entries_.find(id);
        if (it != entries_.end() && now - it->second.last_renewed >= lease_) expired.push_back(id);
      }
    }
    for (std::uint64_t id : expired) lose(id, LockLostReason::unreachable);
    return;
  }

  const Instant now = runtime_.now();
  std::vector<std::uint64_t> gone;
  {
    std::lock_guard guard(mutex_);
    for (std::size_t i = 0; i < ids.size(); ++i) {
      const Reply& flag = reply.as_array()[i];
      auto it = entries_.find(ids[i]);
      if (it == entries_.end()) continue;  // unlocked meanwhile
      if (flag.is_integer() && flag.as_integer() == 1) {
        it->second.last_renewed = now;
      } else {
        gone.push_back(ids[i]);
      }
    }
  }
  for (std::uint64_t id : gone) lose(id, LockLostReason::gone);
}

void Watchdog::lose(std::uint64_t id, LockLostReason reason) {
  std::function<void(std::uint64_t, LockLostReason)> on_lost;
  {
    std::lock_guard guard(mutex_);
    auto it = entries_.find(id);
    if (it == entries_.end()) return;  // unwatched meanwhile: not lost, released
    if (it->second.releasing) {
      it->second.lost_while_releasing = reason;
      return;
    }
    on_lost = std::move(it->second.target.on_lost);
    entries_.erase(it);
  }
  if (on_lost) on_lost(id, reason);
}

}  // namespace turnstile::detail
