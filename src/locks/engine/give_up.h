// locks/engine/give_up.h
//
// The call a wait sends to give up once it ended without acquiring (its
// deadline passed, a stop, a failure): leaving the fleet wake registry
// (locks/engine/wake_registry.h), the reentrant lock's and the fair lock's
// abandon scripts. It is bounded by a grace after it starts, so a hung
// server holds a try_lock_for(100ms) about kGiveUpGraceMs past its
// deadline, not command_timeout_ms: a call that cannot be sent within the
// grace (a busy pool, a connection whose handshake would take longer) is
// not sent, and a reply not in by then is abandoned (the real backend
// drops the connection it was sent on; the fake lets it run out in
// virtual time) and never read. What such a give-up would have removed
// expires by itself (docs/locks.md, "What a give-up leaves").

#ifndef TURNSTILE_LOCKS_ENGINE_GIVE_UP_H_
#define TURNSTILE_LOCKS_ENGINE_GIVE_UP_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "locks/handles/client_core.h"
#include "turnstile/reply.h"
#include "turnstile/script.h"

namespace turnstile::detail {

// How long a give-up call may take, from its start to its reply (ms). A
// healthy server answers a script call in well under a millisecond on
// loopback and in a few on a network; a loaded host (2 busy cores, a
// sanitizer build) stalls a thread for tens of ms at times. 100 ms covers
// that with room to spare, while adding at most a tenth to a one-second
// wait (and leaving a give-up that does not make it to expire by itself).
inline constexpr std::int64_t kGiveUpGraceMs = 100;

// Sends `script` (KEYS `keys`, ARGV `args`) on client's backend within
// kGiveUpGraceMs and returns its reply, or nullopt when it was not sent in
// time or its reply was not in by then (the call abandoned). Throws what
// the call failed with otherwise (a transport error, an error reply).
std::optional<Reply> send_give_up(ClientCore& client, const Script& script, const std::vector<std::string>& keys,
                                  const std::vector<std::string>& args);

}  // namespace turnstile::detail

#endif  // TURNSTILE_LOCKS_ENGINE_GIVE_UP_H_
