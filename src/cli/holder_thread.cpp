// Acquire and release on one dedicated thread.

#include "cli/holder_thread.h"

#include <cassert>
#include <utility>

namespace turnstile::cli {

HolderThread::HolderThread(Flavor& flavor, std::optional<Duration> wait, WakeFd& done)
    : acquire_future_(acquire_result_.get_future()), release_future_(release_result_.get_future()) {
  std::future<bool> release_request = release_request_.get_future();
  thread_ = std::thread([this, &flavor, wait, &done, release_request = std::move(release_request)]() mutable {
    bool held = false;
    try {
      std::optional<Held> result = flavor.acquire(wait, stop_.get_token());
      held = result.has_value();
      acquire_result_.set_value(std::move(result));
    } catch (...) {
      acquire_result_.set_exception(std::current_exception());
    }
    done.notify();
    if (!held) return;
    if (!release_request.get()) return;
    try {
      flavor.release();
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

std::optional<Held> HolderThread::acquired() {
  std::optional<Held> held = acquire_future_.get();
  if (!held) finished_ = true;  // the thread has nothing left to do
  return held;
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
