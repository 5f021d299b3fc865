// turnstile/fair_lock.h
//
// The fair lock (Redisson RFairLock keys): a reentrant lock granted in
// arrival order. Waiters queue in a list, each with a deadline in a sorted
// set, and each listens on its own channel; a release wakes only the head.
//
//   turnstile::FairLock lock = client.fair_lock("orders", {.waiter_timeout = 5s});
//   lock.lock();                 // joins the queue, waits for its turn
//   ...
//   lock.unlock();               // wakes the next waiter in the queue
//
// Keys (Redis Cluster: one hash tag, one slot):
//   <name>                                hash, field owner id = hold count
//   redisson_lock_queue:{<name>}          list of waiting owner ids, FIFO
//   redisson_lock_timeout:{<name>}        zset owner id -> chained deadline
//                                         (epoch ms of the waiter's wall clock)
//   turnstile_lock_waiters:{<name>}       zset owner id -> liveness deadline
//                                         of turnstile's own waiters
//   redisson_lock__channel:{<name>}:<owner id>   that waiter's wake-up channel
//   redisson_lock_token:{<name>}          fencing counter (fenced only)
//
// One queue for both libraries (turnstile and Redisson waiters queue in
// arrival order and wake each other):
//   * Chained deadlines, Redisson's arithmetic: an entry's deadline is its
//     predecessor's (or, in an empty queue, now + the lock's PTTL) plus its
//     wait, and whoever leaves the queue (takes the lock, gives up) moves
//     the deadlines behind it down by its own wait. Redisson evicts a head
//     whose deadline passed. A turnstile waiter's wait in this chain is
//     redisson_wait + 2 x waiter_timeout, and more if a Redisson waiter
//     ahead has a longer wait (seen as its distance to its predecessor), so
//     no sequence of shifts by the waiters ahead can bring it to the past.
//     At each retry it lifts its deadline, with every deadline behind it
//     (the chain stays intact: nobody behind loses time), once it falls a
//     waiter_timeout short of that; a waiter leaving moves those behind
//     down by what it added to the chain (its distance to its predecessor,
//     or to now at the head), never to within waiter_timeout of now, so
//     deadlines do not drift.
//   * The chain is kept only while a Redisson waiter is queued. While the
//     queue holds turnstile waiters alone (each with a live liveness
//     deadline: one ZCOUNT against the queue's LLEN), each keeps its own
//     chained deadline as if it were the head of an empty queue (the
//     lock's expected release + its chain wait), nobody moves the others,
//     and every call costs O(log N) for N waiters, keep-alives included.
//     Redisson's scripts read only a head's deadline (to evict it) and the
//     tail's (to chain a joiner on it). From the first call that sees a
//     Redisson entry, the chain is kept as Redisson's arithmetic needs
//     (O(N) per call, as Redisson's own acquisition).
//   * Dead turnstile waiters are found by a second deadline, in a key of
//     turnstile's own, renewed by each retry: now + waiter_timeout for the
//     first two waiters (retrying at least every waiter_timeout/3), and
//     for every waiter while a Redisson waiter is queued; now + a far
//     timeout (8 x waiter_timeout, at most redisson_wait + waiter_timeout)
//     for the waiters behind them, which retry an eighth as often. Only the
//     head's liveness decides, and the waiter right behind it sees it lapse
//     first. A far waiter that moves into the first two places is told at
//     once (a message that makes it keep alive as a near one from then on,
//     with no call of its own), its liveness cut to waiter_timeout from
//     then and its grant offer dropped until its next try. A release whose grant or wake-up message reaches
//     nobody on a turnstile head's channel (its process died: its
//     connection closed) drops it and passes the lock to the next at once.
//     turnstile's scripts evict a head whose liveness deadline passed (a
//     turnstile waiter) or whose chained deadline passed (a Redisson
//     waiter, Redisson's own rule), and never a live turnstile waiter that
//     listens. Redisson's scripts see only the chained deadline: a crashed
//     turnstile waiter holds up Redisson-only traffic for about
//     redisson_wait (as a crashed Redisson waiter does), any turnstile call
//     on the lock drops it at once.
//   * The shared queue keys carry no expiry (Redisson never extends one, so
//     an expiry would drop its waiters): they vanish when the queue
//     empties; entries of crashed waiters stay until the next call on the
//     lock evicts them. Only turnstile's liveness key expires by itself.
//   * A lease that runs out publishes nothing (Redis does not), so waiters
//     sleep at most until the lock's PTTL: a crashed holder delays the head
//     by one lease, not by an estimate. An unlock that finds the lock gone
//     still wakes the head (as Redisson's does) and reports NotOwnerError.
//   * A waiter that gives up (wait ran out, an error) leaves the queue and,
//     if the lock is free, wakes the new head.
//
// Contract: as every Lock (lock.h): std Lockable/TimedLockable, leases and
// watchdog, async forms, force_unlock, reentrant for its owner. Fairness
// applies to waiting acquisitions: a try_lock() without wait never queues,
// and succeeds only when the lock is free and nobody (alive) is queued.
// Deadlines compare the wall clocks of different clients: keep their skew
// well below waiter_timeout (or a fast clock evicts live waiters, which
// then rejoin at the tail).

#ifndef TURNSTILE_FAIR_LOCK_H_
#define TURNSTILE_FAIR_LOCK_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "turnstile/export.h"
#include "turnstile/lock.h"

namespace turnstile {

// How a release hands the lock to the next waiter (docs/safety.md, "Direct
// handoff").
enum class Handoff : std::uint8_t {
  // The release grants the lock to a turnstile waiter at the head of the
  // queue and the message on its channel carries the grant: it proceeds
  // without a script call of its own. Redisson waiters are told as
  // announce does.
  direct,
  // The release announces that the lock is free ("0" on the head's
  // channel, Redisson's way); the woken waiter acquires with a script call.
  announce,
};

struct TURNSTILE_EXPORT FairLockOptions {
  // How long a waiter in the first two places may go without retrying
  // before it counts as dead and loses its place (they retry every
  // waiter_timeout/3; the waiters behind them every 8 x waiter_timeout/3,
  // and are told when they move up). It bounds what a frozen waiter
  // (SIGSTOP, a partition: its connection open) delays the queue once it
  // reaches the front; a crashed one (its connection closed) costs nothing,
  // the release skips it. 5 s: a live waiter near the head retries every
  // 1.7 s, so it loses its place only after 5 s of silence (a long GC
  // pause, Redis unreachable); the price is one script call per near
  // waiter per 1.7 s and per far waiter per 13.3 s. (Redisson: 5 min, and
  // its deadlines were never refreshed.)
  // Between kMinWaiterTimeout and kMaxWaiterTimeout (InvalidArgumentError).
  std::chrono::milliseconds waiter_timeout{5'000};
  // The longest wait of any Redisson waiter sharing this lock's queue
  // (Redisson: fairLockWaitTimeout, 5 min by default, or the wait its
  // tryLock was given). A Redisson waiter ahead whose wait is longer is
  // seen and allowed for, except one that joined an empty queue.
  // Between 1 ms and kMaxWaiterTimeout (InvalidArgumentError).
  std::chrono::milliseconds redisson_wait{300'000};
  // Draw a fencing token per acquisition (as Client::fenced_lock).
  bool fenced = false;
  // This lock's lock-delay (LockOptions::lock_delay); unset: the client's.
  std::optional<Duration> lock_delay = {};
  // How this lock's waiters take a released lock. A fenced lock's waiters
  // are always announced to (a grant would need to draw their token).
  Handoff handoff = Handoff::direct;
};

namespace detail {
class FairEngine;
}  // namespace detail

class TURNSTILE_EXPORT FairLock final : public Lock {
 public:
  // Below this, waiters would retry faster than a slow round trip.
  static constexpr std::chrono::milliseconds kMinWaiterTimeout{100};
  // A day: a waiter silent that long is dead; bounds deadline arithmetic.
  static constexpr std::chrono::milliseconds kMaxWaiterTimeout{86'400'000};

  const FairLockOptions& options() const;

  // Waiters in the queue (one read; waiters that died are counted until
  // they are evicted: when a release reaches them, or when their liveness
  // deadline passes at the front).
  std::int64_t queue_length();
  // The 0-based place of `owner` in the queue (0: next to acquire), or
  // nullopt if it is not queued. A holder is not queued.
  std::optional<std::int64_t> queue_position(const std::string& owner);

 private:
  friend class Client;
  TURNSTILE_HIDDEN explicit FairLock(Lock lock) : Lock(std::move(lock)) {}
  TURNSTILE_HIDDEN const detail::FairEngine& fair_engine() const;
  TURNSTILE_HIDDEN detail::FairEngine& fair_engine();
};

}  // namespace turnstile

#endif  // TURNSTILE_FAIR_LOCK_H_
