// turnstile/future.h
//
// The result of an asynchronous lock operation (lock_async(), unlock_async(),
// ...). Unlike std::future, waiting goes through the lock's Runtime, so the
// same code waits on a real condition in production and advances virtual
// time in simulation.
//
//   turnstile::Future<bool> attempt = lock.try_lock_async({.wait = 3s});
//   ... other work ...
//   if (attempt.get()) { ... }
//
// get() may be called once; it returns the value or rethrows the operation's
// exception. A Future is move-only.
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
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <type_traits>
#include <utility>
#include <variant>

#include "turnstile/runtime.h"

namespace turnstile {

namespace detail {

template <typename T>
using StoredValue = std::conditional_t<std::is_void_v<T>, std::monostate, T>;

template <typename T>
struct FutureState {
  explicit FutureState(Runtime& runtime) : ready_event(runtime.make_event()) {}

  std::mutex mutex;  // guards value/error/ready; never held while waiting
  std::optional<StoredValue<T>> value;
  std::exception_ptr error;
  bool ready = false;
  std::unique_ptr<Event> ready_event;
};

}  // namespace detail

template <typename T>
class Future;

// Runs `operation` as a new task of `runtime` and returns its future result.
template <typename T>
Future<T> run_async(Runtime& runtime, std::function<T()> operation);

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
    std::lock_guard guard(state_->mutex);
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

  // Waits for the result, then returns it or rethrows the operation's error.
  // Invalidates the future.
  T get() {
    const bool ready = wait_until(kNoDeadline);
    assert(ready);
    (void)ready;
    auto state = std::move(state_);
    if (state->error) std::rethrow_exception(state->error);
    if constexpr (!std::is_void_v<T>) return std::move(*state->value);
  }

 private:
  template <typename U>
  friend Future<U> run_async(Runtime& runtime, std::function<U()> operation);
  explicit Future(std::shared_ptr<detail::FutureState<T>> state) : state_(std::move(state)) {}

  std::shared_ptr<detail::FutureState<T>> state_;
};

template <typename T>
Future<T> run_async(Runtime& runtime, std::function<T()> operation) {
  auto state = std::make_shared<detail::FutureState<T>>(runtime);
  runtime.spawn([state, operation = std::move(operation)] {
    std::optional<detail::StoredValue<T>> value;
    std::exception_ptr error;
    try {
      if constexpr (std::is_void_v<T>) {
        operation();
        value.emplace();
      } else {
        value.emplace(operation());
      }
    } catch (...) {
      error = std::current_exception();
    }
    {
      std::lock_guard guard(state->mutex);
      state->value = std::move(value);
      state->error = error;
      state->ready = true;
    }
    state->ready_event->notify();
  });
  return Future<T>(std::move(state));
}

}  // namespace turnstile

#endif  // TURNSTILE_FUTURE_H_
