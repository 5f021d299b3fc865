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

// Counts the messages published on one channel from construction on.
class Mailbox {
 public:
  Mailbox(Backend& backend, const std::string& channel);
  // Waits until more than `seen` messages arrived (`patience` at most);
  // returns the count then (== seen if none came).
  std::int64_t wait_beyond(std::int64_t seen, std::chrono::milliseconds patience = kPatience);
  std::int64_t count();

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::int64_t count_ = 0;
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

 private:
  Reply eval(const char* script, const std::vector<std::string>& keys, const std::vector<std::string>& args);

  std::unique_ptr<Backend> backend_;
  std::string uuid_;
  std::uint64_t next_id_ = 1;
};

// The 16 raw bytes of 32 hex digits (Redisson's stored permit id).
std::string hex_to_bytes(const std::string& hex);

}  // namespace turnstile::testing

#endif  // TURNSTILE_TESTS_INTEROP_REDISSON_CLIENT_H_
