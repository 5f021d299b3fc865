// locks/engine/event_log.h
//
// The emit side of turnstile/events.h: one per Client, shared (like the
// metrics recorder) by its watchdog and its locks. Every emit point is one
// call here; without a sink (the default) each call is one branch and
// builds nothing. Never call it with an internal lock held: the sink may
// call the Client.

#ifndef TURNSTILE_LOCKS_ENGINE_EVENT_LOG_H_
#define TURNSTILE_LOCKS_ENGINE_EVENT_LOG_H_

#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "turnstile/events.h"
#include "turnstile/flavor.h"
#include "turnstile/reply.h"
#include "turnstile/runtime.h"

namespace turnstile::detail {

class EventLog {
 public:
  // `sink` may be empty: nothing is told. `runtime` outlives the log.
  EventLog(EventSink sink, EventLevel level, Runtime& runtime);

  bool on(EventLevel level) const { return sink_ && level >= level_; }

  void acquired(std::string_view name, Flavor flavor, Duration waited) const {
    if (on(EventLevel::info)) acquired_slow(name, flavor, waited);
  }
  // `holder_lease_left_ms`: negative when unknown.
  void waiting(std::string_view name, Flavor flavor, std::int64_t attempt, std::int64_t holder_lease_left_ms,
               std::optional<std::int64_t> queue_position) const {
    if (on(EventLevel::info)) waiting_slow(name, flavor, attempt, holder_lease_left_ms, queue_position);
  }
  void woken(std::string_view name, Flavor flavor) const {
    if (on(EventLevel::debug)) woken_slow(name, flavor);
  }
  // One renewal batch's answer: flags[i] (1: renewed) for keys[i].
  void renewals(const std::vector<std::string>& keys, const Reply& flags, Duration lease) const {
    if (on(EventLevel::debug)) renewals_slow(keys, flags, lease);
  }
  void renewal_failed(const std::vector<std::string>& keys, Duration lease, std::exception_ptr error) const {
    if (on(EventLevel::warning)) renewal_failed_slow(keys, lease, error);
  }
  void lost(std::string_view key, LockLostReason reason) const {
    if (on(EventLevel::error)) lost_slow(key, reason);
  }
  void reconnected(std::string_view address, bool server_restarted) const {
    if (on(EventLevel::warning)) reconnected_slow(address, server_restarted);
  }
  void background_error(std::exception_ptr error) const {
    if (on(EventLevel::error)) background_error_slow(error);
  }
  void lease_at_risk(std::string_view key, Duration remaining) const {
    if (on(EventLevel::warning)) lease_at_risk_slow(key, remaining);
  }

 private:
  // An event stamped now, about `name` (a key) of `flavor` if given.
  LockEvent make(EventKind kind, EventLevel level, std::string_view name = {},
                 std::optional<Flavor> flavor = std::nullopt) const;
  void tell(const LockEvent& event) const noexcept;
  void acquired_slow(std::string_view name, Flavor flavor, Duration waited) const;
  void waiting_slow(std::string_view name, Flavor flavor, std::int64_t attempt, std::int64_t holder_lease_left_ms,
                    std::optional<std::int64_t> queue_position) const;
  void woken_slow(std::string_view name, Flavor flavor) const;
  void renewals_slow(const std::vector<std::string>& keys, const Reply& flags, Duration lease) const;
  void renewal_failed_slow(const std::vector<std::string>& keys, Duration lease, std::exception_ptr error) const;
  void lost_slow(std::string_view key, LockLostReason reason) const;
  void reconnected_slow(std::string_view address, bool server_restarted) const;
  void background_error_slow(std::exception_ptr error) const;
  void lease_at_risk_slow(std::string_view key, Duration remaining) const;

  const EventSink sink_;
  const EventLevel level_;
  Runtime& runtime_;
};

}  // namespace turnstile::detail

#endif  // TURNSTILE_LOCKS_ENGINE_EVENT_LOG_H_
