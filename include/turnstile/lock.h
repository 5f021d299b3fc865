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
//     unlock() from a task that does not hold the lock throws NotOwnerError,
//     also when the lease ran out before the unlock.
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
//     margin comes from ClientOptions; window = lease - margin. When that
//     instant passes, the holding is lost then, whatever Redis will say:
//     the lock-lost handler runs with LockLostReason::lease_expired (also
//     for a fixed lease running out while held),
//     is_held_by_current_thread() answers false, remaining_ttl() never
//     exceeds the time to the deadline, and unlock() throws NotOwnerError
//     (after asking Redis to release whatever may be left). A lease that
//     leaves no window is refused with InvalidArgumentError.
//   * Waiting never polls: a waiter subscribes to the lock's channel and
//     sleeps until an unlock message or the holder's remaining ttl.
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
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "turnstile/backend.h"
#include "turnstile/flavor.h"
#include "turnstile/future.h"
#include "turnstile/key_layout.h"
#include "turnstile/reply.h"
#include "turnstile/script.h"
#include "turnstile/runtime.h"

namespace turnstile {

namespace detail {
struct ClientCore;
struct LockCore;
struct Holding;
struct NodeAccess;
struct PreparedAcquire;
struct PreparedRelease;

// One script call, described rather than made: the flavor hooks of a Lock
// build them, and the Lock sends them (one at a time, or a composite lock's
// attempt to all its nodes at once).
struct ScriptCall {
  const Script* script = nullptr;
  std::vector<std::string> keys;
  std::vector<std::string> args;
};

// What one unlock script call did.
enum class ReleaseResult { released, still_held, not_owner };
}  // namespace detail

// Behaviour shared by every lock flavor; see the file comment for the
// contract. The flavor supplies its scripts through the protected hooks.
class Lock : public Holdable {
 public:
  Lock(Lock&&) noexcept;
  Lock& operator=(Lock&&) noexcept;
  Lock(const Lock&) = delete;
  Lock& operator=(const Lock&) = delete;
  virtual ~Lock();

  // The key of the lock (the client's key prefix included).
  const std::string& name() const override;
  // Every key and channel of the lock (key_layout.h).
  const KeyLayout& layout() const { return layout_; }

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
    return try_lock(AcquireOptions{.wait = std::chrono::duration_cast<Duration>(wait)});
  }
  [[nodiscard]] bool try_lock_until(Instant deadline);

  // Releases one hold of the calling task. Throws NotOwnerError if the task
  // does not hold the lock (never did, or its lease ran out). A lost reply is
  // retried without releasing twice.
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
  // there was a lock to delete. The former holder learns of it through its
  // lock-lost handler at its next renewal, or NotOwnerError on unlock.
  bool force_unlock();

  // Queries (one script call each).
  bool is_locked();
  bool is_held_by_current_thread();
  // How many times the calling task holds it (0 if not).
  std::int64_t hold_count();
  // Time left on the lock's lease; nullopt if it is not locked.
  std::optional<std::chrono::milliseconds> remaining_ttl();

  // Asynchronous forms: run on a new task of the client's runtime, on behalf
  // of the *calling* task (so a later unlock() from this task works).
  Future<void> lock_async(std::optional<Duration> lease = std::nullopt);
  Future<bool> try_lock_async(const AcquireOptions& options);
  Future<void> unlock_async();

  // The fencing token of the calling task's latest acquisition, if this lock
  // is fenced and the task holds it.
  std::optional<std::int64_t> fencing_token();

  // Who to tell when a held lock is lost (see LockLostHandler).
  void set_lost_handler(LockLostHandler handler) override;

  // Holdable (flavor.h): try_lock(options), with the owner id and fencing
  // token of what was taken; unlock().
  [[nodiscard]] std::optional<Hold> try_hold(const AcquireOptions& options) override;
  void release_hold() override;

  // The owner id the calling task uses: "<client uuid>:<task id>".
  std::string current_owner() const;

  // Hands an error that cannot be thrown to the caller (from a destructor,
  // a timer) to the client's background error handler.
  void report_background_error(std::exception_ptr error) const noexcept;

 protected:
  // What one acquisition attempt found.
  struct Attempt {
    bool acquired = false;
    // When not acquired: ms until the holder's lease runs out (a hint for
    // how long to sleep); negative if unknown.
    std::int64_t retry_after_ms = -1;
    // When acquired on a fenced lock: the fencing token.
    std::optional<std::int64_t> fencing_token;
  };
  // What a status query found.
  struct Status {
    bool locked = false;
    std::int64_t hold_count = 0;  // of the queried owner
    std::int64_t pttl_ms = -2;
  };
  using ReleaseResult = detail::ReleaseResult;

  // `layout`: the flavor's keys at the prefixed name (key_layout()).
  // `family` keeps the local records of locks sharing a name apart (the
  // two halves of a read-write lock).
  Lock(std::shared_ptr<detail::ClientCore> client, KeyLayout layout, std::string_view family = "lock");

  using ScriptCall = detail::ScriptCall;

  // Flavor hooks. `holding` is the caller's local record (created empty
  // before the first attempt of an acquisition).
  // The acquisition script for `owner`; may record in `holding` what the
  // attempt needs later (a token lock's random token).
  virtual ScriptCall attempt_call(const std::string& owner, Duration lease, detail::Holding& holding) = 0;
  // What the acquisition script's reply means.
  virtual Attempt attempt_result(const Reply& reply, const detail::Holding& holding) = 0;
  // The unlock script for `owner`, or nullopt if `holding` shows there is
  // nothing of `owner`'s to release (not_owner without a call).
  virtual std::optional<ScriptCall> release_call(const std::string& owner, const detail::Holding& holding) = 0;
  // What the unlock script's reply means.
  virtual ReleaseResult release_result(const Reply& reply) = 0;
  // Whether the unlock script may be sent again after a lost reply without
  // releasing twice (it remembers its first result in a latch key).
  virtual bool release_retriable() const = 0;
  virtual Status status(const std::string& owner, const detail::Holding* holding) = 0;
  // Type of the lock's key ('hash', 'string') for force unlock.
  virtual std::string_view key_type() const = 0;
  // The watchdog script and the value it checks (owner id or token).
  virtual const Script& renew_script() const = 0;
  virtual std::string renew_holder(const std::string& owner, const detail::Holding& holding) const = 0;
  virtual bool reentrant() const = 0;
  // The channel a waiting `owner` listens on. Default: the lock's channel
  // (every waiter hears every release); a fair lock gives each waiter its own.
  virtual std::string wait_channel(const std::string& owner) const;
  // Called when an acquisition that could wait ends without the lock (its
  // wait ran out, or an attempt threw): a flavor with a wait queue removes
  // `owner` from it. Default: nothing. Errors go to the background handler.
  virtual void abandon(const std::string& owner);
  // force_unlock's one script call; returns whether a lock was deleted.
  // Default: the generic delete-and-publish script.
  virtual bool force_delete();

  detail::ClientCore& client() const;
  detail::LockCore& core() const { return *core_; }

 private:
  // Composite locks (multi_lock.h) act on their node locks for a given owner.
  friend struct detail::NodeAccess;

  bool acquire(const std::string& owner, std::optional<Duration> lease, Instant deadline, std::stop_token stop);
  // After an attempt that failed in transit: gives back a hold of `owner`
  // beyond `held_before` that the attempt may have taken on the server.
  void undo_phantom_hold(const std::string& owner, std::int64_t held_before, Duration lease);
  // Before an acquisition by `owner`: gives back the holds it let go of
  // whose release failed in transit (those Redis still has), so that the
  // acquisition does not stack on them as a reentrant hold, re-arm their
  // renewal and keep the lock one unlock short for good (ahead of every
  // fair waiter). Returns the holds `owner` still has (0 if none); throws
  // what a release throws (the caller retries it as a failed attempt).
  std::int64_t settle_unconfirmed_releases(const std::string& owner);
  void release_or_throw(const std::string& owner);
  // acquire() with a past deadline, in two halves, for a composite lock that
  // sends every node's call before it waits for any reply. prepare_acquire()
  // throws what acquire() throws before its first call; finish_acquire()
  // takes the call's outcome and returns whether the lock is now held
  // (recorded, watched), throwing what acquire() would.
  detail::PreparedAcquire prepare_acquire(const std::string& owner, std::optional<Duration> lease);
  bool finish_acquire(detail::PreparedAcquire& prepared, PendingReply& sent);
  // release_or_throw() in two halves, likewise; finish_release() returns
  // false where release_or_throw() throws NotOwnerError. `sent` is
  // prepared.call already sent, or null to send it now (always null when
  // there is no call).
  detail::PreparedRelease prepare_release(const std::string& owner);
  bool finish_release(detail::PreparedRelease& prepared, std::unique_ptr<PendingReply> sent);

  // One acquisition attempt, sent through Backend::eval_synced() (an
  // acquisition no replica acknowledged is undone by acquire(): see
  // undo_unreplicated) and answered.
  Attempt attempt(const std::string& owner, Duration lease, detail::Holding& holding);
  // One unlock of `owner`'s hold.
  ReleaseResult release(const std::string& owner, detail::Holding& holding);
  // Runs the unlock `call`, sent again after a lost reply as often as
  // release_retriable() allows; `first_try`, if not null, is the call
  // already sent once.
  ReleaseResult send_release(const ScriptCall& call, std::unique_ptr<PendingReply> first_try);
  // Writes down a won acquisition: the holding, and the watchdog when
  // there is no requested lease.
  void record_acquired(const std::string& owner, std::optional<Duration> requested_lease, Duration lease,
                       const Attempt& attempt, const detail::Holding& scratch);
  // Releases an acquisition no replica acknowledged and throws ReplicaSyncError.
  [[noreturn]] void undo_unreplicated(const std::string& owner, Duration lease, detail::Holding& scratch);
  Status status_of(const std::string& owner);
  // abandon(), with its std::exception errors sent to the background handler
  // (the caller is already returning false or propagating another error).
  void abandon_reporting_errors(const std::string& owner);

  KeyLayout layout_;
  std::shared_ptr<detail::LockCore> core_;
};

// The reentrant lock (Redisson RLock / RFencedLock).
class ReentrantLock final : public Lock {
 public:
  ReentrantLock(std::shared_ptr<detail::ClientCore> client, std::string_view name, bool fenced);

  bool fenced() const { return fenced_; }
  Flavor flavor() const override { return Flavor::reentrant; }

 private:
  ScriptCall attempt_call(const std::string& owner, Duration lease, detail::Holding& holding) override;
  Attempt attempt_result(const Reply& reply, const detail::Holding& holding) override;
  std::optional<ScriptCall> release_call(const std::string& owner, const detail::Holding& holding) override;
  ReleaseResult release_result(const Reply& reply) override;
  bool release_retriable() const override;
  Status status(const std::string& owner, const detail::Holding* holding) override;
  std::string_view key_type() const override { return "hash"; }
  const Script& renew_script() const override;
  std::string renew_holder(const std::string& owner, const detail::Holding& holding) const override;
  bool reentrant() const override { return true; }

  bool fenced_;
};

// The plain token lock: SET NX PX with a random token per acquisition.
// Not reentrant: lock() by a task that already holds it throws
// InvalidArgumentError rather than deadlocking.
class TokenLock final : public Lock {
 public:
  TokenLock(std::shared_ptr<detail::ClientCore> client, std::string_view name);

  Flavor flavor() const override { return Flavor::token; }

 private:
  ScriptCall attempt_call(const std::string& owner, Duration lease, detail::Holding& holding) override;
  Attempt attempt_result(const Reply& reply, const detail::Holding& holding) override;
  std::optional<ScriptCall> release_call(const std::string& owner, const detail::Holding& holding) override;
  ReleaseResult release_result(const Reply& reply) override;
  bool release_retriable() const override;
  Status status(const std::string& owner, const detail::Holding* holding) override;
  std::string_view key_type() const override { return "string"; }
  const Script& renew_script() const override;
  std::string renew_holder(const std::string& owner, const detail::Holding& holding) const override;
  bool reentrant() const override { return false; }
};

// Holds a lock for a scope, like std::lock_guard, but safe for a lock whose
// unlock can fail (Redis unreachable, lease already run out): the destructor
// never throws (std::lock_guard would terminate); a failed unlock goes to the
// client's background error handler, and the lease bounds how long the lock
// can outlive the scope.
template <typename LockType>
class [[nodiscard]] LockGuard {
 public:
  explicit LockGuard(LockType& lock) : lock_(lock) { lock_.lock(); }
  LockGuard(const LockGuard&) = delete;
  LockGuard& operator=(const LockGuard&) = delete;
  ~LockGuard() {
    try {
      lock_.unlock();
    } catch (...) {
      lock_.report_background_error(std::current_exception());
    }
  }

 private:
  LockType& lock_;
};

}  // namespace turnstile

#endif  // TURNSTILE_LOCK_H_
