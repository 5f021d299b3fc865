#include "locks/acquire_wait.h"

#include <algorithm>
#include <memory>
#include <stop_token>
#include <string>

#include "turnstile/client.h"
#include "turnstile/errors.h"

namespace turnstile::detail {
namespace {

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
  } catch (const ReadOnlyError&) {
    return true;  // a failover in progress: the old master demoted
  } catch (const ServerError& server_error) {
    const std::string_view code = server_error.code();
    return code == "LOADING" || code == "MASTERDOWN" || code == "TRYAGAIN" || code == "CLUSTERDOWN";
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

bool acquire_with_wait(WakeupHub& hub, Runtime& runtime, std::string_view channel, WakeOptions wake,
                       const WaitLimits& limits, const TryOnce& try_once, AcquisitionTiming* timing,
                       const WaitSubject& subject) {
  const Instant deadline = limits.deadline;
  AcquisitionTiming unused;
  if (timing == nullptr) timing = &unused;
  *timing = AcquisitionTiming{.started = runtime.now()};
  Outage outage(runtime, limits);
  WakeupHub::Waiter waiter = hub.join(channel, wake);
  WaiterGauge gauge(subject);
  const EventLog* const events = subject.events;
  std::int64_t sleeps_after_tries = 0;
  // The latest try's near pace (TryOutcome::near_retry_after_ms).
  std::optional<std::int64_t> near_retry_after_ms;
  // Sleeps until `until`, a wake-up or a stop; false if the wait is over.
  // Told to keep the near pace, it sleeps on, no longer than that pace
  // from then (at most once per message: each ends one sleep).
  const auto sleep_until = [&](Instant until) {
    gauge.asleep();
    WakeupHub::Woken woken = waiter.sleep_until(std::min(until, deadline), limits.stop);
    while (woken == WakeupHub::Woken::by_pace) {
      if (near_retry_after_ms) {
        const Duration pace = std::max<Duration>(std::chrono::milliseconds(*near_retry_after_ms), kMinRetryDelay);
        until = std::min(until, runtime.now() + pace);
      }
      woken = waiter.sleep_until(std::min(until, deadline), limits.stop);
    }
    if (events && woken == WakeupHub::Woken::by_message) events->woken(subject.name, subject.flavor);
    // The last sleep decides: woken by a release message, the next success
    // is a handoff received.
    timing->woken_at = woken == WakeupHub::Woken::by_message ? std::optional(runtime.now()) : std::nullopt;
    return woken != WakeupHub::Woken::by_stop;
  };
  // When the channel is subscribed already (another local waiter has it,
  // or it lingers from a recent wait), one try suffices before sleeping.
  bool first_try = !waiter.subscribe_if_confirmed();
  for (;;) {
    if (limits.stop.stop_requested()) return false;
    std::optional<std::int64_t> retry_after_ms;
    std::optional<std::int64_t> holder_lease_left_ms;
    std::optional<std::int64_t> queue_position;
    WakeupHub::SharedChannel shared = WakeupHub::SharedChannel::heeded;
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
          if (runtime.now() >= deadline) return false;
          throw;
        }
      }
      waiter.begin_try();
      const TryOutcome outcome = try_once();
      retry_after_ms = outcome.retry_after_ms;
      holder_lease_left_ms = outcome.holder_lease_left_ms;
      queue_position = outcome.queue_position;
      near_retry_after_ms = outcome.near_retry_after_ms;
      shared = outcome.shared;
      outage.on_success();
    } catch (const PoolExhaustedError&) {
      // Nothing was sent: every pooled connection stayed busy while this
      // try waited its turn. A crowd, not an outage: the unreachable clock
      // does not run, and the try queues again within the wait's own
      // deadline, whose passing is the wait's usual result.
      first_try = false;
      if (runtime.now() >= deadline) return false;
      if (!sleep_until(runtime.now() + kMinRetryDelay)) return false;
      continue;
    } catch (const std::exception&) {
      // A wake-up taken stays owed: it passes on if the wait ends here.
      if (!is_transient(std::current_exception())) throw;
      const Duration backoff = outage.on_failure();  // rethrows when the limits say so
      first_try = false;
      if (!sleep_until(runtime.now() + backoff)) return false;
      continue;
    }
    waiter.finish_try(!retry_after_ms.has_value(), shared);
    if (!retry_after_ms) return true;
    const Instant now = runtime.now();
    if (now >= deadline) return false;
    if (first_try || !waiter.subscribed()) {
      // Subscribe, then try again at once: before the first sleep, and
      // when this try found a holder whose release only the shared
      // channel announces (a foreign one) while that channel was not
      // subscribed (WakeupHub::SharedChannel).
      first_try = false;
      continue;
    }
    Instant wake_at = deadline;
    if (*retry_after_ms >= 0) {
      const Duration hint = std::max<Duration>(std::chrono::milliseconds(*retry_after_ms), kMinRetryDelay);
      if (hint < deadline - now) wake_at = now + hint;
    }
    if (events) {
      events->waiting(subject.name, subject.flavor, ++sleeps_after_tries,
                      holder_lease_left_ms.value_or(*retry_after_ms), queue_position);
    }
    if (!sleep_until(wake_at)) return false;
  }
}

}  // namespace turnstile::detail
