// The reentrant lock: Redisson's RLock (and RFencedLock) scripts and keys.

#include <cassert>

#include "core/check.h"
#include "locks/engine/lock_access.h"
#include "locks/engine/acquire_wait.h"
#include "locks/handles/client_core.h"
#include "locks/engine/give_up.h"
#include "locks/engine/latched_unlock.h"
#include "locks/engine/random_hex.h"
#include "locks/engine/reply_shape.h"
#include "locks/engine/wake_registry.h"
#include "lua_scripts.h"
#include "turnstile/errors.h"
#include "locks/flavors/lock_flavors.h"
#include "turnstile/lock.h"

namespace turnstile::detail {
namespace {}  // namespace

ReentrantEngine::ReentrantEngine(std::shared_ptr<ClientCore> client, std::string_view name, bool fenced,
                                 const LockOptions& options)
    : LockEngine(client, key_layout(Flavor::reentrant, client->options.key_prefix + std::string(name)), options),
      fenced_(fenced) {}

ScriptCall ReentrantEngine::attempt_call(const std::string& owner, Duration lease, Holding& holding) {
  // The identity (key and value) always, the registry's after it.
  std::vector<std::string> args = call_strings(kCallArgsReserved, server_lease_ms_arg(lease), owner,
                                               shape_check_arg(holding), holder_identity(owner));
  ScriptCall call =
      fenced_ ? ScriptCall{&scripts::fenced_lock_acquire,
                           call_strings(kCallKeysReserved, name(), layout().fencing_counter, layout().holder_identity),
                           std::move(args)}
              : ScriptCall{&scripts::reentrant_lock_acquire,
                           call_strings(kCallKeysReserved, name(), layout().holder_identity), std::move(args)};
  add_wake_registry(call, holding);
  if (holding.may_wait && takes_process_grants()) {
    // A waiting try leaves its process's offer, naming its acquisition and
    // its send instant (no later than the real one: a grantee's lease is
    // timed from it).
    TURNSTILE_CHECK(!holding.grant_acquisition.empty());
    const Instant sent_at = client().runtime->now();
    holding.grant_offered = sent_at;
    call.keys.push_back(layout().fair_grants);
    call.args.push_back(holding.grant_acquisition);
    call.args.push_back(std::to_string(sent_at.time_since_epoch().count()));
  }
  return call;
}

bool ReentrantEngine::takes_process_grants() const {
  return !fenced_ && fleet_wakeups() && client().options.fleet_handoff == Handoff::direct &&
         publish_counts_every_receiver(*client().backend);
}

std::optional<LockEngine::Attempt> ReentrantEngine::take_grant(const std::string& owner, Duration lease,
                                                               Holding& scratch) {
  if (scratch.grant_acquisition.empty()) return std::nullopt;  // it never offered
  return accept_grant(client().wakeups->take_grant_for(wait_channel(owner), scratch.grant_acquisition), lease, scratch);
}

void ReentrantEngine::abandon(const std::string& owner, const Holding& scratch) {
  if (scratch.grant_acquisition.empty()) {
    LockEngine::abandon(owner, scratch);
    return;
  }
  // Its offer withdrawn, its process forgotten if it was the last waiter,
  // and a grant it never took given back (lua/reentrant_lock_abandon.lua).
  ClientCore& client = this->client();
  const bool last = client.wakeups->waiting_on(wait_channel(owner)) == 0;
  // Not the last: the process stays registered for the others, who settle
  // it. The last settles any leave skipped before.
  if (!last) {
    client.wakeups->note_skipped_leave(wait_channel(owner));
  } else {
    (void)client.wakeups->take_skipped_leave(wait_channel(owner));
  }
  // Unreachable, or not answered within the grace (send_give_up): a grant
  // it never took runs out with its lease, an offer left behind with the
  // registry (a release that picks it grants a waiter that is gone: that
  // hold runs out with its lease too).
  try {
    const std::optional<Reply> reply =
        send_give_up(client, scripts::reentrant_lock_abandon,
                     {name(), core().channel, layout().holder_identity, layout().wake_registry, layout().fair_grants},
                     {owner, scratch.grant_acquisition, layout().wake_channel(client.id), last ? "1" : "0",
                      std::string(kUnlockMessage), std::string(client.backend->publish_command()),
                      std::to_string(client.runtime->wall_clock_ms())});
    if (!reply) return;
    const std::int64_t given_back = integer_reply(scripts::reentrant_lock_abandon, *reply);
    if (given_back != 0 && given_back != 1) throw_unexpected(scripts::reentrant_lock_abandon, *reply, "0 or 1");
  } catch (const std::exception&) {
    if (!is_transient(std::current_exception())) throw;
  }
}

LockEngine::Attempt ReentrantEngine::attempt_result(const Reply& reply, const Holding&) {
  // A failure: the pttl, or with the wake registry {pttl, 1 if the holder
  // may be foreign} (fenced: {0, pttl} or {0, pttl, foreign}).
  const auto failed = [](const Script& script, const Reply& failure, std::int64_t pttl,
                         std::optional<std::int64_t> foreign) {
    if (!foreign) return Attempt{.retry_after_ms = pttl};
    if (*foreign != 0 && *foreign != 1) throw_unexpected(script, failure, "0 or 1 for a foreign holder");
    return Attempt{.retry_after_ms = pttl, .holder_may_be_foreign = *foreign == 1};
  };
  if (!fenced_) {
    if (reply.is_nil()) return Attempt{.acquired = true};
    if (reply.is_integer()) return failed(scripts::reentrant_lock_acquire, reply, reply.as_integer(), std::nullopt);
    const auto values = integer_array_reply(scripts::reentrant_lock_acquire, reply, 2);
    return failed(scripts::reentrant_lock_acquire, reply, values[0], values[1]);
  }
  const auto values = integer_array_reply(scripts::fenced_lock_acquire, reply, 2, 3);
  if (values[0] == 1) {
    if (values.size() != 2 || values[1] < 1) {
      throw_unexpected(scripts::fenced_lock_acquire, reply, "a fencing token >= 1");
    }
    return Attempt{.acquired = true, .fencing_token = values[1]};
  }
  return failed(scripts::fenced_lock_acquire, reply, values[1],
                values.size() == 3 ? std::optional<std::int64_t>(values[2]) : std::nullopt);
}

std::optional<ScriptCall> ReentrantEngine::release_call(const std::string& owner, const Holding& holding) {
  ClientCore& client = this->client();
  ScriptCall call{&scripts::reentrant_lock_unlock,
                  call_strings(kCallKeysReserved, name(), core().channel,
                               layout().unlock_latch(random_hex128(*client.runtime)), layout().holder_identity),
                  call_strings(kCallArgsReserved, kUnlockMessage,
                               ClientCore::server_lease_ms_arg(holding.lease, holding.lock_delay), owner,
                               first_send_latch_lifetime_arg(), client.backend->publish_command())};
  call.latch_lifetime_arg = 3;  // ARGV[4]
  add_wake_registry_key(call);
  if (takes_process_grants()) {
    // A release that frees the lock grants it to the oldest registered
    // process's offer; its wall clock re-registers a granted process.
    call.keys.push_back(layout().fair_grants);
    call.args.push_back(std::to_string(client.runtime->wall_clock_ms()));
  }
  return call;
}

ReleaseResult ReentrantEngine::release_result(const Reply& reply) {
  return latched_unlock_result(scripts::reentrant_lock_unlock, reply);
}

LockEngine::Status ReentrantEngine::status(const std::string& owner, const Holding*) {
  const Reply reply = client().backend->eval(scripts::reentrant_lock_status, {name()}, {owner});
  const auto values = integer_array_reply(scripts::reentrant_lock_status, reply, 3);
  return Status{.locked = values[0] == 1, .hold_count = values[1], .pttl_ms = values[2]};
}

const Script& ReentrantEngine::renew_script() const { return scripts::reentrant_lock_renew; }

std::string ReentrantEngine::renew_holder(const std::string& owner, const Holding&) const { return owner; }

}  // namespace turnstile::detail

namespace turnstile {

bool ReentrantLock::fenced() const {
  return static_cast<const detail::ReentrantEngine&>(detail::LockAccess::engine(*this)).fenced();
}

}  // namespace turnstile
