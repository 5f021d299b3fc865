#include "locks/engine/latched_unlock.h"

#include "core/check.h"
#include "locks/engine/reply_shape.h"

namespace turnstile::detail {

std::string first_send_latch_lifetime_arg() { return std::to_string(-kUnlockLatchLifetimeMs); }

std::vector<std::string> resend_args(const ScriptCall& call) {
  TURNSTILE_CHECK(call.latch_lifetime_arg.has_value() && *call.latch_lifetime_arg < call.args.size());
  std::vector<std::string> args = call.args;
  args[*call.latch_lifetime_arg] = std::to_string(kUnlockLatchLifetimeMs);
  return args;
}

ReleaseResult latched_unlock_result(const Script& script, const Reply& reply) {
  if (reply.is_nil()) return ReleaseResult::not_owner;
  const std::int64_t released = integer_reply(script, reply);
  if (released != 0 && released != 1) throw_unexpected(script, reply, "nil, 0 or 1");
  return released == 1 ? ReleaseResult::released : ReleaseResult::still_held;
}

}  // namespace turnstile::detail
