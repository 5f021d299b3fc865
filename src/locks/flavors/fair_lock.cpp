// The fair lock: Redisson's RFairLock keys and deadline arithmetic, with
// turnstile's waiters keeping their place by liveness deadlines of their
// own (see fair_lock.h for the design, lua/lib/fair_queue.lua for the code).

#include "turnstile/fair_lock.h"

#include <algorithm>
#include <string_view>

#include "core/check.h"
#include "locks/engine/lock_access.h"
#include "locks/engine/acquire_wait.h"
#include "locks/handles/client_core.h"
#include "locks/engine/give_up.h"
#include "locks/flavors/lock_flavors.h"
#include "locks/engine/latched_unlock.h"
#include "locks/engine/random_hex.h"
#include "locks/engine/reply_shape.h"
#include "locks/engine/wake_registry.h"
#include "lua_scripts.h"
#include "turnstile/errors.h"

namespace turnstile::detail {
namespace {

// The most stale heads one script call evicts, so a queue full of dead
// waiters costs each call a bounded amount of work; the next call goes on.
constexpr int kMaxEvictionsPerCall = 64;

// The longest liveness timeout a waiting try can be given: FAR_FACTOR (8,
// lib/fair_queue.lua) waiter timeouts at most; anything beyond is not a
// reply of these scripts.
constexpr std::int64_t kMaxFarLivenessMs = 8 * FairLock::kMaxWaiterTimeout.count();

std::string ms_arg(Duration duration) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(duration).count();
  TURNSTILE_CHECK(ms >= 1);
  return std::to_string(ms);
}

std::string prefixed(const ClientCore& client, std::string_view name) {
  return client.options.key_prefix + std::string(name);
}

void check_range(std::string_view what, std::chrono::milliseconds value, std::chrono::milliseconds low) {
  if (value < low || value > FairLock::kMaxWaiterTimeout) {
    throw InvalidArgumentError("fair lock " + std::string(what) + " must be between " + std::to_string(low.count()) +
                               " ms and " + std::to_string(FairLock::kMaxWaiterTimeout.count()) + " ms, got " +
                               std::to_string(value.count()) + " ms");
  }
}

const FairLockOptions& checked(const FairLockOptions& options) {
  check_range("waiter timeout", options.waiter_timeout, FairLock::kMinWaiterTimeout);
  check_range("redisson wait", options.redisson_wait, std::chrono::milliseconds(1));
  return options;
}

}  // namespace

FairEngine::FairEngine(std::shared_ptr<ClientCore> client, std::string_view name, const FairLockOptions& options)
    : LockEngine(client, key_layout(Flavor::fair, prefixed(*client, name)),
                 LockOptions{.lock_delay = options.lock_delay}),
      options_(checked(options)) {}

bool FairEngine::direct_handoff() const {
  return options_.handoff == Handoff::direct && !options_.fenced && publish_counts_every_receiver(*client().backend);
}

ScriptCall FairEngine::attempt_call(const std::string& owner, Duration lease, Holding& holding) {
  ClientCore& client = this->client();
  std::vector<std::string> keys = call_strings(kCallKeysReserved, name(), layout().fair_queue, layout().fair_timeouts,
                                               core().channel, layout().fair_waiters);
  if (options_.fenced) keys.push_back(layout().fencing_counter);
  std::vector<std::string> args =
      call_strings(kCallArgsReserved, server_lease_ms_arg(lease), owner, ms_arg(options_.waiter_timeout),
                   std::to_string(client.runtime->wall_clock_ms()), holding.may_wait ? "1" : "0",
                   client.backend->publish_command(), kUnlockMessage, std::to_string(kMaxEvictionsPerCall),
                   ms_arg(options_.redisson_wait), shape_check_arg(holding), holder_identity(owner));
  keys.push_back(layout().holder_identity);
  if (holding.may_wait && direct_handoff()) {
    // A waiting try offers to take a grant, naming its acquisition and its
    // send instant (no later than the real one: the lease is timed from it).
    const Instant sent_at = client.runtime->now();
    if (holding.grant_acquisition.empty()) {
      holding.grant_acquisition = random_hex128(*client.runtime);
      holding.grant_floor = sent_at;
    }
    holding.grant_offered = sent_at;
    keys.push_back(layout().fair_grants);
    args.push_back(holding.grant_acquisition);
    args.push_back(std::to_string(sent_at.time_since_epoch().count()));
  }
  return ScriptCall{&scripts::fair_lock_acquire, std::move(keys), std::move(args)};
}

LockEngine::Attempt FairEngine::attempt_result(const Reply& reply, const Holding& holding) {
  const auto values = integer_array_reply(scripts::fair_lock_acquire, reply, 3);
  if (values[0] == 1) {
    if (!options_.fenced) {
      TURNSTILE_CHECK(values[1] == 0);
      return Attempt{.acquired = true};
    }
    if (values[1] < 1) throw_unexpected(scripts::fair_lock_acquire, reply, "a fencing token >= 1");
    return Attempt{.acquired = true, .fencing_token = values[1]};
  }
  const std::int64_t pttl_ms = values[1];
  const std::int64_t liveness_ms = values[2];
  if (values[0] != 0 || pttl_ms < -2 || liveness_ms < 0 || (holding.may_wait && liveness_ms < 1) ||
      liveness_ms > kMaxFarLivenessMs) {
    throw_unexpected(scripts::fair_lock_acquire, reply, "{1, token, 0} or {0, pttl, liveness}");
  }
  if (!holding.may_wait) return Attempt{.retry_after_ms = pttl_ms};
  // Queued: retry (refreshing the liveness deadline) at least every third
  // of the liveness timeout the try was given (lib/fair_queue.lua, "Near
  // and far waiters"). A near waiter (given the waiter timeout) also
  // retries no later than the lease's end, since an expiring lease
  // publishes nothing; a far one is told when it moves up (kNearMessage)
  // and then retries within a third of the waiter timeout, its liveness
  // there.
  const std::int64_t refresh_ms = std::max<std::int64_t>(liveness_ms / 3, 1);
  const bool near = liveness_ms <= options_.waiter_timeout.count();
  return Attempt{.retry_after_ms = near && pttl_ms >= 0 ? std::min(pttl_ms, refresh_ms) : refresh_ms,
                 .holder_lease_left_ms = pttl_ms,
                 .near_retry_after_ms = std::max<std::int64_t>(options_.waiter_timeout.count() / 3, 1)};
}

std::optional<std::int64_t> FairEngine::queue_position_for_event(const std::string& owner) {
  // One read (the status script), only for a sink at info level; a
  // transient failure leaves the position unknown: the attempt stands.
  try {
    return queue_position(owner);
  } catch (const std::exception&) {
    if (!is_transient(std::current_exception())) throw;
    return std::nullopt;
  }
}

std::optional<LockEngine::Attempt> FairEngine::take_grant(const std::string& owner, Duration lease, Holding& scratch) {
  if (scratch.grant_acquisition.empty()) return std::nullopt;  // it never offered
  ClientCore& client = this->client();
  return accept_grant(client.wakeups->take_grant(wait_channel(owner)), lease, scratch);
}

std::optional<ScriptCall> FairEngine::release_call(const std::string& owner, const Holding& holding) {
  ClientCore& client = this->client();
  ScriptCall call{&scripts::fair_lock_unlock,
                  call_strings(kCallKeysReserved, name(), layout().fair_queue, layout().fair_timeouts, core().channel,
                               layout().unlock_latch(random_hex128(*client.runtime)), layout().fair_waiters,
                               layout().holder_identity),
                  call_strings(kCallArgsReserved, kUnlockMessage,
                               ClientCore::server_lease_ms_arg(holding.lease, holding.lock_delay), owner,
                               first_send_latch_lifetime_arg(), std::to_string(client.runtime->wall_clock_ms()),
                               client.backend->publish_command(), std::to_string(kMaxEvictionsPerCall),
                               ms_arg(options_.waiter_timeout))};
  call.latch_lifetime_arg = 3;  // ARGV[4]
  if (direct_handoff()) call.keys.push_back(layout().fair_grants);
  return call;
}

ReleaseResult FairEngine::release_result(const Reply& reply) {
  return latched_unlock_result(scripts::fair_lock_unlock, reply);
}

void FairEngine::abandon(const std::string& owner, const Holding& scratch) {
  ClientCore& client = this->client();
  std::vector<std::string> keys{name(), layout().fair_queue, layout().fair_timeouts, core().channel,
                                layout().fair_waiters};
  std::vector<std::string> args{owner,
                                std::to_string(client.runtime->wall_clock_ms()),
                                std::string(client.backend->publish_command()),
                                std::string(kUnlockMessage),
                                std::to_string(kMaxEvictionsPerCall),
                                ms_arg(options_.redisson_wait),
                                ms_arg(options_.waiter_timeout)};
  if (!scratch.grant_acquisition.empty()) {
    // A grant it never took is given back (and passed on).
    keys.push_back(layout().holder_identity);
    keys.push_back(layout().fair_grants);
    args.push_back(scratch.grant_acquisition);
  }
  // Not answered within the grace (send_give_up): its queue entry is
  // evicted once its liveness deadline passes (waiter_timeout), a grant it
  // never took runs out with its lease, its offer with the offers' key.
  const std::optional<Reply> reply = send_give_up(client, scripts::fair_lock_abandon, keys, args);
  if (!reply) return;
  const std::int64_t removed = integer_reply(scripts::fair_lock_abandon, *reply);
  if (removed != 0 && removed != 1) throw_unexpected(scripts::fair_lock_abandon, *reply, "0 or 1");
}

bool FairEngine::force_delete() {
  ClientCore& client = this->client();
  const Reply reply =
      client.backend->eval(scripts::fair_lock_force_unlock,
                           {name(), layout().fair_queue, layout().fair_timeouts, core().channel, layout().fair_waiters,
                            layout().holder_identity},
                           {std::string(kUnlockMessage), std::to_string(client.runtime->wall_clock_ms()),
                            std::string(client.backend->publish_command()), std::to_string(kMaxEvictionsPerCall)});
  const std::int64_t deleted = integer_reply(scripts::fair_lock_force_unlock, reply);
  if (deleted != 0 && deleted != 1) throw_unexpected(scripts::fair_lock_force_unlock, reply, "0 or 1");
  return deleted == 1;
}

FairEngine::QueueStatus FairEngine::queue_status(const std::string& owner) {
  const Reply reply = client().backend->eval(scripts::fair_lock_status, {name(), layout().fair_queue}, {owner});
  const auto values = integer_array_reply(scripts::fair_lock_status, reply, 5);
  const QueueStatus status{.lock = Status{.locked = values[0] == 1, .hold_count = values[1], .pttl_ms = values[2]},
                           .queue_length = values[3],
                           .position = values[4]};
  if (status.queue_length < 0 || status.position < -1 ||
      status.position >= std::max<std::int64_t>(status.queue_length, 1)) {
    throw_unexpected(scripts::fair_lock_status, reply, "a queue length >= 0 and a position in it or -1");
  }
  return status;
}

LockEngine::Status FairEngine::status(const std::string& owner, const Holding*) { return queue_status(owner).lock; }

std::int64_t FairEngine::queue_length() { return queue_status(current_owner()).queue_length; }

std::optional<std::int64_t> FairEngine::queue_position(const std::string& owner) {
  const std::int64_t position = queue_status(owner).position;
  if (position < 0) return std::nullopt;
  return position;
}

const Script& FairEngine::renew_script() const { return scripts::reentrant_lock_renew; }

std::string FairEngine::renew_holder(const std::string& owner, const Holding&) const { return owner; }

std::string FairEngine::wait_channel(const std::string& owner) const { return layout().waiter_channel(owner); }

}  // namespace turnstile::detail

namespace turnstile {

const detail::FairEngine& FairLock::fair_engine() const {
  return static_cast<const detail::FairEngine&>(detail::LockAccess::engine(*this));
}
detail::FairEngine& FairLock::fair_engine() {
  return static_cast<detail::FairEngine&>(detail::LockAccess::engine(*this));
}

const FairLockOptions& FairLock::options() const { return fair_engine().options(); }
std::int64_t FairLock::queue_length() { return fair_engine().queue_length(); }
std::optional<std::int64_t> FairLock::queue_position(const std::string& owner) {
  return fair_engine().queue_position(owner);
}

}  // namespace turnstile
