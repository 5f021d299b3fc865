#include "locks/engine/acquire_wait.h"

#include <algorithm>
#include <memory>
#include <stop_token>
#include <string>

#include "core/check.h"
#include "locks/engine/async_signal.h"
#include "turnstile/client.h"
#include "turnstile/errors.h"

namespace turnstile::detail {
namespace {

// How often a joining waiter looks whether a leave of its channel's wake
// registration is still under way, and how many times at most: past the
// give-up grace (kGiveUpGraceMs) twice over, the leave is abandoned anyway.
constexpr Duration kLeavePoll = std::chrono::milliseconds(1);
constexpr int kMaxLeavePolls = 200;

// Transient failures in a row, and when the first of them happened.
class Outage {
 public:
  Outage(Runtime& runtime, const WaitLimits& limits) : runtime_(runtime), limits_(limits) {}

  // Called with a transient failure in hand: rethrows it if the wait must
  // end, else returns how long to back off.
  Duration on_failure() {
    const Instant now = runtime_.now();
    if (!started_) started_ = now;
    if (now >= limits_.deadline || now - *started_ >= limits_.unreachable_limit) throw;
    const Duration base = delay_;
    delay_ = std::min(delay_ * 2, kMaxTransientRetryDelay);
    const auto jitter_span = static_cast<std::uint64_t>(base.count() / 2);
    const Duration jitter(static_cast<Duration::rep>(jitter_span == 0 ? 0 : runtime_.random_u64() % jitter_span));
    return base - jitter;
  }
  void on_success() {
    started_.reset();
    delay_ = kMinTransientRetryDelay;
  }

 private:
  Runtime& runtime_;
  const WaitLimits& limits_;
  std::optional<Instant> started_;
  Duration delay_ = kMinTransientRetryDelay;
};

// Counts a waiter from its first sleep to the end of its wait.
class WaiterGauge {
 public:
  explicit WaiterGauge(const WaitSubject& subject) : subject_(subject) {}
  ~WaiterGauge() {
    if (counted_) subject_.metrics->waiter_left(subject_.flavor);
  }
  WaiterGauge(const WaiterGauge&) = delete;
  WaiterGauge& operator=(const WaiterGauge&) = delete;
  void asleep() {
    if (counted_ || subject_.metrics == nullptr) return;
    counted_ = true;
    subject_.metrics->waiter_joined(subject_.flavor);
  }

 private:
  const WaitSubject& subject_;
  bool counted_ = false;
};

}  // namespace

bool is_transient(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const TlsVerificationError&) {
    return false;  // a certificate does not fix itself: say so at once
  } catch (const ConnectionError&) {
    return true;  // reset, refused, timed out, cluster redirects exhausted
  } catch (const BusyError&) {
    return true;
  } catch (const ServerNotReadyError&) {
    return true;  // loading its dataset after a restart, or a replica without its master
  } catch (const NoScriptError&) {
    return true;  // flushed again right after the backend loaded it: the next try loads it again
  } catch (const ReadOnlyError&) {
    return true;  // a failover in progress: the old master demoted
  } catch (const NoReplicasError&) {
    return true;  // min-replicas-to-write: a replica lost, or promoted away (a failover)
  } catch (const ReplicaSyncError&) {
    return true;  // undone: its replica (syncing, lagging) may catch up
  } catch (const ServerError& server_error) {
    const std::string_view code = server_error.code();
    return code == "TRYAGAIN" || code == "CLUSTERDOWN";
  } catch (...) {
    return false;
  }
}

bool never_sent(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const PoolExhaustedError&) {
    return true;
  } catch (...) {
    return false;
  }
}

void check_lease(const std::optional<Duration>& lease) {
  if (!lease) return;
  if (*lease < std::chrono::milliseconds(1)) {
    throw InvalidArgumentError("lease must be at least 1 ms, got " +
                               std::to_string(std::chrono::duration_cast<std::chrono::microseconds>(*lease).count()) +
                               " us");
  }
  if (*lease > kMaxLease) {
    throw InvalidArgumentError("lease must be at most " + std::to_string(kMaxLease.count()) + " ms (16 weeks), got " +
                               std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(*lease).count()) +
                               " ms");
  }
}

bool sleep_unless_stopped(Runtime& runtime, Instant until, const std::stop_token& stop) {
  if (!stop.stop_possible()) {
    runtime.sleep_until(until);
    return true;
  }
  const std::unique_ptr<Event> woken = runtime.make_event();
  // A stop request wakes the sleeper, which then sees it.
  const std::stop_callback on_stop(stop, [event = woken.get()] { event->notify(); });
  while (!stop.stop_requested() && runtime.now() < until) (void)woken->wait_until(until);
  return !stop.stop_requested();
}

Task<bool> acquire_with_wait(WaitStyle style, WakeupHub& hub, Runtime& runtime, std::string channel, WakeOptions wake,
                             WaitLimits limits, TryOnce try_once, AcquisitionTiming* timing, WaitSubject subject) {
  const Instant deadline = limits.deadline;
  AcquisitionTiming unused;
  if (timing == nullptr) timing = &unused;
  *timing = AcquisitionTiming{.started = runtime.now()};
  Outage outage(runtime, limits);
  WakeupHub::Waiter waiter =
      hub.join(channel, std::move(wake),
               deadline > runtime.now() ? WakeupHub::Admission::bounded : WakeupHub::Admission::unbounded);
  WaiterGauge gauge(subject);
  const EventLog* const events = subject.events;
  std::int64_t sleeps_after_tries = 0;
  // The latest try's near pace (TryOutcome::near_retry_after_ms).
  std::optional<std::int64_t> near_retry_after_ms;
  // The channel's last waiter may have just left, its leave of the wake
  // registry still on its way: run after this waiter's first try, it would
  // remove the registration that try makes, and no release would pick this
  // process. The first try waits for it (answered or abandoned within the
  // give-up grace), unless this acquisition may not wait.
  for (int polls = 0; polls < kMaxLeavePolls && hub.leave_in_flight(channel); ++polls) {
    const Instant now = runtime.now();
    if (now >= deadline) break;
    Task<bool> pause = sleep_unless_stopped(runtime, style, std::min(deadline, now + kLeavePoll), limits.stop);
    if (!co_await std::move(pause)) co_return false;
  }
  // When the channel is subscribed already (another local waiter has it,
  // or it lingers from a recent wait), one try suffices before sleeping.
  bool first_try = !waiter.subscribe_if_confirmed();
  for (std::uint64_t round = 0;; ++round) {
    TURNSTILE_CHECK(round < kMaxWaitRounds);
    if (limits.stop.stop_requested()) co_return false;
    std::optional<std::int64_t> retry_after_ms;
    std::optional<std::int64_t> holder_lease_left_ms;
    std::optional<std::int64_t> queue_position;
    WakeupHub::SharedChannel shared = WakeupHub::SharedChannel::heeded;
    // Set when the try did not finish: sleep until then and try again
    // (no co_await inside a handler: the handlers only decide).
    std::optional<Instant> retry_at;
    bool timed_out = false;
    try {
      // The first try goes out before subscribing (no round trip when the
      // lock is free); every later one after, so no release is missed.
      // The confirmation is waited for until the deadline at most: one not
      // in by then ends the wait as its timeout (nothing held, the handler
      // gone, a late confirmation confirms nobody's).
      if (!first_try) {
        try {
          waiter.subscribe(deadline);
        } catch (const TimeoutError&) {
          if (runtime.now() < deadline) throw;
          timed_out = true;
        }
      }
      if (!timed_out) {
        waiter.begin_try();
        const TryOutcome outcome = try_once();
        retry_after_ms = outcome.retry_after_ms;
        holder_lease_left_ms = outcome.holder_lease_left_ms;
        queue_position = outcome.queue_position;
        near_retry_after_ms = outcome.near_retry_after_ms;
        shared = outcome.shared;
        outage.on_success();
      }
    } catch (const PoolExhaustedError&) {
      // Nothing was sent: every pooled connection stayed busy while this
      // try waited its turn. A crowd, not an outage: the unreachable clock
      // does not run, and the try queues again within the wait's own
      // deadline, whose passing is the wait's usual result.
      first_try = false;
      timed_out = runtime.now() >= deadline;
      retry_at = runtime.now() + kMinRetryDelay;
    } catch (const std::exception&) {
      // A wake-up taken stays owed: it passes on if the wait ends here.
      if (!is_transient(std::current_exception())) throw;
      const Duration backoff = outage.on_failure();  // rethrows when the limits say so
      first_try = false;
      retry_at = runtime.now() + backoff;
    }
    if (timed_out) co_return false;
    if (!retry_at) {
      waiter.finish_try(!retry_after_ms.has_value(), shared);
      if (!retry_after_ms) co_return true;
      const Instant now = runtime.now();
      if (now >= deadline) co_return false;
      if (first_try || !waiter.subscribed()) {
        // Subscribe, then try again at once: before the first sleep, and
        // when this try found a holder whose release only the shared
        // channel announces (a foreign one) while that channel was not
        // subscribed (WakeupHub::SharedChannel).
        first_try = false;
        continue;
      }
      retry_at = deadline;
      if (*retry_after_ms >= 0) {
        const Duration hint = std::max<Duration>(std::chrono::milliseconds(*retry_after_ms), kMinRetryDelay);
        if (hint < deadline - now) retry_at = now + hint;
      }
      if (events) {
        events->waiting(subject.name, subject.flavor, ++sleeps_after_tries,
                        holder_lease_left_ms.value_or(*retry_after_ms), queue_position);
      }
    }
    // Sleeps until `retry_at`, a wake-up or a stop. Told to keep the near
    // pace, it sleeps on, no longer than that pace from then (at most once
    // per message: each ends one sleep).
    gauge.asleep();
    Instant until = std::min(*retry_at, deadline);
    WakeupHub::Woken woken = WakeupHub::Woken::by_timer;
    for (;;) {
      Task<WakeupHub::Woken> sleeping = waiter.sleep(style, until, limits.stop);
      woken = co_await std::move(sleeping);
      if (woken != WakeupHub::Woken::by_pace) break;
      if (near_retry_after_ms) {
        const Duration pace = std::max<Duration>(std::chrono::milliseconds(*near_retry_after_ms), kMinRetryDelay);
        until = std::min(until, runtime.now() + pace);
      }
    }
    if (events && woken == WakeupHub::Woken::by_message) events->woken(subject.name, subject.flavor);
    // The last sleep decides: woken by a release message, the next success
    // is a handoff received.
    timing->woken_at = woken == WakeupHub::Woken::by_message ? std::optional(runtime.now()) : std::nullopt;
    if (woken == WakeupHub::Woken::by_stop) co_return false;
  }
}

}  // namespace turnstile::detail
