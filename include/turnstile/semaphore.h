// turnstile/semaphore.h
//
// Distributed counting semaphores on Redis, with Redisson's key layout, in
// two kinds. Both are obtained from a Client (client.h):
//
//   turnstile::CountingSemaphore api_slots = client.counting_semaphore("api:slots");
//   (void)api_slots.try_set_permits(4);       // only if not set yet
//   api_slots.acquire();                      // waits for a permit
//   call_the_api();
//   api_slots.release();                      // any process may release
//
//   turnstile::PermitSemaphore jobs = client.permit_semaphore("db:jobs");
//   (void)jobs.try_set_permits(2);
//   turnstile::PermitId permit = jobs.acquire();   // renewed while held
//   run_job();
//   jobs.release(permit);
//
// Kinds:
//   CountingSemaphore  Redisson RSemaphore: the available permits are an
//                    integer string at <name>. Permits have no owner: any
//                    process may release (by design), and a holder that
//                    crashes loses its permits for good.
//   PermitSemaphore  Redisson RPermitExpirableSemaphore, crash-safe: the
//                    available count at <name>, and every acquired permit is
//                    an id in the sorted set "{<name>}:timeout" scored by its
//                    expiry (Unix ms by the acquirer's clock). Expired
//                    permits return to the pool as soon as any operation
//                    touches the semaphore. Without a fixed lease, the
//                    client's watchdog pushes the expiry of every held
//                    permit back every lease/3, so a live holder
//                    keeps its permits and a crashed one's return within one
//                    watchdog timeout.
//   Both publish the new available count on "redisson_sc:{<name>}" whenever
//   permits come back, so they interoperate with Redisson processes.
//
// Common contract:
//   * Acquiring n permits is all or nothing. acquire(0) succeeds at once
//     without touching Redis. A negative count is InvalidArgumentError.
//   * Waiting never polls: a waiter subscribes to the channel and retries on
//     every message (so a waiter for n > 1 wakes as soon as enough permits
//     are free, not at the end of its wait), and for the crash-safe kind
//     also when the earliest held permit's lease runs out (nothing is
//     published then). Not fair: on a release every waiter races.
//   * Durations: a negative wait is zero; a deadline in the past means "try
//     once now". A lease below 1 ms is InvalidArgumentError.
//   * A name (or "{<name>}:timeout") holding another kind of value, or a
//     string that is not an integer, fails with WrongTypeError and nothing is
//     overwritten.
//   * Thread safety: one semaphore object may be shared by many threads.
//   Objects are movable handles; they must not outlive their Client.

#ifndef TURNSTILE_SEMAPHORE_H_
#define TURNSTILE_SEMAPHORE_H_

#include <chrono>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "turnstile/export.h"
#include "turnstile/flavor.h"
#include "turnstile/future.h"
#include "turnstile/lock.h"
#include "turnstile/reply.h"
#include "turnstile/runtime.h"

namespace turnstile {

namespace detail {
struct ClientCore;
struct PermitSemaphoreCore;
class RequiredTotal;
class CountingHold;
class PermitHold;
template <typename T>
class Task;
enum class WaitStyle : std::uint8_t;
}  // namespace detail

// The Redisson-compatible counting semaphore. Permits have no owner.
class TURNSTILE_EXPORT CountingSemaphore : public Holdable {
 public:
  CountingSemaphore(CountingSemaphore&&) noexcept;
  CountingSemaphore& operator=(CountingSemaphore&&) noexcept;
  CountingSemaphore& operator=(const CountingSemaphore&) = delete;
  ~CountingSemaphore();

  // The key of the count (the client's key prefix included).
  const std::string& name() const override { return name_; }
  Flavor flavor() const override { return Flavor::counting_semaphore; }
  // Its wake-up channel, "redisson_sc:{<name>}".
  const std::string& channel() const { return channel_; }

  // Sets the available permits to `permits` if the semaphore does not exist
  // yet, and wakes the waiters; returns whether it did. Nothing changes if it
  // exists (whatever its count).
  [[nodiscard]] bool try_set_permits(std::int64_t permits);

  // Takes `permits`, waiting as long as it takes.
  void acquire(std::int64_t permits = 1);
  // Takes `permits` if that many are available now.
  [[nodiscard]] bool try_acquire(std::int64_t permits = 1);
  // Takes `permits`, waiting up to `wait`.
  [[nodiscard]] bool try_acquire(std::int64_t permits, Duration wait);
  // Takes `permits`, waiting up to options.wait unless options.stop is
  // requested first (then false within one wake-up, nothing taken).
  // options.lease is refused (InvalidArgumentError): permits of a count
  // have no lease.
  [[nodiscard]] bool try_acquire(std::int64_t permits, const AcquireOptions& options);
  template <typename Rep, typename Period>
  [[nodiscard]] bool try_acquire_for(const std::chrono::duration<Rep, Period>& wait, std::int64_t permits = 1) {
    return try_acquire(permits, std::chrono::duration_cast<Duration>(wait));
  }
  [[nodiscard]] bool try_acquire_until(Instant deadline, std::int64_t permits = 1);
  // A deadline of a standard clock: see time_left_until() (runtime.h).
  template <typename Clock, typename ClockDuration>
  requires(!std::is_same_v<Clock, MonotonicClock>)
      [[nodiscard]] bool try_acquire_until(const std::chrono::time_point<Clock, ClockDuration>& deadline,
                                           std::int64_t permits = 1) {
    return try_acquire(permits, time_left_until(deadline));
  }

  // Gives `permits` back (creating the semaphore if absent) and wakes the
  // waiters. Any process may release, also permits it never took, which
  // raises the count (Redisson's semantics). release(0) does nothing.
  void release(std::int64_t permits = 1);

  // The available permits now (0 if the semaphore does not exist; negative
  // after add_permits with a negative count).
  std::int64_t available_permits();
  // Takes every available permit; returns how many (0 if none or negative).
  std::int64_t drain_permits();
  // Adds `delta` permits (negative: removes them, and the count may go
  // below zero) and wakes the waiters. |delta| and the resulting count are
  // at most kMaxPermits (2^53): beyond, InvalidArgumentError or
  // ServerError, nothing changed.
  void add_permits(std::int64_t delta);
  // Sets the available count to `permits` (0..kMaxPermits) whatever it was
  // (an operator resizing it) and wakes the waiters; returns the count it
  // replaced (0 if the semaphore did not exist).
  std::int64_t set_permits(std::int64_t permits);
  // Deletes the semaphore (an operator's reset): the count is gone, as if
  // never set. Returns whether it existed.
  bool reset();

  // Asynchronous forms: waiting on no thread of their own (future.h).
  [[nodiscard]] Future<void> acquire_async(std::int64_t permits = 1);
  [[nodiscard]] Future<bool> try_acquire_async(std::int64_t permits, Duration wait);
  // Cancellable: a stop requested on options.stop ends the wait (false).
  [[nodiscard]] Future<bool> try_acquire_async(std::int64_t permits, const AcquireOptions& options);
  [[nodiscard]] Future<void> release_async(std::int64_t permits = 1);

  // Holds as values (Holdable, flavor.h; turnstile/hold.h): one permit,
  // given back by the LockHold from any thread; options.lease is refused
  // (InvalidArgumentError: a counting semaphore's permits have no lease);
  // never lost, so its loss token is never requested. The total
  // require_total() named is made sure of first.
  [[nodiscard]] LockHold try_acquire_hold(const AcquireOptions& options) override;
  [[nodiscard]] Future<LockHold> try_acquire_hold_async(const AcquireOptions& options) override;
  using Holdable::acquire_hold;
  void set_lost_handler(LockLostHandler) override {}
  // Before the next acquisition: create the semaphore with `total` permits
  // if it does not exist (Client::holdable() with HoldableOptions::permits).
  void require_total(std::int64_t total);

 private:
  friend class Client;
  TURNSTILE_HIDDEN CountingSemaphore(std::shared_ptr<detail::ClientCore> client, std::string_view name);
  // Copied only into a hold as a value, which shares this handle's state.
  friend class detail::CountingHold;
  TURNSTILE_HIDDEN CountingSemaphore(const CountingSemaphore&);
  // The total require_total() named, made sure of once.
  void settle_total();

  bool acquire_by(std::int64_t permits, Instant deadline, std::stop_token stop = {});
  // acquire_by() as an engine task (locks/engine/task.h), for the asynchronous forms.
  TURNSTILE_HIDDEN detail::Task<bool> acquire_task(detail::WaitStyle style, std::int64_t permits, Instant deadline,
                                                   std::stop_token stop);
  // Throws InvalidArgumentError if options.lease is set.
  void refuse_lease(const AcquireOptions& options) const;
  std::int64_t add(std::int64_t delta);
  // One call of the semaphore script.
  Reply call(std::string_view operation, std::int64_t permits);

  std::shared_ptr<detail::ClientCore> client_;
  std::string name_;
  std::string channel_;
  std::shared_ptr<detail::RequiredTotal> total_;
};

// A permit of a PermitSemaphore: 16 random bytes, shown as 32 lower-case
// hex digits. In Redis the id is stored as its 16 raw bytes, as Redisson
// (since 3.17.0) stores it, so either library can release, renew or look up
// the other's permits.
class TURNSTILE_EXPORT PermitId {
 public:
  // Takes the 32 lower-case hex digits or the 16 raw bytes; throws
  // InvalidArgumentError for anything else.
  explicit PermitId(std::string_view hex_or_bytes);
  // The 32 hex digits (what users see, and TURNSTILE_PERMIT_IDS).
  const std::string& hex() const { return hex_; }
  // The 16 raw bytes (the member of "{<name>}:timeout").
  std::string bytes() const;
  auto operator<=>(const PermitId&) const = default;

 private:
  std::string hex_;
};

// What a PermitSemaphore's status query found.
struct TURNSTILE_EXPORT HeldPermit {
  PermitId id;
  // Time left on its lease; nullopt if it never expires (a Redisson permit
  // taken without a lease).
  std::optional<std::chrono::milliseconds> remaining;
};
struct TURNSTILE_EXPORT PermitSemaphoreStatus {
  std::int64_t available = 0;
  std::int64_t held = 0;  // all of them, listed or not
  // Up to kMaxListedPermits of them, earliest expiry first.
  std::vector<HeldPermit> permits;
  std::int64_t total() const { return available + held; }
};

// The outcome of try_set_permits_or_get: whether this call set the total,
// and the total in force afterwards (available + held).
struct TURNSTILE_EXPORT PermitTotal {
  bool set = false;
  std::int64_t total = 0;
};

struct TURNSTILE_EXPORT PermitLost {
  std::string_view semaphore_name;
  const PermitId& permit;
  LockLostReason reason;
};
// Told when a permit held with the watchdog is lost (its renewal found it
// gone, or Redis was unreachable for a whole lease). Runs on the watchdog's
// task; must not block for long.
using PermitLostHandler = std::function<void(const PermitLost&)>;

// The crash-safe semaphore (Redisson RPermitExpirableSemaphore layout,
// renewed while held). Permits are owned by id, not by task: any task with
// the id may release it.
class TURNSTILE_EXPORT PermitSemaphore : public Holdable {
 public:
  // Expired permits one script call returns to the pool; any further ones
  // come back at the next call (an acquire calls again at once, up to
  // kMaxReclaimRounds times per attempt).
  static constexpr std::int64_t kMaxReclaimedPerCall = 1000;
  static constexpr int kMaxReclaimRounds = 16;
  // The most permits one acquire or release may name (script arguments).
  static constexpr std::int64_t kMaxPermitsPerCall = 1000;
  // The most held permits status() lists.
  static constexpr std::int64_t kMaxListedPermits = 1000;
  // Redisson's expiry score for a permit taken without a lease: never.
  static constexpr std::int64_t kNeverExpiresMs = 922337203685477;

  PermitSemaphore(PermitSemaphore&&) noexcept;
  PermitSemaphore& operator=(PermitSemaphore&&) noexcept;
  PermitSemaphore& operator=(const PermitSemaphore&) = delete;
  ~PermitSemaphore();

  // The key of the available count (the client's key prefix included).
  const std::string& name() const override;
  Flavor flavor() const override { return Flavor::semaphore; }
  // The sorted set of held permits, "{<name>}:timeout".
  const std::string& timeout_key() const;
  const std::string& channel() const;

  // Sets the total (available + held) to `total` if the semaphore does not
  // exist yet; returns whether it did.
  [[nodiscard]] bool try_set_permits(std::int64_t total);
  // The same, atomically answering the total in force either way: for
  // callers that must all agree on the total (check `total` against yours).
  PermitTotal try_set_permits_or_get(std::int64_t total);
  // Sets the total to `total` whatever it was: the available count becomes
  // total - held (negative if more are held; releases pay that back).
  void set_permits(std::int64_t total);
  // Deletes the semaphore: its count and every held permit (an operator's
  // reset; holders find their permits gone at their next renewal or
  // release, as after a force unlock). Returns whether anything was there.
  bool reset();

  // One permit, waiting as long as it takes. Without a lease the watchdog
  // keeps it while held; with one, it expires after `lease`.
  [[nodiscard]] PermitId acquire(std::optional<Duration> lease = std::nullopt);
  // `permits` permits, all or none, waiting as long as it takes.
  [[nodiscard]] std::vector<PermitId> acquire_many(std::int64_t permits, std::optional<Duration> lease = std::nullopt);
  // One permit, waiting up to options.wait; nullopt if none came.
  [[nodiscard]] std::optional<PermitId> try_acquire(const AcquireOptions& options = {});
  template <typename Rep, typename Period>
  [[nodiscard]] std::optional<PermitId> try_acquire_for(const std::chrono::duration<Rep, Period>& wait) {
    return try_acquire(
        AcquireOptions{.wait = std::chrono::duration_cast<Duration>(wait), .lease = std::nullopt, .stop = {}});
  }
  [[nodiscard]] std::optional<PermitId> try_acquire_until(Instant deadline);
  // A deadline of a standard clock: see time_left_until() (runtime.h).
  template <typename Clock, typename ClockDuration>
  requires(!std::is_same_v<Clock, MonotonicClock>) [[nodiscard]] std::optional<PermitId> try_acquire_until(
      const std::chrono::time_point<Clock, ClockDuration>& deadline) {
    return try_acquire(AcquireOptions{.wait = time_left_until(deadline), .lease = std::nullopt, .stop = {}});
  }
  // `permits` permits, all or none, waiting up to options.wait; nullopt if
  // they did not come (an empty vector for permits == 0).
  [[nodiscard]] std::optional<std::vector<PermitId>> try_acquire_many(std::int64_t permits,
                                                                      const AcquireOptions& options = {});

  // Releases permits and wakes the waiters. All or nothing: if any id is not
  // held (expired, released, unknown), nothing is released and release
  // throws PermitNotHeldError naming it, try_release returns false. Listing
  // an id twice is InvalidArgumentError.
  void release(const PermitId& permit);
  void release(std::span<const PermitId> permits);
  [[nodiscard]] bool try_release(const PermitId& permit);
  [[nodiscard]] bool try_release(std::span<const PermitId> permits);

  // Gives a held permit a new fixed lease from now (the watchdog stops
  // renewing it, and ClientOptions::max_hold no longer applies). Its local
  // deadline moves as for Lock::extend() (lock.h, "The local deadline").
  // Returns false if it is not held (expired,
  // lost while believed held, released or unknown).
  [[nodiscard]] bool update_lease(const PermitId& permit, Duration lease);
  // update_lease() for a caller that renews by hand: throws
  // PermitNotHeldError where update_lease() answers false.
  void extend(const PermitId& permit, Duration lease);

  // Queries; each reclaims expired permits first.
  std::int64_t available_permits();
  // Permits held now, by anyone.
  std::int64_t acquired_permits();
  // available + held: the total set by try_set_permits / set_permits.
  std::int64_t total_permits();
  PermitSemaphoreStatus status();

  // Who to tell when a watched permit is lost. Either way the loss also
  // goes to the client's background error handler as a LockLostError.
  void set_lost_handler(PermitLostHandler handler);
  // Holdable's form: LockLost::owner is the permit's 32 hex digits.
  void set_lost_handler(LockLostHandler handler) override;

  // Asynchronous forms, waiting on no thread of their own (future.h);
  // try_acquire_async honours options.stop as try_acquire() does.
  [[nodiscard]] Future<PermitId> acquire_async(std::optional<Duration> lease = std::nullopt);
  [[nodiscard]] Future<std::optional<PermitId>> try_acquire_async(const AcquireOptions& options);
  [[nodiscard]] Future<void> release_async(const PermitId& permit);

  // Holds as values (Holdable, flavor.h; turnstile/hold.h): one permit,
  // LockHold::owner() and permit_ids() its id; its loss token is requested
  // when the permit is lost (the lost handler's instant) or found gone at
  // release (release_or_throw(): PermitNotHeldError). The total
  // require_total() named is made sure of first.
  [[nodiscard]] LockHold try_acquire_hold(const AcquireOptions& options) override;
  [[nodiscard]] Future<LockHold> try_acquire_hold_async(const AcquireOptions& options) override;
  using Holdable::acquire_hold;
  // Before the next acquisition: set the total to `total` if the semaphore
  // does not exist; if it exists with another total, the acquisition throws
  // MismatchError (every user of a name must agree on the number).
  void require_total(std::int64_t total);

 private:
  friend class Client;
  TURNSTILE_HIDDEN PermitSemaphore(std::shared_ptr<detail::ClientCore> client, std::string_view name,
                                   const LockOptions& options);
  // Copied only into a hold as a value, which shares this handle's state.
  friend class detail::PermitHold;
  TURNSTILE_HIDDEN PermitSemaphore(const PermitSemaphore&);
  // The total require_total() named, made sure of once (MismatchError).
  void settle_total();

  std::optional<std::vector<PermitId>> acquire_by(std::int64_t permits, std::optional<Duration> lease, Instant deadline,
                                                  std::stop_token stop = {});
  // acquire_by() as an engine task (locks/engine/task.h), for the asynchronous forms.
  TURNSTILE_HIDDEN detail::Task<std::optional<std::vector<PermitId>>> acquire_task(detail::WaitStyle style,
                                                                                   std::int64_t permits,
                                                                                   std::optional<Duration> lease,
                                                                                   Instant deadline,
                                                                                   std::stop_token stop);
  // The id that is not held, if release failed.
  std::optional<PermitId> release_all(std::span<const PermitId> permits);
  PermitTotal set_total(std::int64_t total, bool only_if_absent);
  PermitSemaphoreStatus query(std::int64_t max_listed);

  std::shared_ptr<detail::PermitSemaphoreCore> core_;
  std::shared_ptr<detail::RequiredTotal> total_;
  Duration lock_delay_{};  // LockOptions::lock_delay, else the client's
};

// The former name of CountingSemaphore, kept for one release.
using Semaphore [[deprecated("use CountingSemaphore")]] = CountingSemaphore;

}  // namespace turnstile

#endif  // TURNSTILE_SEMAPHORE_H_
