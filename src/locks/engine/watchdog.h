// locks/engine/watchdog.h
//
// Keeps every holding's local lease deadline, and keeps alive the leases of
// holdings taken without a fixed lease. One per Client.
//
// The local deadline: the safety rule and its formula are stated once, in
// turnstile/lock.h ("The local deadline"); LeaseTiming computes its margin.
// Here: when a holding's deadline passes without a confirmed renewal, it is
// lost *then*, whatever a renewal in flight will answer: on_lost runs with
// LockLostReason::lease_expired. A renewal answering 0 (gone) loses it at
// once with LockLostReason::gone.
//
// Renewals: holdings with a renew script are renewed every window/3, where
// window = lease - margin(lease) of the watchdog lease, in batches of up
// to kMaxLocksPerRenewal targets per script call (Redisson's batch size),
// each call's keys in one cluster slot (Backend::cluster_slot(); on one
// server or Sentinel any keys share a call).
// The batches are pipelined, in waves (Backend::send_evals): up to
// kMaxRenewalLocksInFlight holdings are sent before the oldest reply is
// read, so a tick of N renewed holdings costs about
// 2 N / kMaxRenewalLocksInFlight round trips. Each batch waits for its reply at most one renewal period from its
// own send instant (a hanging call cannot eat the lease: the next one goes
// out on time, on a new connection; a reply after that is never read; one
// whose connection was closed or refused is sent again at once, within
// that period, so a server restart is found at the first renewal after
// it; one that found every pooled connection busy is queued again while
// the period allows), and a successful one moves the deadline to its own
// send instant + lease - margin. A batch's keys are read when it is sent:
// a holding released, lost or extended earlier in the tick is left out.
//
// Keys lost: renew_key_now() renews at once when Redis reports (a keyspace
// `evicted`, `del` or `expired` event) that a held key went, so the loss
// is found then, not at the next renewal. Wipes: while anything is
// renewed, a WipeCheck (wipe_check.h) runs every ClientOptions::
// wipe_check_period, and a wipe it finds renews everything at once: a
// flush or a restart that lost the data is found within that period,
// whatever the lease.
//
// Maximum hold (ClientOptions::max_hold): a renewed holding stops being
// renewed once it has been watched that long (from the send instant of its
// acquisition) and is lost then with LockLostReason::max_hold_reached; the
// lease on the server lapses by itself, as any unrenewed one.
//
// Extending (Lock::extend, PermitSemaphore::extend): begin_extend() before
// the request is sent, finish_extend() with its outcome. A successful one
// fixes the lease (no more renewals) and moves the deadline to the request's
// send instant + lease - margin, but no later than what a watchdog renewal
// that was in flight meanwhile could have armed (it may run on the server
// after the extension and cut it short); a renewal answered after the
// extension never moves the deadline.
//
// Server restarts (Backend::watch_restarts, through server_restarted()):
// every holding watched then, and every one watched later whose arming
// request was sent before then (an acquisition in flight across the
// restart), is lost with LockLostReason::server_restarted, from the expiry
// timer at once. Meanwhile deadline() answers nullopt, and renewals and
// extensions neither move nor lose it.
//
// Timers: one renewal timer while anything is renewed, and one expiry timer
// armed at the earliest deadline (re-armed lazily: a renewal that moves
// deadlines later costs no timer work until the old one fires).

#ifndef TURNSTILE_LOCKS_ENGINE_WATCHDOG_H_
#define TURNSTILE_LOCKS_ENGINE_WATCHDOG_H_

#include <cstddef>
#include <cstdint>
#include <exception>
#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "locks/engine/event_log.h"
#include "locks/engine/metrics_recorder.h"
#include "locks/engine/wipe_check.h"
#include "turnstile/backend.h"
#include "turnstile/lock.h"
#include "turnstile/mutex.h"
#include "turnstile/runtime.h"
#include "turnstile/script.h"

namespace turnstile::detail {

// The lease a script arms on the server for a holder that believes in
// `lease`: `lock_delay` longer (ClientOptions::lock_delay, LockOptions).
inline Duration server_lease(Duration lease, Duration lock_delay) { return lease + lock_delay; }

// How much of a lease a holder may believe in (the file comment).
struct LeaseTiming {
  double clock_drift_factor = 0.0;
  Duration stop_margin{};

  Duration margin(Duration lease) const;
  // lease - margin(lease); not positive when the lease leaves no time.
  Duration window(Duration lease) const { return lease - margin(lease); }
  // Throws InvalidArgumentError if `lease` leaves no time after the margin.
  void check(Duration lease, std::string_view what) const;
};

class Watchdog : public std::enable_shared_from_this<Watchdog> {
 public:
  static constexpr std::size_t kMaxLocksPerRenewal = 100;
  // Holdings whose renewal is sent and not yet answered, at most. They go
  // out in waves of half of it, each wave one Backend::send_evals(), which
  // the real backend pipelines on one pooled connection per server: two
  // waves in flight hold two connections of a server at most, well below
  // the default pool size (16, kDefaultPoolSize), so renewals never take
  // the whole pool from the lock calls. On one server, 100k holdings are
  // renewed in about 125 round trips per tick; on a Cluster, whose calls
  // hold one slot's keys each, a wave is about one write per master.
  static constexpr std::size_t kMaxRenewalLocksInFlight = 16 * kMaxLocksPerRenewal;
  // Passes of renew_all() one renew_serialized() runs, at most.
  static constexpr int kMaxRenewalPasses = 3;
  // A renewal whose connection was closed or refused (not one that timed
  // out) is sent once more at once, within the same renewal period.
  static constexpr int kRenewalAttempts = 2;
  // Sends of one batch in one tick, at most (the resends above, and those
  // of a batch that found every pooled connection busy).
  static constexpr int kMaxRenewalSends = 8;

  struct Target {
    // KEYS = the targets' keys; ARGV = lease ms, [wall clock ms,] holders...
    // Null: a fixed lease, never renewed; only its deadline is kept.
    const Script* renew_script = nullptr;
    std::string key;
    // The holder identity beside it (key_layout.h), re-armed by the same
    // script (after the keys); empty: none. All or none per script.
    std::string identity_key;
    std::string holder;                 // what the script compares: owner id, token, permit id
    Flavor flavor = Flavor::reentrant;  // what the holds gauge counts it as
    // Whether the script takes the runtime's wall clock (Unix ms) after the
    // lease: expiries stored as Unix times (permits) need it. The same for
    // every target of one script.
    bool pass_wall_clock_ms = false;
    // When the request that armed the lease was sent, and the lease it asked
    // for (the watchdog's own for renewed targets).
    Instant sent_at{};
    Duration lease{};
    // Its lock-delay (ClientOptions::lock_delay, LockOptions): added to
    // every lease its renewals arm on the server (server_lease()), never to
    // the one its deadline counts. Renewals are batched by it.
    Duration lock_delay{};
    // Runs once if the holding is lost while watched, with this target's id.
    std::function<void(std::uint64_t id, LockLostReason reason)> on_lost;
  };

  // `max_hold`: see the file comment (nullopt: no limit).
  // Renewals, their failures, losses and the holds watched (a gauge, and
  // their hold times) are counted in `metrics`, and told to `events` (may
  // be null: nothing told).
  // `on_deadline` (may be null) is told a target's key and deadline each
  // time watch(), rearm(), a confirmed renewal or finish_extend() sets it
  // (ClientOptions::on_lease_deadline), outside the mutex.
  Watchdog(Backend& backend, Runtime& runtime, Duration lease, LeaseTiming timing,
           std::function<void(std::exception_ptr)> on_error, std::optional<Duration> max_hold,
           std::shared_ptr<MetricsRecorder> metrics,
           std::function<void(const std::string& key, Instant deadline)> on_deadline = nullptr,
           std::shared_ptr<const EventLog> events = nullptr);
  // Runs `check` (file comment) while anything is renewed; null: no check.
  // Set once, before the first watch().
  void set_wipe_check(std::unique_ptr<WipeCheck> check);
  // The warning before expiry (ClientOptions::lease_warning): `told` (the
  // key, its deadline, the time left) once a holding's deadline comes
  // within `before` without moving; again once it moved later. Set once,
  // before the first watch(); `before` above zero.
  using AtRiskHandler = std::function<void(const std::string& key, Instant deadline, Duration remaining)>;
  void set_lease_warning(Duration before, AtRiskHandler told);

  // Starts keeping `target` (renewing it if it has a renew script); returns
  // its id for the calls below. Its deadline may already have passed: it is
  // then lost at once (from the expiry timer, not from this call).
  std::uint64_t watch(Target target);
  // The lease of `id` was armed again by a request sent at `sent_at`
  // (reentrant acquisition): its deadline becomes sent_at + lease - margin;
  // `renew_script` and `lock_delay` (the acquisition's) replace the
  // target's (a null script: stop renewing).
  void rearm(std::uint64_t id, Instant sent_at, Duration lease, const Script* renew_script, Duration lock_delay);
  // Keeps the deadline of `id` but renews it no more: its holder tried to
  // let go and could not (the release failed in transit); the lease bounds
  // how long the server keeps it, as in Redisson.
  void stop_renewing(std::uint64_t id);
  // Loses `id` now if the expiry timer would lose it if it ran now (its
  // deadline or hold limit passed, its server restarted), told as the
  // timer tells it; nothing otherwise (not watched, being released). For a
  // caller about to act on a holding whose deadline may have passed before
  // the timer's turn (a release: after the deadline every answer comes
  // from it, whatever Redis still has).
  void lose_if_due(std::uint64_t id);
  // An extension of `id`'s lease is about to be sent (the file comment).
  // Returns false if `id` is not watched (lost or released meanwhile).
  bool begin_extend(std::uint64_t id);
  // Its outcome: `extended` with the request sent at `sent_at` for `lease`
  // (the lease is fixed from now on), or not (nothing changes).
  void finish_extend(std::uint64_t id, bool extended, Instant sent_at, Duration lease);
  // Stops keeping `id` (idempotent). A renewal already under way may still
  // renew it once, but its on_lost will not run.
  void unwatch(std::uint64_t id);
  // The local deadline of `id`; nullopt if it is not watched (released, or
  // lost already). Past deadlines are lost first (so nullopt then).
  std::optional<Instant> deadline(std::uint64_t id);
  // The holder's own release of `id` is on its way: a loss found meanwhile
  // (gone, or the deadline) is held back. unwatch() (released) drops it;
  // end_release() (not released: the release failed, or left it held)
  // delivers it through on_lost.
  void begin_release(std::uint64_t id);
  void end_release(std::uint64_t id);
  // Renews now, beside the periodic renewals, every renewed holding if one
  // of them is at `key` (nothing otherwise): Redis said that key was
  // evicted, deleted or expired, and the renewal that finds it gone loses
  // it with LockLostReason::gone, as any renewal would. Does not block (a
  // timer due now; calls before it ran share it); one lookup per call, so
  // a server's every keyspace event may be passed. Holdings with a fixed
  // lease are not renewed, so not told before their deadline.
  void renew_key_now(const std::string& key);
  // The backend found its server restarted (the file comment). Only marks
  // and arms the expiry timer: callable from a backend thread, never calls
  // back.
  void server_restarted();
  // Whether a restart was found after `sent_at`: a request sent then may
  // have been answered by the process that restarted, its writes gone with
  // its keyspace (watch() loses such a hold at once; the acquisitions
  // never hand one out: LockEngine, PermitSemaphore).
  bool restarted_since(Instant sent_at) const;
  // Stops the timers for good (the client is going away).
  void stop();

  std::size_t watched_count() const;
  Duration lease() const { return lease_; }
  const std::optional<Duration>& max_hold() const { return max_hold_; }
  const LeaseTiming& timing() const { return timing_; }
  // How often renewals run: window(lease) / 3.
  Duration renewal_period() const { return renewal_period_; }

 private:
  struct Entry {
    Target target;
    Instant deadline;
    Instant held_since{};                                // the first arming's send instant (max hold)
    bool releasing = false;                              // see begin_release()
    std::optional<LockLostReason> lost_while_releasing;  // no longer renewed
    std::optional<Instant> renewal_sent;                 // a renewal in flight: when it was taken up
    bool extending = false;                              // see begin_extend()
    std::optional<Instant> extend_floor;                 // earliest renewal in flight while extending
    bool server_restarted = false;                       // lost to a restart at the expiry timer's turn
    bool warned = false;                                 // told at risk for this deadline
    std::optional<int> slot;                             // Backend::cluster_slot(key): batched by it
  };
  // The instant a renewed entry reaches the maximum hold (kNoDeadline: never).
  Instant hold_limit(const Entry& entry) const;
  bool restarted_since_locked(Instant sent_at) const TURNSTILE_REQUIRES(mutex_);
  // When the entry must be looked at: its warning (not told yet), its
  // deadline or its hold limit (at once after a server restart).
  Instant due(const Entry& entry) const {
    if (entry.server_restarted) return Instant{};
    const Instant looked_at = std::min(entry.deadline, hold_limit(entry));
    return warning_ > Duration::zero() && !entry.warned ? std::min(looked_at, entry.deadline - warning_) : looked_at;
  }
  // A new deadline for `entry`: its warning armed again if it moved later.
  void set_deadline_locked(Entry& entry, Instant deadline) TURNSTILE_REQUIRES(mutex_);
  // Tells (and marks) every holding whose warning is due at `now`.
  void warn_due(Instant now);

  Instant deadline_of(Instant sent_at, Duration lease) const { return sent_at + timing_.window(lease); }
  // The loss the expiry timer would find for `entry` at `now`, if any.
  std::optional<LockLostReason> due_loss(const Entry& entry, Instant now) const;
  void arm_renewal_locked() TURNSTILE_REQUIRES(mutex_);
  void arm_expiry_locked(Instant when) TURNSTILE_REQUIRES(mutex_);
  void tick(Instant started);
  // The wipe check's turn (file comment): every cluster slot in use by a
  // renewed holding, checked; everything renewed at once if a wipe was found.
  void check_wipes(Instant started);
  std::vector<std::optional<int>> renewed_slots() const;
  // Schedules one renew_all() now unless one is already due.
  void renew_soon_locked() TURNSTILE_REQUIRES(mutex_);
  // `it` leaves entries_ (unwatched or lost); keeps watched_keys_.
  void erase_locked(std::map<std::uint64_t, Entry>::iterator it) TURNSTILE_REQUIRES(mutex_);
  // Renews every renewed holding once (tick()'s work, without re-arming):
  // the batches pipelined (the file comment).
  void renew_all();
  // renew_all(), one at a time: a tick or a renew_soon_locked() that comes
  // while one runs is folded into one more pass of the running one (at
  // most kMaxRenewalPasses in a row; the next tick renews what is left).
  // Overlapping passes would each keep their waves of calls out
  // (kMaxRenewalLocksInFlight), together more than a node's pool (a Cluster whose wipe checks
  // find new slots asked for one every second: every lock was lost).
  void renew_serialized();
  void expire();

  // Up to kMaxLocksPerRenewal holdings of one renew script and one cluster
  // slot (Backend::cluster_slot(): a cluster refuses keys of different
  // slots in one call).
  struct RenewalBatch {
    const Script* script = nullptr;
    bool pass_wall_clock_ms = false;
    bool identities = false;  // the targets' holder identities follow their keys
    Duration lock_delay{};    // every target's: one server lease per call
    std::vector<std::uint64_t> ids;
  };
  // A batch on its way: what was sent, when, and its pending reply.
  struct SentRenewal {
    RenewalBatch batch;  // only the ids sent
    std::vector<std::string> keys;
    std::vector<std::string> args;
    Instant sent_at{};  // of the first send: the batch's deadlines count from it
    int sends = 0;
    int connection_failures = 0;
    std::unique_ptr<PendingReply> pending;
  };
  // Every renewed holding, grouped by script and cluster slot, cut into
  // batches.
  std::vector<RenewalBatch> plan_renewals() const;
  // The call renewing what is still renewed by `batch`'s script of its
  // holdings, not sent yet (nullopt: none is left).
  std::optional<SentRenewal> plan_call(RenewalBatch batch);
  // Sends batches[next...] (advancing `next`, one batch at least) as one
  // Backend::send_evals(), up to kMaxRenewalLocksInFlight / 2 holdings;
  // a failure to send becomes a call's reply.
  std::vector<SentRenewal> send_wave(std::vector<RenewalBatch>& batches, std::size_t& next);
  // Sends `call` (again); a failure to send becomes its reply.
  void send_again(SentRenewal& call);
  // Reads `call`'s reply until its deadline and applies it, or fails the
  // batch; returns it if it was sent again instead.
  std::optional<SentRenewal> finish_renewal(SentRenewal call);
  // A batch's flags: deadlines moved from `sent_at`, holdings gone lost.
  void apply_renewal(const std::vector<std::uint64_t>& ids, Instant sent_at, const Reply& reply);
  void lose(std::uint64_t id, LockLostReason reason);
  // Tells on_deadline_ (if set) about `moved`: {key, deadline} pairs.
  void tell_deadlines(const std::vector<std::pair<std::string, Instant>>& moved) const;
  // One renewed entry fewer (renewed_count_ never wraps).
  void renewed_less_locked() TURNSTILE_REQUIRES(mutex_);
  // Loses every watched holding whose deadline is at or before `now`.
  void lose_expired(Instant now);

  Backend& backend_;
  Runtime& runtime_;
  const Duration lease_;
  const LeaseTiming timing_;
  const Duration renewal_period_;
  const std::optional<Duration> max_hold_;
  std::function<void(std::exception_ptr)> on_error_;
  const std::shared_ptr<MetricsRecorder> metrics_;
  const std::function<void(const std::string& key, Instant deadline)> on_deadline_;
  const std::shared_ptr<const EventLog> events_;

  mutable Mutex mutex_;                                                  // never held across a backend call or callback
  std::map<std::uint64_t, Entry> entries_ TURNSTILE_GUARDED_BY(mutex_);  // ordered: renewals run in a fixed order
  std::size_t renewed_count_ TURNSTILE_GUARDED_BY(mutex_) = 0;           // entries with a renew script
  std::uint64_t next_id_ TURNSTILE_GUARDED_BY(mutex_) = 1;
  // How many entries are at each key (renew_key_now()'s lookup).
  std::unordered_map<std::string, std::size_t> watched_keys_ TURNSTILE_GUARDED_BY(mutex_);
  std::optional<Runtime::TimerId> renewal_timer_ TURNSTILE_GUARDED_BY(mutex_);
  std::optional<Runtime::TimerId> expiry_timer_ TURNSTILE_GUARDED_BY(mutex_);
  // Set once under mutex_ before anything is watched, read without it
  // after: not annotated.
  std::unique_ptr<WipeCheck> wipe_check_;
  Duration warning_{};  // ClientOptions::lease_warning; zero: none
  AtRiskHandler on_at_risk_;
  std::optional<Runtime::TimerId> wipe_timer_ TURNSTILE_GUARDED_BY(mutex_);
  bool renew_soon_ TURNSTILE_GUARDED_BY(mutex_) = false;   // a renew_all() is scheduled now (renew_soon_locked())
  bool renewing_ TURNSTILE_GUARDED_BY(mutex_) = false;     // a renew_serialized() is running
  bool renew_again_ TURNSTILE_GUARDED_BY(mutex_) = false;  // ... and was asked for once more meanwhile
  Instant expiry_at_ TURNSTILE_GUARDED_BY(mutex_){};
  std::uint64_t expiry_generation_ TURNSTILE_GUARDED_BY(mutex_) =
      0;  // a cancelled expiry timer that ran anyway does nothing
  bool stopped_ TURNSTILE_GUARDED_BY(mutex_) = false;
  // When the latest server restart was found: holdings armed by a request
  // sent before it are lost.
  std::optional<Instant> restarted_at_ TURNSTILE_GUARDED_BY(mutex_);
};

}  // namespace turnstile::detail

#endif  // TURNSTILE_LOCKS_ENGINE_WATCHDOG_H_
