// locks/lock_names.h
//
// Redisson's names for the side keys and channels of each lock flavor, in
// one place. Matching them exactly is what lets turnstile and Redisson
// processes lock each other out.

#ifndef TURNSTILE_LOCKS_LOCK_NAMES_H_
#define TURNSTILE_LOCKS_LOCK_NAMES_H_

#include <string_view>

namespace turnstile::detail {

inline constexpr std::string_view kLockChannelPrefix = "redisson_lock__channel";
inline constexpr std::string_view kLockTokenPrefix = "redisson_lock_token";
inline constexpr std::string_view kUnlockLatchPrefix = "redisson_unlock_latch";
// Fair lock: the wait queue (list of owner ids) and the waiters' deadlines
// (zset); each waiter's wake-up channel is "<lock channel>:<owner id>".
inline constexpr std::string_view kFairLockQueuePrefix = "redisson_lock_queue";
inline constexpr std::string_view kFairLockTimeoutPrefix = "redisson_lock_timeout";
// turnstile's own: the liveness deadlines of its fair-lock waiters.
inline constexpr std::string_view kFairLockWaitersPrefix = "turnstile_lock_waiters";
// The token lock is turnstile's own (Redisson has none).
inline constexpr std::string_view kTokenLockChannelPrefix = "turnstile_lock__channel";
inline constexpr std::string_view kFencePrefix = "turnstile_fence";
// Semaphores (both kinds): the wake-up channel, and the crash-safe kind's
// sorted set of held permits, "{<name>}:timeout" (a suffix, not a prefix).
inline constexpr std::string_view kSemaphoreChannelPrefix = "redisson_sc";
inline constexpr std::string_view kPermitTimeoutSuffix = "timeout";

// Lock wake-up messages (Redisson's): wake one waiter / wake all.
inline constexpr std::string_view kUnlockMessage = "0";
inline constexpr std::string_view kReadUnlockMessage = "1";

}  // namespace turnstile::detail

#endif  // TURNSTILE_LOCKS_LOCK_NAMES_H_
