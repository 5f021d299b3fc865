#include "cli/verbose_log.h"

#include <time.h>

#include <cstdio>
#include <utility>

#include "turnstile/errors.h"

namespace turnstile::cli {
namespace {

// The real runtime's clock (turnstile/runtime.h: std::chrono::steady_clock).
Instant monotonic_now() { return Instant(std::chrono::steady_clock::now().time_since_epoch()); }

std::int64_t wall_clock_now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// "1.250 s" (milliseconds exactly).
std::string seconds_text(Duration duration) {
  const std::int64_t ms =
      std::max<std::int64_t>(0, std::chrono::duration_cast<std::chrono::milliseconds>(duration).count());
  char text[32];
  std::snprintf(text, sizeof(text), "%lld.%03lld s", static_cast<long long>(ms / 1000),
                static_cast<long long>(ms % 1000));
  return text;
}

// What the waiter knows of the holder and of its place, for the refresh
// line; the holder's identity is appended by refresh()'s caller.
std::string holder_text(const VerboseLog::Reading& reading, const std::optional<Duration>& estimate,
                        const std::optional<std::int64_t>& queue_position) {
  std::string text;
  if (reading.lease_left) {
    text += reading.permits ? ": the next permit's lease ends in " + seconds_text(*reading.lease_left)
                            : ": holder's lease " + seconds_text(*reading.lease_left) + " left";
  } else if (estimate) {
    text += ": holder's lease about " + seconds_text(*estimate) + " left";
  }
  if (queue_position) {
    text +=
        *queue_position == 0 ? ", next in the queue" : ", " + std::to_string(*queue_position) + " ahead in the queue";
  }
  // Who holds it is asked of Redis by refresh()'s caller (run's main
  // loop), never here: this runs on the library's threads.
  return text;
}

}  // namespace

EventSink VerboseLog::sink() {
  if (!enabled()) return nullptr;
  return [this](const LockEvent& event) { tell(event); };
}

void VerboseLog::tell(const LockEvent& event) {
  // run prints background errors itself (once per distinct message).
  if (event.kind == EventKind::background_error) return;
  MutexLock guard(mutex_);
  if (event.kind == EventKind::waiting) {
    if (!first_wait_) first_wait_ = event.at;
    // A try that changes nothing the waiter was told (a fair waiter
    // refreshing its place about every 1.7 s, a wake-up lost to another)
    // waits for the next refresh line, unless -vv.
    const bool news = !wait_ || wait_->queue_position != event.queue_position || verbosity_ >= 2;
    const Instant told_at = news ? event.at : wait_->told_at;  // news when there was no wait
    wait_ = Wait{.name = std::string(event.name),
                 .told_at = told_at,
                 .event_at = event.at,
                 .started_at = *first_wait_,
                 .holder_lease_left = event.holder_lease_left,
                 .queue_position = event.queue_position};
    if (!news) return;
  } else if (event.kind == EventKind::acquired) {
    wait_.reset();
  } else if (event.kind == EventKind::reconnected) {
    const std::string told = describe(event);
    if (told == last_reconnection_ && event.at < reconnection_told_at_ + kRefreshInterval) return;
    last_reconnection_ = told;
    reconnection_told_at_ = event.at;
  }
  print(event.wall_clock_ms, describe(event));
}

std::chrono::milliseconds VerboseLog::until_refresh() {
  MutexLock guard(mutex_);
  if (!wait_) return kRefreshInterval;
  const Duration left = wait_->told_at + kRefreshInterval - monotonic_now();
  return std::max(std::chrono::milliseconds(1), std::chrono::ceil<std::chrono::milliseconds>(left));
}

void VerboseLog::set_gives_up_at(std::optional<Instant> at) {
  MutexLock guard(mutex_);
  gives_up_at_ = at;
}

void VerboseLog::refresh(const std::function<Reading()>& read) {
  {
    MutexLock guard(mutex_);
    if (!wait_ || monotonic_now() < wait_->told_at + kRefreshInterval) return;
  }
  // Asked of Redis outside the mutex: the client's threads tell events
  // meanwhile.
  const Reading reading = read ? read() : Reading{};
  std::string line;
  {
    MutexLock guard(mutex_);
    if (!wait_) return;  // acquired meanwhile
    const Instant now = monotonic_now();
    wait_->told_at = now;
    // Without a reading, the last try's, less the time since.
    std::optional<Duration> estimate;
    if (wait_->holder_lease_left) {
      estimate = std::max(Duration::zero(), *wait_->holder_lease_left - (now - wait_->event_at));
    }
    line = "still waiting for " + in_quotes(wait_->name) + " (" + seconds_text(now - wait_->started_at) + " so far";
    if (gives_up_at_) line += ", gives up in " + seconds_text(*gives_up_at_ - now);
    line += ")" + holder_text(reading, estimate, wait_->queue_position) + reading.held_by;
  }
  print(wall_clock_now_ms(), line);
}

Instant VerboseLog::now() { return monotonic_now(); }

void VerboseLog::print(std::int64_t wall_clock_ms, const std::string& text) {
  const time_t seconds = static_cast<time_t>(wall_clock_ms / 1000);
  tm local{};
  localtime_r(&seconds, &local);
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "%Y-%m-%d %H:%M:%S", &local);
  std::fprintf(stderr, "turnstile: %s.%03lld %s\n", stamp, static_cast<long long>(wall_clock_ms % 1000), text.c_str());
  std::fflush(stderr);
}

}  // namespace turnstile::cli
