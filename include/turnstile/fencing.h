// turnstile/fencing.h
//
// Fencing tokens protect a resource from a holder that lost its lock without
// knowing it (a long pause, an expired lease): every acquisition of a fenced
// lock draws a strictly increasing token (lock.fencing_token()), writers
// pass it along, and the resource refuses a token lower than the highest it
// has seen. For resources that live in Redis, fenced_set() does that check
// and the write in one script.
//
// Fencing is per lock name on one Redis: tokens from independent masters
// (RedLock) are not comparable.

#ifndef TURNSTILE_FENCING_H_
#define TURNSTILE_FENCING_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "turnstile/export.h"
#include "turnstile/backend.h"
#include "turnstile/key_layout.h"  // fence_key(): the key of the highest token

namespace turnstile {

// Sets string `resource` to `value` unless a write with a higher token was
// accepted before. Returns true if written, false if refused as stale.
[[nodiscard]] TURNSTILE_EXPORT bool fenced_set(Backend& backend, std::string_view resource, std::int64_t token,
                                               std::string_view value);

}  // namespace turnstile

#endif  // TURNSTILE_FENCING_H_
