// locks/engine/async_signal.h
//
// A Runtime Event that a coroutine can also await without a thread: the
// wake-up signal of one waiting acquisition (locks/engine/wakeup_hub.h) and of a
// plain timed sleep (acquire_wait.h). notify() comes from any thread (the
// backend's pub/sub reader, a releasing task); a blocking waiter waits on
// the Runtime's own Event, as before; a suspended coroutine is resumed on
// an engine thread (Runtime::post) by whichever comes first of notify(),
// its deadline (a Runtime timer) and a stop request (a std::stop_callback),
// exactly once, after which the other two are disarmed.
//
// Like Event it is an auto-reset binary signal: a notify() before the wait
// is not lost, and wakes the next wait at once.

#ifndef TURNSTILE_LOCKS_ENGINE_ASYNC_SIGNAL_H_
#define TURNSTILE_LOCKS_ENGINE_ASYNC_SIGNAL_H_

#include <atomic>
#include <coroutine>
#include <cstdint>
#include <memory>
#include <optional>
#include <stop_token>

#include "locks/engine/task.h"
#include "turnstile/mutex.h"
#include "turnstile/runtime.h"

namespace turnstile::detail {

class AsyncSignal final : public Event {
 public:
  explicit AsyncSignal(Runtime& runtime) : runtime_(runtime), blocking_(runtime.make_event()) {}
  AsyncSignal(const AsyncSignal&) = delete;
  AsyncSignal& operator=(const AsyncSignal&) = delete;
  ~AsyncSignal() override;

  void notify() override;
  bool wait_until(Instant deadline) override;

  // One suspension, shared by the coroutine and what may end it.
  struct Armed;

  // Awaitable: resumes once the signal is set (consuming it), `until`
  // passes or a stop is requested on `stop` (which must outlive the wait).
  // Says nothing of which: the caller looks at its own state.
  class Wait {
   public:
    Wait(AsyncSignal& signal, Instant until, const std::stop_token& stop)
        : signal_(signal), until_(until), stop_(stop) {}
    bool await_ready();
    bool await_suspend(std::coroutine_handle<> suspended);
    void await_resume();

   private:
    AsyncSignal& signal_;
    Instant until_;
    const std::stop_token& stop_;
    std::shared_ptr<Armed> armed_;
  };
  [[nodiscard]] Wait wait_async(Instant until, const std::stop_token& stop) { return Wait(*this, until, stop); }

  // Waits as `style` says: blocking (wait_until, ending early only by
  // notify) or suspending (wait_async).
  Task<void> wait(WaitStyle style, Instant until, std::stop_token stop);

 private:
  Runtime& runtime_;
  std::unique_ptr<Event> blocking_;  // blocking waits
  Mutex mutex_;
  bool signaled_ TURNSTILE_GUARDED_BY(mutex_) = false;         // set while no coroutine is suspended on it
  std::shared_ptr<Armed> armed_ TURNSTILE_GUARDED_BY(mutex_);  // the suspended coroutine's, or null
};

// Sleeps until `until` or a stop requested on `stop`, as `style` says;
// false if it was stopped.
Task<bool> sleep_unless_stopped(Runtime& runtime, WaitStyle style, Instant until, std::stop_token stop);

}  // namespace turnstile::detail

#endif  // TURNSTILE_LOCKS_ENGINE_ASYNC_SIGNAL_H_
