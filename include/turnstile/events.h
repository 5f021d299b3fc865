// turnstile/events.h
//
// The logging hook: what a Client's locks do, told as typed events to one
// sink the application gives (ClientOptions::event_sink), to log, trace or
// show as it likes. Off by default: without a sink nothing is built and
// each emit point costs one branch.
//
//   turnstile::ClientOptions options;
//   options.event_sink = [](const turnstile::LockEvent& event) {
//     std::fprintf(stderr, "%s\n", turnstile::describe(event).c_str());
//   };
//   options.event_level = turnstile::EventLevel::info;  // no renewals
//   turnstile::Client client(backend, options);
//
// The events (EventKind), and what each one carries besides its kind,
// level and times:
//
//   acquired         a hold taken: name, flavor, waited (from the start of
//                    the acquisition). info.
//   waiting          an acquisition found the lock taken and goes to sleep:
//                    name, flavor, attempt (1 for the first sleep, then 2,
//                    3, ... after each try that failed again), and what is
//                    known of why: holder_lease_left (the holder's
//                    remaining lease, when the flavor's script tells it)
//                    and queue_position (a fair lock's waiter: how many
//                    waiters are ahead of it, 0 when it is next).
//                    info.
//   woken            a sleeping waiter was woken by a release message (it
//                    tries at once; `acquired` or another `waiting`
//                    follows): name, flavor. debug.
//   renewed          the watchdog renewed a lease: name (the key), lease.
//                    debug.
//   renewal_failed   a renewal call failed or got no reply in time: name,
//                    lease, error. The hold is not lost yet (its local
//                    deadline decides). warning.
//   lost             a hold was lost while believed held: name (the key),
//                    reason (LockLostReason). error.
//   reconnected      the backend opened a connection again after one broke
//                    (a reset, CLIENT KILL, a timeout, an outage):
//                    address ("host:port") and server_restarted, true when
//                    the server is a new run of itself (every key of a
//                    server without persistence is gone, and every hold
//                    on it is lost: LockLostReason::server_restarted),
//                    false when it is the process talked to before (or
//                    cannot tell: INFO refused; holds stay held). At most
//                    one per outage of the client's command connections
//                    and one per reconnection of its pub/sub connection
//                    (Backend::watch_reconnects, watch_restarts); none
//                    from a backend that cannot tell (the simulator's
//                    fake tells restarts only). warning.
//   background_error what ClientOptions::on_background_error is given (it
//                    still is): error. error.
//   lease_at_risk    a hold's local deadline came within
//                    ClientOptions::lease_warning without moving (what
//                    on_lease_at_risk is told): name (the key), remaining.
//                    warning.
//
// A name is the lock's or semaphore's key as sent to Redis (the client's
// key prefix included); a renewal's and a loss's is the key the watchdog
// renews (for a crash-safe semaphore's permits, its timeout key:
// key_layout.h). No event carries a password or a URL: addresses are
// "host:port" and error texts are the library's own, which never quote
// credentials.
//
// Threads: the sink is called on the thread that did the thing: the
// acquiring task (acquired, waiting, woken), the watchdog's timer task
// (renewed, renewal_failed, lost by deadline or renewal), an unlocking
// task (lost when its unlock finds the hold gone is told by the lost
// handler only), the backend's connecting thread (reconnected). Never with
// an internal lock held, so the sink may call the Client (not wait on it).
// It may be called from several threads at once, must be thread-safe, must
// not throw (an exception is swallowed) and must not block: it runs inside
// a lock's acquisition or renewal, and a slow sink delays renewals. Hand
// slow work (files, networks) to a thread of your own.
//
// Times: `at` is the Runtime's monotonic instant and `wall_clock_ms` its
// Unix time in ms (Runtime::wall_clock_ms), both read when the event is
// made: virtual time in a simulated world, so a simulated story's events
// are the same on every run.

#ifndef TURNSTILE_EVENTS_H_
#define TURNSTILE_EVENTS_H_

#include <cstdint>
#include <exception>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "turnstile/export.h"
#include "turnstile/flavor.h"
#include "turnstile/runtime.h"

namespace turnstile {

// How much an event matters, in increasing order; a sink is given the
// events at or above ClientOptions::event_level.
enum class EventLevel : std::uint8_t { debug, info, warning, error };

enum class EventKind : std::uint8_t {
  acquired,
  waiting,
  woken,
  renewed,
  renewal_failed,
  lost,
  reconnected,
  background_error,
  lease_at_risk,
};

// One event (the file comment says which fields each kind sets; the
// others keep their defaults). Views are valid during the sink call only:
// copy what you keep.
struct TURNSTILE_EXPORT LockEvent {
  EventKind kind = EventKind::background_error;
  EventLevel level = EventLevel::error;
  Instant at{};                                // the Runtime's now()
  std::int64_t wall_clock_ms = 0;              // the Runtime's wall_clock_ms()
  std::string_view name;                       // the key (acquired .. lost)
  std::optional<Flavor> flavor;                // acquired, waiting, woken
  Duration waited{};                           // acquired
  std::int64_t attempt = 0;                    // waiting: 1, 2, ...
  std::optional<Duration> holder_lease_left;   // waiting, when known
  std::optional<std::int64_t> queue_position;  // waiting on a fair lock: waiters ahead (0: next)
  Duration lease{};                            // renewed, renewal_failed
  std::optional<LockLostReason> reason;        // lost
  std::string_view address;                    // reconnected: "host:port"
  bool server_restarted = false;               // reconnected
  std::exception_ptr error;                    // renewal_failed, background_error
  Duration remaining{};                        // lease_at_risk: to the local deadline
};

// Called for every event at or above the client's event_level (the file
// comment: threads, blocking).
using EventSink = std::function<void(const LockEvent&)>;

// "acquired", "waiting", "woken", "renewed", "renewal_failed", "lost",
// "reconnected", "background_error".
TURNSTILE_EXPORT std::string_view event_kind_name(EventKind kind);
// "debug", "info", "warning", "error".
TURNSTILE_EXPORT std::string_view event_level_name(EventLevel level);

// One line of text for `event`, without its time or level, e.g.
//   acquired 'orders' (reentrant) after 1.250 s
//   waiting for 'orders' (fair, attempt 1): holder's lease 28.600 s left, 2 ahead in the queue
//   lost 'orders': gone
// Names are quoted with control bytes escaped; never a password.
TURNSTILE_EXPORT std::string describe(const LockEvent& event);

}  // namespace turnstile

#endif  // TURNSTILE_EVENTS_H_
