// locks/engine/task.h
//
// How one waiting acquisition is written once and run two ways. The
// acquisition is a C++20 coroutine (Task<T>): straight-line code whose
// locals live in a heap frame of a few hundred bytes, not on a thread's
// stack. Where it waits (for a wake-up message, a retry timer, a stop) it
// co_awaits, and the way it was started decides what that means:
//
//   * WaitStyle::blocking: run_blocking() runs it on the calling thread,
//     and every wait blocks that thread through the Runtime, as a plain
//     function would (lock(), try_lock(), the simulator's tasks). It never
//     actually suspends.
//   * WaitStyle::suspending: start() runs it on the Runtime's engine
//     threads (Runtime::post); each wait suspends the coroutine and arms
//     what ends it (locks/engine/async_signal.h), so a waiting acquisition holds
//     no thread at all. Its script calls still block the engine thread
//     that runs them, for one round trip.
//
// Task<T> is lazy (nothing runs until it is awaited or started), move-only,
// and owns its frame; awaiting a Task from another Task runs it in place,
// and a wait loop keeps a constant stack however long it runs (see
// FinalAwaiter). An exception leaving the coroutine is rethrown to whoever
// awaits it, or handed to start()'s completion.

#ifndef TURNSTILE_LOCKS_ENGINE_TASK_H_
#define TURNSTILE_LOCKS_ENGINE_TASK_H_

#include <atomic>
#include <coroutine>
#include <cstdint>
#include <exception>
#include <functional>
#include <optional>
#include <type_traits>
#include <utility>
#include <variant>

#include "core/check.h"
#include "turnstile/runtime.h"

namespace turnstile::detail {

// How a coroutine's waits happen (see the overview).
enum class WaitStyle : std::uint8_t { blocking, suspending };

template <typename T>
class [[nodiscard]] Task {
  using Stored = std::conditional_t<std::is_void_v<T>, std::monostate, T>;

 public:
  struct promise_type;
  using Handle = std::coroutine_handle<promise_type>;

  // Ends the task: continues the awaiting coroutine if it is suspended
  // (the task suspended on the way and finished on another resumption),
  // else leaves it to go on by itself in await_suspend() (the task ran to
  // its end inside that call). Never nests one frame per await, so a
  // blocking loop of awaits runs in constant stack at any optimisation
  // level (symmetric transfer is a tail call only when the compiler makes
  // it one).
  struct FinalAwaiter {
    bool await_ready() const noexcept { return false; }
    std::coroutine_handle<> await_suspend(Handle finished) noexcept {
      PromiseBase& promise = finished.promise();
      if (promise.continuation && promise.handed_over.exchange(true)) return promise.continuation;
      return std::noop_coroutine();
    }
    void await_resume() const noexcept {}
  };

  struct PromiseBase {
    std::coroutine_handle<> continuation;  // the awaiting coroutine, or none
    // Set by whichever comes second of "the awaiting coroutine suspended"
    // and "this task finished"; that one continues the awaiting coroutine.
    std::atomic<bool> handed_over{false};
    std::optional<Stored> value;
    std::exception_ptr error;

    std::suspend_always initial_suspend() noexcept { return {}; }
    FinalAwaiter final_suspend() noexcept { return {}; }
    void unhandled_exception() noexcept { error = std::current_exception(); }
  };

  struct ValuePromise : PromiseBase {
    template <typename U>
    void return_value(U&& result) {
      this->value.emplace(std::forward<U>(result));
    }
  };
  struct VoidPromise : PromiseBase {
    void return_void() { this->value.emplace(); }
  };

  struct promise_type : std::conditional_t<std::is_void_v<T>, VoidPromise, ValuePromise> {
    Task get_return_object() { return Task(Handle::from_promise(*this)); }
  };

  Task(Task&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
  Task& operator=(Task&&) = delete;
  Task(const Task&) = delete;
  Task& operator=(const Task&) = delete;
  ~Task() {
    if (handle_) handle_.destroy();
  }

  // Awaiting runs the task here; if it finished (a blocking wait, or no
  // wait) the awaiting coroutine goes on at once, else it suspends until
  // the task's end resumes it (FinalAwaiter).
  bool await_ready() const noexcept { return false; }
  bool await_suspend(std::coroutine_handle<> awaiting) noexcept {
    handle_.promise().continuation = awaiting;
    handle_.resume();
    return !handle_.promise().handed_over.exchange(true);
  }
  T await_resume() { return take_result(); }

  // Runs the task to its end on the calling thread and returns its result
  // (or rethrows). Only for a task whose every wait is WaitStyle::blocking:
  // one that suspended would leave here unfinished (checked).
  T run_blocking() && {
    handle_.resume();
    TURNSTILE_CHECK_MSG(handle_.done(), "a blocking task never suspends");
    return take_result();
  }

 private:
  explicit Task(Handle handle) : handle_(handle) {}

  T take_result() {
    promise_type& promise = handle_.promise();
    if (promise.error) std::rethrow_exception(promise.error);
    TURNSTILE_CHECK(promise.value.has_value());
    if constexpr (!std::is_void_v<T>) return std::move(*promise.value);
  }

  Handle handle_;
};

namespace task_internal {

// The root of a started task: runs it, hands its outcome to `done`, and
// frees itself (its frame ends at its final suspension point).
struct Detached {
  struct promise_type {
    Detached get_return_object() { return Detached{std::coroutine_handle<promise_type>::from_promise(*this)}; }
    std::suspend_always initial_suspend() noexcept { return {}; }
    std::suspend_never final_suspend() noexcept { return {}; }
    void return_void() {}
    // Only what is no std::exception gets here (run_then hands those to
    // `done`): a simulated task's TaskKilled, a fiber's forced unwind. It
    // goes on up to whoever resumed the task, whose stack it unwinds.
    void unhandled_exception() { throw; }
  };
  std::coroutine_handle<promise_type> handle;
};

template <typename T, typename Done>
Detached run_then(Task<T> task, Done done) {
  std::exception_ptr error;
  if constexpr (std::is_void_v<T>) {
    try {
      co_await std::move(task);
    } catch (const std::exception&) {
      error = std::current_exception();
    }
    done(error);
  } else {
    std::optional<T> value;
    try {
      value.emplace(co_await std::move(task));
    } catch (const std::exception&) {
      error = std::current_exception();
    }
    done(std::move(value), error);
  }
}

}  // namespace task_internal

// Starts `task` on one of `runtime`'s engine threads (Runtime::post), never
// on the caller's, and calls `done` where it ends: done(optional<T>,
// exception_ptr) (done(exception_ptr) for Task<void>), the value set when
// no std::exception was thrown. `done` must not throw; it runs on the
// thread that finished the task.
template <typename T, typename Done>
void start(Runtime& runtime, Task<T> task, Done done) {
  const std::coroutine_handle<> root = task_internal::run_then(std::move(task), std::move(done)).handle;
  runtime.post([root] { root.resume(); });
}

}  // namespace turnstile::detail

#endif  // TURNSTILE_LOCKS_ENGINE_TASK_H_
