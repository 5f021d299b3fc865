#include "locks/engine/watchdog.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <set>
#include <tuple>
#include <utility>

#include "core/check.h"
#include "core/pending_reply.h"
#include "turnstile/errors.h"

namespace turnstile::detail {
namespace {

std::string format_ms(Duration duration) {
  return std::to_string(std::chrono::duration_cast<std::chrono::microseconds>(duration).count() / 1000.0) + " ms";
}

}  // namespace

Duration LeaseTiming::margin(Duration lease) const {
  TURNSTILE_CHECK(clock_drift_factor >= 0 && clock_drift_factor < 1);  // ClientOptions refuses others
  TURNSTILE_CHECK(stop_margin >= Duration::zero());
  return Duration(std::llround(static_cast<double>(lease.count()) * clock_drift_factor)) + stop_margin;
}

void LeaseTiming::check(Duration lease, std::string_view what) const {
  if (window(lease) > Duration::zero()) return;
  throw InvalidArgumentError(std::string(what) + " of " + format_ms(lease) +
                             " leaves no time to hold: the safety margin (clock drift allowance plus stop margin) "
                             "is " +
                             format_ms(margin(lease)));
}

Watchdog::Watchdog(Backend& backend, Runtime& runtime, Duration lease, LeaseTiming timing,
                   std::function<void(std::exception_ptr)> on_error, std::optional<Duration> max_hold,
                   std::shared_ptr<MetricsRecorder> metrics,
                   std::function<void(const std::string& key, Instant deadline)> on_deadline,
                   std::shared_ptr<const EventLog> events)
    : backend_(backend),
      runtime_(runtime),
      lease_(lease),
      timing_(timing),
      renewal_period_(timing.window(lease) / 3),
      max_hold_(max_hold),
      on_error_(std::move(on_error)),
      metrics_(std::move(metrics)),
      on_deadline_(std::move(on_deadline)),
      events_(events ? std::move(events) : std::make_shared<const EventLog>(nullptr, EventLevel::error, runtime)) {
  TURNSTILE_CHECK(metrics_ != nullptr);
  TURNSTILE_CHECK(lease_ > Duration::zero());
  timing_.check(lease_, "the watchdog timeout");
  TURNSTILE_CHECK_MSG(renewal_period_ > Duration::zero(), "a window of at least 3 clock ticks");
}

std::uint64_t Watchdog::watch(Target target) {
  TURNSTILE_CHECK(!target.key.empty());
  TURNSTILE_CHECK(target.lease > Duration::zero());
  TURNSTILE_CHECK(target.lock_delay >= Duration::zero());
  std::vector<std::pair<std::string, Instant>> moved;
  const std::optional<int> slot = backend_.cluster_slot(target.key);
  MutexLock guard(mutex_);
  const std::uint64_t id = next_id_++;
  TURNSTILE_CHECK_MSG(id != 0, "ids never wrap");
  const Instant deadline = deadline_of(target.sent_at, target.lease);
  if (target.renew_script != nullptr) ++renewed_count_;
  Entry entry;
  // Sent before a restart was found: the server that answered may have been
  // the one that restarted.
  entry.server_restarted = restarted_since_locked(target.sent_at);
  entry.held_since = target.sent_at;
  entry.slot = slot;
  entry.target = std::move(target);
  entry.deadline = deadline;
  const Instant due_at = entry.server_restarted ? runtime_.now() : due(entry);
  metrics_->hold_started(entry.target.flavor);
  ++watched_keys_[entry.target.key];
  const bool inserted = entries_.emplace(id, std::move(entry)).second;
  TURNSTILE_CHECK_MSG(inserted, "watch ids are never reused");
  TURNSTILE_CHECK(renewed_count_ <= entries_.size());
  arm_renewal_locked();
  arm_expiry_locked(due_at);
  if (on_deadline_) moved.emplace_back(entries_.at(id).target.key, deadline);
  guard.unlock();
  tell_deadlines(moved);
  return id;
}

bool Watchdog::restarted_since_locked(Instant sent_at) const { return restarted_at_ && sent_at < *restarted_at_; }

bool Watchdog::restarted_since(Instant sent_at) const {
  const MutexLock guard(mutex_);
  return restarted_since_locked(sent_at);
}

Instant Watchdog::hold_limit(const Entry& entry) const {
  if (!max_hold_ || entry.target.renew_script == nullptr) return kNoDeadline;
  return entry.held_since + *max_hold_;
}

void Watchdog::rearm(std::uint64_t id, Instant sent_at, Duration lease, const Script* renew_script,
                     Duration lock_delay) {
  TURNSTILE_CHECK(lease > Duration::zero() && lock_delay >= Duration::zero());
  std::vector<std::pair<std::string, Instant>> moved;
  MutexLock guard(mutex_);
  auto it = entries_.find(id);
  // Lost meanwhile (or to a restart, at the timer's turn); on_lost tells.
  if (it == entries_.end() || it->second.lost_while_releasing || it->second.server_restarted) return;
  Entry& entry = it->second;
  if (entry.target.renew_script != nullptr && renew_script == nullptr) renewed_less_locked();
  if (entry.target.renew_script == nullptr && renew_script != nullptr) ++renewed_count_;
  TURNSTILE_CHECK(renewed_count_ <= entries_.size());
  entry.target.renew_script = renew_script;
  entry.target.lease = lease;
  entry.target.lock_delay = lock_delay;
  set_deadline_locked(entry, deadline_of(sent_at, lease));
  arm_renewal_locked();
  arm_expiry_locked(due(entry));
  if (on_deadline_) moved.emplace_back(entry.target.key, entry.deadline);
  guard.unlock();
  tell_deadlines(moved);
}

bool Watchdog::begin_extend(std::uint64_t id) {
  MutexLock guard(mutex_);
  auto it = entries_.find(id);
  if (it == entries_.end() || it->second.lost_while_releasing || it->second.server_restarted) return false;
  it->second.extending = true;
  it->second.extend_floor = it->second.renewal_sent;
  return true;
}

void Watchdog::finish_extend(std::uint64_t id, bool extended, Instant sent_at, Duration lease) {
  TURNSTILE_CHECK(lease > Duration::zero());
  std::vector<std::pair<std::string, Instant>> moved;
  MutexLock guard(mutex_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return;  // lost meanwhile; on_lost tells
  Entry& entry = it->second;
  const std::optional<Instant> floor = std::exchange(entry.extend_floor, std::nullopt);
  entry.extending = false;
  if (!extended || entry.lost_while_releasing || entry.server_restarted) return;
  if (entry.target.renew_script != nullptr) renewed_less_locked();
  entry.target.renew_script = nullptr;
  entry.target.lease = lease;
  Instant deadline = deadline_of(sent_at, lease);
  // A renewal in flight meanwhile may have run after the extension.
  if (floor) deadline = std::min(deadline, deadline_of(*floor, lease_));
  set_deadline_locked(entry, deadline);
  arm_expiry_locked(due(entry));
  if (on_deadline_) moved.emplace_back(entry.target.key, entry.deadline);
  guard.unlock();
  tell_deadlines(moved);
}

void Watchdog::stop_renewing(std::uint64_t id) {
  MutexLock guard(mutex_);
  auto it = entries_.find(id);
  if (it == entries_.end() || it->second.target.renew_script == nullptr) return;
  it->second.target.renew_script = nullptr;
  renewed_less_locked();
}

void Watchdog::unwatch(std::uint64_t id) {
  // The timers stay armed: one that finds nothing does not re-arm, and
  // lock/unlock in a loop then costs no timer work at all.
  MutexLock guard(mutex_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return;
  if (it->second.target.renew_script != nullptr) renewed_less_locked();
  metrics_->hold_ended(it->second.target.flavor, runtime_.now() - it->second.held_since);
  erase_locked(it);
  TURNSTILE_CHECK(renewed_count_ <= entries_.size());
}

void Watchdog::erase_locked(std::map<std::uint64_t, Entry>::iterator it) {
  auto counted = watched_keys_.find(it->second.target.key);
  TURNSTILE_CHECK_MSG(counted != watched_keys_.end() && counted->second > 0, "every entry's key is counted");
  if (--counted->second == 0) watched_keys_.erase(counted);
  entries_.erase(it);
  TURNSTILE_CHECK(watched_keys_.size() <= entries_.size());
}

std::optional<Instant> Watchdog::deadline(std::uint64_t id) {
  const Instant now = runtime_.now();
  {
    MutexLock guard(mutex_);
    auto it = entries_.find(id);
    if (it == entries_.end() || it->second.lost_while_releasing) return std::nullopt;
    if (due(it->second) > now) {
      TURNSTILE_CHECK(it->second.deadline > now);  // due() is never after the deadline
      return it->second.deadline;
    }
  }
  lose_expired(now);  // due: lost now, not at the timer's turn
  return std::nullopt;
}

void Watchdog::begin_release(std::uint64_t id) {
  MutexLock guard(mutex_);
  auto it = entries_.find(id);
  if (it != entries_.end()) it->second.releasing = true;
}

void Watchdog::end_release(std::uint64_t id) {
  std::optional<LockLostReason> lost;
  {
    MutexLock guard(mutex_);
    auto it = entries_.find(id);
    if (it == entries_.end()) return;
    it->second.releasing = false;
    lost = it->second.lost_while_releasing;
    if (!lost && it->second.server_restarted) lost = LockLostReason::server_restarted;
    const Instant now = runtime_.now();
    if (!lost && it->second.deadline <= now) lost = LockLostReason::lease_expired;
    if (!lost && hold_limit(it->second) <= now) lost = LockLostReason::max_hold_reached;
  }
  if (lost) lose(id, *lost);
}

void Watchdog::server_restarted() {
  MutexLock guard(mutex_);
  if (stopped_) return;
  const Instant now = runtime_.now();
  restarted_at_ = now;
  bool any = false;
  for (auto& [id, entry] : entries_) {
    if (entry.lost_while_releasing) continue;  // lost already; end_release() tells
    entry.server_restarted = true;
    any = true;
  }
  if (any) arm_expiry_locked(now);
}

void Watchdog::stop() {
  std::optional<Runtime::TimerId> renewal_timer;
  std::optional<Runtime::TimerId> expiry_timer;
  std::optional<Runtime::TimerId> wipe_timer;
  {
    MutexLock guard(mutex_);
    stopped_ = true;
    entries_.clear();
    watched_keys_.clear();
    renewed_count_ = 0;
    renewal_timer = std::exchange(renewal_timer_, std::nullopt);
    expiry_timer = std::exchange(expiry_timer_, std::nullopt);
    wipe_timer = std::exchange(wipe_timer_, std::nullopt);
    ++expiry_generation_;
  }
  if (renewal_timer) runtime_.cancel(*renewal_timer);
  if (expiry_timer) runtime_.cancel(*expiry_timer);
  if (wipe_timer) runtime_.cancel(*wipe_timer);
}

void Watchdog::renewed_less_locked() {
  TURNSTILE_CHECK_MSG(renewed_count_ > 0, "counted down once per renewed entry");
  --renewed_count_;
}

std::size_t Watchdog::watched_count() const {
  MutexLock guard(mutex_);
  return entries_.size();
}

void Watchdog::arm_renewal_locked() {
  if (stopped_ || renewed_count_ == 0) return;
  if (!wipe_timer_ && wipe_check_ && wipe_check_->enabled()) {
    const Instant check_at = runtime_.now() + wipe_check_->period();
    wipe_timer_ =
        runtime_.schedule_at(check_at, [self = shared_from_this(), check_at] { self->check_wipes(check_at); });
  }
  if (renewal_timer_) return;
  TURNSTILE_CHECK(renewed_count_ <= entries_.size());
  const Instant when = runtime_.now() + renewal_period_;
  // The callback holds the watchdog alive; stop() cancels it.
  renewal_timer_ = runtime_.schedule_at(when, [self = shared_from_this(), when] { self->tick(when); });
}

void Watchdog::arm_expiry_locked(Instant when) {
  if (stopped_) return;
  if (expiry_timer_ && expiry_at_ <= when) return;  // an earlier one fires first and re-arms
  if (expiry_timer_) runtime_.cancel(*expiry_timer_);
  TURNSTILE_CHECK(!expiry_timer_ || when < expiry_at_);  // only ever moved earlier
  const std::uint64_t generation = ++expiry_generation_;
  expiry_at_ = when;
  expiry_timer_ = runtime_.schedule_at(when, [self = shared_from_this(), generation] {
    {
      MutexLock guard(self->mutex_);
      if (generation != self->expiry_generation_) return;  // replaced or stopped
      self->expiry_timer_.reset();
    }
    self->expire();
  });
}

void Watchdog::expire() {
  const Instant now = runtime_.now();
  lose_expired(now);
  warn_due(now);
  MutexLock guard(mutex_);
  std::optional<Instant> next;
  for (const auto& [id, entry] : entries_) {
    if (entry.lost_while_releasing) continue;
    if (!next || due(entry) < *next) next = due(entry);
  }
  if (next) arm_expiry_locked(*next);
}

std::optional<LockLostReason> Watchdog::due_loss(const Entry& entry, Instant now) const {
  if (entry.lost_while_releasing) return std::nullopt;
  if (entry.server_restarted) return LockLostReason::server_restarted;
  if (entry.deadline <= now) return LockLostReason::lease_expired;
  // Renewed no more; the lease lapses on the server by itself.
  if (hold_limit(entry) <= now) return LockLostReason::max_hold_reached;
  return std::nullopt;
}

void Watchdog::lose_if_due(std::uint64_t id) {
  std::optional<LockLostReason> reason;
  {
    MutexLock guard(mutex_);
    const auto it = entries_.find(id);
    if (it == entries_.end() || it->second.releasing) return;
    reason = due_loss(it->second, runtime_.now());
  }
  if (reason) lose(id, *reason);
}

void Watchdog::lose_expired(Instant now) {
  std::vector<std::pair<std::uint64_t, LockLostReason>> expired;
  {
    MutexLock guard(mutex_);
    for (const auto& [id, entry] : entries_) {
      if (const std::optional<LockLostReason> reason = due_loss(entry, now)) expired.emplace_back(id, *reason);
    }
  }
  for (const auto& [id, reason] : expired) lose(id, reason);
}

void Watchdog::tick(Instant started) {
  {
    MutexLock guard(mutex_);
    renewal_timer_.reset();
    if (stopped_) return;
  }
  if (runtime_.buggify("watchdog.renewal_delayed")) runtime_.sleep_for(renewal_period_);  // simulation only
  renew_serialized();
  MutexLock guard(mutex_);
  if (renewal_timer_ || stopped_ || renewed_count_ == 0) return;
  // On the fixed cadence from this tick's start: a slow renewal does not
  // push the next one later (a time already past runs at once).
  const Instant next = std::max(started + renewal_period_, runtime_.now());
  TURNSTILE_CHECK(next > started);
  renewal_timer_ = runtime_.schedule_at(next, [self = shared_from_this(), next] { self->tick(next); });
}

void Watchdog::renew_key_now(const std::string& key) {
  MutexLock guard(mutex_);
  if (stopped_ || renewed_count_ == 0 || !watched_keys_.contains(key)) return;
  renew_soon_locked();
}

void Watchdog::renew_soon_locked() {
  if (renew_soon_ || stopped_) return;
  renew_soon_ = true;
  // A one-off renewal beside the periodic ones (idempotent on the server):
  // the one that finds a key gone loses its holdings.
  runtime_.schedule_at(runtime_.now(), [self = shared_from_this()] {
    {
      MutexLock guard(self->mutex_);
      self->renew_soon_ = false;
    }
    self->renew_serialized();
  });
}

void Watchdog::renew_serialized() {
  {
    MutexLock guard(mutex_);
    if (renewing_) {
      renew_again_ = true;
      return;
    }
    renewing_ = true;
  }
  for (int pass = 1;; ++pass) {
    try {
      renew_all();
    } catch (...) {
      MutexLock guard(mutex_);
      renewing_ = false;
      renew_again_ = false;
      throw;
    }
    MutexLock guard(mutex_);
    if (!renew_again_ || stopped_ || pass >= kMaxRenewalPasses) {
      renewing_ = false;
      renew_again_ = false;
      return;
    }
    renew_again_ = false;
  }
}

void Watchdog::set_lease_warning(Duration before, AtRiskHandler told) {
  TURNSTILE_CHECK(before > Duration::zero());
  MutexLock guard(mutex_);
  TURNSTILE_CHECK_MSG(entries_.empty() && warning_ == Duration::zero(), "set once, before anything is watched");
  warning_ = before;
  on_at_risk_ = std::move(told);
}

void Watchdog::set_deadline_locked(Entry& entry, Instant deadline) {
  if (deadline > entry.deadline) entry.warned = false;
  entry.deadline = deadline;
}

void Watchdog::warn_due(Instant now) {
  if (warning_ == Duration::zero()) return;
  std::vector<std::tuple<std::string, Instant, Duration>> at_risk;
  {
    MutexLock guard(mutex_);
    for (auto& [id, entry] : entries_) {
      if (entry.warned || entry.lost_while_releasing || entry.server_restarted) continue;
      if (entry.deadline - warning_ > now || entry.deadline <= now) continue;
      entry.warned = true;  // marked even untold, or the expiry timer would come back at once
      // Its holder is letting go of it: nothing to warn about.
      if (!entry.releasing) at_risk.emplace_back(entry.target.key, entry.deadline, entry.deadline - now);
    }
  }
  for (const auto& [key, deadline, remaining] : at_risk) {
    events_->lease_at_risk(key, remaining);
    if (on_at_risk_) on_at_risk_(key, deadline, remaining);
  }
}

void Watchdog::set_wipe_check(std::unique_ptr<WipeCheck> check) {
  MutexLock guard(mutex_);
  TURNSTILE_CHECK_MSG(entries_.empty() && !wipe_check_, "set once, before anything is watched");
  wipe_check_ = std::move(check);
}

std::vector<std::optional<int>> Watchdog::renewed_slots() const {
  std::set<std::optional<int>> slots;  // ordered: checks take slots in a fixed order
  MutexLock guard(mutex_);
  for (const auto& [id, entry] : entries_) {
    if (entry.target.renew_script != nullptr) slots.insert(entry.slot);
  }
  return {slots.begin(), slots.end()};
}

void Watchdog::check_wipes(Instant started) {
  {
    MutexLock guard(mutex_);
    wipe_timer_.reset();
    if (stopped_) return;
  }
  TURNSTILE_CHECK(wipe_check_ != nullptr);
  if (wipe_check_->run(renewed_slots())) {
    MutexLock guard(mutex_);
    renew_soon_locked();
  }
  MutexLock guard(mutex_);
  if (wipe_timer_ || stopped_ || renewed_count_ == 0 || !wipe_check_->enabled()) return;
  const Instant next = std::max(started + wipe_check_->period(), runtime_.now());
  TURNSTILE_CHECK(next > started);
  wipe_timer_ = runtime_.schedule_at(next, [self = shared_from_this(), next] { self->check_wipes(next); });
}

void Watchdog::renew_all() {
  std::vector<RenewalBatch> batches = plan_renewals();
  // Pipelined: the batches go out in waves of up to half of
  // kMaxRenewalLocksInFlight holdings, each wave one Backend::send_evals()
  // (on a real backend, one write per server), and the next wave is sent
  // once no more than that half is still unanswered, so a server always
  // has the next wave in hand while the client reads the last one. Each
  // batch waits for its reply until its own deadline.
  std::deque<SentRenewal> in_flight;
  std::size_t locks_in_flight = 0;
  std::size_t next = 0;
  // Every pass sends a wave (one batch at least) or reads the oldest
  // reply; a batch is sent at most kMaxRenewalSends times.
  const std::size_t max_passes = batches.size() * (2 * static_cast<std::size_t>(kMaxRenewalSends)) + 1;
  for (std::size_t pass = 0; pass < max_passes && (next < batches.size() || !in_flight.empty()); ++pass) {
    if (next < batches.size() && locks_in_flight <= kMaxRenewalLocksInFlight / 2) {
      for (SentRenewal& sent : send_wave(batches, next)) {
        locks_in_flight += sent.batch.ids.size();
        in_flight.push_back(std::move(sent));
      }
      continue;
    }
    TURNSTILE_CHECK(!in_flight.empty());
    SentRenewal oldest = std::move(in_flight.front());
    in_flight.pop_front();
    TURNSTILE_CHECK(locks_in_flight >= oldest.batch.ids.size());
    locks_in_flight -= oldest.batch.ids.size();
    // Sent again (still the oldest): read first.
    if (std::optional<SentRenewal> again = finish_renewal(std::move(oldest))) {
      locks_in_flight += again->batch.ids.size();
      in_flight.push_front(std::move(*again));
    }
  }
  TURNSTILE_CHECK_MSG(in_flight.empty() && next == batches.size(), "every batch sent and answered or failed");
  TURNSTILE_CHECK(locks_in_flight == 0);
}

std::vector<Watchdog::SentRenewal> Watchdog::send_wave(std::vector<RenewalBatch>& batches, std::size_t& next) {
  TURNSTILE_CHECK(next < batches.size());
  std::vector<SentRenewal> wave;
  std::size_t locks = 0;
  // One batch at least, then as many as fit in half the window.
  while (next < batches.size() && (wave.empty() || locks + batches[next].ids.size() <= kMaxRenewalLocksInFlight / 2)) {
    if (std::optional<SentRenewal> call = plan_call(std::move(batches[next++]))) {
      locks += call->batch.ids.size();
      wave.push_back(std::move(*call));
    }
  }
  if (wave.empty()) return wave;
  std::vector<EvalRequest> requests;
  requests.reserve(wave.size());
  for (const SentRenewal& call : wave) requests.push_back(EvalRequest{call.batch.script, call.keys, call.args});
  std::vector<std::unique_ptr<PendingReply>> pending;
  try {
    pending = backend_.send_evals(std::move(requests));
    TURNSTILE_CHECK(pending.size() == wave.size());
  } catch (const std::exception&) {
    // Read as every call's reply.
    const std::exception_ptr error = std::current_exception();
    pending.clear();
    for (std::size_t i = 0; i < wave.size(); ++i) pending.push_back(std::make_unique<CompletedReply>(error));
  }
  for (std::size_t i = 0; i < wave.size(); ++i) {
    TURNSTILE_CHECK(pending[i] != nullptr && wave[i].sends == 0);
    wave[i].pending = std::move(pending[i]);
    wave[i].sends = 1;
  }
  return wave;
}

std::vector<Watchdog::RenewalBatch> Watchdog::plan_renewals() const {
  // Grouped by script, cluster slot and lock-delay (a fixed order), then
  // cut into batches; the keys and holders are read when each batch is
  // sent (plan_call). A key's slot never changes, so a batch stays in one.
  std::map<std::tuple<std::string_view, std::optional<int>, Duration::rep>, RenewalBatch> by_script;
  {
    MutexLock guard(mutex_);
    if (stopped_) return {};
    for (const auto& [id, entry] : entries_) {
      if (entry.target.renew_script == nullptr) continue;
      RenewalBatch& group = by_script[{entry.target.renew_script->name, entry.slot, entry.target.lock_delay.count()}];
      TURNSTILE_CHECK_MSG(group.ids.empty() || group.pass_wall_clock_ms == entry.target.pass_wall_clock_ms,
                          "every target of one renew script passes the wall clock alike");
      TURNSTILE_CHECK_MSG(group.ids.empty() || group.identities == !entry.target.identity_key.empty(),
                          "every target of one renew script has a holder identity, or none");
      group.script = entry.target.renew_script;
      group.pass_wall_clock_ms = entry.target.pass_wall_clock_ms;
      group.identities = !entry.target.identity_key.empty();
      group.lock_delay = entry.target.lock_delay;
      group.ids.push_back(id);
    }
  }
  std::vector<RenewalBatch> batches;
  for (auto& [script_and_slot, group] : by_script) {
    TURNSTILE_CHECK(group.script != nullptr && !group.ids.empty());
    for (std::size_t begin = 0; begin < group.ids.size(); begin += kMaxLocksPerRenewal) {
      const std::size_t end = std::min(group.ids.size(), begin + kMaxLocksPerRenewal);
      batches.push_back(
          RenewalBatch{.script = group.script,
                       .pass_wall_clock_ms = group.pass_wall_clock_ms,
                       .identities = group.identities,
                       .lock_delay = group.lock_delay,
                       .ids = std::vector<std::uint64_t>(group.ids.begin() + begin, group.ids.begin() + end)});
    }
  }
  return batches;
}

std::optional<Watchdog::SentRenewal> Watchdog::plan_call(RenewalBatch batch) {
  TURNSTILE_CHECK(batch.script != nullptr && batch.ids.size() <= kMaxLocksPerRenewal);
  SentRenewal call;
  // The server's lease (with the batch's lock-delay); deadlines use the holder's.
  call.args.push_back(std::to_string(
      std::chrono::duration_cast<std::chrono::milliseconds>(server_lease(lease_, batch.lock_delay)).count()));
  if (batch.pass_wall_clock_ms) call.args.push_back(std::to_string(runtime_.wall_clock_ms()));
  std::vector<std::uint64_t> ids;
  std::vector<std::string> identity_keys;
  {
    MutexLock guard(mutex_);
    if (stopped_) return std::nullopt;
    // The lease a successful renewal arms starts no earlier than this.
    call.sent_at = runtime_.now();
    for (const std::uint64_t id : batch.ids) {
      auto it = entries_.find(id);
      // Released, lost, extended (a fixed lease) or given another script or
      // lock-delay since the tick began (a rearm: its lease was just armed); never renewed past the maximum hold (the
      // expiry timer loses it).
      if (it == entries_.end()) continue;
      Entry& entry = it->second;
      // Nor past its deadline: the expiry timer loses it, and a renewal
      // then would keep a key nobody believes held (for the lease and the
      // lock-delay) from the others.
      if (entry.target.renew_script != batch.script || entry.target.lock_delay != batch.lock_delay ||
          entry.lost_while_releasing || entry.server_restarted || hold_limit(entry) <= call.sent_at ||
          entry.deadline <= call.sent_at) {
        continue;
      }
      entry.renewal_sent = call.sent_at;
      if (entry.extending && !entry.extend_floor) entry.extend_floor = call.sent_at;
      ids.push_back(id);
      call.keys.push_back(entry.target.key);
      call.args.push_back(entry.target.holder);
      if (!entry.target.identity_key.empty()) identity_keys.push_back(entry.target.identity_key);
    }
  }
  if (ids.empty()) return std::nullopt;
  // The identities after the locks (lib/holder_identity.lua), all or none.
  TURNSTILE_CHECK(identity_keys.size() == (batch.identities ? ids.size() : 0));
  for (std::string& key : identity_keys) call.keys.push_back(std::move(key));
  batch.ids = std::move(ids);
  call.batch = std::move(batch);
  return call;
}

void Watchdog::send_again(SentRenewal& call) {
  TURNSTILE_CHECK(call.sends < kMaxRenewalSends);
  ++call.sends;
  try {
    call.pending = backend_.send_eval(*call.batch.script, call.keys, call.args, EvalSync::none);
  } catch (const std::exception&) {
    call.pending = std::make_unique<CompletedReply>(std::current_exception());  // read as the reply
  }
  TURNSTILE_CHECK(call.pending != nullptr);
}

std::optional<Watchdog::SentRenewal> Watchdog::finish_renewal(SentRenewal call) {
  const Script& script = *call.batch.script;
  const std::vector<std::uint64_t>& ids = call.batch.ids;
  // The batch's own deadline: a reply not in by then is never read (the
  // pending is dropped; the real backend closes that connection), so its
  // holdings keep the deadlines they had and the expiry timer loses those
  // that pass; the next tick goes out on time meanwhile.
  const Instant reply_deadline = call.sent_at + renewal_period_;
  Reply reply;
  try {
    const Duration left = reply_deadline - runtime_.now();
    if (left <= Duration::zero() || !call.pending->wait_for(left)) {
      throw TimeoutError(std::string(script.name) + " got no reply within " + format_ms(renewal_period_) +
                         " (one renewal period)");
    }
    try {
      reply = call.pending->get().reply;
    } catch (const PoolExhaustedError&) {
      // Nothing was sent: every pooled connection stayed busy. Queued again
      // while the batch's deadline allows.
      if (call.sends < kMaxRenewalSends && runtime_.now() < reply_deadline) {
        send_again(call);
        return call;
      }
      throw;
    } catch (const TimeoutError&) {
      throw;
    } catch (const ConnectionError&) {
      // Closed or refused, not slow: after a server restart the first call
      // finds its pooled connection dead. Once more at once, on a new one,
      // whose handshake finds the restart (server_restarted()).
      if (++call.connection_failures < kRenewalAttempts && call.sends < kMaxRenewalSends) {
        send_again(call);
        return call;
      }
      throw;
    }
    if (!reply.is_array() || reply.as_array().size() != ids.size()) {
      throw ProtocolError(std::string(script.name) + " answered " + reply.to_string() + ", expected one flag per lock");
    }
  } catch (const Error&) {
    // The deadlines stay where they are: the expiry timer loses what is not
    // renewed in time; the next tick tries again meanwhile.
    {
      MutexLock guard(mutex_);
      for (const std::uint64_t id : ids) {
        auto it = entries_.find(id);
        if (it != entries_.end()) it->second.renewal_sent.reset();
      }
    }
    metrics_->renewal_failed(ids.size());
    events_->renewal_failed(call.keys, lease_, std::current_exception());
    on_error_(std::current_exception());
    return std::nullopt;
  }
  events_->renewals(call.keys, reply, lease_);
  apply_renewal(ids, call.sent_at, reply);
  return std::nullopt;
}

void Watchdog::apply_renewal(const std::vector<std::uint64_t>& ids, Instant sent_at, const Reply& reply) {
  TURNSTILE_CHECK(reply.is_array() && reply.as_array().size() == ids.size());
  std::vector<std::uint64_t> gone;
  std::vector<std::pair<std::string, Instant>> moved;
  {
    MutexLock guard(mutex_);
    for (std::size_t i = 0; i < ids.size(); ++i) {
      const Reply& flag = reply.as_array()[i];
      auto it = entries_.find(ids[i]);
      if (it == entries_.end()) continue;  // unlocked meanwhile
      it->second.renewal_sent.reset();
      if (it->second.server_restarted) continue;  // the expiry timer loses it
      if (flag.is_integer() && flag.as_integer() == 1) {
        // Extended (a fixed lease now) or renewed no more meanwhile: the
        // deadline stays the extension's.
        if (it->second.target.renew_script == nullptr) continue;
        const Instant renewed_to = deadline_of(sent_at, lease_);
        TURNSTILE_CHECK(renewed_to > sent_at);  // the watchdog lease leaves a window (constructor)
        set_deadline_locked(it->second, std::max(it->second.deadline, renewed_to));
        // A warning armed again may come before the expiry timer's turn.
        if (warning_ > Duration::zero()) arm_expiry_locked(due(it->second));
        if (on_deadline_) moved.emplace_back(it->second.target.key, it->second.deadline);
      } else {
        gone.push_back(ids[i]);
      }
    }
  }
  metrics_->renewed(
      static_cast<std::uint64_t>(std::count_if(reply.as_array().begin(), reply.as_array().end(), [](const Reply& flag) {
        return flag.is_integer() && flag.as_integer() == 1;
      })));
  tell_deadlines(moved);
  for (std::uint64_t id : gone) lose(id, LockLostReason::gone);
}

void Watchdog::tell_deadlines(const std::vector<std::pair<std::string, Instant>>& moved) const {
  if (!on_deadline_) return;
  for (const auto& [key, deadline] : moved) on_deadline_(key, deadline);
}

void Watchdog::lose(std::uint64_t id, LockLostReason reason) {
  std::function<void(std::uint64_t, LockLostReason)> on_lost;
  std::string key;
  {
    MutexLock guard(mutex_);
    auto it = entries_.find(id);
    if (it == entries_.end()) return;  // unwatched meanwhile: not lost, released
    if (it->second.releasing) {
      if (!it->second.lost_while_releasing) it->second.lost_while_releasing = reason;
      return;
    }
    on_lost = std::move(it->second.target.on_lost);
    key = it->second.target.key;
    if (it->second.target.renew_script != nullptr) renewed_less_locked();
    metrics_->hold_ended(it->second.target.flavor, runtime_.now() - it->second.held_since);
    erase_locked(it);
    TURNSTILE_CHECK(renewed_count_ <= entries_.size());
  }
  metrics_->lost(reason);
  events_->lost(key, reason);
  if (on_lost) on_lost(id, reason);
}

}  // namespace turnstile::detail
