#include "locks/engine/give_up.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <memory>

#include "locks/engine/acquire_wait.h"
#include "turnstile/backend.h"
#include "turnstile/runtime.h"

namespace turnstile::detail {

std::optional<Reply> send_give_up(ClientCore& client, const Script& script, const std::vector<std::string>& keys,
                                  const std::vector<std::string>& args) {
  const Duration grace = std::chrono::milliseconds(kGiveUpGraceMs);
  const Instant ends_at = client.runtime->now() + grace;
  std::unique_ptr<PendingReply> sent =
      client.backend->send_eval_within(script, keys, args, EvalSync::none, EvalOptions{.send_within = grace});
  // Not in by the end of the grace: `sent` is destroyed unread, which
  // abandons the call.
  if (!sent->wait_for(std::max(ends_at - client.runtime->now(), Duration::zero()))) return std::nullopt;
  try {
    return std::move(sent->get().reply);
  } catch (const std::exception&) {
    if (never_sent(std::current_exception())) return std::nullopt;  // no turn in the grace: skipped
    throw;
  }
}

}  // namespace turnstile::detail
