// The token lock: SET NX PX with a random token, compare-and-delete release,
// compare-and-extend renewal.

#include <cassert>

#include "locks/client_core.h"
#include "locks/random_hex.h"
#include "locks/reply_shape.h"
#include "lua_scripts.h"
#include "turnstile/lock.h"

namespace turnstile {

TokenLock::TokenLock(std::shared_ptr<detail::ClientCore> client, std::string_view name)
    : Lock(client, key_layout(Flavor::token, client->options.key_prefix + std::string(name))) {}

Lock::ScriptCall TokenLock::attempt_call(const std::string&, Duration lease, detail::Holding& holding) {
  detail::ClientCore& client = this->client();
  // One token per acquisition, kept across the retries of one wait.
  if (holding.token.empty()) holding.token = client.id + ":" + detail::random_hex128(*client.runtime);
  const auto lease_ms = std::chrono::duration_cast<std::chrono::milliseconds>(lease).count();
  return ScriptCall{&scripts::token_lock_acquire, {name()}, {holding.token, std::to_string(lease_ms)}};
}

Lock::Attempt TokenLock::attempt_result(const Reply& reply, const detail::Holding&) {
  if (reply.is_nil()) return Attempt{.acquired = true};
  return Attempt{.retry_after_ms = detail::integer_reply(scripts::token_lock_acquire, reply)};
}

std::optional<Lock::ScriptCall> TokenLock::release_call(const std::string&, const detail::Holding& holding) {
  if (holding.token.empty()) return std::nullopt;
  return ScriptCall{&scripts::token_lock_release,
                    {name(), core().channel},
                    {holding.token, std::string(kUnlockMessage), std::string(client().backend->publish_command())}};
}

Lock::ReleaseResult TokenLock::release_result(const Reply& reply) {
  const std::int64_t released = detail::integer_reply(scripts::token_lock_release, reply);
  if (released != 0 && released != 1) detail::throw_unexpected(scripts::token_lock_release, reply, "0 or 1");
  return released == 1 ? ReleaseResult::released : ReleaseResult::not_owner;
}

// Compare-and-delete: only the caller's own token is ever deleted. Not
// retried: a retry after a lost reply would answer 0 although the first
// call released it.
bool TokenLock::release_retriable() const { return false; }

Lock::Status TokenLock::status(const std::string&, const detail::Holding* holding) {
  const std::string token = holding != nullptr ? holding->token : std::string();
  const Reply reply = client().backend->eval(scripts::token_lock_status, {name()}, {token});
  const auto values = detail::integer_array_reply(scripts::token_lock_status, reply, 3);
  return Status{.locked = values[0] == 1, .hold_count = values[1], .pttl_ms = values[2]};
}

const Script& TokenLock::renew_script() const { return scripts::token_lock_renew; }

std::string TokenLock::renew_holder(const std::string&, const detail::Holding& holding) const {
  assert(!holding.token.empty());
  return holding.token;
}

}  // namespace turnstile
