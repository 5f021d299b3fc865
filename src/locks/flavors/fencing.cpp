#include "turnstile/fencing.h"

#include "locks/engine/reply_shape.h"
#include "lua_scripts.h"

namespace turnstile {

bool fenced_set(Backend& backend, std::string_view resource, std::int64_t token, std::string_view value) {
  const Reply reply = backend.eval(scripts::fenced_write, {std::string(resource), fence_key(resource)},
                                   {std::to_string(token), std::string(value)});
  return detail::integer_reply(scripts::fenced_write, reply) == 1;
}

}  // namespace turnstile
