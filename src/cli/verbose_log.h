// cli/verbose_log.h
//
// `turnstile run -v/--verbose` (-vv for more): the client's events
// (turnstile/events.h) as timestamped lines on stderr, in local time with
// milliseconds:
//
//   turnstile: 2026-11-26 04:31:02.123 waiting for 'backup' (reentrant, attempt 1): held elsewhere, holder's
//   lease 28.604 s left turnstile: 2026-11-26 04:31:07.125 still waiting for 'backup' (5.0 s so far): holder's lease
//   about 23.602 s left turnstile: 2026-11-26 04:31:09.870 acquired 'backup' (reentrant) after 7.747 s turnstile:
//   2026-11-26 04:31:31.002 lost 'backup': gone
//
// -v: acquisitions, waits (the first failed try and each change of a fair
// waiter's place at once; otherwise a line every kRefreshInterval, read
// afresh from Redis: who holds it, the lease it has left, and when -w
// gives up), failed renewals, losses, reconnections (the same one once).
// -vv adds each renewal, each wake-up and every failed try. Background
// errors are not repeated here: `run` prints them already. Quiet by
// default.
// The sink is called on the client's threads; lines are written whole,
// one at a time.

#ifndef TURNSTILE_CLI_VERBOSE_LOG_H_
#define TURNSTILE_CLI_VERBOSE_LOG_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "turnstile/events.h"
#include "turnstile/mutex.h"
#include "turnstile/runtime.h"

namespace turnstile::cli {

class VerboseLog {
 public:
  static constexpr std::chrono::milliseconds kRefreshInterval = std::chrono::seconds(5);

  // `verbosity`: how many -v were given (0: quiet).
  explicit VerboseLog(int verbosity) : verbosity_(verbosity) {}

  bool enabled() const { return verbosity_ > 0; }
  // The client's event level: info for -v, debug for -vv.
  EventLevel level() const { return verbosity_ >= 2 ? EventLevel::debug : EventLevel::info; }
  // The client's event sink (empty when quiet); this log must outlive the client.
  EventSink sink();

  // What Redis says of the lock now, for a refresh line.
  struct Reading {
    std::string held_by;  // " by host:pid, command ..." (may be empty)
    // The holder's lease left, or for a semaphore the soonest a held
    // permit's lease ends; nullopt: Redis could not say.
    std::optional<Duration> lease_left;
    bool permits = false;  // lease_left is a permit's
  };
  // The instant a bounded wait (-w) gives up, for the countdown.
  void set_gives_up_at(std::optional<Instant> at);
  // While waiting, from the main loop: how long until the next refresh
  // line is due, and the line itself when it is (nothing before the first
  // `waiting` event, nor once acquired). `read` (may be empty) asks Redis
  // about the lock now, called on this thread and only when a line is
  // due, never under this log's mutex.
  std::chrono::milliseconds until_refresh();
  void refresh(const std::function<Reading()>& read);
  // This log's clock (the real runtime's, steady).
  static Instant now();

 private:
  void tell(const LockEvent& event);
  // Writes "turnstile: <local time> <text>".
  static void print(std::int64_t wall_clock_ms, const std::string& text);

  const int verbosity_;
  Mutex mutex_;
  // The latest `waiting` event, while the acquisition still waits.
  struct Wait {
    std::string name;
    Instant told_at{};     // when it was last printed (an event or a refresh)
    Instant event_at{};    // the event's instant
    Instant started_at{};  // the first waiting event's
    std::optional<Duration> holder_lease_left;
    std::optional<std::int64_t> queue_position;
  };
  std::optional<Wait> wait_ TURNSTILE_GUARDED_BY(mutex_);
  std::optional<Instant> first_wait_ TURNSTILE_GUARDED_BY(mutex_);
  std::optional<Instant> gives_up_at_ TURNSTILE_GUARDED_BY(mutex_);
  // The last reconnection told, and when: the same one again within
  // kRefreshInterval (each of the client's connections reconnecting after
  // one outage) is not repeated.
  std::string last_reconnection_ TURNSTILE_GUARDED_BY(mutex_);
  Instant reconnection_told_at_ TURNSTILE_GUARDED_BY(mutex_){};
};

}  // namespace turnstile::cli

#endif  // TURNSTILE_CLI_VERBOSE_LOG_H_
