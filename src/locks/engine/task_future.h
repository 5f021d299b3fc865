// locks/engine/task_future.h
//
// The asynchronous forms of the public API (Future<T>, turnstile/future.h)
// over an engine task (locks/engine/task.h): the task is started suspending on the
// Runtime's engine threads, and its outcome, turned into the caller's T by
// `finish` on the thread that ends it, completes the future. No thread is
// spawned and none is held while the task waits.

#ifndef TURNSTILE_LOCKS_ENGINE_TASK_FUTURE_H_
#define TURNSTILE_LOCKS_ENGINE_TASK_FUTURE_H_

#include <exception>
#include <memory>
#include <optional>
#include <utility>

#include "locks/engine/task.h"
#include "turnstile/future.h"

namespace turnstile::detail {

// `finish` takes the task's value (U) and returns T; it may throw (the
// future then holds that error) and must not block for long.
template <typename T, typename U, typename Finish>
[[nodiscard]] Future<T> start_future(Runtime& runtime, Task<U> task, Finish finish) {
  static_assert(!std::is_void_v<U>, "an engine task answers with a value");
  auto state = std::make_shared<FutureState<T>>(runtime);
  start(runtime, std::move(task),
        [state, finish = std::move(finish)](std::optional<U> value, std::exception_ptr error) mutable noexcept {
          state->complete([&]() -> T {
            if (error) std::rethrow_exception(error);
            return finish(std::move(*value));
          });
        });
  return future_of(std::move(state));
}

// run_async() (turnstile/future.h) for an operation that never waits, only
// makes script calls (a release): on an engine thread (Runtime::post),
// not on a thread of its own.
template <typename T, typename Operation>
[[nodiscard]] Future<T> post_future(Runtime& runtime, Operation operation) {
  auto state = std::make_shared<FutureState<T>>(runtime);
  runtime.post([state, operation = std::move(operation)]() mutable { state->complete(operation); });
  return future_of(std::move(state));
}

}  // namespace turnstile::detail

#endif  // TURNSTILE_LOCKS_ENGINE_TASK_FUTURE_H_
