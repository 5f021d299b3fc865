// locks/engine/reply_shape.h
//
// Checks on the shape of script replies. A reply of an unexpected shape comes
// from outside the process (another program wrote the key, a different
// script has the same SHA), so it is a ProtocolError naming the script, not
// an assertion.

#ifndef TURNSTILE_LOCKS_ENGINE_REPLY_SHAPE_H_
#define TURNSTILE_LOCKS_ENGINE_REPLY_SHAPE_H_

#include <cstdint>
#include <cstddef>
#include <vector>

#include "turnstile/reply.h"
#include "turnstile/script.h"

namespace turnstile::detail {

[[noreturn]] void throw_unexpected(const Script& script, const Reply& reply, const char* expected);

inline std::int64_t integer_reply(const Script& script, const Reply& reply) {
  if (!reply.is_integer()) throw_unexpected(script, reply, "an integer");
  return reply.as_integer();
}

// An array of exactly `size` integers.
std::vector<std::int64_t> integer_array_reply(const Script& script, const Reply& reply, std::size_t size);
// An array of `min_size` to `max_size` integers.
std::vector<std::int64_t> integer_array_reply(const Script& script, const Reply& reply, std::size_t min_size,
                                              std::size_t max_size);

}  // namespace turnstile::detail

#endif  // TURNSTILE_LOCKS_ENGINE_REPLY_SHAPE_H_
