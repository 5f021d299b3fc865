// interop/redisson_client.h
//
// A Redisson client played at the Redis level: its own connection, a UUID,
// and the scripts of support/redisson_scripts.h (written by us from the
// reference, no Redisson code). Waiting is done only on pub/sub messages
// (Mailbox), so a test that sees a Redisson waiter take the lock knows a
// message woke it.

#ifndef TURNSTILE_TESTS_INTEROP_REDISSON_CLIENT_H_
#define TURNSTILE_TESTS_INTEROP_REDISSON_CLIENT_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "turnstile/backend.h"
#include "turnstile/reply.h"

namespace turnstile::testing {

// Generous: a loaded 2-core machine may be slow, never this slow.
inline constexpr std::chrono::seconds kPatience{30};

// Epoch ms by this machine's wall clock (Redisson passes its own).
std::int64_t wall_ms();

// Keeps the messages published on one channel from construction on.
class Mailbox {
 public:
  Mailbox(Backend& backend, const std::string& channel);
  // Waits until more than `seen` messages arrived (`patience` at most);
  // returns the count then (== seen if none came).
  std::int64_t wait_beyond(std::int64_t seen, std::chrono::milliseconds patience = kPatience);
  std::int64_t count();
  // The messages' contents, in arrival order.
  std::vector<std::string> messages();

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<std::string> messages_;
  Subscription subscription_;
};

class RedissonClient {
 public:
  // Redisson's default fairLockWaitTimeout.
  static constexpr std::int64_t kDefaultWaitMs = 300'000;

  explicit RedissonClient(const std::string& url);
  Backend& backend() { return *backend_; }
  // "<uuid>:<thread>".
  std::string owner(int thread) const;

  // RLock / RFencedLock: nullopt when taken, else the ttl.
  std::optional<std::int64_t> lock(const std::string& name, const std::string& owner, std::int64_t lease_ms);
  // The token when taken, nullopt when not.
  std::optional<std::int64_t> fenced_lock(const std::string& name, const std::string& owner, std::int64_t lease_ms);
  // nil / 0 / 1 as Redisson's unlock; the latch is deleted after, as Redisson does.
  Reply unlock(const std::string& name, const std::string& owner);

  // RFairLock: nullopt when taken, else the ttl. `queue` false: a tryLock()
  // without wait (never queues).
  std::optional<std::int64_t> fair_lock(const std::string& name, const std::string& owner, std::int64_t lease_ms,
                                        std::int64_t wait_ms, bool queue = true);
  void fair_give_up(const std::string& name, const std::string& owner, std::int64_t wait_ms);
  Reply fair_unlock(const std::string& name, const std::string& owner);

  // RSemaphore.
  bool semaphore_acquire(const std::string& name, std::int64_t permits);
  std::int64_t semaphore_release(const std::string& name, std::int64_t permits);

  // RPermitExpirableSemaphore: a new id (32 hex digits) when taken.
  std::optional<std::string> permit_acquire(const std::string& name, std::optional<std::int64_t> lease_ms);
  bool permit_release(const std::string& name, const std::string& hex_id);
  // addPermits(n): permits nobody took; the new count.
  std::int64_t permit_add(const std::string& name, std::int64_t permits);

  // lockWatchdogTimeout: the lease of holds taken without one, and what
  // the watchdog's renewals set (default 30 s, Redisson's).
  std::int64_t watchdog_ms() const { return watchdog_ms_; }
  void set_watchdog_ms(std::int64_t ms) { watchdog_ms_ = ms; }

  Reply eval(const char* script, const std::vector<std::string>& keys, const std::vector<std::string>& args);

 private:
  std::unique_ptr<Backend> backend_;
  std::string uuid_;
  std::uint64_t next_id_ = 1;
  std::int64_t watchdog_ms_ = 30'000;
};

// Redisson's tag(N): "{N}", or N itself when it already has a '{'.
std::string redisson_tag(const std::string& name);

// RReadWriteLock of one RedissonClient on one name: both halves' calls
// (support/redisson_scripts.h), owners "<uuid>:<thread>" as
// RedissonClient::owner() gives them. Waiting as Redisson's: the client's
// waiters on this lock share one subscription to "redisson_rwlock:<tag>",
// taken when the first starts waiting and dropped when the last leaves; a
// "0" (a read half's release) wakes one of them, a "1" (a write half's)
// wakes all. A wake-up that comes while nobody sleeps is kept for the next
// (a semaphore's permit, as Redisson's latch). Waiters wait for messages
// only, never for the ttl an attempt returned: a waiter that took the lock
// after sleeping was woken by a message.
class RedissonReadWriteLock {
 public:
  RedissonReadWriteLock(RedissonClient& client, std::string name);
  ~RedissonReadWriteLock();
  RedissonReadWriteLock(const RedissonReadWriteLock&) = delete;
  RedissonReadWriteLock& operator=(const RedissonReadWriteLock&) = delete;

  const std::string& name() const { return name_; }
  const std::string& channel() const { return channel_; }
  // "<tag>:<owner>:rwlock_timeout:<k>", read hold k's lease.
  std::string timeout_key(const std::string& owner, std::int64_t k) const;

  // One attempt (tryLock() without a wait): nullopt when taken, else the
  // lock's PTTL. No lease: the watchdog timeout (renewals are the test's
  // to make: renew_reads, renew_write).
  std::optional<std::int64_t> try_read(const std::string& owner, std::optional<std::int64_t> lease_ms = std::nullopt);
  std::optional<std::int64_t> try_write(const std::string& owner, std::optional<std::int64_t> lease_ms = std::nullopt);
  // tryLock(wait, lease): attempts, sleeping on wake-ups between them, for
  // `patience` at most; whether the lock was taken.
  bool read_lock(const std::string& owner, std::optional<std::int64_t> lease_ms,
                 std::chrono::milliseconds patience = kPatience);
  bool write_lock(const std::string& owner, std::optional<std::int64_t> lease_ms,
                  std::chrono::milliseconds patience = kPatience);

  // nil / 0 / 1 as Redisson's unlocks; the latch is deleted after.
  Reply read_unlock(const std::string& owner);
  // Re-arms with the last lease this object's write half was taken with
  // (internalLockLeaseTime) while write holds remain.
  Reply write_unlock(const std::string& owner);

  // The watchdogs' calls: the batched read renewal (3.44+) of `owners`'
  // read holds, the write renewal of `owner`'s. Whether anything was there.
  bool renew_reads(const std::vector<std::string>& owners);
  bool renew_write(const std::string& owner);

  // readLock().forceUnlock(), writeLock().forceUnlock().
  bool force_unlock_read();
  bool force_unlock_write();

  // Waiters inside read_lock/write_lock, and those of them asleep now.
  int waiting();
  int sleeping();
  // Wake-ups taken by a sleeping waiter, and the messages heard ("0", "1").
  std::int64_t wakeups();
  std::int64_t messages(const std::string& payload);

 private:
  std::optional<std::int64_t> attempt(bool write, const std::string& owner, std::optional<std::int64_t> lease_ms);
  bool wait_for(bool write, const std::string& owner, std::optional<std::int64_t> lease_ms,
                std::chrono::milliseconds patience);
  void on_message(const std::string& payload);

  RedissonClient& client_;
  std::string name_;
  std::string tag_;
  std::string channel_;
  std::int64_t internal_lease_ms_;

  std::mutex subscription_mutex_;  // taken before mutex_, never inside the handler
  std::mutex mutex_;
  std::condition_variable woken_;
  int waiting_ = 0;
  int sleeping_ = 0;
  std::int64_t permits_ = 0;
  std::int64_t wakeups_ = 0;
  std::int64_t zeros_ = 0;
  std::int64_t ones_ = 0;
  Subscription subscription_;  // while waiting_ > 0
};

// The 16 raw bytes of 32 hex digits (Redisson's stored permit id).
std::string hex_to_bytes(const std::string& hex);

}  // namespace turnstile::testing

#endif  // TURNSTILE_TESTS_INTEROP_REDISSON_CLIENT_H_
