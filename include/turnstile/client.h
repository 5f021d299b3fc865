// turnstile/client.h
//
// The entry point of the lock family. A Client binds a Backend (where the
// locks live) to a Runtime (time, waiting, tasks), has a random UUID that
// names it in every owner id ("<uuid>:<task id>", as Redisson), and runs one
// watchdog that renews the leases of every lock it holds without a fixed
// lease: every lease/3, in batches of up to 100 locks per script
// call.
//
//   std::shared_ptr<turnstile::Backend> backend = turnstile::make_redis_backend(
//       turnstile::RedisOptions::from_url("redis://127.0.0.1:6379"));
//   turnstile::Client client(backend);               // the real runtime
//   turnstile::ReentrantLock lock = client.lock("order:42");
//
// A Client is thread-safe and meant to be shared (one per process and
// backend, like a RedissonClient). Destroying it stops its watchdog: locks
// still held then expire one watchdog timeout later.

#ifndef TURNSTILE_CLIENT_H_
#define TURNSTILE_CLIENT_H_

#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "turnstile/events.h"
#include "turnstile/export.h"
#include "turnstile/election.h"
#include "turnstile/fair_lock.h"
#include "turnstile/flavor.h"
#include "turnstile/key_layout.h"
#include "turnstile/lock.h"
#include "turnstile/metrics.h"
#include "turnstile/multi_lock.h"
#include "turnstile/read_write_lock.h"
#include "turnstile/revocation.h"
#include "turnstile/runtime.h"
#include "turnstile/semaphore.h"
#include "turnstile/server_check.h"

namespace turnstile {

class Backend;

namespace detail {
struct ClientCore;
}  // namespace detail

inline constexpr double kDefaultClockDriftFactor = 0.01;
inline constexpr double kMaxClockDriftFactor = 0.5;
inline constexpr Duration kDefaultStopMargin = std::chrono::milliseconds(2);
inline constexpr std::int64_t kDefaultUnreachableLimitMs = 30'000;
inline constexpr std::size_t kDefaultMaxWaiting = 1'000'000;

// A holding's local deadline (lock.h, "The local deadline") as it was just
// set or moved, for ClientOptions::on_lease_deadline.
struct TURNSTILE_EXPORT LeaseDeadline {
  std::string_view key;  // the key whose lease it is (the client's key prefix included)
  // The instant the holding is lost unless renewed first, on the Runtime's
  // clock (the real runtime: std::chrono::steady_clock, which is
  // CLOCK_MONOTONIC on Linux).
  Instant deadline;
};

// A holding whose local deadline came within ClientOptions::lease_warning
// without moving (ClientOptions::on_lease_at_risk).
struct TURNSTILE_EXPORT LeaseAtRisk {
  std::string_view key;  // as LeaseDeadline's
  Instant deadline;      // the local deadline it will be lost at unless renewed first
  Duration remaining;    // deadline - now, when told (at most lease_warning)
};

// Whether a Client checks the server's memory policy by itself
// (ClientOptions::server_check).
enum class ServerCheck : std::uint8_t {
  // No check: nothing is sent for it.
  off,
  // Checked once, before the first script call; a server that may evict
  // lock keys is reported through on_background_error.
  warn,
};

// ClientOptions::wake_scope.
enum class WakeScope : std::uint8_t { process, fleet };

struct TURNSTILE_EXPORT ClientOptions {
  // The lease the watchdog renews: that of every hold taken without a
  // fixed one (AcquireOptions::lease), and so how long a crashed holder's
  // lock outlives it; `turnstile run --lease`. Renewed every window/3
  // (lock.h: window = the lease minus the safety margin below). Redisson's
  // lockWatchdogTimeout, and its default.
  std::chrono::milliseconds lease{30'000};
  // Prepended to every lock name. Empty (the default) for Redisson
  // compatibility.
  std::string key_prefix = {};
  // Errors that cannot be thrown to a caller (an unlock that could not
  // reach Redis in a std::scoped_lock's destructor, watchdog renewals
  // failing). Default: one line on stderr. Must not throw.
  std::function<void(std::exception_ptr)> on_background_error = {};
  // The safety margin taken off every lease for the holder's local deadline
  // (lock.h, "The local deadline"): lease x clock_drift_factor + stop_margin.
  // clock_drift_factor bounds how much slower this process's clock may run
  // than the server's, plus scheduling noise (RedLock's 1 %); stop_margin is
  // the time the holder needs to stop acting once told its lock is lost
  // (`turnstile run` puts its kill grace here). A lease not longer than its
  // margin is refused. 0 <= clock_drift_factor < 0.5; stop_margin >= 0.
  // Safety does not depend on the backend's timeouts (the deadline is a
  // timer of its own), but availability does: a renewal waits at most one
  // renewal period on the standalone backend; on Sentinel and Cluster it
  // waits the backend's command timeout, which should then be well below
  // a third of the window (`turnstile run` caps it so).
  double clock_drift_factor = kDefaultClockDriftFactor;
  Duration stop_margin = kDefaultStopMargin;
  // A waiting acquisition rides out transient failures (connection reset or
  // refused, a timeout, a server loading, busy, paused or failing over),
  // trying again with backoff (10 ms doubling to 1 s) until its own
  // deadline, unless Redis stays unreachable this long without one
  // successful call: then the failure is thrown. A try with no wait throws
  // at once, as before.
  std::chrono::milliseconds unreachable_limit{kDefaultUnreachableLimitMs};
  // The most acquisitions of this client that may wait at once, all names
  // and flavors together (blocking and asynchronous alike: none of them
  // keeps a thread of its own, locks/engine/task.h). One more is refused with
  // TooManyWaitersError before it sends anything; the others go on. A
  // bound against a runaway caller, far above a sane crowd (a waiting
  // acquisition costs about a kilobyte here and a few hundred bytes in
  // Redis). At least 1.
  std::size_t max_waiting = kDefaultMaxWaiting;
  // The longest the watchdog keeps a hold alive: a lock or permit taken
  // without a fixed lease is renewed no more once it has been held this
  // long (counted from the send instant of its acquisition), and its holder
  // is told through the lost handler with LockLostReason::max_hold_reached
  // at that instant; the lease then lapses on the server within one
  // watchdog timeout, as any unrenewed one. A cap on how long a stuck
  // holder (a hung job, a deadlocked thread) can keep others out. Holds
  // with a fixed lease, and those given one by extend(), are not affected.
  // Unset (the default): no limit. Must be above zero and at most kMaxLease.
  std::optional<Duration> max_hold = {};
  // The warning before expiry (the DynamoDB lock client's "danger zone"):
  // on_lease_at_risk is told, once, when a holding's local deadline comes
  // within lease_warning without having moved: renewals of a renewed hold
  // have not been confirmed for a window less lease_warning (Redis slow or
  // unreachable, this process stalled), or a fixed lease is running out. The
  // holder can checkpoint and step down before the loss cuts it off; the
  // hold is still believed held until the deadline, and a renewal that
  // moves the deadline arms the warning again. Also an event
  // (EventKind::lease_at_risk). Runs on the watchdog's task, never under
  // an internal lock; must not block for long nor throw. Zero (the
  // default): none. Healthy renewals keep at least two thirds of a window
  // (lock.h) ahead, so a warning of at most half the watchdog's window
  // (about 14.8 s with the default 30 s timeout) is told only when
  // renewals fail; a longer one is refused (InvalidArgumentError).
  Duration lease_warning = Duration::zero();
  std::function<void(const LeaseAtRisk&)> on_lease_at_risk = {};
  // Lock-delay (Chubby's; Consul sessions' lock-delay): every lease this
  // client arms on the server is lock_delay longer than the lease its
  // holder believes in (the local deadline, lock.h, is the lease's as
  // before). A clean release deletes the key as always, so the delay costs
  // nothing then. A holder lost without one (crashed, paused past its
  // lease, cut off from Redis) keeps everybody out for lock_delay beyond the
  // instant its own deadline told it the hold was lost: a paused holder that
  // wakes and acts once before it looks (docs/safety.md) finds nobody let in
  // yet if its pause ended within the delay. Every acquirer honours it,
  // turnstile's and Redisson's alike: it is the key's expiry. Applies to
  // every lease this client arms: locks, read and write holds, permits, the
  // watchdog's renewals, extend(); the counting semaphore has no lease. A
  // lock handle may set its own (LockOptions::lock_delay, flavor.h). A
  // force-unlock ends it. Shown by `turnstile status` (the holder's identity,
  // key_layout.h). Zero (the default): none. At most kMaxLockDelay.
  Duration lock_delay = Duration::zero();
  // How soon a holder learns that its server lost the keys under it
  // (FLUSHALL, FLUSHDB, a restart without persistence, a failover to a
  // replica that had not synced them), whatever the lease: while the
  // watchdog renews anything, the client reads a presence key of its own
  // every period, one per cluster slot in use
  // ("turnstile_presence:{<tag>}:<client uuid>", key_layout.h); found
  // missing, every renewed hold is renewed at once, and those whose keys
  // are gone are lost (LockLostReason::gone). The check's reconnection
  // after a restart also finds the restart (LockLostReason::
  // server_restarted). Costs one script call per period per slot in use
  // (at most 64 per period, taken in turn), none while nothing is renewed;
  // holds with a fixed lease are not checked. Zero, or a period no shorter
  // than the renewals' (window/3): no check; a wipe is found at the next
  // renewal. Must not be negative.
  Duration wipe_check_period = std::chrono::seconds(1);
  // Told the local deadline of a holding each time it is set or moved: at
  // its acquisition (a reentrant one too), at each confirmed renewal, at a
  // successful extend(). For a supervisor that must enforce the deadline
  // even while this process cannot (`turnstile run`'s guardian process
  // kills the command at it if turnstile is stopped). Not told: losses
  // (the lost handler is) and releases. Runs on the task that moved the
  // deadline (the acquiring task, the watchdog's); calls for one holding
  // from two tasks may overlap, so a caller whose deadlines only move
  // later (no extend(), no shorter lease on a reentrant acquisition) keeps
  // the latest of them. Must not block for long nor throw. Unset (the
  // default): nothing is told.
  std::function<void(const LeaseDeadline&)> on_lease_deadline = {};
  // A Redis that may evict lock keys (a memory limit and an evicting
  // maxmemory-policy: turnstile/server_check.h) can hand a held lock to a
  // second holder. With warn (the default) the client runs check_server()
  // once, before its first script call (calls made meanwhile wait for it up to their own
  // deadline; a check left unfinished is made again), and, if some master evicts, calls on_background_error
  // with an UnsafeServerError naming the policy and the fix; the locks work
  // as usual (refusing is the caller's choice: Client::check_server()). A
  // server whose policy cannot be read (INFO refused, the fake Redis) is
  // not reported. off: no check.
  ServerCheck server_check = ServerCheck::warn;
  // The logging hook (turnstile/events.h): told every acquisition, wait,
  // wake-up, renewal, loss, reconnection and background error at or above
  // event_level, on the thread that did it, never under an internal lock.
  // Must be thread-safe, must not block nor throw. Unset (the default):
  // nothing is built, each emit point costs one branch.
  EventSink event_sink = {};
  EventLevel event_level = EventLevel::info;
  // Who holds a lock, for people (key_layout.h, "The holder's identity";
  // inspection.h: LockHolder::identity): every acquisition of a lock with
  // one holder stores this host's name, the process id, holder_command
  // (empty: the process's name) and holder_label beside the lock, with the
  // lease as its expiry. Never put a secret here: anyone who can read the
  // keys can read it. Cut to kMaxHolderCommandBytes / kMaxHolderLabelBytes.
  std::string holder_command = {};
  std::string holder_label = {};
  // Who one release wakes. fleet (the default): one waiting task of the
  // whole fleet for a lock, n for a semaphore release of n permits
  // (turnstile_lock_wake:{name}; the protocol: docs/redisson-interop.md,
  // "Fleet-wide wake-ups"); Redisson's waiters are woken as before.
  // process: one waiting task in each process with a waiter (every
  // process hears the lock's shared channel, as Redisson's do), turnstile's
  // behaviour before fleet-wide wake-ups; no registry key is written. With
  // fleet, a failed try writes (it registers its process), so with replica
  // sync every failed try waits for a replica too. Processes of both scopes
  // may share a name.
  WakeScope wake_scope = WakeScope::fleet;
  // How a reentrant lock's release hands it on with wake_scope fleet
  // (docs/locks.md, "Direct handoff"). direct (the default): a waiting
  // task's try leaves its process's offer, and a release that frees the
  // lock grants it to the oldest registered process's offer, whose task
  // proceeds on the message without a script call; announce: the release
  // wakes that process ("0") and its task acquires with a call. A fenced
  // lock's waiters are always announced to (a grant would need to draw
  // their token). Processes of both kinds may share a name.
  Handoff fleet_handoff = Handoff::direct;
  // The same for the crash-safe semaphore (PermitSemaphore) with wake_scope
  // fleet: direct (the default), a waiting task's try for one permit leaves its
  // process's offer, and a release (or a reclaim of expired permits) of n
  // permits grants up to n of them to the oldest registered processes'
  // offers, each grantee's task proceeding on the message; announce: the
  // release wakes them and they acquire with a call. A
  // counting semaphore's waiters are always announced to (no lease: a
  // grant to a dead process would lose its permit).
  Handoff permit_handoff = Handoff::direct;
};

class Client;

// How Client::holdable() makes a flavor (flavor.h). Options that do not
// apply to the flavor asked for are refused, not ignored.
struct TURNSTILE_EXPORT HoldableOptions {
  // Reentrant and fair locks: draw a fencing token per acquisition
  // (InvalidArgumentError for the other flavors).
  bool fenced = false;
  // Fair lock: the queue's options (`fenced` above is the one that counts).
  FairLockOptions fair = {};
  // Read-write lock: hold the read half (shared) rather than the write
  // half (InvalidArgumentError for the other flavors).
  bool shared = false;
  // Semaphores: the total permits, made sure of before the first hold (the
  // semaphore is created with it if absent; the crash-safe semaphore set to
  // another total is a MismatchError). 0: use the semaphore as it is.
  std::int64_t permits = 0;
  // RedLock and MultiLock: the clients of the other nodes, one per node
  // (this client is the first node); a reentrant lock at the name on each.
  // Refused for the other flavors; none: a composite of this node alone.
  std::vector<Client*> nodes = {};
  CompositeLockOptions composite = {};
  // Every flavor with a lease: its lock-delay (LockOptions::lock_delay; a
  // composite lock's: each node's; the fair lock's `fair.lock_delay` is
  // replaced by it). Refused for the counting semaphore, which has no lease.
  std::optional<Duration> lock_delay = {};
};

class TURNSTILE_EXPORT Client {
 public:
  // A client on `backend`, with `runtime` for time and tasks.
  Client(std::shared_ptr<Backend> backend, std::shared_ptr<Runtime> runtime, ClientOptions options = {});
  // A client on `backend` with the process's real runtime.
  explicit Client(std::shared_ptr<Backend> backend, ClientOptions options = {});
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // This client's UUID (8-4-4-4-12 lower-case hex).
  const std::string& id() const;
  // The owner id of the calling task: "<uuid>:<task id>".
  std::string current_owner() const;

  // The handles below take what they set for themselves (LockOptions,
  // flavor.h: a lock-delay of their own) or from their options struct;
  // InvalidArgumentError for a setting out of range.
  //
  // The reentrant lock at `name` (Redisson RLock).
  ReentrantLock lock(std::string_view name, const LockOptions& options = {});
  // The reentrant lock at `name`, drawing a fencing token per acquisition
  // (Redisson RFencedLock).
  ReentrantLock fenced_lock(std::string_view name, const LockOptions& options = {});
  // The plain token lock at `name`.
  TokenLock token_lock(std::string_view name, const LockOptions& options = {});
  // The fair lock at `name` (Redisson RFairLock): granted in arrival order.
  FairLock fair_lock(std::string_view name, const FairLockOptions& options = {});
  // The leader election at `name` (turnstile/election.h): a fenced fair
  // lock there, and its leader record.
  Election election(std::string_view name, const ElectionOptions& options = {});
  // The counting semaphore at `name` (Redisson RSemaphore).
  CountingSemaphore counting_semaphore(std::string_view name);
  // The former name of counting_semaphore(), kept for one release.
  [[deprecated("use counting_semaphore()")]] CountingSemaphore semaphore(std::string_view name) {
    return counting_semaphore(name);
  }
  // The read-write lock at `name` (Redisson RReadWriteLock): read() and
  // write() halves.
  ReadWriteLock read_write_lock(std::string_view name, const LockOptions& options = {});
  // The crash-safe semaphore at `name` (Redisson RPermitExpirableSemaphore
  // layout; this client's watchdog renews permits held without a lease).
  PermitSemaphore permit_semaphore(std::string_view name, const LockOptions& options = {});

  // Runs work(lost) while holding the reentrant lock at `name` (renewed by
  // the watchdog, or for options.lease), where `lost` is the hold's
  // loss_token() (lock.h): requested at the instant the lock can no longer
  // be trusted, so the work stops acting as its holder then, in the spirit
  // of std::jthread:
  //
  //   const bool ran = client.with_lock("orders", [](std::stop_token lost) {
  //     while (!lost.stop_requested() && more_work()) do_a_step();
  //   });
  //
  // Waits up to options.wait (default: as long as it takes; cancellable
  // through options.stop) and returns false without running the work if the
  // lock was not had then. Releases the lock when the work returns or
  // throws (the exception propagates); a lock lost meanwhile is released
  // quietly (lock.h, "Releasing").
  template <typename Work>
  requires std::invocable<Work&, std::stop_token>
  [[nodiscard]] bool with_lock(std::string_view name, Work&& work,
                               const AcquireOptions& options = {
                                   .wait = kWaitForever, .lease = std::nullopt, .stop = {}}) {
    ReentrantLock held = lock(name);
    if (!held.try_lock(options)) return false;
    const std::unique_lock hold(held, std::adopt_lock);
    std::invoke(work, held.loss_token());
    return true;
  }

  // Revocation (turnstile/revocation.h): asks the holders of `name` (any
  // flavor) that watch it to release it; returns how many processes
  // listened (revocation.h). InvalidArgumentError for a bad name or a reason longer than
  // kMaxReleaseReasonBytes; what the script call throws.
  std::int64_t request_release(std::string_view name, std::string_view reason = {});
  // Watches the release requests for `name` until the returned watch ends
  // (subscribed before it returns); `handler`, if given, is told each.
  [[nodiscard]] RevocationWatch watch_release_requests(std::string_view name, ReleaseRequestHandler handler = {});

  // Any flavor at `name`, by its Flavor (flavor.h): what the CLI, the
  // simulator and the benchmarks hold when the flavor is chosen at run
  // time. Throws InvalidArgumentError for options that do not fit it.
  std::unique_ptr<Holdable> holdable(Flavor flavor, std::string_view name, const HoldableOptions& options = {});

  // What the memory policy of this client's Redis is now (check_server(),
  // turnstile/server_check.h: one INFO memory per master, whatever
  // options().server_check says). Throws only what finding the masters
  // throws; a master that cannot be asked is unknown.
  ServerSafety check_server() const;

  Backend& backend() const;
  Runtime& runtime() const;
  const ClientOptions& options() const;

  // What this client has done so far (turnstile/metrics.h): counters and
  // latency histograms, with its backend's counters. Cheap; any thread.
  MetricsSnapshot metrics() const;

 private:
  std::shared_ptr<detail::ClientCore> core_;
};

// The longest lock or semaphore name, in bytes (a Redis key may be 512 MB;
// a name this long is a mistake, refused before anything is sent).
inline constexpr std::size_t kMaxNameBytes = 4096;

// The longest lease (and watchdog timeout) any call takes: 16 weeks, about
// 115 days. Longer is a mistake (a crashed holder's lock would outlive any
// on-call rotation), refused with InvalidArgumentError; the CLI and the
// lock policy file take the same maximum for waits.
inline constexpr std::chrono::milliseconds kMaxLease = std::chrono::hours(24 * 7 * 16);

// The longest lock-delay (ClientOptions::lock_delay, LockOptions): an hour. A crashed
// holder keeps its lock for its lease and this much more; longer is a
// mistake (an operator would have to force-unlock every crash).
inline constexpr std::chrono::milliseconds kMaxLockDelay = std::chrono::hours(1);

// The most permits a semaphore count may reach or a call may name: 2^53.
// Counts are computed by Lua scripts, whose numbers are doubles, exact only
// up to 2^53; a larger count is refused with InvalidArgumentError before
// anything is written (and a release that would push the stored count past
// it, with an error reply, nothing changed).
inline constexpr std::int64_t kMaxPermits = std::int64_t{1} << 53;

// Throws InvalidArgumentError naming `what` ("lock name") for a name no lock
// or semaphore may have: empty, longer than kMaxNameBytes, or (`key`, the
// name with the client's key prefix) one whole hash tag "{x}" with no other
// '{': by Redisson's rule above its side keys ("<prefix>:{x}", "{x}:timeout")
// would be those of the name "x", so two locks would share a queue, a
// fencing counter or a semaphore's permits.
TURNSTILE_EXPORT void check_lock_name(std::string_view name, std::string_view key, std::string_view what);

}  // namespace turnstile

#endif  // TURNSTILE_CLIENT_H_
