// turnstile/asio.h
//
// Acquiring from Boost.Asio: asynchronous operations with Asio's completion
// tokens, so a coroutine awaits a hold without blocking its executor's
// thread, and a callback or a future works as well. Header-only; include it
// where Boost.Asio is used (the library itself does not depend on Asio).
//
//   boost::asio::awaitable<void> handle(turnstile::ReentrantLock& lock) {
//     auto [error, hold] = co_await turnstile::asio::async_acquire(
//         lock, {.wait = 5s}, boost::asio::as_tuple(boost::asio::use_awaitable));   // Boost >= 1.78
//     if (error) co_return;            // timed_out, operation_aborted, or a turnstile::asio::errc
//     co_await write_order(hold.fencing_token());   // any thread may resume us
//     co_await turnstile::asio::async_release(std::move(hold), boost::asio::use_awaitable);
//   }
//
// Two forms, one operation:
//   * async_acquire(holdable, asio::AcquireOptions, token): completes with
//     (boost::system::error_code, LockHold). Success: no error and a held
//     hold. Nothing taken within options.wait: boost::asio::error::timed_out.
//     Cancelled (options.stop) or its io_context gone: operation_aborted
//     (the latter never reaches the handler: Asio destroys it unrun).
//     Anything else: a turnstile::asio::errc (errc::unreachable,
//     errc::server_error, errc::invalid_argument, errc::failed); the form
//     below keeps the exception itself. With use_awaitable a non-zero code
//     is thrown as boost::system::system_error.
//   * async_acquire_hold(holdable, turnstile::AcquireOptions, token):
//     completes with (std::exception_ptr, LockHold); an empty hold means
//     nothing was taken within options.wait or options.stop was requested.
//
// Contract:
//   * The executor's thread never blocks, and no thread is kept for a
//     waiting operation: the acquisition runs as an engine task of the
//     lock's Runtime (locks/engine/task.h, Holdable::try_acquire_hold_async()),
//     suspended between its tries, on the Runtime's few engine threads. A
//     hundred thousand may wait at once. The completion is posted to the
//     handler's associated executor (for a coroutine, its own), never run
//     inline.
//   * The operation keeps the executor's work count up until it completes,
//     so io_context::run() does not return under a waiting coroutine.
//   * Shutting down is safe: an io_context stopped and destroyed (or any
//     execution context shut down) with operations pending destroys their
//     handlers unrun, as Asio does its own; each pending acquisition is
//     cancelled, and a hold taken for a handler that can no longer run is
//     released at once. Nothing touches the context after its shutdown.
//   * Cancelling: through a std::stop_source (options.stop): the operation
//     completes within one wake-up, leaving nothing behind (a fair-lock
//     queue entry is withdrawn). Per-operation cancellation slots came with
//     Boost 1.77; Debian 12's 1.74 has none.
//   * GCC 12 destroys a temporary inside a co_await expression twice (a
//     stop token's reference count with it). asio::AcquireOptions is
//     trivially destructible (it names the stop source by pointer), so
//     `co_await async_acquire(lock, {.wait = 5s, .stop = &stop}, ...)` is
//     safe there; turnstile::AcquireOptions holding a stop token is not:
//     with async_acquire_hold make such options a named variable.
//   * The hold is a value (turnstile/hold.h): it may be released on any
//     thread the coroutine resumes on, or moved elsewhere. The holdable it
//     came from may go first; its Client must outlive the operation.

#ifndef TURNSTILE_ASIO_H_
#define TURNSTILE_ASIO_H_

// <utility> first: Boost 1.74's awaitable.hpp uses std::exchange without
// including it.
#include <utility>
// clang-format off
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/execution_context.hpp>
#include <boost/asio/execution/context.hpp>
#include <boost/asio/execution/executor.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/query.hpp>
#include <boost/system/error_code.hpp>
// clang-format on
#include <exception>
#include <memory>
#include <optional>
#include <set>
#include <stop_token>
#include <string>
#include <type_traits>
#include <vector>

#include "turnstile/errors.h"
#include "turnstile/flavor.h"
#include "turnstile/future.h"
#include "turnstile/hold.h"
#include "turnstile/mutex.h"

namespace turnstile::asio {

// How async_acquire() waits. Trivially destructible (see the overview).
struct AcquireOptions {
  // How long to wait for the hold; kWaitForever for as long as it takes.
  Duration wait = kWaitForever;
  // As turnstile::AcquireOptions::lease.
  std::optional<Duration> lease = {};
  // A stop request on it cancels the operation (operation_aborted). Read
  // when the operation starts; the source must outlive the operation.
  const std::stop_source* stop = nullptr;
};
static_assert(std::is_trivially_destructible_v<AcquireOptions>);

// What async_acquire() completes with besides Asio's own codes.
enum class errc {
  failed = 1,            // any other turnstile::Error (async_acquire_hold keeps it)
  unreachable = 2,       // ConnectionError: Redis did not answer in time
  server_error = 3,      // ServerError: Redis refused a call
  invalid_argument = 4,  // InvalidArgumentError: a bad lease or wait
};

inline const boost::system::error_category& error_category() noexcept {
  class Category final : public boost::system::error_category {
   public:
    const char* name() const noexcept override { return "turnstile"; }
    std::string message(int value) const override {
      switch (static_cast<errc>(value)) {
        case errc::failed:
          return "the acquisition failed";
        case errc::unreachable:
          return "Redis was unreachable";
        case errc::server_error:
          return "Redis refused a call";
        case errc::invalid_argument:
          return "an invalid argument";
      }
      return "unknown turnstile error";
    }
  };
  static const Category category;
  return category;
}

inline boost::system::error_code make_error_code(errc value) noexcept {
  return {static_cast<int>(value), error_category()};
}

namespace detail {

// The error code of an acquisition's exception.
inline boost::system::error_code code_of(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const ConnectionError&) {
    return make_error_code(errc::unreachable);
  } catch (const ServerError&) {
    return make_error_code(errc::server_error);
  } catch (const InvalidArgumentError&) {
    return make_error_code(errc::invalid_argument);
  } catch (...) {
    return make_error_code(errc::failed);
  }
}

// An operation the service of its handler's execution context knows of,
// so that the context's shutdown can abandon it.
class PendingBase {
 public:
  virtual ~PendingBase() = default;
  // Under the registry's lock, at shutdown: gives up the handler and its
  // work (destroyed by the caller after the lock) and cancels.
  virtual void abandon(std::vector<std::shared_ptr<void>>& destroyed_later) = 0;
};

// The operations pending on one execution context. Outlives the service:
// an acquisition that completes after the shutdown finds it shut.
struct Registry {
  Mutex mutex;  // held while posting a completion
  bool shut TURNSTILE_GUARDED_BY(mutex) = false;
  std::set<PendingBase*> pending TURNSTILE_GUARDED_BY(mutex);

  void shut_down() {
    std::vector<std::shared_ptr<void>> destroyed_later;
    {
      const MutexLock guard(mutex);
      shut = true;
      for (PendingBase* operation : pending) operation->abandon(destroyed_later);
      pending.clear();
    }
  }
};

class Service final : public boost::asio::execution_context::service {
 public:
  using key_type = Service;
  static inline boost::asio::execution_context::id id;

  explicit Service(boost::asio::execution_context& context)
      : boost::asio::execution_context::service(context), registry(std::make_shared<Registry>()) {}
  void shutdown() override { registry->shut_down(); }

  const std::shared_ptr<Registry> registry;
};

template <typename Executor>
boost::asio::execution_context& context_of(const Executor& executor) {
  if constexpr (boost::asio::execution::is_executor<Executor>::value) {
    return boost::asio::query(executor, boost::asio::execution::context);
  } else {
    return executor.context();
  }
}

// A handler, the work it keeps counted and the stop of its acquisition,
// until its operation ends or its context shuts down.
template <typename Handler>
class Pending final : public PendingBase, public std::enable_shared_from_this<Pending<Handler>> {
 public:
  using Executor = boost::asio::associated_executor_t<Handler>;

  explicit Pending(Handler&& handler_in)
      : work_(std::in_place, boost::asio::make_work_guard(boost::asio::get_associated_executor(handler_in))),
        handler_(std::move(handler_in)),
        registry_(boost::asio::use_service<Service>(context_of(work_->get_executor())).registry) {}

  // Registers with the context's service (false: it is shut down already).
  bool enlist() {
    const MutexLock guard(registry_->mutex);
    if (registry_->shut) return false;
    registry_->pending.insert(this);
    return true;
  }

  // Cancels the acquisition when `user` (if any) is stopped.
  std::stop_token stop_token(const std::stop_source* user) {
    if (user != nullptr) forward_.emplace(user->get_token(), Forward{&stop_});
    return stop_.get_token();
  }
  std::stop_token stop_token(const std::stop_token& user) {
    forward_.emplace(user, Forward{&stop_});
    return stop_.get_token();
  }
  bool stopped() const { return stop_.stop_requested(); }

  // Posts the completion with `args` to the handler's executor (never
  // inline), unless the context shut down: then `args` (a hold) are just
  // destroyed, here, which releases what they hold. The post and the end of
  // the work happen under the registry's lock, which the context's shutdown
  // takes first: this thread never touches a context being destroyed.
  template <typename... Args>
  void complete(Args... args) {
    const MutexLock guard(registry_->mutex);
    if (registry_->shut || !handler_) return;  // abandoned: `args` go with this frame
    registry_->pending.erase(this);
    auto self = this->shared_from_this();
    boost::asio::post(work_->get_executor(), [self, ... args = std::move(args)]() mutable {
      Handler handler = std::move(*self->handler_);
      self->handler_.reset();
      std::move(handler)(std::move(args)...);
    });
    work_.reset();
  }

 private:
  struct Forward {
    std::stop_source* stop;
    void operator()() const noexcept { stop->request_stop(); }
  };

  void abandon(std::vector<std::shared_ptr<void>>& destroyed_later) override {
    if (handler_) destroyed_later.push_back(std::make_shared<Handler>(std::move(*handler_)));
    handler_.reset();
    if (work_)
      destroyed_later.push_back(std::make_shared<boost::asio::executor_work_guard<Executor>>(std::move(*work_)));
    work_.reset();
    stop_.request_stop();
  }

  std::optional<boost::asio::executor_work_guard<Executor>> work_;
  std::optional<Handler> handler_;
  const std::shared_ptr<Registry> registry_;
  std::stop_source stop_;
  std::optional<std::stop_callback<Forward>> forward_;
};

template <typename Handler>
std::shared_ptr<Pending<std::decay_t<Handler>>> make_pending(Handler&& handler) {
  return std::make_shared<Pending<std::decay_t<Handler>>>(std::forward<Handler>(handler));
}

// Starts `holdable`'s acquisition for `pending` and calls `finish(pending,
// error, hold)` where it ends (not once the context shut down).
template <typename PendingPtr, typename Finish>
void start_acquisition(const PendingPtr& pending, Holdable& holdable, turnstile::AcquireOptions options,
                       Finish finish) {
  if (!pending->enlist()) return;  // the context is gone: nothing to start
  Future<LockHold> acquiring;
  try {
    acquiring = holdable.try_acquire_hold_async(options);
  } catch (...) {
    finish(pending, std::current_exception(), LockHold());
    return;
  }
  // Runs on the engine thread that completes the acquisition (or here, if
  // it is already done); only posts.
  (void)acquiring.then([pending, finish](Future<LockHold> done) {
    std::exception_ptr error;
    LockHold hold;
    try {
      hold = done.get();
    } catch (...) {
      error = std::current_exception();
    }
    finish(pending, error, std::move(hold));
  });
}

struct InitiateAcquire {
  template <typename Handler>
  void operator()(Handler&& handler, Holdable* holdable, const AcquireOptions& options) const {
    auto pending = make_pending(std::forward<Handler>(handler));
    const turnstile::AcquireOptions acquire{
        .wait = options.wait, .lease = options.lease, .stop = pending->stop_token(options.stop)};
    start_acquisition(pending, *holdable, acquire, [](const auto& done, std::exception_ptr error, LockHold hold) {
      boost::system::error_code code;
      if (error) {
        code = code_of(error);
      } else if (!hold.owns_hold()) {
        code = done->stopped() ? boost::system::error_code(boost::asio::error::operation_aborted)
                               : boost::system::error_code(boost::asio::error::timed_out);
      }
      done->complete(code, std::move(hold));
    });
  }
};

struct InitiateAcquireHold {
  template <typename Handler>
  void operator()(Handler&& handler, Holdable* holdable, const turnstile::AcquireOptions& options) const {
    auto pending = make_pending(std::forward<Handler>(handler));
    turnstile::AcquireOptions acquire = options;
    acquire.stop = pending->stop_token(options.stop);
    start_acquisition(pending, *holdable, acquire, [](const auto& done, std::exception_ptr error, LockHold hold) {
      done->complete(error, std::move(hold));
    });
  }
};

struct InitiateRelease {
  template <typename Handler>
  void operator()(Handler&& handler, LockHold hold) const {
    auto pending = make_pending(std::forward<Handler>(handler));
    if (!pending->enlist()) return;  // the context is gone: `hold` is released here
    if (!hold.owns_hold()) {
      pending->complete();
      return;
    }
    (void)hold.release_async().then([pending](Future<void> done) {
      done.get();  // never fails (LockHold::release_async())
      pending->complete();
    });
  }
};

}  // namespace detail

// Acquires a hold of `holdable` as Holdable::try_acquire_hold() would,
// completing `token` with (boost::system::error_code, LockHold); see the
// overview for the codes.
template <typename CompletionToken>
auto async_acquire(Holdable& holdable, const AcquireOptions& options, CompletionToken&& token) {
  return boost::asio::async_initiate<CompletionToken, void(boost::system::error_code, LockHold)>(
      detail::InitiateAcquire{}, token, &holdable, options);
}

// Acquires a hold of `holdable` as Holdable::try_acquire_hold(options)
// would, completing `token` with (std::exception_ptr, LockHold). Errors
// thrown before anything is sent (an invalid lease) complete it too.
template <typename CompletionToken>
auto async_acquire_hold(Holdable& holdable, const turnstile::AcquireOptions& options, CompletionToken&& token) {
  return boost::asio::async_initiate<CompletionToken, void(std::exception_ptr, LockHold)>(detail::InitiateAcquireHold{},
                                                                                          token, &holdable, options);
}

// Gives `hold` back without blocking the executor's thread (release() on
// an engine thread: LockHold::release_async()), completing `token` with
// void() once done; a loss or a failure goes where release() sends it. An
// empty hold completes at once (posted). The destructor of a hold, and
// release(), wait for the script call on the calling thread instead.
template <typename CompletionToken>
auto async_release(LockHold hold, CompletionToken&& token) {
  return boost::asio::async_initiate<CompletionToken, void()>(detail::InitiateRelease{}, token, std::move(hold));
}

}  // namespace turnstile::asio

namespace boost::system {
template <>
struct is_error_code_enum<turnstile::asio::errc> : std::true_type {};
}  // namespace boost::system

#endif  // TURNSTILE_ASIO_H_
