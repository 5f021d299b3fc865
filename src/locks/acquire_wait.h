// locks/acquire_wait.h
//
// The waiting loop every blocking acquire shares (locks and semaphores):
// try; if that fails and time is left, subscribe to the wake-up channel,
// then alternate "try again" and "sleep until a message or the retry hint",
// until success or the deadline. Subscribing before the second try is what
// makes it race-free: a release between a failed try and the sleep leaves
// its message in the Event, so the sleep returns at once. When the backend
// can subscribe without a round trip (the channel is still subscribed from a
// recent wait, Backend::subscribe_if_confirmed), it subscribes first and
// skips the unsubscribed try: a contended re-acquisition then costs one
// script call before it sleeps instead of two and a SUBSCRIBE.

#ifndef TURNSTILE_LOCKS_ACQUIRE_WAIT_H_
#define TURNSTILE_LOCKS_ACQUIRE_WAIT_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>

#include "turnstile/backend.h"
#include "turnstile/runtime.h"

namespace turnstile::detail {

// The shortest sleep between two tries, so a retry hint of 0 ms (a lease in
// its last millisecond) cannot spin without letting time pass.
inline constexpr Duration kMinRetryDelay = std::chrono::milliseconds(1);

// One try: nullopt if it succeeded, else how many ms the caller may sleep
// before trying again if no message comes (negative: until a message).
using TryOnce = std::function<std::optional<std::int64_t>()>;

// Throws InvalidArgumentError for a lease under 1 ms (a lock that expires
// as it is granted).
void check_lease(const std::optional<Duration>& lease);

// Returns true if `try_once` succeeded by `deadline`.
bool acquire_with_wait(Backend& backend, Runtime& runtime, std::string_view channel,
                       Instant deadline, const TryOnce& try_once);

}  // namespace turnstile::detail

#endif  // TURNSTILE_LOCKS_ACQUIRE_WAIT_H_
