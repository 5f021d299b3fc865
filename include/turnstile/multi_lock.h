// turnstile/multi_lock.h
//
// Locks made of several locks ("nodes"), each on its own Client:
//
//   RedLock    held when a majority of the nodes granted it: N independent
//              Redis masters (N odd, typically 3 or 5), so that losing a
//              minority of them (crash, restart without persistence, a
//              failover to a replica that missed the write) cannot hand the
//              lock to a second holder. Redis's RedLock algorithm; Redisson
//              RedissonRedLock.
//   MultiLock  held when every node granted it: several locks (on the same
//              or different servers) taken as one, all or none. Redisson
//              RedissonMultiLock.
//
// Both are one class, CompositeLock, differing only in how many nodes must
// grant it (RedLock: N/2 + 1; MultiLock: N).
//
//   turnstile::Client a(backend_a), b(backend_b), c(backend_c);  // one per master
//   turnstile::ReentrantLock on_a = a.lock("order:42"), on_b = b.lock("order:42"),
//                            on_c = c.lock("order:42");
//   turnstile::RedLock lock({on_a, on_b, on_c});
//   if (lock.try_lock({.wait = 3s, .lease = 10s})) {
//     ... while (lock.remaining_validity() > step) { do one step }
//     lock.unlock();
//   }
//
// Acquisition (one attempt): the first request is sent at `start`; every
// node is asked to take its lock once, with the composite's lease as its
// lease (never the wait). The calling task sends all N requests before it
// reads any reply (Backend::send_eval: one connection per node, no thread
// per node), so an attempt costs about one round trip of the slowest node,
// not N round trips. It then takes the answers in node order, waiting at
// most `node_timeout` from `start` in all (answers already in are taken
// past it). The attempt wins if enough nodes granted and
//
//   validity = lease - (now - start) - (lease * clock_drift_factor + clock_drift_constant)
//
// is positive. Otherwise everything taken on every node is released before
// the attempt returns (a late answer is waited for: at most the node
// backend's command timeout), and after a random delay (the runtime's
// seeded random stream) the next attempt starts, until the wait runs out.
// Measuring from the first request, with the same lease everywhere, is what
// keeps Redisson's old bugs out (two holders when the lease was shorter
// than the wait, or with no wait and a lease).
//
// Validity is the time the caller may act as the holder. It is a promise
// only under the RedLock assumptions: clocks (servers' and the client's)
// run at nearly the same rate (within clock_drift_factor), and the holder
// is not paused between checking remaining_validity() and acting. A client
// whose clock runs slow by more than the allowance, or a GC pause after the
// check, can act while another client holds the lock (turnstile's
// simulation shows both: src/scenarios/redlock_scenarios.h).
//
// Fencing tokens are not available: each master has its own counter, so
// tokens from different masters are not comparable, and a master that fails
// over to a lagging replica (or restarts without persistence) can issue a
// token it issued before. Use a single fenced lock where fencing is needed.
//
// Leases: with no lease given, the nodes' watchdogs keep their locks
// (validity is then unbounded: kNoDeadline) and the composite counts as
// lost, reported once to its LockLostHandler, when too few of the nodes
// that granted it still hold it. A restarted node should stay out of the
// set for at least one lease (the RedLock paper's delayed restart): a node
// that forgets a key the holder needed for its majority can let a second
// client in.
//
// Unlock releases every node, all requests sent before any reply is read
// (a release that cannot be sent is sent again as Lock::unlock() retries
// it). Node failures are reported to
// the node client's background error handler and not thrown, unless too
// few nodes are left released for the composite to count as released.
//
// Contract, as every lock (lock.h): owner = the calling task; not
// reentrant (lock() by a holder throws InvalidArgumentError); a negative
// wait or lease is zero; a past deadline means one attempt; a zero lease is
// invalid. The node locks must outlive the composite (or be handed over to
// it as unique_ptrs), must share one clock and one notion of task (the same
// simulated runtime, or real runtimes of one process; the first node's
// runtime times and runs the composite), and must not be used directly
// while the composite holds them. The composite installs its own lost
// handler on every node lock.
//
// Throughput: on one machine the N servers share its cores, so even with
// every request in flight at once a pair costs more than on one node. The
// lock benchmark (benchmarks/lock_benchmark.cpp) compares RedLock with the
// same scripts sent by raw hiredis to all N servers at once; on 2 cores
// that ceiling is about 0.5 (N = 3) and 0.4 (N = 5) of one node's rate.

#ifndef TURNSTILE_MULTI_LOCK_H_
#define TURNSTILE_MULTI_LOCK_H_

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "turnstile/export.h"
#include "turnstile/flavor.h"
#include "turnstile/future.h"
#include "turnstile/lock.h"
#include "turnstile/runtime.h"

namespace turnstile {

namespace detail {
struct CompositeState;
}  // namespace detail

struct TURNSTILE_EXPORT CompositeLockOptions {
  // How long one attempt waits for the nodes' answers. Short against the
  // lease: a node that does not answer in time counts as refusing.
  Duration node_timeout = std::chrono::milliseconds(50);
  // The clock-drift allowance subtracted from every validity:
  // lease * factor + constant (the RedLock paper's 1% and 2 ms).
  double clock_drift_factor = 0.01;
  Duration clock_drift_constant = std::chrono::milliseconds(2);
  // Between failed attempts, a random delay in [min, max].
  Duration retry_delay_min = std::chrono::milliseconds(50);
  Duration retry_delay_max = std::chrono::milliseconds(200);
};

class TURNSTILE_EXPORT CompositeLock : public Holdable {
 public:
  // More nodes than this is a mistake, not a deployment.
  static constexpr std::size_t kMaxNodes = 64;
  // Largest allowed clock_drift_factor: a validity must be possible.
  static constexpr double kMaxClockDriftFactor = 0.5;

  CompositeLock(CompositeLock&&) noexcept;
  CompositeLock& operator=(CompositeLock&&) noexcept;
  CompositeLock(const CompositeLock&) = delete;
  CompositeLock& operator=(const CompositeLock&) = delete;
  virtual ~CompositeLock();

  // The first node's lock name.
  const std::string& name() const override;
  std::size_t node_count() const;
  // How many nodes must grant it: N/2 + 1 for a RedLock, N for a MultiLock.
  std::size_t required_nodes() const;

  // Waits as long as it takes; the nodes' watchdogs keep it while held.
  // Throws ConnectionError when an attempt finds too many nodes unreachable
  // to ever succeed (more than N - required_nodes() failing with errors).
  void lock();
  // Waits as long as it takes; it frees itself after `lease`.
  void lock(Duration lease);

  // One attempt; watchdog lease.
  [[nodiscard]] bool try_lock();
  // Attempts until acquired or options.wait runs out. Returns false if it
  // was not acquired; throws ConnectionError as lock() does. A stop
  // requested on options.stop ends the wait before the next attempt or
  // during the delay between two (an attempt under way finishes: it takes
  // at most node_timeout, and if it lost it released every node it took),
  // returning false with no node held.
  [[nodiscard]] bool try_lock(const AcquireOptions& options);
  template <typename Rep, typename Period>
  [[nodiscard]] bool try_lock_for(const std::chrono::duration<Rep, Period>& wait) {
    return try_lock(
        AcquireOptions{.wait = std::chrono::duration_cast<Duration>(wait), .lease = std::nullopt, .stop = {}});
  }
  [[nodiscard]] bool try_lock_until(Instant deadline);
  // A deadline of a standard clock: see time_left_until() (runtime.h).
  template <typename Clock, typename ClockDuration>
  requires(!std::is_same_v<Clock, MonotonicClock>)
      [[nodiscard]] bool try_lock_until(const std::chrono::time_point<Clock, ClockDuration>& deadline) {
    return try_lock(AcquireOptions{.wait = time_left_until(deadline), .lease = std::nullopt, .stop = {}});
  }

  // Releases it on every node, as Lock::unlock() releases (lock.h,
  // "Releasing"): never throws for a loss or a failure. A hold reported lost
  // returns quietly (the nodes are released all the same); fewer than
  // required_nodes() nodes still holding it is a loss told now to the lost
  // handler (LockLostReason::gone); node errors go to the background error
  // handler. Throws NotOwnerError only if the calling task does not hold it.
  void unlock();

  // Until when (runtime clock) the calling task may act as the holder;
  // nullopt if it does not hold it; kNoDeadline when held without a lease
  // (the watchdogs keep it).
  std::optional<Instant> valid_until() const;
  // valid_until() - now, zero if not held or already past.
  Duration remaining_validity() const;
  // Whether the calling task holds it (local record; no script call).
  bool is_held_by_current_thread() const;

  // Asynchronous forms, on behalf of the calling task (see lock.h);
  // try_lock_async honours options.stop as try_lock() does.
  [[nodiscard]] Future<void> lock_async(std::optional<Duration> lease = std::nullopt);
  [[nodiscard]] Future<bool> try_lock_async(const AcquireOptions& options);
  [[nodiscard]] Future<void> unlock_async();

  // Told once when a lock held without a lease is lost on too many nodes.
  // LockLost::lock_name is name(); owner is the first node's owner id.
  void set_lost_handler(LockLostHandler handler) override;

  // Holds as values (turnstile/hold.h): every node held for an owner id of
  // its own client; LockHold::owner() is the first node's. The hold's loss
  // token is requested when too few nodes are left (the lost handler's
  // instant). A composite hold cannot be extended. release_or_throw()
  // throws NotOwnerError for a loss (lost before, or too few nodes left)
  // and the first node error if fewer than required_nodes() nodes could be
  // reached.
  [[nodiscard]] LockHold try_acquire_hold(const AcquireOptions& options) override;
  [[nodiscard]] Future<LockHold> try_acquire_hold_async(const AcquireOptions& options) override;
  using Holdable::acquire_hold;

  // The owner id of the calling task on the first node.
  std::string current_owner() const;
  // To the first node's client background error handler.
  void report_background_error(std::exception_ptr error) const noexcept;

 protected:
  // Either `nodes` (borrowed) or `owned` (kept alive with the composite). Throws InvalidArgumentError for no nodes,
  // more than kMaxNodes, a node given twice, nodes on different runtimes, or bad options.
  CompositeLock(std::vector<Lock*> nodes, std::vector<std::unique_ptr<Lock>> owned, bool majority,
                const CompositeLockOptions& options);

 private:
  std::shared_ptr<detail::CompositeState> state_;
};

// Held when a majority of independent masters granted it (see the file
// comment).
class TURNSTILE_EXPORT RedLock final : public CompositeLock {
 public:
  // Borrows the node locks (they must outlive the RedLock).
  explicit RedLock(std::vector<std::reference_wrapper<Lock>> nodes, const CompositeLockOptions& options = {});
  // Owns the node locks.
  explicit RedLock(std::vector<std::unique_ptr<Lock>> nodes, const CompositeLockOptions& options = {});

  Flavor flavor() const override { return Flavor::redlock; }
};

// Held when every node granted it: all or none, one wait, one lease.
class TURNSTILE_EXPORT MultiLock final : public CompositeLock {
 public:
  explicit MultiLock(std::vector<std::reference_wrapper<Lock>> nodes, const CompositeLockOptions& options = {});
  explicit MultiLock(std::vector<std::unique_ptr<Lock>> nodes, const CompositeLockOptions& options = {});

  Flavor flavor() const override { return Flavor::multilock; }
};

}  // namespace turnstile

#endif  // TURNSTILE_MULTI_LOCK_H_
