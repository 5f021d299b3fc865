// runtime/real_runtime.h
//
// The production Runtime (make_real_runtime() in turnstile/runtime.h):
//
//   * now():           std::chrono::steady_clock, as nanoseconds since its epoch.
//   * wall_clock_ms(): std::chrono::system_clock.
//   * Events:          a mutex, a condition variable and a flag (auto-reset
//                      binary signal). notify() takes the mutex only briefly
//                      and never waits for a waiter.
//   * Timers:          one timer thread keeps the pending timers ordered by
//                      (deadline, sequence number) and hands due callbacks to
//                      a pool of kTimerWorkerThreads workers. A callback may
//                      block (the watchdog calls a backend), but while
//                      kTimerWorkerThreads callbacks block at once, further due
//                      callbacks wait for a free worker: they run late, never
//                      early, never concurrently with their own cancel() == true.
//   * post():          kEngineThreads engine threads, started at the first
//                      post(), take posted tasks in the order posted
//                      (asynchronous acquisitions between their waits:
//                      locks/engine/task.h). However many acquisitions wait,
//                      these are the threads they use; a task still queued
//                      (or posted) when the runtime goes is dropped.
//   * spawn():         one std::thread per task. Finished threads are joined
//                      on the next spawn(); the destructor joins every thread
//                      still running (it blocks until spawned tasks return),
//                      so no thread outlives the runtime's state. A thread
//                      that itself drops the last reference to the runtime is
//                      detached instead of joining itself; the shared state
//                      it uses stays alive until it exits.
//   * current_task_id(): a small per-thread number, assigned on first use
//                      from a process-wide counter; never reused.
//   * random_u64():    a std::mt19937_64 seeded from std::random_device,
//                      behind a mutex.

#ifndef TURNSTILE_RUNTIME_REAL_RUNTIME_H_
#define TURNSTILE_RUNTIME_REAL_RUNTIME_H_

#include <chrono>
#include <cstddef>
#include <memory>

#include "turnstile/runtime.h"

namespace turnstile {

class RealRuntime final : public Runtime {
 public:
  // Workers that run timer callbacks; see the overview for what happens when
  // they all block.
  static constexpr std::size_t kTimerWorkerThreads = 4;
  // Threads that run posted tasks (post()): each blocks at most for a
  // script call's round trip, so a few serve any number of waiters.
  static constexpr std::size_t kEngineThreads = 4;
  // Upper bounds on pending timers (reaching it is a leak in the caller,
  // a TURNSTILE_CHECK, kept in release builds) and on live spawned threads (spawn() then
  // throws turnstile::Error; no acquisition spawns, locks/engine/task.h).
  static constexpr std::size_t kMaxPendingTimers = 4'000'000;
  static constexpr std::size_t kMaxLiveSpawnedThreads = 10'000;

  RealRuntime();
  ~RealRuntime() override;

  Instant now() override;
  std::int64_t wall_clock_ms() override;
  void sleep_until(Instant deadline) override;
  std::unique_ptr<Event> make_event() override;
  TimerId schedule_at(Instant when, std::function<void()> callback) override;
  bool cancel(TimerId id) override;
  void spawn(std::function<void()> task) override;
  void post(std::function<void()> task) override;
  std::uint64_t current_task_id() override;
  std::uint64_t random_u64() override;

  // The steady_clock time point of an Instant of this runtime.
  static std::chrono::steady_clock::time_point to_steady(Instant instant);

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace turnstile

#endif  // TURNSTILE_RUNTIME_REAL_RUNTIME_H_
