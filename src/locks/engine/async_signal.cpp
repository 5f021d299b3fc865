#include "locks/engine/async_signal.h"

#include <utility>

#include "locks/engine/acquire_wait.h"

namespace turnstile::detail {

// The phases of one suspension. A wake-up that comes while the waits are
// still being armed is noted, and the coroutine then continues without
// suspending: it is resumed exactly once, never before await_suspend()
// has finished with it.
struct AsyncSignal::Armed {
  enum Phase : int { kArming, kArmed, kFired, kFiredWhileArming };

  // What a stop request runs (on the requesting thread): only fire().
  struct FireOnStop {
    Armed* armed;
    void operator()() const noexcept { armed->fire(); }
  };

  Armed(Runtime& runtime_in, std::coroutine_handle<> handle_in) : runtime(runtime_in), handle(handle_in) {}

  void fire() {
    int phase_now = phase.load();
    int next = kFired;
    do {
      if (phase_now == kFired || phase_now == kFiredWhileArming) return;
      next = phase_now == kArming ? kFiredWhileArming : kFired;
    } while (!phase.compare_exchange_weak(phase_now, next));
    if (next == kFired) runtime.post([resumed = handle] { resumed.resume(); });
  }

  Runtime& runtime;
  const std::coroutine_handle<> handle;
  std::atomic<int> phase{kArming};
  // Written while arming only; read once resumed.
  std::optional<Runtime::TimerId> timer;
  std::optional<std::stop_callback<FireOnStop>> on_stop;
};

AsyncSignal::~AsyncSignal() {
  // A suspended wait ends before its signal goes (the coroutine owns both).
  TURNSTILE_CHECK(armed_ == nullptr);
}

void AsyncSignal::notify() {
  std::shared_ptr<Armed> armed;
  {
    const MutexLock guard(mutex_);
    armed = std::move(armed_);
    if (armed == nullptr) signaled_ = true;
  }
  if (armed != nullptr) {
    armed->fire();
    return;
  }
  blocking_->notify();
}

bool AsyncSignal::wait_until(Instant deadline) {
  const bool signaled = blocking_->wait_until(deadline);
  if (signaled) {
    const MutexLock guard(mutex_);
    signaled_ = false;
  }
  return signaled;
}

bool AsyncSignal::Wait::await_ready() {
  if (stop_.stop_requested() || signal_.runtime_.now() >= until_) return true;
  const MutexLock guard(signal_.mutex_);
  return std::exchange(signal_.signaled_, false);
}

bool AsyncSignal::Wait::await_suspend(std::coroutine_handle<> suspended) {
  const auto armed = std::make_shared<Armed>(signal_.runtime_, suspended);
  {
    const MutexLock guard(signal_.mutex_);
    if (std::exchange(signal_.signaled_, false)) return false;  // notified since await_ready()
    TURNSTILE_CHECK_MSG(signal_.armed_ == nullptr, "one coroutine waits on a signal at a time");
    signal_.armed_ = armed;
  }
  armed_ = armed;
  if (until_ < kNoDeadline) armed->timer = signal_.runtime_.schedule_at(until_, [armed] { armed->fire(); });
  if (stop_.stop_possible()) armed->on_stop.emplace(stop_, Armed::FireOnStop{armed.get()});
  int expected = Armed::kArming;
  // From here on another thread may resume the coroutine (and end this
  // awaiter): nothing of `this` is touched after a successful exchange.
  if (armed->phase.compare_exchange_strong(expected, Armed::kArmed)) return true;
  armed->phase.store(Armed::kFired);  // woken while arming: go on at once
  return false;
}

void AsyncSignal::Wait::await_resume() {
  if (armed_ == nullptr) return;
  {
    const MutexLock guard(signal_.mutex_);
    if (signal_.armed_ == armed_) signal_.armed_.reset();
  }
  if (armed_->timer) (void)signal_.runtime_.cancel(*armed_->timer);
  armed_->on_stop.reset();  // waits for a stop callback running elsewhere: it only fires
  armed_.reset();
}

Task<void> AsyncSignal::wait(WaitStyle style, Instant until, std::stop_token stop) {
  if (style == WaitStyle::blocking) {
    // A stop request wakes the sleeper, which then sees it.
    const std::stop_callback on_stop(stop, [this] { notify(); });
    (void)wait_until(until);
    co_return;
  }
  Wait suspension = wait_async(until, stop);
  co_await suspension;
}

Task<bool> sleep_unless_stopped(Runtime& runtime, WaitStyle style, Instant until, std::stop_token stop) {
  if (style == WaitStyle::blocking) co_return sleep_unless_stopped(runtime, until, stop);
  AsyncSignal timer_only(runtime);
  while (!stop.stop_requested() && runtime.now() < until) {
    AsyncSignal::Wait suspension = timer_only.wait_async(until, stop);
    co_await suspension;
  }
  co_return !stop.stop_requested();
}

}  // namespace turnstile::detail
