// turnstile/asio.h
//
// Acquiring from Boost.Asio: an asynchronous operation with Asio's
// completion tokens, so a coroutine awaits a hold without blocking its
// executor's thread, and a callback or a future works as well. Header-only;
// include it where Boost.Asio is used (the library itself does not depend
// on Asio).
//
//   boost::asio::awaitable<void> handle(turnstile::ReentrantLock& lock) {
//     turnstile::LockHold hold = co_await turnstile::asio::async_acquire_hold(
//         lock, {.wait = turnstile::kWaitForever}, boost::asio::use_awaitable);
//     co_await write_order(hold.fencing_token());   // any thread may resume us
//     co_await turnstile::asio::async_release(std::move(hold), boost::asio::use_awaitable);
//   }
//
// The completion signature is void(std::exception_ptr, LockHold): with
// use_awaitable the error is thrown at the co_await, and the hold comes
// back as the value; an empty hold means nothing was taken within
// options.wait, or options.stop was requested.
//
// Contract:
//   * The executor's thread never blocks: the acquisition (its script
//     calls, and its wait for a wake-up) runs on a task of the lock's
//     Runtime (Holdable::try_acquire_hold_async(), flavor.h), and the
//     completion is posted to the handler's associated executor (for a
//     coroutine, its own), never run inline. In production a waiting
//     acquisition keeps one runtime thread parked on its wake-up (no CPU,
//     one wake-up message per release): ten thousand waiting at once is
//     the runtime's bound (RealRuntime::kMaxLiveSpawnedThreads).
//   * The operation keeps the executor's work count up until it completes,
//     so io_context::run() does not return under a waiting coroutine.
//   * Cancelling: through options.stop (a std::stop_source the caller
//     keeps): the operation completes with an empty hold within one
//     wake-up, leaving nothing behind (a fair-lock queue entry is
//     withdrawn). Per-operation cancellation slots came with Boost 1.77;
//     Debian 12's 1.74 has none. With GCC 12 (Debian 12's), make options
//     that hold a stop token a named variable, not a temporary inside the
//     co_await expression: GCC 12 destroys such temporaries twice (the
//     stop token's reference count with them; tests/locks/asio_test.cpp
//     shows the form):
//
//       const turnstile::AcquireOptions options{.wait = kWaitForever, .stop = stop};
//       turnstile::LockHold hold = co_await async_acquire_hold(lock, options, use_awaitable);
//   * The hold is a value (turnstile/hold.h): it may be released on any
//     thread the coroutine resumes on, or moved elsewhere. The holdable it
//     came from may go first; its Client must outlive the operation.
//   * A handler that is destroyed without being run (its io_context
//     destroyed first) releases what was taken.

#ifndef TURNSTILE_ASIO_H_
#define TURNSTILE_ASIO_H_

// <utility> first: Boost 1.74's awaitable.hpp uses std::exchange without
// including it.
#include <utility>
// clang-format off
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
// clang-format on
#include <exception>
#include <memory>
#include <optional>
#include <utility>

#include "turnstile/flavor.h"
#include "turnstile/future.h"
#include "turnstile/hold.h"

namespace turnstile::asio {

namespace detail {

// A handler and the work it keeps counted, until its operation ends.
template <typename Handler>
struct Pending {
  using Executor = boost::asio::associated_executor_t<Handler>;
  explicit Pending(Handler&& handler_in)
      : work(boost::asio::make_work_guard(boost::asio::get_associated_executor(handler_in))),
        handler(std::move(handler_in)) {}

  boost::asio::executor_work_guard<Executor> work;
  std::optional<Handler> handler;
};

template <typename Handler>
std::shared_ptr<Pending<std::decay_t<Handler>>> make_pending(Handler&& handler) {
  return std::make_shared<Pending<std::decay_t<Handler>>>(std::forward<Handler>(handler));
}

// Posts the completion with `args` to the handler's executor (never
// inline). The work is released here, after post() returned, not by the
// completion: until this thread stops touching the executor's context,
// its run() cannot return (and the context be destroyed) under it.
template <typename Handler, typename... Args>
void post_completion(const std::shared_ptr<Pending<Handler>>& pending, Args... args) {
  auto executor = pending->work.get_executor();
  boost::asio::post(executor, [pending, ... args = std::move(args)]() mutable {
    Handler handler = std::move(*pending->handler);
    pending->handler.reset();
    std::move(handler)(std::move(args)...);
  });
  pending->work.reset();
}

struct InitiateAcquireHold {
  template <typename Handler>
  void operator()(Handler&& handler, Holdable* holdable, const AcquireOptions& options) const {
    auto pending = make_pending(std::forward<Handler>(handler));
    Future<LockHold> acquiring;
    try {
      acquiring = holdable->try_acquire_hold_async(options);
    } catch (...) {
      post_completion(pending, std::current_exception(), LockHold());
      return;
    }
    // Runs on the runtime task that completes the acquisition (or here, if
    // it is already done); only posts.
    (void)acquiring.then([pending](Future<LockHold> done) {
      std::exception_ptr error;
      LockHold hold;
      try {
        hold = done.get();
      } catch (...) {
        error = std::current_exception();
      }
      post_completion(pending, error, std::move(hold));
    });
  }
};

struct InitiateRelease {
  template <typename Handler>
  void operator()(Handler&& handler, LockHold hold) const {
    auto pending = make_pending(std::forward<Handler>(handler));
    if (!hold.owns_hold()) {
      post_completion(pending);
      return;
    }
    (void)hold.release_async().then([pending](Future<void> done) {
      done.get();  // never fails (LockHold::release_async())
      post_completion(pending);
    });
  }
};

}  // namespace detail

// Acquires a hold of `holdable` as Holdable::try_acquire_hold(options)
// would, completing `token` with (std::exception_ptr, LockHold). Errors
// thrown before anything is sent (an invalid lease) complete it too.
template <typename CompletionToken>
auto async_acquire_hold(Holdable& holdable, const AcquireOptions& options, CompletionToken&& token) {
  return boost::asio::async_initiate<CompletionToken, void(std::exception_ptr, LockHold)>(detail::InitiateAcquireHold{},
                                                                                          token, &holdable, options);
}

// Gives `hold` back without blocking the executor's thread (release() on
// a runtime task: LockHold::release_async()), completing `token` with
// void() once done; a loss or a failure goes where release() sends it. An
// empty hold completes at once (posted). The destructor of a hold, and
// release(), wait for the script call on the calling thread instead.
template <typename CompletionToken>
auto async_release(LockHold hold, CompletionToken&& token) {
  return boost::asio::async_initiate<CompletionToken, void()>(detail::InitiateRelease{}, token, std::move(hold));
}

}  // namespace turnstile::asio

#endif  // TURNSTILE_ASIO_H_
