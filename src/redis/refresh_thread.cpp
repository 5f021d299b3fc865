// The topology refresh thread (refresh_thread.h). Out of line on purpose:
// the thread's start lambda lives in a function of this file, so the
// std::thread state it instantiates is local to the library and never an
// exported symbol (tools/check_exports.py).

#include "redis/refresh_thread.h"

#include "redis/backoff.h"

namespace turnstile::redis {

RefreshThread::~RefreshThread() { stop(); }

void RefreshThread::stop() {
  {
    const MutexLock lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void RefreshThread::request() {
  {
    const MutexLock lock(mutex_);
    if (stopping_) return;
    requested_ = true;
    if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
  }
  changed_.notify_all();
}

void RefreshThread::run() {
  Backoff backoff;
  int failures = 0;
  MutexLock lock(mutex_);
  for (;;) {
    lock.wait(changed_, [this]() TURNSTILE_REQUIRES(mutex_) { return stopping_ || requested_; });
    if (stopping_) return;
    requested_ = false;
    lock.unlock();
    bool failed = false;
    try {
      refresh_();
    } catch (...) {
      failed = true;
    }
    lock.lock();
    if (!failed) {
      failures = 0;
      backoff.reset();
      continue;
    }
    if (++failures > kMaxRefreshRetries) {
      failures = 0;
      continue;  // wait for the next request
    }
    if (lock.wait_for(changed_, backoff.next(), [this]() TURNSTILE_REQUIRES(mutex_) { return stopping_; })) return;
    requested_ = true;
  }
}

}  // namespace turnstile::redis
