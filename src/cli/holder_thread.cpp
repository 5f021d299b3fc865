// Acquire and release on one dedicated thread.

#include "cli/holder_thread.h"

#include <cassert>
#include <utility>

namespace turnstile::cli {

HolderThread::HolderThread(Holdable& held, std::optional<Duration> wait, WakeFd& done)
    : acquire_future_(acquire_result_.get_future()), release_future_(release_result_.get_future()) {
  std::future<bool> release_request = release_request_.get_future();
  thread_ = std::thread([this, &held, wait, &done, release_request = std::move(release_request)]() mutable {
    bool holding = false;
    try {
      std::optional<Hold> result = held.try_hold(
          AcquireOptions{.wait = wait.value_or(kWaitForever), .lease = std::nullopt, .stop = stop_.get_token()});
      holding = result.has_value();
      acquire_result_.set_value(std::move(result));
    } catch (...) {
      acquire_result_.set_exception(std::current_exception());
    }
    done.notify();
    if (!holding) return;
    if (!release_request.get()) return;
    try {
      held.release_hold();
      release_result_.set_value();
    } catch (...) {
      release_result_.set_exception(std::current_exception());
    }
  });
}

HolderThread::~HolderThread() {
  if (!finished_) finish(/*do_release=*/false);
  thread_.join();
}

std::optional<Hold> HolderThread::acquired() {
  std::optional<Hold> hold = acquire_future_.get();
  if (!hold) finished_ = true;  // the thread has nothing left to do
  return hold;
}

void HolderThread::finish(bool do_release) {
  assert(!finished_);
  finished_ = true;
  release_request_.set_value(do_release);
}

void HolderThread::release() {
  finish(/*do_release=*/true);
  release_future_.get();
}

}  // namespace turnstile::cli
