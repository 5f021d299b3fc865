// The behaviour every lock flavor shares (lock_engine.h): validating
// durations, waiting, keeping the local record of holdings, watchdog
// registration, unlock semantics, queries and the asynchronous forms.
// Flavors supply scripts.

#include "locks/engine/lock_engine.h"

#include <algorithm>
#include <utility>

#include "core/check.h"
#include "locks/engine/acquire_wait.h"
#include "locks/handles/client_core.h"
#include "locks/engine/hold_record.h"
#include "locks/engine/latched_unlock.h"
#include "locks/engine/random_hex.h"
#include "locks/engine/reply_shape.h"
#include "locks/flavors/semaphore_common.h"
#include "locks/engine/task_future.h"
#include "locks/engine/wake_registry.h"
#include "lua_scripts.h"
#include "turnstile/errors.h"

namespace turnstile::detail {
namespace {

// The unlocks the owner of a holding lost now still owes it: its holds but
// those it already let go of (releases unconfirmed), at least one.
std::int64_t owed_unlocks(const Holding& holding) {
  return std::max<std::int64_t>(holding.count - holding.unconfirmed_releases, 1);
}

// A holding found lost, to be told once the core's mutex is released.
struct FoundLoss {
  std::string owner;
  std::stop_source loss{std::nostopstate};
  std::optional<std::uint64_t> watch_id;
  LockLostHandler handler;
};

// Under `core.mutex`: forgets the holding at `it` as lost. Its owner still
// owes its unlocks, each of which then returns quietly (release_or_throw()
// throws NotOwnerError), whatever trace of the hold Redis still has.
FoundLoss forget_as_lost(LockCore& core, std::map<std::string, Holding>::iterator it) TURNSTILE_REQUIRES(core.mutex) {
  core.lost.add(it->first, it->second.token, owed_unlocks(it->second));
  FoundLoss found{
      .owner = it->first, .loss = it->second.loss, .watch_id = it->second.watch_id, .handler = core.lost_handler};
  core.holdings.erase(it);
  return found;
}

// Without the core's mutex: the one way a loss is told, whatever found it
// (a renewal, the local deadline, extend(), a force-unlock through this
// client): the hold's loss token requested, then the lost handler run once.
void tell_loss(FoundLoss& found, const std::string& lock_name, LockLostReason reason) {
  found.loss.request_stop();
  if (found.handler) found.handler(LockLost{lock_name, found.owner, reason});
}

}  // namespace

LockEngine::LockEngine(std::shared_ptr<ClientCore> client, KeyLayout layout, const LockOptions& options,
                       std::string_view family)
    : layout_(std::move(layout)) {
  TURNSTILE_CHECK(client != nullptr);
  check_lock_name(layout_.name, layout_.name, "lock name");  // the key: the prefix is in it
  ClientCore& core = *client;
  lock_delay_ = core.lock_delay_of(options);
  if (!layout_.wake_registry.empty()) own_wake_channel_ = layout_.wake_channel(core.id);
  core_ = core.lock_core(std::move(client), layout_.name, layout_.channel, family);
}

LockEngine::~LockEngine() = default;

const std::string& LockEngine::name() const { return core_->name; }

std::string LockEngine::server_lease_ms_arg(Duration lease) const {
  return ClientCore::server_lease_ms_arg(lease, lock_delay_);
}
std::string LockEngine::holder_identity(const std::string& owner) const {
  return client().holder_identity(owner, lock_delay_);
}
ClientCore& LockEngine::client() const { return *core_->client; }
std::string LockEngine::current_owner() const { return core_->client->owner_of_current_task(); }

void LockEngine::report_background_error(std::exception_ptr error) const noexcept {
  core_->client->report_background_error(error);
}

void LockEngine::lock(std::optional<Duration> lease) {
  const bool acquired = acquire(current_owner(), lease, kNoDeadline, {});
  TURNSTILE_CHECK(acquired);
  (void)acquired;
}

bool LockEngine::try_lock(std::optional<Duration> lease, Instant deadline, std::stop_token stop) {
  return acquire(current_owner(), lease, deadline, std::move(stop));
}

PreparedAcquire LockEngine::prepare_acquire(const std::string& owner, std::optional<Duration> requested_lease) {
  check_lease(requested_lease);
  LockCore& core = *core_;
  if (!reentrant()) {
    MutexLock guard(core.mutex);
    auto it = core.holdings.find(owner);
    // Holds let go of (releases unconfirmed) are given back before the
    // attempt (settle_before_attempt): not held any more.
    if (it != core.holdings.end() && it->second.count > it->second.unconfirmed_releases) {
      throw InvalidArgumentError("lock " + in_quotes(core.name) + " is already held by this task and is not reentrant");
    }
  }
  if (requested_lease) client().watchdog->timing().check(*requested_lease, "lease");
  PreparedAcquire prepared;
  prepared.owner = owner;
  prepared.requested_lease = requested_lease;
  prepared.lease = requested_lease.value_or(client().watchdog->lease());
  prepared.scratch.sent_at = client().runtime->now();  // a composite sends it right after
  prepared.scratch.lock_delay = lock_delay_;
  prepared.scratch.grant_renewed = !requested_lease;
  return prepared;
}

bool LockEngine::acquire(const std::string& owner, std::optional<Duration> requested_lease, Instant deadline,
                         std::stop_token stop) {
  return acquire_task(WaitStyle::blocking, owner, requested_lease, deadline, std::move(stop)).run_blocking();
}

Task<bool> LockEngine::acquire_task(WaitStyle style, std::string owner, std::optional<Duration> requested_lease,
                                    Instant deadline, std::stop_token stop) {
  ClientCore& client = this->client();
  PreparedAcquire prepared = prepare_acquire(owner, requested_lease);
  Holding& scratch = prepared.scratch;  // what the successful attempt learned (token, fencing token)
  scratch.may_wait = deadline > client.runtime->now();
  AttemptSettlement settlement;
  Attempt last;
  bool acquired = false;
  AcquisitionTiming timing;
  // Whether the successful try kept this process registered for other
  // waiters of it (wake registry, "others"); none for a grant taken
  // without a try: see below.
  std::optional<bool> kept_registration;
  // Whether an attempt may have reached the server (one that found every
  // pooled connection busy did not): only then is there a place to give up.
  bool sent_any = false;
  std::exception_ptr failure;
  try {
    WaitLimits limits{
        .deadline = deadline, .stop = std::move(stop), .unreachable_limit = client.options.unreachable_limit};
    std::string channel = wait_channel(owner);
    WakeOptions wake = wake_options();
    if (scratch.may_wait && takes_process_grants()) {
      // Its offers and the grants made to them name this acquisition.
      scratch.grant_acquisition = random_hex128(*client.runtime);
      scratch.grant_floor = client.runtime->now();
      wake.grant_id = scratch.grant_acquisition;
    }
    Task<bool> waiting = acquire_with_wait(
        style, *client.wakeups, *client.runtime, channel, std::move(wake), std::move(limits),
        [&, channel]() -> TryOutcome {
          if (scratch.may_wait) {
            if (std::optional<Attempt> granted = take_grant(owner, prepared.lease, scratch)) {
              last = *granted;
              scratch.replica_ack = ReplicaAck{};  // no call of its own: nothing to wait for
              return TryOutcome(std::nullopt, WakeupHub::SharedChannel::ignored);
            }
          }
          const bool uncertain = settlement.uncertain;
          settle_before_attempt(owner, prepared.lease, settlement);
          // A hold the lost try may have taken (a grant too) was given back.
          if (uncertain) scratch.grant_floor = client.runtime->now();
          // This one has joined, and counts if it may wait.
          scratch.others_waiting = client.wakeups->waiting_on(channel) > (scratch.may_wait ? 1 : 0);
          try {
            last = attempt(owner, prepared.lease, scratch, deadline);
          } catch (const std::exception&) {
            note_failed_attempt(settlement, std::current_exception());
            sent_any = sent_any || !never_sent(std::current_exception());
            throw;
          }
          sent_any = true;
          if (last.acquired && client.watchdog->restarted_since(scratch.sent_at)) {
            // A restart found while this try was in flight: the process
            // that answered may be the one that restarted, its grant gone
            // with its keyspace. Never handed out as a hold (Watchdog::watch
            // would lose it at once, after lock() returned): a try failed
            // in transit, settled (any hold it took given back) and tried
            // again while the wait lasts; a try that may not wait gets the
            // error at once.
            const auto in_transit = std::make_exception_ptr(
                ConnectionError("the server restarted while the acquisition of " + in_quotes(name()) +
                                " was in flight; whether it was granted is unknown"));
            note_failed_attempt(settlement, in_transit);
            std::rethrow_exception(in_transit);
          }
          if (last.acquired && scratch.replica_ack.grant_unsafe()) {
            // On the master alone (no replica acknowledged it: one in its
            // first sync, or lagging): undone, and tried again while the
            // wait lasts, as through a failover (ReplicaSyncError is
            // transient); a try that may not wait gets the error at once.
            try {
              undo_unreplicated(owner, prepared.lease, scratch);
            } catch (const std::exception&) {
              note_failed_attempt(settlement, std::current_exception());
              throw;
            }
          }
          // A success: this process holds it, and its release wakes a
          // registered process.
          if (last.acquired) {
            kept_registration = scratch.others_waiting;
            return TryOutcome(std::nullopt, WakeupHub::SharedChannel::ignored);
          }
          TryOutcome outcome(last.retry_after_ms, last.holder_may_be_foreign ? WakeupHub::SharedChannel::heeded
                                                                             : WakeupHub::SharedChannel::ignored);
          outcome.holder_lease_left_ms = last.holder_lease_left_ms;
          outcome.near_retry_after_ms = last.near_retry_after_ms;
          if (scratch.may_wait && client.events->on(EventLevel::info)) {
            outcome.queue_position = queue_position_for_event(owner);
          }
          return outcome;
        },
        &timing, client.wait_subject(name(), flavor()));
    acquired = co_await std::move(waiting);
  } catch (const std::exception&) {
    failure = std::current_exception();
  }
  if (failure) {
    if (scratch.may_wait && sent_any) abandon_reporting_errors(owner, scratch);
    std::rethrow_exception(failure);
  }
  if (!acquired) {
    client.metrics->failed_try();
    if (scratch.may_wait && sent_any) abandon_reporting_errors(owner, scratch);
    co_return false;
  }
  TURNSTILE_CHECK(last.acquired);
  TURNSTILE_CHECK_MSG(!scratch.replica_ack.grant_unsafe(), "an unreplicated or unsynced hold is undone in its try");
  record_acquired(owner, requested_lease, prepared.lease, last, scratch);
  client.acquired(name(), flavor(), timing);
  if (kept_registration && fleet_wakeups()) {
    settle_registration_after_success(client, layout_, wait_channel(owner), {.others_sent = *kept_registration});
  }
  co_return true;
}

void LockEngine::settle_before_attempt(const std::string& owner, Duration lease, AttemptSettlement& settlement) {
  settlement.held_before = settle_unconfirmed_releases(owner);
  // A server restart found since this owner's last attempt may have lost
  // writes (an append-only file's last second, a lagging replica promoted)
  // and brought back a hold it had released: this attempt would stack on
  // it as a reentrant hold that no unlock gives back, and the watchdog
  // would keep it (the lock never free for the others). Checked as after
  // an attempt failed in transit, once per restart.
  if (reentrant() && restart_since_settled(owner)) settlement.uncertain = true;
  // An attempt that failed in transit may have run on the server: for a
  // reentrant flavor, this attempt would take a second hold that one unlock
  // does not give back. The token lock's script recognises its own token
  // instead (kept across the tries of one acquisition).
  if (settlement.uncertain && reentrant()) undo_phantom_hold(owner, settlement.held_before, lease);
  settlement.uncertain = false;
}

void LockEngine::note_failed_attempt(AttemptSettlement& settlement, const std::exception_ptr& error) {
  settlement.uncertain = is_transient(error) && !never_sent(error);
}

bool LockEngine::restart_since_settled(const std::string& owner) {
  const std::uint64_t restarts = client().server_restarts->load();
  if (restarts == 0) return false;
  MutexLock guard(core_->mutex);
  if (core_->restarts_settled.size() >= kMaxRestartsSettled && !core_->restarts_settled.contains(owner)) {
    core_->restarts_settled.clear();
  }
  std::uint64_t& settled = core_->restarts_settled[owner];
  if (settled == restarts) return false;
  settled = restarts;
  return true;
}

void LockEngine::undo_phantom_hold(const std::string& owner, std::int64_t held_before, Duration lease) {
  const Status found = status(owner, nullptr);
  // The lost attempt did take a hold, or a restart brought back holds
  // released before it: give those back. Never believed held, so neither
  // recorded nor watched.
  release_stale_holds(owner, lease, found.hold_count - held_before);
}

ReleaseResult LockEngine::release_stale_holds(const std::string& owner, Duration lease, std::int64_t at_most) {
  Holding phantom;
  phantom.lease = lease;
  phantom.lock_delay = lock_delay_;
  ReleaseResult result = ReleaseResult::still_held;
  // Stops at the owner's last hold, or at none left (its lease ran out meanwhile).
  for (std::int64_t released = 0; released < std::min(at_most, kMaxStaleHolds); ++released) {
    result = release(owner, phantom);
    if (result != ReleaseResult::still_held) break;
  }
  return result;
}

std::int64_t LockEngine::settle_unconfirmed_releases(const std::string& owner) {
  Holding holding;
  {
    MutexLock guard(core_->mutex);
    auto it = core_->holdings.find(owner);
    if (it == core_->holdings.end()) return 0;
    if (it->second.unconfirmed_releases == 0) return it->second.count;
    holding = it->second;
  }
  const std::int64_t kept = holding.count - holding.unconfirmed_releases;
  TURNSTILE_CHECK(kept >= 0);
  // A failed release may have run (its reply lost): Redis's count says how
  // many of the unconfirmed holds are left. At most that many releases.
  const std::int64_t left = status(owner, &holding).hold_count - kept;
  for (std::int64_t released = 0; released < std::min(left, holding.unconfirmed_releases); ++released) {
    if (release(owner, holding) == ReleaseResult::not_owner) break;  // its lease ran out meanwhile
  }
  std::optional<std::uint64_t> unwatched;
  {
    MutexLock guard(core_->mutex);
    auto it = core_->holdings.find(owner);
    // Gone meanwhile (its deadline passed, a loss): nothing is held.
    if (it == core_->holdings.end() || it->second.watch_id != holding.watch_id) return 0;
    if (kept == 0) {
      unwatched = it->second.watch_id;
      core_->holdings.erase(it);
    } else {
      it->second.count = kept;
      it->second.unconfirmed_releases = 0;
    }
  }
  if (unwatched) client().watchdog->unwatch(*unwatched);
  return kept;
}

bool LockEngine::finish_acquire(PreparedAcquire& prepared, PendingReply& sent) {
  TURNSTILE_CHECK(prepared.call.script != nullptr);
  TURNSTILE_CHECK(!prepared.scratch.may_wait);  // one try: nothing queued to abandon
  SyncedReply synced = sent.get();
  prepared.scratch.replica_ack = synced.ack;
  const Attempt result = attempt_result(synced.reply, prepared.scratch);
  if (!result.acquired) return false;
  if (prepared.scratch.replica_ack.grant_unsafe()) undo_unreplicated(prepared.owner, prepared.lease, prepared.scratch);
  record_acquired(prepared.owner, prepared.requested_lease, prepared.lease, result, prepared.scratch);
  return true;
}

LockEngine::Attempt LockEngine::attempt(const std::string& owner, Duration lease, Holding& holding, Instant deadline) {
  const ScriptCall call = attempt_call(owner, lease, holding);
  TURNSTILE_CHECK(call.script != nullptr);
  const Instant now = client().runtime->now();
  holding.sent_at = now;  // the lease it may arm starts no earlier
  EvalOptions options;
  if (holding.may_wait && deadline != kNoDeadline) options.send_within = std::max(deadline - now, Duration::zero());
  SyncedReply synced = client().backend->eval_synced_within(*call.script, call.keys, call.args, options);
  holding.replica_ack = synced.ack;
  Attempt result = attempt_result(synced.reply, holding);
  // A shape refused is thrown above: the key is a lock of this flavor.
  if (!result.acquired) {
    holding.shape_seen = true;
    holding.grant_floor = std::max(holding.grant_floor, holding.grant_offered);  // no grant before this try
  }
  return result;
}

void LockEngine::record_acquired(const std::string& owner, std::optional<Duration> requested_lease, Duration lease,
                                 const Attempt& attempt, const Holding& scratch) {
  TURNSTILE_CHECK(attempt.acquired);
  ClientCore& client = this->client();
  LockCore& core = *core_;
  std::optional<std::uint64_t> rearm;
  const Script* renew = nullptr;
  {
    MutexLock guard(core.mutex);
    core.lost.forget(owner);
    Holding& holding = core.holdings[owner];
    if (!holding.loss.stop_possible()) holding.loss = std::stop_source();
    holding.lease = lease;
    holding.lock_delay = lock_delay_;
    holding.fencing_token = attempt.fencing_token;
    holding.sent_at = scratch.sent_at;
    ++holding.count;
    if (!scratch.token.empty()) holding.token = scratch.token;
    // Renewed while any hold of it was taken without a fixed lease (Redisson).
    holding.renewed = holding.renewed || !requested_lease;
    renew = holding.renewed ? &renew_script() : nullptr;
    if (holding.watch_id) {
      rearm = holding.watch_id;
    } else {
      std::weak_ptr<LockCore> weak_core = core_;
      holding.watch_id = client.watchdog->watch(Watchdog::Target{
          .renew_script = renew,
          .key = core.name,
          .identity_key = layout().holder_identity,
          .holder = renew_holder(owner, holding),
          .flavor = flavor(),
          .sent_at = scratch.sent_at,
          .lease = lease,
          .lock_delay = lock_delay_,
          .on_lost =
              [weak_core, owner](std::uint64_t watch_id, LockLostReason reason) {
                const std::shared_ptr<LockCore> lost_core = weak_core.lock();
                if (!lost_core) return;
                FoundLoss found;
                {
                  MutexLock lost_guard(lost_core->mutex);
                  auto it = lost_core->holdings.find(owner);
                  if (it == lost_core->holdings.end() || it->second.watch_id != watch_id) return;
                  found = forget_as_lost(*lost_core, it);
                }
                tell_loss(found, lost_core->name, reason);
              },
      });
    }
  }
  // The watchdog's own lock is never taken under the core's, except by
  // watch() above, which calls nothing back.
  if (rearm) client.watchdog->rearm(*rearm, scratch.sent_at, lease, renew, lock_delay_);
}

void LockEngine::undo_unreplicated(const std::string& owner, Duration lease, Holding& scratch) {
  client().metrics->unreplicated_grant();
  scratch.lease = lease;
  scratch.lock_delay = lock_delay_;
  std::string undo;
  try {
    undo = release(owner, scratch) == ReleaseResult::not_owner ? "; it was already gone" : "; it was released again";
  } catch (const std::exception& error) {
    undo = std::string("; releasing it again failed (it runs out with its lease): ") + error.what();
  }
  const ReplicaAck& ack = scratch.replica_ack;
  TURNSTILE_CHECK(ack.grant_unsafe());
  if (ack.unconfirmed()) {
    throw ReplicaSyncError("lock " + in_quotes(core_->name) + " was acquired on the master, but none of its " +
                           std::to_string(ack.replicas) + " replicas acknowledged it within the replica-sync timeout" +
                           undo);
  }
  throw AofSyncError("lock " + in_quotes(core_->name) +
                     " was acquired, but the master did not confirm its fsync to the append-only file within "
                     "aof_sync_timeout_ms" +
                     undo);
}

ReleaseResult LockEngine::release(const std::string& owner, Holding& holding) {
  const std::optional<ScriptCall> call = release_call(owner, holding);
  if (!call) return ReleaseResult::not_owner;
  return send_release(*call, nullptr);
}

ReleaseResult LockEngine::send_release(const ScriptCall& call, std::unique_ptr<PendingReply> first_try,
                                       ReleaseRetries retries) {
  TURNSTILE_CHECK(call.script != nullptr);
  Backend& backend = *client().backend;
  const int attempts = release_retriable() && retries == ReleaseRetries::allowed ? kUnlockAttempts : 1;
  int sent = 0;
  int unsent = 0;
  // A latched unlock sent again reads its latch first (resend_args).
  std::optional<std::vector<std::string>> args_again;
  // Each pass counts one send or one call that was never sent: bounded.
  for (;;) {
    TURNSTILE_CHECK(sent < attempts && unsent < kUnsentUnlockAttempts);
    try {
      const Reply reply = first_try ? std::exchange(first_try, nullptr)->get().reply
                                    : backend.eval(*call.script, call.keys, args_again ? *args_again : call.args);
      return release_result(reply);
    } catch (const PoolExhaustedError&) {
      // Every pooled connection stayed busy: nothing was sent, so sending
      // it now is as safe as the first send was, for every flavor (a
      // token lock's unlock too), and is no try in transit.
      if (++unsent >= kUnsentUnlockAttempts) throw;
    } catch (const ConnectionError&) {
      // The reply may be lost after the server ran the script: a latched
      // unlock answers the same call again with its first result.
      if (++sent >= attempts) throw;
      if (call.latch_lifetime_arg && !args_again) args_again = resend_args(call);
    }
  }
}

void LockEngine::unlock() { release_quietly(current_owner()); }

void LockEngine::release_quietly(const std::string& owner) { (void)release_owner(owner, ReleaseMode::quietly); }

bool LockEngine::release_owner(const std::string& owner, ReleaseMode mode) {
  PreparedRelease prepared = prepare_release(owner);
  // Every recorded holding is watched (its local deadline), so a watch id
  // is what "this client believed it held" means.
  const bool believed_held = prepared.holding.watch_id.has_value();
  bool released = false;
  try {
    released = finish_release(prepared, nullptr);
  } catch (const std::exception&) {
    // Nothing of ours here: the caller's mistake, or another process's hold
    // under the same owner id; either way not a hold to let go quietly.
    if (mode == ReleaseMode::strictly || (!believed_held && !prepared.lost)) throw;
    // The hold was let go of: the lease ends it on the server, and its
    // renewal has stopped (finish_release).
    report_background_error(std::current_exception());
    return false;
  }
  if (released) return prepared.left_nothing;
  if (believed_held && !prepared.lost) {
    // Believed held, but Redis no longer had it (force-unlocked, expired or
    // evicted before a renewal could tell): a loss, told now, as every loss
    // is, whichever form of release found it. The holds the owner still
    // believed it had beyond this one are owed unlocks of a lost hold
    // (quiet, as after any loss).
    FoundLoss found{.owner = owner, .loss = prepared.holding.loss, .watch_id = std::nullopt, .handler = nullptr};
    {
      MutexLock guard(core_->mutex);
      const std::int64_t owed = prepared.holding.count - 1;
      if (owed > 0) core_->lost.add(owner, prepared.holding.token, owed);
      found.handler = core_->lost_handler;
    }
    tell_loss(found, core_->name, LockLostReason::gone);
  }
  // A loss was told when it was found (now or before): quiet, or NotOwnerError.
  if (mode == ReleaseMode::quietly && (believed_held || prepared.lost)) return false;
  throw NotOwnerError("attempt to unlock lock " + in_quotes(core_->name) + ", not locked by current task (owner id " +
                      owner + ")");
}

void LockEngine::extend(Duration lease) { extend_for(current_owner(), lease); }

void LockEngine::extend_for(const std::string& owner, Duration lease) {
  (void)lease_ms_of(lease);  // checked
  ClientCore& client = this->client();
  Watchdog& watchdog = *client.watchdog;
  watchdog.timing().check(lease, "lease");
  const auto not_owner = [&] {
    return NotOwnerError("attempt to extend lock " + in_quotes(core_->name) +
                         ", not locked by current task (owner id " + owner + ")");
  };
  Holding holding;
  {
    MutexLock guard(core_->mutex);
    auto it = core_->holdings.find(owner);
    if (it == core_->holdings.end()) throw not_owner();
    holding = it->second;
  }
  TURNSTILE_CHECK(holding.watch_id);
  const std::uint64_t watch_id = *holding.watch_id;
  if (!watchdog.begin_extend(watch_id)) throw not_owner();  // lost meanwhile
  const Script& script = renew_script();
  const Instant sent_at = client.runtime->now();  // the lease it arms starts no earlier
  bool extended = false;
  try {
    const Reply reply = client.backend->eval(
        script, {core_->name, layout().holder_identity},
        {ClientCore::server_lease_ms_arg(lease, holding.lock_delay), renew_holder(owner, holding)});
    const std::int64_t flag = integer_array_reply(script, reply, 1)[0];
    if (flag != 0 && flag != 1) throw_unexpected(script, reply, "{0 or 1}");
    extended = flag == 1;
  } catch (...) {
    watchdog.finish_extend(watch_id, false, sent_at, lease);
    throw;
  }
  watchdog.finish_extend(watch_id, extended, sent_at, lease);
  std::optional<FoundLoss> found;
  {
    MutexLock guard(core_->mutex);
    auto it = core_->holdings.find(owner);
    if (it == core_->holdings.end() || it->second.watch_id != watch_id) throw not_owner();  // lost meanwhile
    if (extended) {
      it->second.lease = lease;  // what a partial unlock re-arms
      it->second.renewed = false;
    } else {
      found = forget_as_lost(*core_, it);  // gone on the server: a lost lock
    }
  }
  if (found) {
    watchdog.unwatch(watch_id);
    tell_loss(*found, core_->name, LockLostReason::gone);
    throw not_owner();
  }
}

PreparedRelease LockEngine::prepare_release(const std::string& owner) {
  PreparedRelease prepared;
  prepared.owner = owner;
  // A hold past its local deadline was lost then, whether or not the expiry
  // timer has had its turn: lost first, as the timer would have, so this is
  // a lost hold's release (one try; not the caller's, told once). With a
  // lock-delay its key may still be on the server, and would be released
  // as if the holder had let go in time.
  std::optional<std::uint64_t> watch_id;
  {
    MutexLock guard(core_->mutex);
    if (const auto it = core_->holdings.find(owner); it != core_->holdings.end()) watch_id = it->second.watch_id;
  }
  if (watch_id) client().watchdog->lose_if_due(*watch_id);
  {
    MutexLock guard(core_->mutex);
    const std::optional<std::string> lost_token = core_->lost.take(owner);
    prepared.lost = lost_token.has_value();
    auto it = core_->holdings.find(owner);
    if (it != core_->holdings.end()) {
      prepared.holding = it->second;
    } else {
      // Lost: released all the same (what Redis still has of it goes
      // early), but reported as not owned.
      if (lost_token) prepared.holding.token = *lost_token;
      // Not held through this client's records; Redis decides (the hold may
      // come from another process with the same owner id, as in Redisson).
      prepared.holding.lease = client().watchdog->lease();
    }
  }
  prepared.call = release_call(owner, prepared.holding);
  return prepared;
}

bool LockEngine::finish_release(PreparedRelease& prepared, std::unique_ptr<PendingReply> sent) {
  TURNSTILE_CHECK(prepared.call || sent == nullptr);
  Watchdog& watchdog = *client().watchdog;
  // A renewal that finds the lock gone while this unlock is on its way is
  // held back: the unlock decides whether it was a loss.
  const std::optional<std::uint64_t> watched = prepared.holding.watch_id;
  if (watched) watchdog.begin_release(*watched);
  ReleaseResult result = ReleaseResult::not_owner;
  bool gave_back_stale = false;
  try {
    // A hold already lost gets one try: what Redis may still have of it
    // goes early if the link answers; its lease ends it if not.
    if (prepared.call) {
      result =
          send_release(*prepared.call, std::move(sent), prepared.lost ? ReleaseRetries::none : ReleaseRetries::allowed);
    }
  } catch (...) {
    if (watched) {
      // The holder let go as far as it could: renewing a lock it tried to
      // release would keep it forever if the caller does not retry. It
      // stays held (a retried unlock works) until its deadline. Whatever
      // the error: a server out of memory refuses the unlock's writes
      // (OOM, not transient) but still runs the renewal's PEXPIRE.
      watchdog.stop_renewing(*watched);
      {
        // Let go of, though still held: the owner's next acquisition gives
        // it back first. A retried unlock of the same hold counts once.
        MutexLock guard(core_->mutex);
        auto it = core_->holdings.find(prepared.owner);
        if (it != core_->holdings.end() && it->second.watch_id == watched) {
          it->second.unconfirmed_releases = std::min(it->second.unconfirmed_releases + 1, it->second.count);
        }
      }
      watchdog.end_release(*watched);
    }
    throw;
  }
  if (result == ReleaseResult::still_held) {
    bool believes_more = false;
    {
      MutexLock guard(core_->mutex);
      auto it = core_->holdings.find(prepared.owner);
      if (it != core_->holdings.end() && it->second.count > 1) {
        --it->second.count;
        // A retried unlock confirms the release that failed.
        it->second.unconfirmed_releases = std::max<std::int64_t>(it->second.unconfirmed_releases - 1, 0);
        believes_more = true;
      }
    }
    if (believes_more) {
      if (watched) watchdog.end_release(*watched);
      return true;
    }
    // The server keeps holds of this owner beyond the last one it believed
    // (brought back by a restart that lost their unlock, taken by an
    // attempt whose reply was lost): given back now, or the owner's next
    // hold would stack on them and its renewals keep them for good. Its
    // own hold is released either way.
    give_back_stale_holds(prepared.owner, prepared.holding.lease);
    result = ReleaseResult::released;
    gave_back_stale = true;
  }

  std::optional<std::uint64_t> watch_id;
  {
    MutexLock guard(core_->mutex);
    auto it = core_->holdings.find(prepared.owner);
    if (it != core_->holdings.end()) {
      watch_id = it->second.watch_id;
      core_->holdings.erase(it);
    }
  }
  if (watch_id) watchdog.unwatch(*watch_id);
  // A holding lost before this release was not the caller's to release,
  // whatever trace of it Redis still had.
  const bool released = result == ReleaseResult::released && !prepared.lost;
  prepared.left_nothing = released && !gave_back_stale;
  return released;
}

void LockEngine::give_back_stale_holds(const std::string& owner, Duration lease) {
  try {
    release_stale_holds(owner, lease, kMaxStaleHolds);
  } catch (const std::exception&) {
    // Their lease ends them; the owner's next attempt settles them first
    // if a restart brought them back.
    if (!is_transient(std::current_exception())) throw;
    report_background_error(std::current_exception());
  }
}

void LockEngine::release_or_throw(const std::string& owner) { (void)release_owner(owner, ReleaseMode::strictly); }

std::string LockEngine::take_hold_owner() {
  {
    MutexLock guard(core_->mutex);
    if (!core_->idle_hold_owners.empty()) {
      std::string owner = std::move(core_->idle_hold_owners.back());
      core_->idle_hold_owners.pop_back();
      TURNSTILE_CHECK(!core_->holdings.contains(owner));
      return owner;
    }
  }
  return client().next_hold_owner();
}

void LockEngine::release_hold(const std::string& owner, ReleaseMode mode) {
  if (!release_owner(owner, mode)) return;  // a trace may be left: the id retires
  MutexLock guard(core_->mutex);
  if (core_->holdings.contains(owner)) return;
  core_->idle_hold_owners.push_back(owner);
  if (core_->idle_hold_owners.size() > kMaxIdleHoldOwners) core_->idle_hold_owners.pop_front();
}

bool LockEngine::force_unlock() {
  ClientCore& client = this->client();
  LockCore& core = *core_;
  const bool deleted = force_delete();
  // None of this client's tasks holds it any more: each holding is lost,
  // told as any loss (an unlock owed to it, by a std::scoped_lock say,
  // returns quietly).
  std::vector<FoundLoss> found;
  {
    MutexLock guard(core.mutex);
    while (!core.holdings.empty()) found.push_back(forget_as_lost(core, core.holdings.begin()));
  }
  for (FoundLoss& loss : found) {
    if (loss.watch_id) client.watchdog->unwatch(*loss.watch_id);
    tell_loss(loss, core.name, LockLostReason::gone);
  }
  return deleted;
}

bool LockEngine::force_delete() {
  // The optional keys in their one order (lua/lib/holder_identity.lua):
  // the identity, then the registry.
  std::vector<std::string> keys{core_->name, core_->channel, layout().holder_identity};
  if (fleet_wakeups()) keys.push_back(layout_.wake_registry);
  const Reply reply = client().backend->eval(
      scripts::lock_force_unlock, keys,
      {std::string(kUnlockMessage), std::string(key_type()), std::string(client().backend->publish_command())});
  const std::int64_t deleted = integer_reply(scripts::lock_force_unlock, reply);
  if (deleted != 0 && deleted != 1) throw_unexpected(scripts::lock_force_unlock, reply, "0 or 1");
  return deleted == 1;
}

std::string LockEngine::wait_channel(const std::string&) const { return core_->channel; }

bool LockEngine::fleet_wakeups() const { return detail::fleet_wakeups(client(), layout_); }

WakeOptions LockEngine::wake_options() const {
  WakeOptions wake{.rule = WakeRule::lock};
  if (fleet_wakeups()) wake.own_channel = own_wake_channel_;
  return wake;
}

// The one order of a script's optional trailing keys and arguments
// (lua/lib/holder_identity.lua): the holder's identity, then the registry.
void LockEngine::add_wake_registry(ScriptCall& call, const Holding& holding) const {
  if (!fleet_wakeups()) return;
  add_wake_registry_key(call);
  // An acquisition's own three arguments, then the identity's value.
  TURNSTILE_CHECK(call.args.size() == 4);
  const ClientCore& client = this->client();
  TURNSTILE_CHECK(!own_wake_channel_.empty());
  call.args.push_back(own_wake_channel_);
  call.args.push_back(std::to_string(client.runtime->wall_clock_ms()));
  call.args.emplace_back(holding.may_wait ? "1" : "0");
  call.args.emplace_back(holding.others_waiting ? "1" : "0");
}

void LockEngine::add_wake_registry_key(ScriptCall& call) const {
  if (!fleet_wakeups()) return;
  TURNSTILE_CHECK(!call.keys.empty() && call.keys.back() == layout_.holder_identity);
  call.keys.push_back(layout_.wake_registry);
}

std::optional<std::int64_t> LockEngine::queue_position_for_event(const std::string& owner) {
  (void)owner;
  return std::nullopt;
}

void LockEngine::abandon(const std::string& owner, const Holding&) {
  leave_wake_registry(client(), layout_, wait_channel(owner));
}

std::optional<LockEngine::Attempt> LockEngine::take_grant(const std::string&, Duration, Holding&) {
  return std::nullopt;
}

std::optional<LockEngine::Attempt> LockEngine::accept_grant(const std::optional<std::string>& grant, Duration lease,
                                                            Holding& scratch) const {
  // With replicas (replica sync), the try takes it: its reply waits for a
  // replica to acknowledge the grant, which the releaser's unlock did not.
  if (scratch.replica_ack.replicas > 0) return std::nullopt;
  const std::optional<Instant> sent_at =
      grant_sent_at(client(), grant, scratch.grant_acquisition, scratch.grant_floor, lease, scratch.grant_renewed);
  if (!sent_at) return std::nullopt;
  scratch.sent_at = *sent_at;
  return Attempt{.acquired = true};
}

void LockEngine::abandon_reporting_errors(const std::string& owner, const Holding& scratch) {
  try {
    abandon(owner, scratch);
  } catch (const std::exception&) {
    report_background_error(std::current_exception());
  }
}

LockEngine::Status LockEngine::status_of(const std::string& owner, StatusQuery query) {
  std::optional<Holding> holding;
  bool lost = false;
  {
    MutexLock guard(core_->mutex);
    auto it = core_->holdings.find(owner);
    if (it != core_->holdings.end()) holding = it->second;
    lost = !holding && core_->lost.contains(owner);
  }
  // The holder's belief first: past its local deadline it is lost now.
  std::optional<Instant> deadline;
  if (holding && holding->watch_id) {
    deadline = client().watchdog->deadline(*holding->watch_id);
    if (!deadline || *deadline <= client().runtime->now()) {
      holding.reset();
      lost = true;
    }
  }
  // What the owner holds after a loss is known here: nothing. No call goes
  // to Redis for it (lock.h, "The local deadline").
  if (lost && query == StatusQuery::own_holds) return Status{.locked = true, .hold_count = 0, .pttl_ms = -2};
  Status result;
  try {
    result = status(owner, holding ? &*holding : nullptr);
  } catch (const std::exception&) {
    // The call outlived the local deadline (a frozen link): the owner's
    // holds are known without its answer.
    const bool lapsed = deadline && *deadline <= client().runtime->now();
    if (lapsed && query == StatusQuery::own_holds) return Status{.locked = true, .hold_count = 0, .pttl_ms = -2};
    throw;
  }
  // A reply after the local deadline never revives the holding.
  if (lost || (deadline && *deadline <= client().runtime->now())) {
    result.hold_count = 0;
  } else if (holding && holding->watch_id && holding->count > holding->unconfirmed_releases && result.hold_count == 0) {
    // Believed held, and Redis has none of it: a loss found by a query,
    // told now as any loss (once: a renewal or an unlock finding it too
    // finds the holding forgotten).
    std::optional<FoundLoss> found;
    {
      MutexLock guard(core_->mutex);
      auto it = core_->holdings.find(owner);
      if (it != core_->holdings.end() && it->second.watch_id == holding->watch_id) found = forget_as_lost(*core_, it);
    }
    if (found) {
      client().watchdog->unwatch(*holding->watch_id);
      tell_loss(*found, core_->name, LockLostReason::gone);
    }
  } else if (deadline && result.hold_count > 0) {
    const auto left_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - client().runtime->now()).count();
    if (result.pttl_ms < 0 || result.pttl_ms > left_ms) result.pttl_ms = std::max<std::int64_t>(left_ms, 0);
  }
  return result;
}

bool LockEngine::is_held_by_current_thread() {
  return status_of(current_owner(), StatusQuery::own_holds).hold_count > 0;
}
std::int64_t LockEngine::hold_count() { return status_of(current_owner(), StatusQuery::own_holds).hold_count; }
bool LockEngine::is_locked() { return status_of(current_owner(), StatusQuery::lock).locked; }

std::optional<std::chrono::milliseconds> LockEngine::remaining_lease() {
  const Status status = status_of(current_owner(), StatusQuery::lock);
  if (!status.locked) return std::nullopt;
  // -1: no expiry, which only another tool can have written.
  if (status.pttl_ms < 0) return std::chrono::milliseconds::max();
  return std::chrono::milliseconds(status.pttl_ms);
}

std::optional<std::int64_t> LockEngine::fencing_token() {
  MutexLock guard(core_->mutex);
  auto it = core_->holdings.find(current_owner());
  if (it == core_->holdings.end()) return std::nullopt;
  return it->second.fencing_token;
}

std::stop_token LockEngine::loss_token() {
  {
    MutexLock guard(core_->mutex);
    auto it = core_->holdings.find(current_owner());
    if (it != core_->holdings.end() && it->second.loss.stop_possible()) return it->second.loss.get_token();
  }
  // Not held: work that needs the lock must not run.
  return stopped_token();
}

bool LockEngine::believed_held(const std::string& owner) {
  std::optional<std::uint64_t> watch_id;
  {
    MutexLock guard(core_->mutex);
    auto it = core_->holdings.find(owner);
    if (it == core_->holdings.end()) return false;
    watch_id = it->second.watch_id;
  }
  TURNSTILE_CHECK(watch_id.has_value());  // every recorded holding is watched
  const std::optional<Instant> deadline = client().watchdog->deadline(*watch_id);
  return deadline && *deadline > client().runtime->now();
}

// One hold as a value (turnstile/hold.h): the engine's holding of an
// owner id that no task uses.
class EngineHold final : public HoldRecord {
 public:
  EngineHold(std::shared_ptr<LockEngine> engine, std::string owner)
      : HoldRecord(engine->flavor(), engine->name(), std::move(owner)), engine_(std::move(engine)) {
    MutexLock guard(engine_->core_->mutex);
    auto it = engine_->core_->holdings.find(this->owner);
    TURNSTILE_CHECK(it != engine_->core_->holdings.end() && it->second.loss.stop_possible());
    fencing_token = it->second.fencing_token;
    loss_ = it->second.loss;
  }

  bool held() const override { return !released() && !loss_.stop_requested() && engine_->believed_held(owner); }
  std::stop_token loss_token() const override { return loss_.get_token(); }
  void extend(Duration lease) override { engine_->extend_for(owner, lease); }
  Runtime& runtime() const override { return *engine_->client().runtime; }

 private:
  void release(bool strict) override {
    engine_->release_hold(owner, strict ? LockEngine::ReleaseMode::strictly : LockEngine::ReleaseMode::quietly);
  }
  void report_background_error(std::exception_ptr error) const noexcept override {
    engine_->report_background_error(error);
  }

  std::shared_ptr<LockEngine> engine_;
  std::stop_source loss_;
};

LockHold LockEngine::try_acquire_hold(const AcquireOptions& options) {
  check_lease(options.lease);
  std::string owner = take_hold_owner();
  if (!acquire(owner, options.lease, client().runtime->deadline_after(options.wait), options.stop)) return {};
  return wrap_hold(std::make_shared<EngineHold>(shared_from_this(), std::move(owner)));
}

Future<LockHold> LockEngine::try_acquire_hold_async(const AcquireOptions& options) {
  check_lease(options.lease);
  const Instant deadline = client().runtime->deadline_after(options.wait);
  std::string owner = take_hold_owner();
  Task<bool> acquiring = acquire_task(WaitStyle::suspending, owner, options.lease, deadline, options.stop);
  return start_future<LockHold>(*client().runtime, std::move(acquiring),
                                [self = shared_from_this(), owner](bool acquired) -> LockHold {
                                  if (!acquired) return {};
                                  return wrap_hold(std::make_shared<EngineHold>(self, owner));
                                });
}

void LockEngine::set_lost_handler(LockLostHandler handler) {
  MutexLock guard(core_->mutex);
  core_->lost_handler = std::move(handler);
}

// The asynchronous forms act for the calling task: the owner id is taken
// now, not on the task that runs them. They keep the engine alive, so the
// handle they were started from may go first.
Future<void> LockEngine::lock_async(std::optional<Duration> lease) {
  check_lease(lease);
  Task<bool> acquiring = acquire_task(WaitStyle::suspending, current_owner(), lease, kNoDeadline, {});
  return start_future<void>(*client().runtime, std::move(acquiring),
                            [self = shared_from_this()](bool acquired) { TURNSTILE_CHECK(acquired); });
}

Future<bool> LockEngine::try_lock_async(const AcquireOptions& options) {
  check_lease(options.lease);
  const Instant deadline = client().runtime->deadline_after(options.wait);
  Task<bool> acquiring = acquire_task(WaitStyle::suspending, current_owner(), options.lease, deadline, options.stop);
  return start_future<bool>(*client().runtime, std::move(acquiring),
                            [self = shared_from_this()](bool acquired) { return acquired; });
}

Future<void> LockEngine::unlock_async() {
  return post_future<void>(*client().runtime,
                           [self = shared_from_this(), owner = current_owner()] { self->release_quietly(owner); });
}

}  // namespace turnstile::detail
