// turnstile/lock.h
//
// Distributed locks on Redis, with Redisson's key layout so that a C++
// process using turnstile and a Java process using Redisson exclude each
// other. Locks are obtained from a Client (client.h):
//
//   turnstile::Client client(backend);
//   turnstile::ReentrantLock lock = client.lock("order:42");
//   {
//     std::scoped_lock hold(lock);      // waits; watchdog renews the lease
//     ...                               // critical section
//   }                                   // unlock, wakes the next waiter
//   if (lock.try_lock({.wait = 3s, .lease = 10s})) { ...; lock.unlock(); }
//
// Flavors:
//   ReentrantLock  a hash at <name>, field "<client uuid>:<task id>" = hold
//                  count (Redisson RLock). Reentrant per task. Not fair: on
//                  release every waiter races. Optionally fenced (Redisson
//                  RFencedLock): every acquisition draws a strictly
//                  increasing token from "redisson_lock_token:{<name>}".
//   TokenLock      SET <name> <random token> NX PX; compare-and-delete
//                  release. The simplest lock; not reentrant.
//
// Common contract (all flavors):
//   * Owner = the calling task (thread, or simulated task) of this Client.
//   * Releasing: a lost lock is an expected event, so unlock() (what
//     std::scoped_lock and std::unique_lock call from their destructors)
//     never throws for it, and never ends the process:
//       - a hold lost while held (its local deadline passed, a renewal found
//         it gone, max_hold reached) was told to the lock-lost handler when
//         it happened; unlock() gives back what Redis may still have of it
//         (one try, not retried: a frozen link costs one command timeout)
//         and returns;
//       - a hold Redis no longer has although this client believed it held
//         (force-unlocked, expired or evicted before a renewal could tell)
//         is a loss found by the unlock: the lock-lost handler is told then
//         (LockLostReason::gone, on the unlocking task), and unlock()
//         returns;
//       - an unlock that cannot reach Redis (a lost reply is retried first)
//         leaves the hold to its lease: the watchdog renews it no more, the
//         error goes to ClientOptions::on_background_error, and unlock()
//         returns; the lost handler may be told when its deadline passes.
//     What stays loud is the programmer's error: unlock() by a task that
//     holds nothing of this lock here (never locked it, or unlocked it more
//     often than it locked it) throws NotOwnerError. (A lost hold is
//     remembered as such for the 1,024 most recently lost owners of each
//     lock.) A hold as a value has the strict form, for callers that act
//     on the outcome (the CLI's exit status): LockHold::release_or_throw()
//     throws NotOwnerError for a lost hold and the error of an unlock that
//     failed. Any release that finds the hold gone tells the loss first, as
//     any call that finds it does (a renewal, extend(), a query such as
//     is_held_by_current_thread()): the loss token requested and the lost
//     handler run, once per lost hold, whichever call came first.
//   * Leases: with no lease given, the lease is the client's watchdog
//     timeout and the client's watchdog re-arms it every window/3 while the
//     lock is held (below); if a renewal finds the lock gone, the lock-lost
//     handler is told. With a lease given, nothing renews it: the lock frees
//     itself when the lease runs out.
//   * The local deadline (the safety rule: a holder never acts after its
//     lease can have lapsed). Every holding is believed held only until
//         sent + lease - (lease x clock_drift_factor + stop_margin)
//     where `sent` is when the request that last armed its lease (the
//     acquisition, or a renewal that was answered) was *sent*, and the
//     margin comes from ClientOptions; window = lease - margin. At that
//     instant the holding is lost, whatever Redis will say (every deadline
//     turnstile keeps is over at its own millisecond: a hold's, a permit's
//     expiry in Redis, a fair waiter's; only a key's own expiry is Redis's,
//     alive through its millisecond):
//     the lock-lost handler runs with LockLostReason::lease_expired (also
//     for a fixed lease running out while held),
//     is_held_by_current_thread() and hold_count() answer 0 from this
//     record, without a call to Redis (a reply that arrives after the
//     deadline never revives the holding, and a call that outlives it
//     answers 0 rather than its timeout), while held remaining_lease() never
//     exceeds the time to the deadline, and unlock() asks Redis to release
//     whatever may be left (see "Releasing"). is_locked() and
//     remaining_lease() describe the lock on the server, whoever holds it: a
//     lost holder may still see its own stale trace there until the
//     server's lease ends. A lease that leaves no window is refused with
//     InvalidArgumentError. Every limit of this rule (clock rate, pauses,
//     eviction, restarts, failover) is in docs/safety.md.
//   * What the local deadline cannot cover: a Redis that evicts keys
//     (maxmemory with an allkeys-* or volatile-* policy) may delete a held
//     lock's key at any moment; the holder is told (LockLostReason::gone)
//     as soon as Redis says so: at once through keyspace `evicted` events
//     when the server publishes them (notify-keyspace-events with E and e;
//     standalone and Sentinel, watchdog leases), else at its next renewal
//     or unlock. Such a server is reported (server_check.h) and unsafe for
//     locks: docs/safety.md.
//   * Server restarts: every connection the backend opens learns its
//     server's run_id (Backend::watch_restarts). At the client's first
//     contact with another process behind the same endpoint (a restart, a
//     Sentinel failover) every hold is lost at once: the lock-lost handler
//     runs with LockLostReason::server_restarted, loss tokens are
//     requested. First contact: with a live subscription, the pub/sub
//     reader's reconnect (within its backoff, at most 1 s); otherwise the
//     next renewal or call. The limit: a restart without persistence
//     forgets the lock, so another client may be granted it before that
//     contact (up to one renewal period, window/3, for a holder without a
//     subscription); fencing tokens keep rising across the restart
//     (lua/lib/fencing_counter.lua), so a fenced resource refuses the old
//     holder. With AOF the lock survives and is given up all the same. A
//     server that refuses INFO is never found restarted (docs/safety.md).
//     An acquisition in flight when a restart is found (sent before it) is
//     never handed out as a hold: the process that answered may be the one
//     that restarted. The try failed in transit: a hold it may have taken
//     is given back and the acquisition tries again while its wait lasts
//     (a try that may not wait throws ConnectionError); a crash-safe
//     semaphore sends its call again with the same permit ids.
//   * Waiting never polls: a waiter subscribes to the lock's channel and
//     sleeps until an unlock message or the holder's remaining lease.
//   * Durations: a negative wait or lease is taken as zero; a deadline in the
//     past means "try once now". A zero lease is invalid (InvalidArgumentError).
//   * A name holding another kind of value fails with WrongTypeError and
//     nothing is overwritten.
//   * Thread safety: one lock object may be shared by many threads.
//
// Lock objects are movable handles; they must not outlive their Client's
// backend and runtime.

#ifndef TURNSTILE_LOCK_H_
#define TURNSTILE_LOCK_H_

#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <type_traits>
#include <utility>

#include "turnstile/export.h"
#include "turnstile/flavor.h"
#include "turnstile/future.h"
#include "turnstile/key_layout.h"
#include "turnstile/runtime.h"

namespace turnstile {

class Client;
class ReadWriteLock;

namespace detail {
class LockEngine;
struct LockAccess;
}  // namespace detail

// Behaviour shared by every lock flavor; see the file comment for the
// contract. A Lock is a handle: Client makes them (client.h), each on the
// machinery of its flavor.
class TURNSTILE_EXPORT Lock : public Holdable {
 public:
  Lock(Lock&&) noexcept;
  Lock& operator=(Lock&&) noexcept;
  Lock(const Lock&) = delete;
  Lock& operator=(const Lock&) = delete;
  ~Lock() override;

  Flavor flavor() const override;
  // The key of the lock (the client's key prefix included).
  const std::string& name() const override;
  // Every key and channel of the lock (key_layout.h).
  const KeyLayout& layout() const;

  // Waits as long as it takes; the watchdog keeps the lock while held.
  void lock();
  // Waits as long as it takes; the lock frees itself after `lease`.
  void lock(Duration lease);

  // One attempt, no wait; watchdog lease.
  [[nodiscard]] bool try_lock();
  // Waits up to options.wait; returns whether the lock was acquired.
  [[nodiscard]] bool try_lock(const AcquireOptions& options);
  // std TimedLockable: waits up to `wait` / until `deadline`.
  template <typename Rep, typename Period>
  [[nodiscard]] bool try_lock_for(const std::chrono::duration<Rep, Period>& wait) {
    return try_lock(
        AcquireOptions{.wait = std::chrono::duration_cast<Duration>(wait), .lease = std::nullopt, .stop = {}});
  }
  [[nodiscard]] bool try_lock_until(Instant deadline);
  // A deadline of a standard clock (steady_clock, system_clock, ...): see
  // time_left_until() (runtime.h).
  template <typename Clock, typename ClockDuration>
  requires(!std::is_same_v<Clock, MonotonicClock>)
      [[nodiscard]] bool try_lock_until(const std::chrono::time_point<Clock, ClockDuration>& deadline) {
    return try_lock(AcquireOptions{.wait = time_left_until(deadline), .lease = std::nullopt, .stop = {}});
  }

  // Releases one hold of the calling task. A lost reply is retried without
  // releasing twice. Never throws for a hold that was lost or cannot be
  // released now (see "Releasing" in the file comment); throws
  // NotOwnerError only if the task holds nothing of this lock here.
  void unlock();

  // Lease control, for a caller that renews by hand: re-arms the calling
  // task's hold with `lease` from now, on the server only if the task still
  // holds it there (one script call, the watchdog's renewal script). The
  // hold then has a fixed lease: the watchdog renews it no more (a later
  // acquisition without a lease by the same task brings it back), and its
  // local deadline becomes the request's *send* instant + lease - margin
  // (no later than a watchdog renewal in flight meanwhile could have
  // armed). A shorter lease than what is left shortens the hold. Throws
  // NotOwnerError if the task does not hold it (never did, its deadline
  // passed, or it is gone on the server: then it is forgotten here, as a
  // lost lock), InvalidArgumentError for a lease as lock(lease) refuses it.
  // A reentrant hold is extended as a whole.
  void extend(Duration lease);

  // Deletes the lock whoever holds it and wakes its waiters. Returns whether
  // there was a lock to delete. A holder through this same client (any
  // task, any handle of this name) is told at once, as any loss: its loss
  // token is requested and the lost handler runs once per hold, before this
  // returns; the unlocks it still owes return quietly (a std::scoped_lock
  // around it ends normally), release_or_throw() throws NotOwnerError. A holder
  // through another client or process learns of it at its next renewal,
  // unlock or extend().
  bool force_unlock();

  // Queries (one script call each).
  bool is_locked();
  bool is_held_by_current_thread();
  // How many times the calling task holds it (0 if not).
  std::int64_t hold_count();
  // Time left on the lock's lease; nullopt if it is not locked.
  std::optional<std::chrono::milliseconds> remaining_lease();

  // Asynchronous forms: on behalf of the *calling* task (so a later
  // unlock() from this task works), waiting on no thread of their own
  // (future.h). The operation keeps what it needs alive: the handle may go
  // first.
  [[nodiscard]] Future<void> lock_async(std::optional<Duration> lease = std::nullopt);
  [[nodiscard]] Future<bool> try_lock_async(const AcquireOptions& options);
  [[nodiscard]] Future<void> unlock_async();

  // The fencing token of the calling task's latest acquisition, if this lock
  // is fenced and the task holds it.
  std::optional<std::int64_t> fencing_token();

  // The loss as a std::stop_token: one per hold of the calling task (a
  // reentrant hold shares it across its depth), requested at the instant
  // the holding is lost: its local deadline passes (a frozen link, a pause,
  // a fixed lease running out, max_hold), a renewal or an unlock finds it
  // gone (force-unlocked, expired, evicted), extend() finds it gone, or
  // force_unlock() through this client deletes it. Requested on the task
  // that finds the loss, before the lost handler runs; a stop_callback on
  // it must not block for long. Not requested by an ordinary unlock. If the
  // calling task does not hold the lock, the token is already stopped.
  // Client::with_lock() runs work with it.
  std::stop_token loss_token();

  // Who to tell when a held lock is lost (see LockLostHandler). One handler
  // per (Client, lock name): every handle of this name made by this client
  // shares it, and the last one set replaces the one before for all of
  // them; it is told once per lost hold, with the owner that held it
  // (LockLost::owner), whichever handle or task took the hold.
  void set_lost_handler(LockLostHandler handler) override;

  // Holds as values (turnstile/hold.h): owned by the returned LockHold,
  // released from any thread; a fenced lock's hold carries its token.
  [[nodiscard]] LockHold try_acquire_hold(const AcquireOptions& options) override;
  [[nodiscard]] Future<LockHold> try_acquire_hold_async(const AcquireOptions& options) override;
  using Holdable::acquire_hold;

  // The owner id the calling task uses: "<client uuid>:<task id>".
  std::string current_owner() const;

  // Hands an error that cannot be thrown to the caller (from a destructor,
  // a timer) to the client's background error handler.
  void report_background_error(std::exception_ptr error) const noexcept;

 private:
  // The one way in (src/locks/engine/lock_access.h): it makes the Lock a
  // flavor's handle (ReentrantLock, FairLock, ...) is made from, in
  // Client's factories, and hands the flavors and the composite locks
  // (multi_lock.h) their engines. A new flavor adds its handle, not a
  // line here.
  friend struct detail::LockAccess;

  TURNSTILE_HIDDEN explicit Lock(std::shared_ptr<detail::LockEngine> engine);
  TURNSTILE_HIDDEN detail::LockEngine& engine() const;

  std::shared_ptr<detail::LockEngine> engine_;
};

// The reentrant lock (Redisson RLock / RFencedLock).
class TURNSTILE_EXPORT ReentrantLock final : public Lock {
 public:
  bool fenced() const;

 private:
  friend class Client;
  TURNSTILE_HIDDEN explicit ReentrantLock(Lock lock) : Lock(std::move(lock)) {}
};

// The plain token lock: SET NX PX with a random token per acquisition.
// Not reentrant: lock() by a task that already holds it throws
// InvalidArgumentError rather than deadlocking.
class TURNSTILE_EXPORT TokenLock final : public Lock {
 private:
  friend class Client;
  TURNSTILE_HIDDEN explicit TokenLock(Lock lock) : Lock(std::move(lock)) {}
};

}  // namespace turnstile

#endif  // TURNSTILE_LOCK_H_
