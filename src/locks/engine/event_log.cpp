// The logging hook (turnstile/events.h): event names, describe(), and the
// client's EventLog (locks/engine/event_log.h).

#include "locks/engine/event_log.h"

#include <chrono>
#include <cstdio>
#include <utility>

#include "core/check.h"
#include "turnstile/errors.h"
#include "turnstile/metrics.h"

namespace turnstile {
namespace {

// "1.250 s", "0.003 s": milliseconds exactly, never "986.000000 ms".
std::string seconds_text(Duration duration) {
  const std::int64_t ms = std::chrono::duration_cast<std::chrono::milliseconds>(duration).count();
  char text[32];
  std::snprintf(text, sizeof(text), "%s%lld.%03lld s", ms < 0 ? "-" : "",
                static_cast<long long>((ms < 0 ? -ms : ms) / 1000), static_cast<long long>((ms < 0 ? -ms : ms) % 1000));
  return text;
}

std::string error_text(const std::exception_ptr& error) {
  if (!error) return "unknown error";
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& exception) {
    return exception.what();
  } catch (...) {
    return "unknown error";
  }
}

std::string flavored(const LockEvent& event) {
  std::string text = in_quotes(event.name);
  if (event.flavor) text += " (" + std::string(flavor_name(*event.flavor)) + ")";
  return text;
}

}  // namespace

std::string_view event_kind_name(EventKind kind) {
  switch (kind) {
    case EventKind::acquired:
      return "acquired";
    case EventKind::waiting:
      return "waiting";
    case EventKind::woken:
      return "woken";
    case EventKind::renewed:
      return "renewed";
    case EventKind::renewal_failed:
      return "renewal_failed";
    case EventKind::lost:
      return "lost";
    case EventKind::reconnected:
      return "reconnected";
    case EventKind::background_error:
      return "background_error";
    case EventKind::lease_at_risk:
      return "lease_at_risk";
  }
  TURNSTILE_CHECK_MSG(false, "every event kind has a name");
  return "unknown";
}

std::string_view event_level_name(EventLevel level) {
  switch (level) {
    case EventLevel::debug:
      return "debug";
    case EventLevel::info:
      return "info";
    case EventLevel::warning:
      return "warning";
    case EventLevel::error:
      return "error";
  }
  TURNSTILE_CHECK_MSG(false, "every event level has a name");
  return "unknown";
}

std::string describe(const LockEvent& event) {
  switch (event.kind) {
    case EventKind::acquired:
      return "acquired " + flavored(event) + " after " + seconds_text(event.waited);
    case EventKind::waiting: {
      std::string text = "waiting for " + in_quotes(event.name) + " (";
      if (event.flavor) text += std::string(flavor_name(*event.flavor)) + ", ";
      text += "attempt " + std::to_string(event.attempt) + "): held elsewhere";
      if (event.holder_lease_left) text += ", holder's lease " + seconds_text(*event.holder_lease_left) + " left";
      if (event.queue_position) {
        text += *event.queue_position == 0 ? ", next in the queue"
                                           : ", " + std::to_string(*event.queue_position) + " ahead in the queue";
      }
      return text;
    }
    case EventKind::woken:
      return "woken by a release of " + flavored(event);
    case EventKind::renewed:
      return "renewed " + in_quotes(event.name) + " for " + seconds_text(event.lease);
    case EventKind::renewal_failed:
      return "renewing " + in_quotes(event.name) + " failed: " + error_text(event.error);
    case EventKind::lost:
      return "lost " + in_quotes(event.name) + ": " +
             std::string(event.reason ? lock_lost_reason_name(*event.reason) : "unknown reason");
    case EventKind::reconnected:
      return std::string(event.server_restarted ? "server restarted: reconnected to " : "reconnected to ") +
             std::string(event.address);
    case EventKind::background_error:
      return "error: " + error_text(event.error);
    case EventKind::lease_at_risk:
      return in_quotes(event.name) + " at risk: no renewal confirmed, lost in " + seconds_text(event.remaining) +
             " unless one is";
  }
  return "unknown event";
}

namespace detail {

EventLog::EventLog(EventSink sink, EventLevel level, Runtime& runtime)
    : sink_(std::move(sink)), level_(level), runtime_(runtime) {}

LockEvent EventLog::make(EventKind kind, EventLevel level, std::string_view name, std::optional<Flavor> flavor) const {
  return LockEvent{.kind = kind,
                   .level = level,
                   .at = runtime_.now(),
                   .wall_clock_ms = runtime_.wall_clock_ms(),
                   .name = name,
                   .flavor = flavor};
}

void EventLog::tell(const LockEvent& event) const noexcept {
  TURNSTILE_CHECK(sink_ && event.level >= level_);
  try {
    sink_(event);
  } catch (...) {
    // A sink must not throw (turnstile/events.h): swallowed.
  }
}

void EventLog::acquired_slow(std::string_view name, Flavor flavor, Duration waited) const {
  LockEvent event = make(EventKind::acquired, EventLevel::info, name, flavor);
  event.waited = waited;
  tell(event);
}

void EventLog::waiting_slow(std::string_view name, Flavor flavor, std::int64_t attempt,
                            std::int64_t holder_lease_left_ms, std::optional<std::int64_t> queue_position) const {
  LockEvent event = make(EventKind::waiting, EventLevel::info, name, flavor);
  event.attempt = attempt;
  if (holder_lease_left_ms >= 0) event.holder_lease_left = std::chrono::milliseconds(holder_lease_left_ms);
  event.queue_position = queue_position;
  tell(event);
}

void EventLog::woken_slow(std::string_view name, Flavor flavor) const {
  tell(make(EventKind::woken, EventLevel::debug, name, flavor));
}

void EventLog::renewals_slow(const std::vector<std::string>& keys, const Reply& flags, Duration lease) const {
  if (!flags.is_array()) return;
  const std::vector<Reply>& answers = flags.as_array();
  for (std::size_t i = 0; i < keys.size() && i < answers.size(); ++i) {
    // A 0 (gone) is told as the loss that follows.
    if (!answers[i].is_integer() || answers[i].as_integer() != 1) continue;
    LockEvent event = make(EventKind::renewed, EventLevel::debug, keys[i]);
    event.lease = lease;
    tell(event);
  }
}

void EventLog::renewal_failed_slow(const std::vector<std::string>& keys, Duration lease,
                                   std::exception_ptr error) const {
  for (const std::string& key : keys) {
    LockEvent event = make(EventKind::renewal_failed, EventLevel::warning, key);
    event.lease = lease;
    event.error = error;
    tell(event);
  }
}

void EventLog::lost_slow(std::string_view key, LockLostReason reason) const {
  LockEvent event = make(EventKind::lost, EventLevel::error, key);
  event.reason = reason;
  tell(event);
}

void EventLog::reconnected_slow(std::string_view address, bool server_restarted) const {
  LockEvent event = make(EventKind::reconnected, EventLevel::warning);
  event.address = address;
  event.server_restarted = server_restarted;
  tell(event);
}

void EventLog::lease_at_risk_slow(std::string_view key, Duration remaining) const {
  LockEvent event = make(EventKind::lease_at_risk, EventLevel::warning, key);
  event.remaining = remaining;
  tell(event);
}

void EventLog::background_error_slow(std::exception_ptr error) const {
  LockEvent event = make(EventKind::background_error, EventLevel::error);
  event.error = std::move(error);
  tell(event);
}

}  // namespace detail
}  // namespace turnstile
