#include "locks/engine/latched_unlock.h"

#include "locks/engine/reply_shape.h"

namespace turnstile::detail {

ReleaseResult latched_unlock_result(const Script& script, const Reply& reply) {
  if (reply.is_nil()) return ReleaseResult::not_owner;
  const std::int64_t released = integer_reply(script, reply);
  if (released != 0 && released != 1) throw_unexpected(script, reply, "nil, 0 or 1");
  return released == 1 ? ReleaseResult::released : ReleaseResult::still_held;
}

}  // namespace turnstile::detail
