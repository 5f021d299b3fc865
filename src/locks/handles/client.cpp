#include "turnstile/client.h"

#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <utility>

#include "core/check.h"
#include "locks/engine/lock_access.h"
#include "locks/handles/client_core.h"
#include "locks/flavors/lock_flavors.h"
#include "locks/engine/measured_backend.h"
#include "locks/engine/server_checking_backend.h"
#include "turnstile/errors.h"
#include "turnstile/key_layout.h"

namespace turnstile {
namespace {

// A version-4 UUID from the runtime's randomness (seeded in simulation).
std::string random_uuid(Runtime& runtime) {
  std::uint64_t high = runtime.random_u64();
  std::uint64_t low = runtime.random_u64();
  high = (high & ~0xf000ull) | 0x4000ull;                       // version 4
  low = (low & 0x3fffffffffffffffull) | 0x8000000000000000ull;  // variant 10
  char text[37];
  std::snprintf(text, sizeof(text), "%08x-%04x-%04x-%04x-%012llx", static_cast<unsigned>(high >> 32),
                static_cast<unsigned>((high >> 16) & 0xffff), static_cast<unsigned>(high & 0xffff),
                static_cast<unsigned>(low >> 48), static_cast<unsigned long long>(low & 0xffffffffffffull));
  return text;
}

void print_background_error(std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& exception) {
    std::fprintf(stderr, "turnstile: %s\n", exception.what());
  } catch (...) {
    std::fprintf(stderr, "turnstile: unknown background error\n");
  }
}

// Host, pid, command and label of this process (ClientOptions).
HolderIdentity this_process_as_holder(const ClientOptions& options) {
  HolderIdentity holder;
  std::array<char, kMaxHolderHostBytes + 1> host{};
  if (gethostname(host.data(), host.size() - 1) == 0) holder.host = host.data();
  holder.pid = getpid();
  holder.command = options.holder_command;
  if (holder.command.empty()) {
    std::array<char, 17> name{};  // the kernel's name: 15 bytes and a NUL
    if (prctl(PR_GET_NAME, name.data()) == 0) holder.command = name.data();
  }
  holder.command = holder_text(holder.command, kMaxHolderCommandBytes);
  holder.label = holder_text(options.holder_label, kMaxHolderLabelBytes);
  return holder;
}

// A lock-delay (ClientOptions::lock_delay, LockOptions::lock_delay) within
// [0, kMaxLockDelay].
void check_lock_delay(Duration lock_delay) {
  if (lock_delay < Duration::zero() || lock_delay > kMaxLockDelay) {
    throw InvalidArgumentError(
        "lock_delay must be within [0, " + std::to_string(kMaxLockDelay.count()) + "] ms (an hour), got " +
        std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(lock_delay).count()) + " ms");
  }
}

}  // namespace

namespace detail {

ClientCore::ClientCore(std::shared_ptr<Backend> backend_in, std::shared_ptr<Runtime> runtime_in,
                       ClientOptions options_in)
    : user_backend(std::move(backend_in)), runtime(std::move(runtime_in)), options(std::move(options_in)) {
  TURNSTILE_CHECK(user_backend != nullptr && runtime != nullptr);
  events = std::make_shared<const EventLog>(options.event_sink, options.event_level, *runtime);
  backend = std::make_shared<MeasuredBackend>(user_backend, runtime, metrics);
  std::shared_ptr<ServerCheckingBackend> checking;
  if (options.server_check == ServerCheck::warn) {
    checking = std::make_shared<ServerCheckingBackend>(
        backend, runtime, [this](std::exception_ptr error) { report_background_error(std::move(error)); });
    backend = checking;
  }
  if (options.lease <= std::chrono::milliseconds::zero() || options.lease > kMaxLease) {
    throw InvalidArgumentError("lease must be within (0, " + std::to_string(kMaxLease.count()) + "] ms, got " +
                               std::to_string(options.lease.count()) + " ms");
  }
  if (!(options.clock_drift_factor >= 0 && options.clock_drift_factor < kMaxClockDriftFactor)) {
    throw InvalidArgumentError("clock_drift_factor must be within [0, " + std::to_string(kMaxClockDriftFactor) +
                               "), got " + std::to_string(options.clock_drift_factor));
  }
  if (options.stop_margin < Duration::zero()) throw InvalidArgumentError("stop_margin must not be negative");
  if (options.max_waiting == 0) throw InvalidArgumentError("max_waiting must be at least 1");
  if (options.max_hold && (*options.max_hold <= Duration::zero() || *options.max_hold > kMaxLease)) {
    throw InvalidArgumentError("max_hold must be above zero and at most " + std::to_string(kMaxLease.count()) +
                               " ms (16 weeks)");
  }
  check_lock_delay(options.lock_delay);
  if (options.wipe_check_period < Duration::zero())
    throw InvalidArgumentError("wipe_check_period must not be negative");
  if (!options.on_background_error) options.on_background_error = print_background_error;
  id = random_uuid(*runtime);
  holder = this_process_as_holder(options);
  identity_writer.emplace(holder);
  // Copies, not `this`: a renewal or a wipe check may still run while the
  // client goes.
  const std::function<void(std::exception_ptr)> tell_background_error =
      [told = events, handler = options.on_background_error](std::exception_ptr error) {
        told->background_error(error);
        handler(std::move(error));
      };
  watchdog = std::make_shared<Watchdog>(
      *backend, *runtime, options.lease,
      LeaseTiming{.clock_drift_factor = options.clock_drift_factor, .stop_margin = options.stop_margin},
      tell_background_error, options.max_hold, metrics,
      options.on_lease_deadline ? std::function<void(const std::string&, Instant)>(
                                      [told = options.on_lease_deadline](const std::string& key, Instant deadline) {
                                        told(LeaseDeadline{.key = key, .deadline = deadline});
                                      })
                                : nullptr,
      events);
  if (options.lease_warning < Duration::zero()) throw InvalidArgumentError("lease_warning must not be negative");
  if (options.lease_warning > Duration::zero()) {
    // Healthy renewals keep two thirds of a window ahead (ClientOptions).
    const Duration most = watchdog->timing().window(options.lease) / 2;
    if (options.lease_warning > most) {
      throw InvalidArgumentError(
          "lease_warning must be at most half the watchdog's window (" +
          std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(most).count()) + " ms with a lease of " +
          std::to_string(options.lease.count()) + " ms), or healthy renewals would warn; got " +
          std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(options.lease_warning).count()) + " ms");
    }
    watchdog->set_lease_warning(
        options.lease_warning,
        [told = options.on_lease_at_risk](const std::string& key, Instant deadline, Duration remaining) {
          if (told) told(LeaseAtRisk{.key = key, .deadline = deadline, .remaining = remaining});
        });
  }
  // Renewals as frequent as the check find a wipe as soon: no check then.
  if (options.wipe_check_period > Duration::zero() && options.wipe_check_period < watchdog->renewal_period()) {
    watchdog->set_wipe_check(
        std::make_unique<WipeCheck>(*backend, *runtime, id, options.wipe_check_period, tell_background_error));
  }
  if (checking) {
    checking->set_key_lost_handler([watched = std::weak_ptr<Watchdog>(watchdog)](const std::string& key) {
      if (const std::shared_ptr<Watchdog> alive = watched.lock()) alive->renew_key_now(key);
    });
  }
  wakeups = std::make_unique<WakeupHub>(*backend, *runtime, options.max_waiting);
  restart_watch = backend->watch_restarts([weak = std::weak_ptr<Watchdog>(watchdog), told = events,
                                           restarts = server_restarts](const ServerRestart& restart) {
    restarts->fetch_add(1);
    if (const std::shared_ptr<Watchdog> alive = weak.lock()) alive->server_restarted();
    told->reconnected(restart.endpoint, /*server_restarted=*/true);
  });
  if (events->on(EventLevel::warning)) {
    reconnect_watch = backend->watch_reconnects(
        [told = events](const ServerRestart& reconnect) { told->reconnected(reconnect.endpoint, false); });
  }
}

std::string ClientCore::holder_identity(const std::string& owner, Duration lock_delay) const {
  TURNSTILE_CHECK(identity_writer.has_value());
  return identity_writer->value(owner, runtime->wall_clock_ms(),
                                std::chrono::duration_cast<std::chrono::milliseconds>(lock_delay).count());
}

std::string ClientCore::server_lease_ms_arg(Duration lease, Duration lock_delay) {
  TURNSTILE_CHECK(lock_delay >= Duration::zero());
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(server_lease(lease, lock_delay)).count();
  TURNSTILE_CHECK(ms >= 1);
  return std::to_string(ms);
}

Duration ClientCore::lock_delay_of(const LockOptions& lock_options) const {
  if (!lock_options.lock_delay) return options.lock_delay;
  check_lock_delay(*lock_options.lock_delay);
  return *lock_options.lock_delay;
}

std::string ClientCore::owner_of_current_task() const { return id + ":" + std::to_string(runtime->current_task_id()); }

std::string ClientCore::next_hold_owner() {
  const std::uint64_t hold_id = next_hold_id_.fetch_add(1, std::memory_order_relaxed);
  TURNSTILE_CHECK(hold_id >= kFirstHoldId);  // 2^62 holds later it would wrap
  return id + ":" + std::to_string(hold_id);
}

void ClientCore::report_background_error(std::exception_ptr error) const noexcept {
  events->background_error(error);
  try {
    options.on_background_error(error);
  } catch (...) {
    print_background_error(error);
  }
}

void ClientCore::acquired(std::string_view name, Flavor flavor, const AcquisitionTiming& timing) const {
  const Instant now = runtime->now();
  metrics->acquired(flavor, timing, now);
  events->acquired(name, flavor, now - timing.started);
}

}  // namespace detail

Client::Client(std::shared_ptr<Backend> backend, std::shared_ptr<Runtime> runtime, ClientOptions options)
    : core_(std::make_shared<detail::ClientCore>(std::move(backend), std::move(runtime), std::move(options))) {}

Client::Client(std::shared_ptr<Backend> backend, ClientOptions options)
    : Client(std::move(backend), make_real_runtime(), std::move(options)) {}

Client::~Client() {
  core_->restart_watch.reset();
  core_->reconnect_watch.reset();
  core_->watchdog->stop();
}

const std::string& Client::id() const { return core_->id; }

ServerSafety Client::check_server() const { return turnstile::check_server(*core_->user_backend); }
std::string Client::current_owner() const { return core_->owner_of_current_task(); }

ReentrantLock Client::lock(std::string_view name, const LockOptions& options) {
  return ReentrantLock(
      detail::LockAccess::make(std::make_shared<detail::ReentrantEngine>(core_, name, /*fenced=*/false, options)));
}
ReentrantLock Client::fenced_lock(std::string_view name, const LockOptions& options) {
  return ReentrantLock(
      detail::LockAccess::make(std::make_shared<detail::ReentrantEngine>(core_, name, /*fenced=*/true, options)));
}
TokenLock Client::token_lock(std::string_view name, const LockOptions& options) {
  return TokenLock(detail::LockAccess::make(std::make_shared<detail::TokenEngine>(core_, name, options)));
}
FairLock Client::fair_lock(std::string_view name, const FairLockOptions& options) {
  return FairLock(detail::LockAccess::make(std::make_shared<detail::FairEngine>(core_, name, options)));
}
CountingSemaphore Client::counting_semaphore(std::string_view name) { return CountingSemaphore(core_, name); }
PermitSemaphore Client::permit_semaphore(std::string_view name, const LockOptions& options) {
  return PermitSemaphore(core_, name, options);
}
ReadWriteLock Client::read_write_lock(std::string_view name, const LockOptions& options) {
  return ReadWriteLock(
      ReadLock(detail::LockAccess::make(std::make_shared<detail::ReadEngine>(core_, name, options))),
      WriteLock(detail::LockAccess::make(std::make_shared<detail::WriteEngine>(core_, name, options))));
}

Backend& Client::backend() const { return *core_->user_backend; }

MetricsSnapshot Client::metrics() const {
  MetricsSnapshot snapshot = core_->metrics->snapshot();
  const BackendCounters counters = core_->user_backend->counters();
  snapshot.reconnects = counters.reconnects;
  snapshot.script_reloads = counters.script_reloads;
  return snapshot;
}
Runtime& Client::runtime() const { return *core_->runtime; }
const ClientOptions& Client::options() const { return core_->options; }

void check_lock_name(std::string_view name, std::string_view key, std::string_view what) {
  if (name.empty()) throw InvalidArgumentError(std::string(what) + " must not be empty");
  if (name.size() > kMaxNameBytes) {
    throw InvalidArgumentError(std::string(what) + " is " + std::to_string(name.size()) + " bytes, longer than " +
                               std::to_string(kMaxNameBytes));
  }
  const bool whole_tag =
      key.size() > 2 && key.front() == '{' && key.back() == '}' && key.find('{', 1) == std::string_view::npos;
  if (whole_tag) {
    const std::string inner(key.substr(1, key.size() - 2));
    throw InvalidArgumentError(std::string(what) + " " + in_quotes(key) +
                               " is one whole hash tag: its side keys would be those of " + in_quotes(inner) +
                               " (Redisson's {name} rule); use " + in_quotes(inner));
  }
}

}  // namespace turnstile

namespace turnstile::detail {

std::shared_ptr<LockCore> ClientCore::lock_core(std::shared_ptr<ClientCore> self, const std::string& name,
                                                const std::string& channel, std::string_view family) {
  TURNSTILE_CHECK(self.get() == this);
  std::string registry_key(family);
  registry_key += ':';
  registry_key += name;
  MutexLock guard(locks_mutex_);
  if (auto existing = locks_[registry_key].lock()) return existing;
  // Forget entries whose locks are all gone, so the registry stays bounded
  // by the number of live lock objects (twice, plus 64).
  prune_expired(locks_, locks_pruned_size_);
  auto core = std::make_shared<LockCore>();
  core->client = std::move(self);
  core->name = name;
  core->channel = channel;
  locks_[registry_key] = core;
  return core;
}

}  // namespace turnstile::detail

namespace turnstile::detail {

void LostOwners::add(const std::string& owner, std::string token, std::int64_t holds) {
  TURNSTILE_CHECK(holds >= 1);
  if (owners_.size() >= kMaxLostOwners) {
    auto oldest = std::min_element(owners_.begin(), owners_.end(),
                                   [](const auto& a, const auto& b) { return a.second.order < b.second.order; });
    owners_.erase(oldest);
  }
  owners_[owner] = Lost{next_++, std::move(token), holds};
  TURNSTILE_CHECK(owners_.size() <= kMaxLostOwners);
}

std::optional<std::string> LostOwners::take(const std::string& owner) {
  auto it = owners_.find(owner);
  if (it == owners_.end()) return std::nullopt;
  TURNSTILE_CHECK(it->second.holds >= 1);
  if (--it->second.holds > 0) return it->second.token;
  std::string token = std::move(it->second.token);
  owners_.erase(it);
  return token;
}

}  // namespace turnstile::detail
