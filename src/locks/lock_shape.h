// locks/lock_shape.h
//
// What a lock of each flavor looks like in Redis, for readers outside a
// script (`turnstile status`, `turnstile unlock`). The scripts check the
// same shapes atomically (lua/lib/lock_shape.lua); a key of another shape
// is someone else's data and is never waited on, deleted or reported as a
// lock.
//
//   owner id    "<uuid>:<n>": Redisson's client UUID (8-4-4-4-12 hex
//               digits) and a thread or task id in decimal
//   hold count  a decimal integer >= 1, no sign, no leading zero
//   token       "<uuid>:<32 hex digits>": turnstile's token lock
//
// A lock hash (reentrant or fair) has only owner-id fields with hold-count
// values; a lock, of any flavor, always has an expiry.

#ifndef TURNSTILE_LOCKS_LOCK_SHAPE_H_
#define TURNSTILE_LOCKS_LOCK_SHAPE_H_

#include <string_view>

namespace turnstile::detail {

bool is_owner_id(std::string_view text);
bool is_hold_count(std::string_view text);
bool is_lock_token(std::string_view text);

}  // namespace turnstile::detail

#endif  // TURNSTILE_LOCKS_LOCK_SHAPE_H_
