// The token lock: SET NX PX with a random token, compare-and-delete release,
// compare-and-extend renewal.

#include "core/check.h"
#include "locks/handles/client_core.h"
#include "locks/engine/random_hex.h"
#include "locks/engine/reply_shape.h"
#include "lua_scripts.h"
#include "locks/flavors/lock_flavors.h"

namespace turnstile::detail {

TokenEngine::TokenEngine(std::shared_ptr<ClientCore> client, std::string_view name, const LockOptions& options)
    : LockEngine(client, key_layout(Flavor::token, client->options.key_prefix + std::string(name)), options) {}

ScriptCall TokenEngine::attempt_call(const std::string&, Duration lease, Holding& holding) {
  ClientCore& client = this->client();
  // One token per acquisition, kept across the retries of one wait.
  if (holding.token.empty()) holding.token = client.id + ":" + random_hex128(*client.runtime);
  ScriptCall call{&scripts::token_lock_acquire, call_strings(kCallKeysReserved, name(), layout().holder_identity),
                  call_strings(kCallArgsReserved, holding.token, server_lease_ms_arg(lease), shape_check_arg(holding),
                               holder_identity(holding.token))};
  add_wake_registry(call, holding);
  return call;
}

LockEngine::Attempt TokenEngine::attempt_result(const Reply& reply, const Holding&) {
  if (reply.is_nil()) return Attempt{.acquired = true};
  // Every token lock holder is turnstile's: its release wakes a registered
  // process.
  return Attempt{.retry_after_ms = integer_reply(scripts::token_lock_acquire, reply), .holder_may_be_foreign = false};
}

std::optional<ScriptCall> TokenEngine::release_call(const std::string&, const Holding& holding) {
  if (holding.token.empty()) return std::nullopt;
  ScriptCall call{&scripts::token_lock_release,
                  call_strings(kCallKeysReserved, name(), core().channel, layout().holder_identity),
                  call_strings(kCallArgsReserved, holding.token, kUnlockMessage, client().backend->publish_command())};
  add_wake_registry_key(call);
  return call;
}

ReleaseResult TokenEngine::release_result(const Reply& reply) {
  const std::int64_t released = integer_reply(scripts::token_lock_release, reply);
  if (released != 0 && released != 1) throw_unexpected(scripts::token_lock_release, reply, "0 or 1");
  return released == 1 ? ReleaseResult::released : ReleaseResult::not_owner;
}

// With fleet-wide wake-ups the process's own channel only: a failed try
// never heeds the shared channel (attempt_result), so subscribing it would
// only have every release's "0" there delivered to each process with a
// waiter, to be ignored (issue #33: Redis CPU per contended acquisition).
// Without them (WakeScope::process) the shared channel, as always.
WakeOptions TokenEngine::wake_options() const {
  WakeOptions wake = LockEngine::wake_options();
  wake.subscribe_shared = wake.own_channel.empty();
  return wake;
}

// Compare-and-delete: only the caller's own token is ever deleted. Not
// retried: a retry after a lost reply would answer 0 although the first
// call released it.
bool TokenEngine::release_retriable() const { return false; }

LockEngine::Status TokenEngine::status(const std::string&, const Holding* holding) {
  const std::string token = holding != nullptr ? holding->token : std::string();
  const Reply reply = client().backend->eval(scripts::token_lock_status, {name()}, {token});
  const auto values = integer_array_reply(scripts::token_lock_status, reply, 3);
  return Status{.locked = values[0] == 1, .hold_count = values[1], .pttl_ms = values[2]};
}

const Script& TokenEngine::renew_script() const { return scripts::token_lock_renew; }

std::string TokenEngine::renew_holder(const std::string&, const Holding& holding) const {
  TURNSTILE_CHECK(!holding.token.empty());
  return holding.token;
}

}  // namespace turnstile::detail
