// locks/engine/latched_unlock.h
//
// Unlock scripts that remember their first result in a short-lived latch
// key (Redisson's redisson_unlock_latch), so that an unlock whose reply was
// lost can be sent again without releasing twice.

#ifndef TURNSTILE_LOCKS_ENGINE_LATCHED_UNLOCK_H_
#define TURNSTILE_LOCKS_ENGINE_LATCHED_UNLOCK_H_

#include <cstdint>
#include <string>
#include <vector>

#include "locks/engine/lock_engine.h"
#include "turnstile/reply.h"
#include "turnstile/script.h"

namespace turnstile::detail {

// An unlock is retried this many times when its reply is lost; the latch
// key makes the retries harmless.
inline constexpr int kUnlockAttempts = 3;
// An unlock that found every pooled connection busy (PoolExhaustedError:
// nothing was sent, each wait up to the command timeout) is queued again
// up to this many times in all, for any flavor, beside the tries above.
inline constexpr int kUnsentUnlockAttempts = 3;
// How long the latch remembers an unlock's first result: longer than all
// retries of one unlock can take.
inline constexpr std::int64_t kUnlockLatchLifetimeMs = 10'000;

// A latched unlock's latch-lifetime argument as the call's first send
// passes it: negated, so the script reads no latch (its request id is
// new: none can exist yet) and writes it for kUnlockLatchLifetimeMs
// (lua/lib/unlock_latch.lua).
std::string first_send_latch_lifetime_arg();

// The arguments `call` (a latched unlock, its latch_lifetime_arg set) is
// sent again with after a send whose reply was lost: the latch is read
// first, so a call the server ran answers with its first result.
std::vector<std::string> resend_args(const ScriptCall& call);

// What a latched unlock script's reply means: nil, not the owner; 0, holds
// remain; 1, released. LockEngine::send_release() retries such a script up to
// kUnlockAttempts times in all.
ReleaseResult latched_unlock_result(const Script& script, const Reply& reply);

}  // namespace turnstile::detail

#endif  // TURNSTILE_LOCKS_ENGINE_LATCHED_UNLOCK_H_
