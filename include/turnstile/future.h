// turnstile/future.h
//
// The result of an asynchronous lock operation (lock_async(), unlock_async(),
// ...). Unlike std::future, waiting goes through the lock's Runtime, so the
// same code waits on a real condition in production and advances virtual
// time in simulation. The operation itself holds no thread while it waits:
// it runs on the Runtime's engine threads between its waits (Runtime::post),
// so any number may be pending (ClientOptions::max_waiting).
//
//   turnstile::Future<bool> attempt = lock.try_lock_async({.wait = 3s});
//   ... other work ...
//   if (attempt.get()) { ... }
//
// get() may be called once; it returns the value or rethrows the operation's
// exception. then() continues with a callable instead of waiting. A Future
// is move-only.
//
// Cancelling: an acquisition's future is cancelled through the stop token
// it was started with, not through the Future. The try_*_async forms take
// AcquireOptions (flavor.h), whose `stop` they honour as the blocking forms
// do: once a stop is requested (from any thread), the operation ends
// within one wake-up, leaving nothing behind, and the future becomes ready
// with false / nullopt. To wait as long as it takes yet stay cancellable,
// pass .wait = kWaitForever:
//
//   std::stop_source cancel;
//   turnstile::Future<bool> attempt =
//       lock.try_lock_async({.wait = turnstile::kWaitForever, .stop = cancel.get_token()});
//   ... cancel.request_stop();   // attempt.get() == false, unless it won first
//
// The forms without options (lock_async(), acquire_async()) wait as long as
// it takes and cannot be cancelled.

#ifndef TURNSTILE_FUTURE_H_
#define TURNSTILE_FUTURE_H_

#include <cassert>
#include <concepts>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>
#include <variant>

#include "turnstile/mutex.h"
#include "turnstile/runtime.h"

namespace turnstile {

namespace detail {

template <typename T>
using StoredValue = std::conditional_t<std::is_void_v<T>, std::monostate, T>;

template <typename T>
struct FutureState {
  explicit FutureState(Runtime& runtime_in) : runtime(runtime_in), ready_event(runtime_in.make_event()) {}

  // Runs `produce` (returning T) and makes its value or exception the
  // result: ready, the waiter notified, the continuation (if any) run.
  template <typename Produce>
  void complete(Produce&& produce) {
    std::optional<StoredValue<T>> result;
    std::exception_ptr failure;
    try {
      if constexpr (std::is_void_v<T>) {
        produce();
        result.emplace();
      } else {
        result.emplace(produce());
      }
    } catch (...) {
      failure = std::current_exception();
    }
    std::function<void()> next;
    {
      const MutexLock guard(mutex);
      value = std::move(result);
      error = failure;
      ready = true;
      next = std::move(continuation);
    }
    ready_event->notify();
    if (next) next();
  }

  Runtime& runtime;
  Mutex mutex;  // never held while waiting or calling
  std::optional<StoredValue<T>> value TURNSTILE_GUARDED_BY(mutex);
  std::exception_ptr error TURNSTILE_GUARDED_BY(mutex);
  bool ready TURNSTILE_GUARDED_BY(mutex) = false;
  std::unique_ptr<Event> ready_event;
  // Set by Future::then(); run once, when ready.
  std::function<void()> continuation TURNSTILE_GUARDED_BY(mutex);
};

}  // namespace detail

template <typename T>
class Future;

namespace detail {
// The future of `state` (the library's asynchronous operations complete it).
template <typename T>
Future<T> future_of(std::shared_ptr<FutureState<T>> state);
}  // namespace detail

// Runs `operation` as a new task of `runtime` and returns its future result.
template <typename T>
[[nodiscard]] Future<T> run_async(Runtime& runtime, std::function<T()> operation);

template <typename T>
class Future {
 public:
  Future() = default;
  Future(Future&&) noexcept = default;
  Future& operator=(Future&&) noexcept = default;
  Future(const Future&) = delete;
  Future& operator=(const Future&) = delete;

  bool valid() const { return state_ != nullptr; }

  bool is_ready() const {
    assert(valid());
    const MutexLock guard(state_->mutex);
    return state_->ready;
  }

  // Waits until the result is ready or `deadline` passes; true if ready.
  [[nodiscard]] bool wait_until(Instant deadline) {
    assert(valid());
    for (;;) {
      if (is_ready()) return true;
      if (!state_->ready_event->wait_until(deadline)) return is_ready();
    }
  }

  // Continues with `next`, a callable taking this future (ready by then):
  // returns the future of what `next` returns (or throws). `next` runs on
  // the thread that completes this future's operation (for the library's
  // operations, one of the Runtime's few engine threads, which carry every
  // waiting acquisition: Runtime::post), or at once on the caller if the
  // result is already there; it must not block (post longer work
  // elsewhere). It reads the result with get(), which rethrows the
  // operation's error:
  //
  //   lock.try_lock_async({.wait = 3s}).then([&](turnstile::Future<bool> got) {
  //     if (got.get()) schedule_work();
  //   });
  //
  // Invalidates this future (it is handed to `next`).
  template <typename Next>
  requires std::invocable<Next&, Future<T>>
  [[nodiscard]] Future<std::invoke_result_t<Next&, Future<T>>> then(Next&& next) {
    using U = std::invoke_result_t<Next&, Future<T>>;
    assert(valid());
    auto state = std::move(state_);
    auto following = std::make_shared<detail::FutureState<U>>(state->runtime);
    auto run = [state, following, next = std::forward<Next>(next)]() mutable {
      following->complete([&]() -> U { return std::invoke(next, Future<T>(state)); });
    };
    {
      const MutexLock guard(state->mutex);
      if (!state->ready) {
        state->continuation = std::move(run);
        return Future<U>(std::move(following));
      }
    }
    run();
    return Future<U>(std::move(following));
  }

  // Waits for the result, then returns it or rethrows the operation's error.
  // Invalidates the future.
  T get() {
    const bool ready = wait_until(kNoDeadline);
    assert(ready);
    (void)ready;
    auto state = std::move(state_);
    const MutexLock guard(state->mutex);  // ready: uncontended, and nothing else runs under it
    if (state->error) std::rethrow_exception(state->error);
    if constexpr (!std::is_void_v<T>) return std::move(*state->value);
  }

 private:
  template <typename U>
  friend Future<U> run_async(Runtime& runtime, std::function<U()> operation);
  template <typename U>
  friend class Future;
  template <typename U>
  friend Future<U> detail::future_of(std::shared_ptr<detail::FutureState<U>> state);
  explicit Future(std::shared_ptr<detail::FutureState<T>> state) : state_(std::move(state)) {}

  std::shared_ptr<detail::FutureState<T>> state_;
};

template <typename T>
Future<T> detail::future_of(std::shared_ptr<FutureState<T>> state) {
  return Future<T>(std::move(state));
}

template <typename T>
Future<T> run_async(Runtime& runtime, std::function<T()> operation) {
  auto state = std::make_shared<detail::FutureState<T>>(runtime);
  runtime.spawn([state, operation = std::move(operation)] { state->complete(operation); });
  return Future<T>(std::move(state));
}

}  // namespace turnstile

#endif  // TURNSTILE_FUTURE_H_
