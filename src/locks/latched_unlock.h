// locks/latched_unlock.h
//
// Running an unlock script that remembers its first result in a short-lived
// latch key (Redisson's redisson_unlock_latch), so that an unlock whose
// reply was lost can be sent again without releasing twice.

#ifndef TURNSTILE_LOCKS_LATCHED_UNLOCK_H_
#define TURNSTILE_LOCKS_LATCHED_UNLOCK_H_

#include <cstdint>
#include <string>
#include <vector>

#include "turnstile/backend.h"
#include "turnstile/script.h"

namespace turnstile::detail {

// An unlock is retried this many times when its reply is lost; the latch
// key makes the retries harmless.
inline constexpr int kUnlockAttempts = 3;
// How long the latch remembers an unlock's first result: longer than all
// retries of one unlock can take.
inline constexpr std::int64_t kUnlockLatchLifetimeMs = 10'000;

enum class LatchedUnlockResult { not_owner, still_held, released };

// Runs `script` (reply nil: not the owner, 0: holds remain, 1: released),
// retrying on ConnectionError up to kUnlockAttempts times in all.
LatchedUnlockResult eval_latched_unlock(Backend& backend, const Script& script, const std::vector<std::string>& keys,
                                        const std::vector<std::string>& args);

}  // namespace turnstile::detail

#endif  // TURNSTILE_LOCKS_LATCHED_UNLOCK_H_
