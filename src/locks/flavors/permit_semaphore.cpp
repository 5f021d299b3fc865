// The crash-safe semaphore: Redisson's permit-expirable layout (count at the
// name, permit ids in "{<name>}:timeout" scored by expiry), with the
// client's watchdog renewing permits held without a fixed lease.

#include <algorithm>
#include <set>
#include <optional>
#include <utility>

#include "core/check.h"
#include "locks/engine/acquire_wait.h"
#include "locks/handles/client_core.h"
#include "locks/engine/hold_record.h"
#include "locks/engine/random_hex.h"
#include "locks/engine/reply_shape.h"
#include "locks/flavors/required_total.h"
#include "locks/flavors/semaphore_common.h"
#include "locks/engine/task_future.h"
#include "locks/engine/wake_registry.h"
#include "lua_scripts.h"
#include "turnstile/errors.h"
#include "turnstile/semaphore.h"

namespace turnstile {

namespace detail {

// This client's record of one semaphore, shared by every handle of it: the
// permits the watchdog renews.
struct PermitSemaphoreCore {
  std::shared_ptr<ClientCore> client;
  std::string name;         // the available count
  std::string timeout_key;  // the held permits
  std::string channel;
  KeyLayout layout;  // the wake registry's too (fleet-wide wake-ups)
  // A held permit's watch, and its loss as a stop source (requested when
  // it is lost, or found gone at release; turnstile/hold.h).
  struct Watched {
    std::uint64_t watch_id = 0;
    std::stop_source loss;
  };
  Mutex mutex;                                                         // never held across a call
  std::map<std::string, Watched> watched TURNSTILE_GUARDED_BY(mutex);  // by permit id
  LostOwners lost TURNSTILE_GUARDED_BY(mutex);  // permit ids lost while believed held (client_core.h)
  PermitLostHandler lost_handler TURNSTILE_GUARDED_BY(mutex);
};

}  // namespace detail

namespace {

using detail::PermitSemaphoreCore;

constexpr std::size_t kPermitIdLength = 32;
constexpr std::size_t kPermitIdBytes = 16;
constexpr std::string_view kHexDigits = "0123456789abcdef";

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// The 16 raw bytes of each id (what the scripts store and look up).
std::vector<std::string> stored_ids(const std::vector<std::string>& hex_ids) {
  std::vector<std::string> stored;
  stored.reserve(hex_ids.size());
  for (const std::string& hex : hex_ids) stored.push_back(PermitId(hex).bytes());
  return stored;
}
constexpr std::string_view kRegistryFamily = "permit_semaphore";
const Script& kScript = scripts::permit_semaphore;

const char* reason_text(LockLostReason reason) {
  switch (reason) {
    case LockLostReason::gone:
      return "it expired or was released elsewhere";
    case LockLostReason::lease_expired:
      return "its lease may have lapsed (no renewal confirmed by its local deadline)";
    case LockLostReason::max_hold_reached:
      return "it was held for the client's max_hold and is renewed no more";
    case LockLostReason::server_restarted:
      return "the server restarted (or failed over) since it was taken";
  }
  return "unknown reason";
}

// KEYS and leading ARGV of every call of the script: now, the publish
// command, the reclaim bound, the operation.
struct Call {
  std::vector<std::string> keys;
  std::vector<std::string> args;
  std::int64_t now_ms = 0;
};

// Whether this client's calls pass the grants (direct handoff,
// ClientOptions::permit_handoff; fleet-wide wake-ups only).
bool direct_handoff(const PermitSemaphoreCore& core) {
  return detail::fleet_wakeups(*core.client, core.layout) && core.client->options.permit_handoff == Handoff::direct &&
         detail::publish_counts_every_receiver(*core.client->backend);
}

Call make_call(const PermitSemaphoreCore& core, std::string_view operation) {
  Call call;
  call.now_ms = core.client->runtime->wall_clock_ms();
  call.keys = {core.name, core.timeout_key, core.channel};
  if (detail::fleet_wakeups(*core.client, core.layout)) call.keys.push_back(core.layout.wake_registry);
  // A release grants the permits it frees to offers.
  if (direct_handoff(core)) call.keys.push_back(core.layout.fair_grants);
  call.args = {std::to_string(call.now_ms), std::string(core.client->backend->publish_command()),
               std::to_string(PermitSemaphore::kMaxReclaimedPerCall), std::string(operation)};
  return call;
}

Reply run(const PermitSemaphoreCore& core, const Call& call) {
  return core.client->backend->eval(kScript, call.keys, call.args);
}

bool flag_reply(const Reply& reply) {
  const std::int64_t flag = detail::integer_reply(kScript, reply);
  if (flag != 0 && flag != 1) detail::throw_unexpected(kScript, reply, "0 or 1");
  return flag == 1;
}

// Stops watching `ids`; returns their loss sources (for a caller that
// found them gone).
std::vector<std::stop_source> forget(PermitSemaphoreCore& core, const std::vector<std::string>& ids) {
  std::vector<std::uint64_t> watch_ids;
  std::vector<std::stop_source> losses;
  {
    MutexLock guard(core.mutex);
    for (const std::string& id : ids) {
      auto it = core.watched.find(id);
      if (it == core.watched.end()) continue;
      watch_ids.push_back(it->second.watch_id);
      losses.push_back(it->second.loss);
      core.watched.erase(it);
    }
  }
  for (std::uint64_t watch_id : watch_ids) core.client->watchdog->unwatch(watch_id);
  return losses;
}

// forget(), for permits found gone: their losses are requested.
void forget_lost(PermitSemaphoreCore& core, const std::vector<std::string>& ids) {
  for (std::stop_source& loss : forget(core, ids)) loss.request_stop();
}

// Tells the lost handler and the client's background error handler.
void report_lost(PermitSemaphoreCore& core, const std::string& id, LockLostReason reason) {
  PermitLostHandler handler;
  {
    MutexLock guard(core.mutex);
    handler = core.lost_handler;
  }
  if (handler) handler(PermitLost{core.name, PermitId(id), reason});
  core.client->report_background_error(std::make_exception_ptr(
      LockLostError("permit " + id + " of semaphore " + in_quotes(core.name) + " was lost: " + reason_text(reason))));
}

// The watchdog ids of the watched permits among `ids`.
std::vector<std::uint64_t> watch_ids_of(PermitSemaphoreCore& core, const std::vector<std::string>& ids) {
  std::vector<std::uint64_t> watch_ids;
  MutexLock guard(core.mutex);
  for (const std::string& id : ids) {
    auto it = core.watched.find(id);
    if (it != core.watched.end()) watch_ids.push_back(it->second.watch_id);
  }
  return watch_ids;
}

// Keeps the permit's local deadline (lock.h, "The local deadline"), renewing it
// when it was taken without a fixed lease.
void watch(const std::shared_ptr<PermitSemaphoreCore>& core, const std::string& id, Instant sent_at, Duration lease,
           bool renewed, Duration lock_delay) {
  // The callback keeps the core alive while the permit is watched (the
  // client's destructor stops the watchdog, which drops it).
  const std::uint64_t watch_id = core->client->watchdog->watch(detail::Watchdog::Target{
      .renew_script = renewed ? &scripts::permit_semaphore_renew : nullptr,
      .key = core->timeout_key,
      .holder = PermitId(id).bytes(),
      .flavor = Flavor::semaphore,
      .pass_wall_clock_ms = true,
      .sent_at = sent_at,
      .lease = lease,
      .lock_delay = lock_delay,
      .on_lost =
          [core, id](std::uint64_t lost_watch_id, LockLostReason reason) {
            std::stop_source loss{std::nostopstate};
            {
              MutexLock guard(core->mutex);
              auto it = core->watched.find(id);
              if (it == core->watched.end() || it->second.watch_id != lost_watch_id) return;
              loss = it->second.loss;
              core->watched.erase(it);
              core->lost.add(id);
            }
            loss.request_stop();
            report_lost(*core, id, reason);
          },
  });
  MutexLock guard(core->mutex);
  const bool inserted = core->watched.emplace(id, PermitSemaphoreCore::Watched{watch_id, std::stop_source()}).second;
  TURNSTILE_CHECK(inserted);
  (void)inserted;
}

std::vector<std::string> hex_ids(std::span<const PermitId> permits, std::string_view operation) {
  if (static_cast<std::int64_t>(permits.size()) > PermitSemaphore::kMaxPermitsPerCall) {
    throw InvalidArgumentError(std::string(operation) + ": at most " +
                               std::to_string(PermitSemaphore::kMaxPermitsPerCall) + " permits per call, got " +
                               std::to_string(permits.size()));
  }
  std::vector<std::string> ids;
  std::set<std::string_view> seen;
  for (const PermitId& permit : permits) {
    if (!seen.insert(permit.hex()).second) {
      throw InvalidArgumentError(std::string(operation) + ": permit " + permit.hex() + " is listed twice");
    }
    ids.push_back(permit.hex());
  }
  return ids;
}

}  // namespace

PermitId::PermitId(std::string_view hex_or_bytes) {
  if (hex_or_bytes.size() == kPermitIdBytes) {
    for (const char c : hex_or_bytes) {
      const auto byte = static_cast<unsigned char>(c);
      hex_ += kHexDigits[byte >> 4];
      hex_ += kHexDigits[byte & 0xf];
    }
    return;
  }
  const bool well_formed =
      hex_or_bytes.size() == kPermitIdLength &&
      std::all_of(hex_or_bytes.begin(), hex_or_bytes.end(), [](char c) { return hex_value(c) >= 0; });
  if (!well_formed) {
    // Never echo raw bytes: a malformed id is shown by its length only.
    const bool printable =
        std::all_of(hex_or_bytes.begin(), hex_or_bytes.end(), [](char c) { return c >= 0x20 && c < 0x7f; });
    throw InvalidArgumentError("permit id must be 32 lower-case hex digits or 16 bytes, got " +
                               (printable && hex_or_bytes.size() <= 64
                                    ? "'" + std::string(hex_or_bytes) + "'"
                                    : std::to_string(hex_or_bytes.size()) + " bytes"));
  }
  hex_ = std::string(hex_or_bytes);
}

std::string PermitId::bytes() const {
  std::string raw;
  raw.reserve(kPermitIdBytes);
  for (std::size_t i = 0; i < hex_.size(); i += 2) {
    raw += static_cast<char>(hex_value(hex_[i]) * 16 + hex_value(hex_[i + 1]));
  }
  return raw;
}

PermitSemaphore::PermitSemaphore(std::shared_ptr<detail::ClientCore> client, std::string_view name,
                                 const LockOptions& options) {
  TURNSTILE_CHECK(client != nullptr);
  const std::string key = client->options.key_prefix + std::string(name);
  check_lock_name(name, key, "semaphore name");
  detail::ClientCore& client_core = *client;
  lock_delay_ = client_core.lock_delay_of(options);
  total_ = std::make_shared<detail::RequiredTotal>();
  core_ = client_core.shared_state<PermitSemaphoreCore>(kRegistryFamily, key, [&] {
    auto core = std::make_shared<PermitSemaphoreCore>();
    core->client = client;
    core->name = key;
    const KeyLayout layout = key_layout(Flavor::semaphore, key);
    core->timeout_key = layout.permit_timeouts;
    core->channel = layout.channel;
    core->layout = layout;
    return core;
  });
}

PermitSemaphore::PermitSemaphore(PermitSemaphore&&) noexcept = default;
PermitSemaphore& PermitSemaphore::operator=(PermitSemaphore&&) noexcept = default;
PermitSemaphore::~PermitSemaphore() = default;

const std::string& PermitSemaphore::name() const { return core_->name; }
const std::string& PermitSemaphore::timeout_key() const { return core_->timeout_key; }
const std::string& PermitSemaphore::channel() const { return core_->channel; }

// ---- the total ----------------------------------------------------------------

bool PermitSemaphore::try_set_permits(std::int64_t total) { return set_total(total, /*only_if_absent=*/true).set; }

PermitTotal PermitSemaphore::try_set_permits_or_get(std::int64_t total) {
  return set_total(total, /*only_if_absent=*/true);
}

void PermitSemaphore::set_permits(std::int64_t total) { (void)set_total(total, /*only_if_absent=*/false); }

bool PermitSemaphore::reset() { return flag_reply(run(*core_, make_call(*core_, "reset"))); }

PermitTotal PermitSemaphore::set_total(std::int64_t total, bool only_if_absent) {
  detail::check_permit_count(total, only_if_absent ? "try_set_permits" : "set_permits");
  Call call = make_call(*core_, only_if_absent ? "init_permits" : "set_permits");
  call.args.push_back(std::to_string(total));
  const Reply reply = run(*core_, call);
  const auto values = detail::integer_array_reply(kScript, reply, 2);
  if (values[0] != 0 && values[0] != 1) detail::throw_unexpected(kScript, reply, "{0 or 1, total}");
  const PermitTotal result{.set = values[0] == 1, .total = values[1]};
  // Set: the total is ours. Not set: only-if-absent found one, or the total
  // already was ours.
  if (result.set && result.total != total) detail::throw_unexpected(kScript, reply, "{1, the total set}");
  if (!result.set && !only_if_absent && result.total != total) {
    detail::throw_unexpected(kScript, reply, "{0, the unchanged total}");
  }
  return result;
}

// ---- acquiring ----------------------------------------------------------------

PermitId PermitSemaphore::acquire(std::optional<Duration> lease) {
  std::optional<std::vector<PermitId>> permits = acquire_by(1, lease, kNoDeadline);
  TURNSTILE_CHECK(permits && permits->size() == 1);
  return std::move(permits->front());
}

std::vector<PermitId> PermitSemaphore::acquire_many(std::int64_t permits, std::optional<Duration> lease) {
  std::optional<std::vector<PermitId>> acquired = acquire_by(permits, lease, kNoDeadline);
  TURNSTILE_CHECK(acquired);
  return std::move(*acquired);
}

std::optional<PermitId> PermitSemaphore::try_acquire(const AcquireOptions& options) {
  std::optional<std::vector<PermitId>> permits =
      acquire_by(1, options.lease, core_->client->runtime->deadline_after(options.wait), options.stop);
  if (!permits) return std::nullopt;
  return std::move(permits->front());
}

std::optional<PermitId> PermitSemaphore::try_acquire_until(Instant deadline) {
  std::optional<std::vector<PermitId>> permits = acquire_by(1, std::nullopt, deadline);
  if (!permits) return std::nullopt;
  return std::move(permits->front());
}

std::optional<std::vector<PermitId>> PermitSemaphore::try_acquire_many(std::int64_t permits,
                                                                       const AcquireOptions& options) {
  return acquire_by(permits, options.lease, core_->client->runtime->deadline_after(options.wait), options.stop);
}

std::optional<std::vector<PermitId>> PermitSemaphore::acquire_by(std::int64_t permits, std::optional<Duration> lease,
                                                                 Instant deadline, std::stop_token stop) {
  return acquire_task(detail::WaitStyle::blocking, permits, lease, deadline, std::move(stop)).run_blocking();
}

detail::Task<std::optional<std::vector<PermitId>>> PermitSemaphore::acquire_task(detail::WaitStyle style,
                                                                                 std::int64_t permits,
                                                                                 std::optional<Duration> lease,
                                                                                 Instant deadline,
                                                                                 std::stop_token stop) {
  detail::check_permit_count(permits, "acquire");
  if (permits > kMaxPermitsPerCall) {
    throw InvalidArgumentError("acquire: at most " + std::to_string(kMaxPermitsPerCall) + " permits per call, got " +
                               std::to_string(permits));
  }
  detail::ClientCore& client = *core_->client;
  if (lease) client.watchdog->timing().check(*lease, "lease");
  const Duration effective_lease = lease.value_or(client.watchdog->lease());
  // Armed on the server with the lock-delay (watchdog.h, server_lease()).
  const std::int64_t lease_ms = detail::lease_ms_of(detail::server_lease(effective_lease, lock_delay_));
  Instant sent_at{};  // of the call that took the permits
  if (permits == 0) co_return std::vector<PermitId>{};
  settle_total();  // on the engine's thread for an asynchronous form

  // The ids are drawn once and kept across the retries of one wait.
  std::vector<std::string> ids;
  for (std::int64_t i = 0; i < permits; ++i) ids.push_back(detail::random_hex128(*client.runtime));
  TURNSTILE_CHECK(std::set<std::string>(ids.begin(), ids.end()).size() == ids.size());
  const std::vector<std::string> stored = stored_ids(ids);
  // Who holds them (lua/lib/holder_identity.lua, permit_identity_key): one
  // identity for the acquisition, naming its first permit.
  const std::string identity = client.holder_identity(ids.front(), lock_delay_);
  // A retry after a try that failed in transit sends the same ids: the
  // script recognises a grant of them and does not take more permits.
  const detail::WaitLimits limits{
      .deadline = deadline, .stop = std::move(stop), .unreachable_limit = client.options.unreachable_limit};
  // With fleet-wide wake-ups a failed try registers the process, and a
  // waiter tries again at least every kFleetSemaphoreRetryMs.
  const bool fleet = detail::fleet_wakeups(client, core_->layout);
  const bool will_wait = deadline > client.runtime->now();
  bool sent_any = false;
  bool others_waiting = false;  // the latest try's "others" argument
  // A fleet try's success: whether it was sent with other waiters of this
  // process ("others"), which decides what the registry keeps of it.
  std::optional<bool> success_sent_others;
  bool more_left = false;  // ...and left free permits ({1, 0, 1})
  // Direct handoff (ClientOptions::permit_handoff): a waiter for one permit
  // offers it for its process; the grant names its id (as its acquisition).
  const bool handoff = direct_handoff(*core_);
  const bool offers = handoff && will_wait && permits == 1;
  Instant grant_floor = client.runtime->now();  // no grant is older
  detail::WakeOptions wake{.rule = detail::WakeRule::permit_count, .pass_on_failure = permits > 1};
  if (offers) wake.grant_id = ids.front();
  // A waiter that offered leaves with its give-back (a grant it never
  // took is given back at once), timed when it leaves.
  const auto give_back = [&]() -> std::optional<detail::GiveBack> {
    if (!offers) return std::nullopt;
    Call call = make_call(*core_, "give_back");
    call.args.insert(call.args.end(), {stored.front(), ids.front(), core_->layout.wake_channel(client.id)});
    return detail::GiveBack{.script = &kScript, .keys = std::move(call.keys), .args = std::move(call.args)};
  };

  detail::AcquisitionTiming timing;
  bool acquired = false;
  std::exception_ptr failure;
  try {
    detail::Task<bool> waiting = detail::acquire_with_wait(
        style, *client.wakeups, *client.runtime, core_->channel,
        detail::with_own_channel(client, core_->layout, std::move(wake)), limits,
        [&]() -> detail::TryOutcome {
          if (offers) {
            // Granted by a message: held from the send instant of the try
            // whose offer it answered, without a call.
            if (const std::optional<Instant> granted =
                    detail::grant_sent_at(client, client.wakeups->take_grant_for(core_->channel, ids.front()),
                                          ids.front(), grant_floor, effective_lease,
                                          /*renewed=*/!lease)) {
              sent_at = *granted;
              return {std::nullopt, detail::WakeupHub::SharedChannel::ignored};
            }
          }
          // A hint of 0: expired permits are left that one call could not
          // reclaim; the next call reclaims more.
          for (int round = 1;; ++round) {
            Call call = make_call(*core_, "acquire");
            call.args.push_back(std::to_string(permits));
            call.args.push_back(std::to_string(call.now_ms + lease_ms));
            call.args.push_back(std::to_string(kNeverExpiresMs));
            call.args.insert(call.args.end(), stored.begin(), stored.end());
            if (fleet) {
              call.args.push_back(core_->layout.wake_channel(client.id));
              call.args.push_back(std::to_string(call.now_ms));
              call.args.emplace_back(will_wait ? "1" : "0");
              others_waiting = client.wakeups->waiting_on(core_->channel) > (will_wait ? 1 : 0);
              call.args.emplace_back(others_waiting ? "1" : "0");
              call.args.push_back(std::to_string(detail::kFleetSemaphoreRetryMs));
            }
            const Instant now = client.runtime->now();
            if (handoff) {  // an offer's arguments (a success withdraws one)
              call.args.push_back(ids.front());
              call.args.push_back(std::to_string(now.time_since_epoch().count()));
              call.args.push_back(std::to_string(lease_ms));
            }
            call.args.push_back(identity);  // last, after the optional groups
            sent_at = now;
            sent_any = true;
            const Reply reply = run(*core_, call);
            const auto values = detail::integer_array_reply(kScript, reply, 2, fleet ? 3 : 2);
            if (values[0] == 1 && values[1] == 0 && client.watchdog->restarted_since(sent_at)) {
              // A restart found while the call was in flight: the process
              // that answered may be the one that restarted, the permits
              // gone with its keyspace. Never handed out (Watchdog::watch
              // would lose them at once): sent again with the same ids,
              // which re-arms them if the new process has them and takes
              // them afresh if not (the script's retry rule).
              if (round >= kMaxReclaimRounds) {
                throw ConnectionError("the server restarted again and again while permits of " +
                                      in_quotes(core_->name) + " were acquired");
              }
              continue;
            }
            if (values[0] == 1 && values[1] == 0) {
              if (fleet) success_sent_others = others_waiting;
              more_left = values.size() == 3 && values[2] == 1;
              return {std::nullopt, detail::WakeupHub::SharedChannel::ignored};
            }
            if (values[0] != 0 || values[1] < -1 || (fleet && values.size() != 3)) {
              detail::throw_unexpected(kScript, reply, "{1, 0} or {0, hint >= -1}");
            }
            // A failure: no grant was made before this try.
            if (offers) grant_floor = now;
            if (values[1] != 0 || round == kMaxReclaimRounds) {
              if (!fleet) return detail::TryOutcome(values[1]);
              const std::int64_t hint =
                  values[1] < 0 ? detail::kFleetSemaphoreRetryMs : std::min(values[1], detail::kFleetSemaphoreRetryMs);
              return {hint, values[2] == 1 ? detail::WakeupHub::SharedChannel::ignored
                                           : detail::WakeupHub::SharedChannel::heeded};
            }
          }
        },
        &timing, client.wait_subject(core_->name, Flavor::semaphore));
    acquired = co_await std::move(waiting);
  } catch (const std::exception&) {
    failure = std::current_exception();
  }
  if (failure) {
    if (will_wait && sent_any) {
      const std::optional<detail::GiveBack> back = give_back();
      detail::leave_wake_registry_reporting_errors(client, core_->layout, core_->channel, back ? &*back : nullptr);
    }
    std::rethrow_exception(failure);
  }
  if (!acquired) {
    client.metrics->failed_try();
    if (will_wait && sent_any) {
      const std::optional<detail::GiveBack> back = give_back();
      detail::leave_wake_registry(client, core_->layout, core_->channel, back ? &*back : nullptr);
    }
    co_return std::nullopt;
  }
  client.acquired(core_->name, Flavor::semaphore, timing);
  if (success_sent_others) {
    detail::settle_registration_after_success(client, core_->layout, core_->channel,
                                              {.others_sent = *success_sent_others, .permits_left = more_left});
  }

  std::vector<PermitId> acquired_ids;
  for (const std::string& id : ids) {
    watch(core_, id, sent_at, effective_lease, /*renewed=*/!lease, lock_delay_);
    acquired_ids.emplace_back(id);
  }
  co_return acquired_ids;
}

// ---- releasing ----------------------------------------------------------------

void PermitSemaphore::release(const PermitId& permit) { release(std::span<const PermitId>(&permit, 1)); }

void PermitSemaphore::release(std::span<const PermitId> permits) {
  if (const std::optional<PermitId> not_held = release_all(permits)) {
    throw PermitNotHeldError("permit " + not_held->hex() + " of semaphore " + in_quotes(core_->name) +
                             " is not held (expired, released or unknown); nothing was released");
  }
}

bool PermitSemaphore::try_release(const PermitId& permit) { return try_release(std::span<const PermitId>(&permit, 1)); }

bool PermitSemaphore::try_release(std::span<const PermitId> permits) { return !release_all(permits).has_value(); }

std::optional<PermitId> PermitSemaphore::release_all(std::span<const PermitId> permits) {
  const std::vector<std::string> ids = hex_ids(permits, "release");
  if (ids.empty()) return std::nullopt;
  // A permit past its local deadline was lost then, whether or not the
  // expiry timer has had its turn (as a lock's, LockEngine::prepare_release).
  for (const std::uint64_t watch_id : watch_ids_of(*core_, ids)) core_->client->watchdog->lose_if_due(watch_id);
  {
    // A permit lost while believed held is not the caller's to release,
    // whatever trace of it Redis still has: all or nothing, so none is.
    MutexLock guard(core_->mutex);
    for (const std::string& id : ids) {
      if (core_->lost.take(id)) return PermitId(id);
    }
  }
  Call call = make_call(*core_, "release");
  const std::vector<std::string> stored = stored_ids(ids);
  call.args.insert(call.args.end(), stored.begin(), stored.end());
  // A renewal that finds a permit gone while this release is on its way is
  // held back: the release decides whether it was a loss (Watchdog).
  detail::Watchdog& watchdog = *core_->client->watchdog;
  const std::vector<std::uint64_t> watch_ids = watch_ids_of(*core_, ids);
  for (const std::uint64_t watch_id : watch_ids) watchdog.begin_release(watch_id);
  const auto end_release = [&] {
    for (const std::uint64_t watch_id : watch_ids) watchdog.end_release(watch_id);
  };
  std::string not_held;
  try {
    const Reply reply = run(*core_, call);
    const auto values = detail::integer_array_reply(kScript, reply, 2);
    const auto count = static_cast<std::int64_t>(ids.size());
    if (values[0] == 1 && values[1] == count) {
      forget(*core_, ids);
      return std::nullopt;
    }
    if (values[0] != 0 || values[1] < 1 || values[1] > count) {
      detail::throw_unexpected(kScript, reply, "{1, count} or {0, index of the id not held}");
    }
    not_held = ids[static_cast<std::size_t>(values[1] - 1)];
  } catch (...) {
    // As for a lock: a release that failed, whatever the error, stops the
    // renewals; the permits stay held (a retry works) until their deadlines.
    for (const std::uint64_t watch_id : watch_ids) watchdog.stop_renewing(watch_id);
    end_release();
    throw;
  }
  // That one is gone (the caller learns it here); the others are still held
  // (all or nothing: none was released).
  forget_lost(*core_, {not_held});
  end_release();
  return PermitId(not_held);
}

bool PermitSemaphore::update_lease(const PermitId& permit, Duration lease) {
  detail::Watchdog& watchdog = *core_->client->watchdog;
  const std::int64_t lease_ms = detail::lease_ms_of(detail::server_lease(lease, lock_delay_));
  watchdog.timing().check(lease, "lease");
  {
    // Lost while believed held: not the caller's any more.
    MutexLock guard(core_->mutex);
    if (core_->lost.contains(permit.hex())) return false;
  }
  // Watched here: its deadline moves with the lease (Watchdog, extending).
  const std::vector<std::uint64_t> watch_ids = watch_ids_of(*core_, {permit.hex()});
  if (!watch_ids.empty() && !watchdog.begin_extend(watch_ids.front())) return false;  // lost meanwhile
  const auto finish = [&](bool updated, Instant sent_at) {
    if (!watch_ids.empty()) watchdog.finish_extend(watch_ids.front(), updated, sent_at, lease);
  };
  Call call = make_call(*core_, "update_lease");
  call.args.push_back(permit.bytes());
  call.args.push_back(std::to_string(call.now_ms + lease_ms));
  const Instant sent_at = core_->client->runtime->now();
  bool updated = false;
  try {
    updated = flag_reply(run(*core_, call));
  } catch (...) {
    finish(false, sent_at);
    throw;
  }
  // The lease is fixed now: its deadline is kept, no longer renewed.
  finish(updated, sent_at);
  if (!updated) forget_lost(*core_, {permit.hex()});
  return updated;
}

void PermitSemaphore::extend(const PermitId& permit, Duration lease) {
  if (!update_lease(permit, lease)) {
    throw PermitNotHeldError("cannot extend permit " + permit.hex() + " of semaphore " + in_quotes(core_->name) +
                             ": it is not held (expired, lost, released or unknown)");
  }
}

// ---- queries ------------------------------------------------------------------

std::int64_t PermitSemaphore::available_permits() { return query(0).available; }
std::int64_t PermitSemaphore::acquired_permits() { return query(0).held; }
std::int64_t PermitSemaphore::total_permits() { return query(0).total(); }
PermitSemaphoreStatus PermitSemaphore::status() { return query(kMaxListedPermits); }

PermitSemaphoreStatus PermitSemaphore::query(std::int64_t max_listed) {
  TURNSTILE_CHECK(max_listed >= 0 && max_listed <= kMaxListedPermits);
  Call call = make_call(*core_, "status");
  call.args.push_back(std::to_string(max_listed));
  call.args.push_back(std::to_string(kNeverExpiresMs));
  const Reply reply = run(*core_, call);
  const char* expected = "{available, held, (id, ms left)...}";
  if (!reply.is_array() || reply.as_array().size() < 2 || reply.as_array().size() % 2 != 0) {
    detail::throw_unexpected(kScript, reply, expected);
  }
  const std::vector<Reply>& elements = reply.as_array();
  PermitSemaphoreStatus status;
  status.available = detail::integer_reply(kScript, elements[0]);
  status.held = detail::integer_reply(kScript, elements[1]);
  const auto listed = static_cast<std::int64_t>(elements.size() / 2 - 1);
  if (status.held < 0 || listed > max_listed || listed > status.held)
    detail::throw_unexpected(kScript, reply, expected);
  for (std::size_t i = 2; i < elements.size(); i += 2) {
    if (!elements[i].is_bulk()) detail::throw_unexpected(kScript, reply, expected);
    const std::int64_t remaining_ms = detail::integer_reply(kScript, elements[i + 1]);
    if (remaining_ms < -1) detail::throw_unexpected(kScript, reply, expected);
    // Members are 16 raw bytes (Redisson since 3.17.0, turnstile since
    // then too); 32 hex digits were stored by older versions of both.
    const std::string& member = elements[i].as_string();
    if (member.size() != kPermitIdBytes && member.size() != kPermitIdLength) {
      detail::throw_unexpected(kScript, reply, "permit ids of 16 bytes or 32 hex digits");
    }
    std::optional<PermitId> id;
    try {
      id.emplace(member);
    } catch (const InvalidArgumentError&) {
      detail::throw_unexpected(kScript, reply, "permit ids of 16 bytes or 32 hex digits");
    }
    HeldPermit held{.id = std::move(*id), .remaining = std::nullopt};
    if (remaining_ms >= 0) held.remaining = std::chrono::milliseconds(remaining_ms);
    status.permits.push_back(std::move(held));
  }
  return status;
}

void PermitSemaphore::set_lost_handler(PermitLostHandler handler) {
  MutexLock guard(core_->mutex);
  core_->lost_handler = std::move(handler);
}

void PermitSemaphore::set_lost_handler(LockLostHandler handler) {
  if (!handler) {
    set_lost_handler(PermitLostHandler());
    return;
  }
  set_lost_handler(PermitLostHandler([handler = std::move(handler)](const PermitLost& lost) {
    handler(LockLost{.lock_name = lost.semaphore_name, .owner = lost.permit.hex(), .reason = lost.reason});
  }));
}

// ---- Holdable ----

void PermitSemaphore::require_total(std::int64_t total) {
  detail::check_permit_count(total, "require_total");
  total_->require(total);
}

void PermitSemaphore::settle_total() {
  if (const std::optional<std::int64_t> total = total_->unsettled()) {
    const PermitTotal found = try_set_permits_or_get(*total);
    if (found.total != *total) {
      throw MismatchError(in_quotes(name()) + " has " + std::to_string(found.total) + " permits, not " +
                          std::to_string(*total) + ": every user of a name must agree on the number");
    }
    total_->settled();
  }
}

PermitSemaphore::PermitSemaphore(const PermitSemaphore&) = default;

namespace detail {

// One permit as a value (turnstile/hold.h): owned by its id.
class PermitHold final : public HoldRecord {
 public:
  PermitHold(const PermitSemaphore& semaphore, const PermitId& permit)
      : HoldRecord(Flavor::semaphore, semaphore.name(), permit.hex()), semaphore_(semaphore) {
    permit_ids.push_back(permit.hex());
    PermitSemaphoreCore& core = *semaphore_.core_;
    MutexLock guard(core.mutex);
    auto it = core.watched.find(owner);
    TURNSTILE_CHECK(it != core.watched.end());  // watched since it was taken
    loss_ = it->second.loss;
  }

  bool held() const override {
    if (released() || loss_.stop_requested()) return false;
    PermitSemaphoreCore& core = *semaphore_.core_;
    std::uint64_t watch_id = 0;
    {
      MutexLock guard(core.mutex);
      auto it = core.watched.find(owner);
      if (it == core.watched.end()) return false;
      watch_id = it->second.watch_id;
    }
    const std::optional<Instant> deadline = core.client->watchdog->deadline(watch_id);
    return deadline && *deadline > core.client->runtime->now();
  }
  std::stop_token loss_token() const override { return loss_.get_token(); }
  void extend(Duration lease) override { semaphore_.extend(PermitId(owner), lease); }
  Runtime& runtime() const override { return *semaphore_.core_->client->runtime; }

 private:
  void release(bool strict) override {
    const PermitId permit(owner);
    bool told = false;  // lost while believed held: told when it happened
    {
      MutexLock guard(semaphore_.core_->mutex);
      told = semaphore_.core_->lost.contains(owner);
    }
    // Found gone at release (expired or deleted before a renewal could
    // tell): a loss, told now, the one way whichever form of release found
    // it (release_all() requested its loss token); the strict form then
    // throws.
    if (const std::optional<PermitId> not_held = semaphore_.release_all(std::span<const PermitId>(&permit, 1))) {
      if (!told) report_lost(*semaphore_.core_, owner, LockLostReason::gone);
      if (strict) {
        throw PermitNotHeldError("permit " + not_held->hex() + " of semaphore " + in_quotes(semaphore_.name()) +
                                 " is not held (expired, released or unknown); nothing was released");
      }
    }
  }
  void report_background_error(std::exception_ptr error) const noexcept override {
    semaphore_.core_->client->report_background_error(error);
  }

  mutable PermitSemaphore semaphore_;
  std::stop_source loss_;
};

}  // namespace detail

LockHold PermitSemaphore::try_acquire_hold(const AcquireOptions& options) {
  settle_total();
  const std::optional<std::vector<PermitId>> permits =
      acquire_by(1, options.lease, core_->client->runtime->deadline_after(options.wait), options.stop);
  if (!permits) return {};
  return detail::wrap_hold(std::make_shared<detail::PermitHold>(*this, permits->front()));
}

Future<LockHold> PermitSemaphore::try_acquire_hold_async(const AcquireOptions& options) {
  if (options.lease) (void)detail::lease_ms_of(*options.lease);
  const Instant deadline = core_->client->runtime->deadline_after(options.wait);
  // A copy of the handle: the operation outlives this object if it must.
  auto semaphore = std::shared_ptr<PermitSemaphore>(new PermitSemaphore(*this));
  auto acquiring = semaphore->acquire_task(detail::WaitStyle::suspending, 1, options.lease, deadline, options.stop);
  return detail::start_future<LockHold>(
      *core_->client->runtime, std::move(acquiring),
      [semaphore](std::optional<std::vector<PermitId>> permits) -> LockHold {
        if (!permits) return {};
        return detail::wrap_hold(std::make_shared<detail::PermitHold>(*semaphore, permits->front()));
      });
}

// ---- asynchronous forms: no thread of their own (locks/engine/task.h); each keeps
// a copy of the handle, so this object may go first ---------------------------

Future<PermitId> PermitSemaphore::acquire_async(std::optional<Duration> lease) {
  if (lease) (void)detail::lease_ms_of(*lease);
  auto semaphore = std::shared_ptr<PermitSemaphore>(new PermitSemaphore(*this));
  auto acquiring = semaphore->acquire_task(detail::WaitStyle::suspending, 1, lease, kNoDeadline, {});
  return detail::start_future<PermitId>(*core_->client->runtime, std::move(acquiring),
                                        [semaphore](std::optional<std::vector<PermitId>> permits) {
                                          TURNSTILE_CHECK(permits && permits->size() == 1);
                                          return std::move(permits->front());
                                        });
}

Future<std::optional<PermitId>> PermitSemaphore::try_acquire_async(const AcquireOptions& options) {
  if (options.lease) (void)detail::lease_ms_of(*options.lease);
  const Instant deadline = core_->client->runtime->deadline_after(options.wait);
  auto semaphore = std::shared_ptr<PermitSemaphore>(new PermitSemaphore(*this));
  auto acquiring = semaphore->acquire_task(detail::WaitStyle::suspending, 1, options.lease, deadline, options.stop);
  return detail::start_future<std::optional<PermitId>>(
      *core_->client->runtime, std::move(acquiring),
      [semaphore](std::optional<std::vector<PermitId>> permits) -> std::optional<PermitId> {
        if (!permits) return std::nullopt;
        return std::move(permits->front());
      });
}

Future<void> PermitSemaphore::release_async(const PermitId& permit) {
  auto semaphore = std::shared_ptr<PermitSemaphore>(new PermitSemaphore(*this));
  return detail::post_future<void>(*core_->client->runtime, [semaphore, permit] { semaphore->release(permit); });
}

}  // namespace turnstile
