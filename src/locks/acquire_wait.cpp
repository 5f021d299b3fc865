#include "locks/acquire_wait.h"

#include <algorithm>
#include <memory>
#include <string>

#include "turnstile/errors.h"

namespace turnstile::detail {

void check_lease(const std::optional<Duration>& lease) {
  if (lease && *lease < std::chrono::milliseconds(1)) {
    throw InvalidArgumentError("lease must be at least 1 ms, got " +
                               std::to_string(std::chrono::duration_cast<std::chrono::microseconds>(*lease).count()) +
                               " us");
  }
}

bool acquire_with_wait(Backend& backend, Runtime& runtime, std::string_view channel,
                       Instant deadline, const TryOnce& try_once) {
  // Declared before the subscription: the handler must not outlive it.
  const std::unique_ptr<Event> wake = runtime.make_event();
  const PubSubHandler notify = [event = wake.get()](const PubSubEvent&) { event->notify(); };
  // A waiter that waited a moment ago finds its channel still subscribed:
  // then one try suffices before sleeping, as the subscription came first.
  Subscription subscription = backend.subscribe_if_confirmed(channel, notify);
  if (!subscription.active()) {
    if (!try_once()) return true;
    if (runtime.now() >= deadline) return false;
    subscription = backend.subscribe(channel, notify);
  }
  for (;;) {
    const std::optional<std::int64_t> retry_after_ms = try_once();
    if (!retry_after_ms) return true;
    const Instant now = runtime.now();
    if (now >= deadline) return false;
    Instant wake_at = deadline;
    if (*retry_after_ms >= 0) {
      const Duration hint = std::max<Duration>(std::chrono::milliseconds(*retry_after_ms), kMinRetryDelay);
      if (hint < deadline - now) wake_at = now + hint;
    }
    (void)wake->wait_until(wake_at);
  }
}

}  // namespace turnstile::detail
