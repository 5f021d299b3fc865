#include "locks/latched_unlock.h"

#include "locks/reply_shape.h"
#include "turnstile/errors.h"

namespace turnstile::detail {

LatchedUnlockResult eval_latched_unlock(Backend& backend, const Script& script, const std::vector<std::string>& keys,
                                        const std::vector<std::string>& args) {
  for (int attempt_number = 1;; ++attempt_number) {
    try {
      const Reply reply = backend.eval(script, keys, args);
      if (reply.is_nil()) return LatchedUnlockResult::not_owner;
      const std::int64_t released = integer_reply(script, reply);
      if (released != 0 && released != 1) throw_unexpected(script, reply, "nil, 0 or 1");
      return released == 1 ? LatchedUnlockResult::released : LatchedUnlockResult::still_held;
    } catch (const ConnectionError&) {
      // The reply may be lost after the server ran the script: the same
      // latch answers the retry with the first result.
      if (attempt_number == kUnlockAttempts) throw;
    }
  }
}

}  // namespace turnstile::detail
