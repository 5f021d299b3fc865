// turnstile/runtime.h
//
// Everything lock code needs from time, waiting, timers, tasks and
// randomness, behind one interface. Lock code never reads a std::chrono clock,
// sleeps, waits on a condition variable or draws random numbers itself: it
// asks its Runtime. That is what lets the very same lock code run
//
//   * in production, on RealRuntime (std::chrono::steady_clock, threads), and
//   * in simulation, on a simulated runtime whose clock is virtual: a wait
//     advances virtual time to the next event instead of sleeping, so an hour
//     of contention runs in milliseconds and a seed replays a run exactly.
//
// Times: Instant is a point on the runtime's monotonic clock; only
// differences between Instants mean anything. wall_clock_ms() is the
// runtime's idea of the Unix time, used only for deadlines that are stored in
// Redis and compared by other clients (fair-lock waiter deadlines, permit
// expiries), exactly as Redisson does.
//
// Edge cases, everywhere: a deadline in the past means "now" (check once, do
// not wait); a negative duration means zero.

#ifndef TURNSTILE_RUNTIME_H_
#define TURNSTILE_RUNTIME_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>
#include <type_traits>
#include <utility>

#include "turnstile/export.h"

namespace turnstile {

// The clock behind Instant. It has no now(): time is read through
// Runtime::now() only.
struct TURNSTILE_EXPORT MonotonicClock {
  using rep = std::int64_t;
  using period = std::nano;
  using duration = std::chrono::nanoseconds;
  using time_point = std::chrono::time_point<MonotonicClock>;
  static constexpr bool is_steady = true;
};

using Duration = std::chrono::nanoseconds;
using Instant = MonotonicClock::time_point;

// Far enough in the future to mean "no deadline", with room to add to it.
inline constexpr Instant kNoDeadline = Instant(Duration(INT64_MAX / 2));

// The time left until `deadline`, a time point of any standard clock
// (std::chrono::steady_clock, system_clock, a clock of the caller's):
// read on that clock now, so `try_lock_until(steady_clock::now() + 1s)`
// waits one second of that clock, whatever the Runtime (in simulation: one
// virtual second from the call). Zero for a past deadline; Duration::max()
// (wait forever) for one beyond Duration's range, such as
// time_point::max(). Instant deadlines take the Runtime's clock directly.
template <typename Clock, typename ClockDuration>
requires(!std::is_same_v<Clock, MonotonicClock>) Duration
    time_left_until(const std::chrono::time_point<Clock, ClockDuration>& deadline) {
  if (deadline == std::chrono::time_point<Clock, ClockDuration>::max()) return Duration::max();
  const std::chrono::duration<double, std::nano> left = deadline - Clock::now();
  if (left.count() <= 0) return Duration::zero();
  if (left.count() >= static_cast<double>(Duration::max().count())) return Duration::max();
  return Duration(static_cast<Duration::rep>(left.count()));
}

// An auto-reset binary signal (like a binary semaphore): notify() sets it,
// a wait consumes it. A notify() before the wait is not lost, which is what
// makes "subscribe, try, then wait" race-free. Several notify() calls before
// one wait collapse into one.
class TURNSTILE_EXPORT Event {
 public:
  Event() = default;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  virtual ~Event() = default;

  // Sets the signal and wakes the waiter, if any. Safe from any thread,
  // including a backend's pub/sub reader thread. Never blocks.
  virtual void notify() = 0;

  // Waits until the signal is set (consumes it, returns true) or `deadline`
  // passes (returns false). A deadline in the past checks once and returns.
  [[nodiscard]] virtual bool wait_until(Instant deadline) = 0;
};

class TURNSTILE_EXPORT Runtime {
 public:
  using TimerId = std::uint64_t;

  Runtime() = default;
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;
  virtual ~Runtime() = default;

  // The monotonic clock.
  virtual Instant now() = 0;

  // Milliseconds since the Unix epoch, by this runtime's wall clock (which in
  // simulation may drift from the servers').
  virtual std::int64_t wall_clock_ms() = 0;

  // Blocks the calling task until `deadline` (returns at once if it passed).
  virtual void sleep_until(Instant deadline) = 0;

  // A new Event bound to this runtime.
  virtual std::unique_ptr<Event> make_event() = 0;

  // Runs `callback` once at `when` (at once if `when` passed), on a task of
  // the runtime's choosing; the callback may block (e.g. call a backend).
  // Returns an id for cancel().
  virtual TimerId schedule_at(Instant when, std::function<void()> callback) = 0;

  // Cancels a timer. Returns true if it had not started; false if it already
  // ran, is running, or was cancelled. Does not wait for a running callback.
  virtual bool cancel(TimerId id) = 0;

  // Runs `task` concurrently with the caller (a thread in production, a new
  // simulated task in simulation).
  virtual void spawn(std::function<void()> task) = 0;

  // Runs `task` soon on one of a small, fixed set of the runtime's threads
  // (the engine threads that carry asynchronous acquisitions between their
  // waits), never on the caller's. `task` may block for a script call's
  // round trip, not for a wait. Default: spawn() (a simulated runtime's
  // new task; a Runtime of the user's keeps working unchanged).
  virtual void post(std::function<void()> task) { spawn(std::move(task)); }

  // Identifies the calling task (thread, or simulated task) for owner ids:
  // stable for the task's lifetime, distinct between live tasks.
  virtual std::uint64_t current_task_id() = 0;

  // 64 random bits: from the OS in production, from the seed in simulation.
  virtual std::uint64_t random_u64() = 0;

  // BUGGIFY: whether the named fault-injection point fires here. Only a
  // simulated runtime ever says yes (drawn from the world's seed, see
  // docs/simulation.md); a real one never does, so the point's fault is
  // unreachable in production.
  virtual bool buggify(std::string_view point) {
    (void)point;
    return false;
  }

  // Conveniences over the primitives above.
  void sleep_for(Duration duration) { sleep_until(deadline_after(duration)); }
  TimerId schedule_after(Duration delay, std::function<void()> callback) {
    return schedule_at(deadline_after(delay), std::move(callback));
  }
  // now() + duration, with a negative duration taken as zero and without
  // overflow for huge durations (they saturate at kNoDeadline).
  Instant deadline_after(Duration duration);
};

// The production runtime: std::chrono::steady_clock and system_clock,
// std::thread, one timer thread. Shared by every lock of a process.
TURNSTILE_EXPORT std::shared_ptr<Runtime> make_real_runtime();

}  // namespace turnstile

#endif  // TURNSTILE_RUNTIME_H_
