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
//   redisson_lock_timeout:{<name>}        zset owner id -> deadline (epoch ms
//                                         of the waiter's wall clock)
//   redisson_lock__channel:{<name>}:<owner id>   that waiter's wake-up channel
//   redisson_lock_token:{<name>}          fencing counter (fenced only)
//
// How it differs from Redisson's (whose queue users report stuck):
//   * A waiter's deadline is now + waiter_timeout, refreshed by each of its
//     retries, and a waiter retries at least every waiter_timeout/3. So a
//     live waiter keeps its place however long the holder holds, deadlines
//     never chain on the previous waiter's (no drift), and only a waiter
//     that stopped retrying (crashed) goes stale.
//   * Stale waiters are evicted from the head by every writing script; when
//     that leaves the lock free, the new head is woken.
//   * A lease that runs out publishes nothing (Redis does not), so waiters
//     sleep at most until the lock's PTTL: a crashed holder delays the head
//     by one lease, not by an estimate.
//   * A waiter that gives up (wait ran out, an error) leaves the queue and,
//     if the lock is free, wakes the new head.
//   * The queue keys expire with their latest deadline: when every waiter is
//     gone (done or dead) no key is left behind.
//
// Contract: as every Lock (lock.h): std Lockable/TimedLockable, leases and
// watchdog, async forms, force_unlock, reentrant for its owner. Fairness
// applies to waiting acquisitions: a try_lock() without wait never queues,
// and succeeds only when the lock is free and nobody (alive) is queued.
// Waiter deadlines compare the wall clocks of different clients: keep their
// skew well below waiter_timeout (or a fast clock evicts live waiters, which
// then rejoin at the tail).

#ifndef TURNSTILE_FAIR_LOCK_H_
#define TURNSTILE_FAIR_LOCK_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "turnstile/lock.h"

namespace turnstile {

struct FairLockOptions {
  // How long a waiter may go without retrying before it counts as dead and
  // loses its place (waiters retry every waiter_timeout/3). It is the most a
  // crashed waiter delays the queue. 5 s: a live waiter retries every
  // 1.7 s, so it loses its place only after 5 s of silence (a long GC pause,
  // Redis unreachable), while a crashed waiter costs the queue far less than
  // the 30 s a crashed holder does; the price is one script call per waiter
  // per 1.7 s. (Redisson: 5 min, and its deadlines were never refreshed.)
  // Between kMinWaiterTimeout and kMaxWaiterTimeout (InvalidArgumentError).
  std::chrono::milliseconds waiter_timeout{5'000};
  // Draw a fencing token per acquisition (as Client::fenced_lock).
  bool fenced = false;
};

class FairLock final : public Lock {
 public:
  // Below this, waiters would retry faster than a slow round trip.
  static constexpr std::chrono::milliseconds kMinWaiterTimeout{100};
  // A day: a waiter silent that long is dead; bounds deadline arithmetic.
  static constexpr std::chrono::milliseconds kMaxWaiterTimeout{86'400'000};

  FairLock(std::shared_ptr<detail::ClientCore> client, std::string_view name, const FairLockOptions& options);

  const FairLockOptions& options() const { return options_; }

  // Waiters in the queue (one read; waiters that died are counted until
  // they are evicted, at most waiter_timeout after their last retry).
  std::int64_t queue_length();
  // The 0-based place of `owner` in the queue (0: next to acquire), or
  // nullopt if it is not queued. A holder is not queued.
  std::optional<std::int64_t> queue_position(const std::string& owner);

 private:
  struct QueueStatus {
    Status lock;
    std::int64_t queue_length = 0;
    std::int64_t position = -1;
  };

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
  std::string wait_channel(const std::string& owner) const override;
  void abandon(const std::string& owner) override;
  bool force_delete() override;

  QueueStatus queue_status(const std::string& owner);

  FairLockOptions options_;
  std::string queue_key_;
  std::string timeout_key_;
  std::string token_key_;
};

}  // namespace turnstile

#endif  // TURNSTILE_FAIR_LOCK_H_
