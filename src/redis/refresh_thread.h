// redis/refresh_thread.h
//
// A background thread that runs a topology refresh when asked: the cluster
// backend's slot map after MOVED or a dropped sharded channel, the sentinel
// backend's master after +switch-master or a lost connection. Requests made
// while a refresh runs are coalesced into one more run. A refresh that throws
// is retried after a backoff (redis/backoff.h), at most kMaxRefreshRetries
// times in a row, then waits for the next request.

#ifndef TURNSTILE_REDIS_REFRESH_THREAD_H_
#define TURNSTILE_REDIS_REFRESH_THREAD_H_

#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

#include "redis/backoff.h"

namespace turnstile::redis {

inline constexpr int kMaxRefreshRetries = 20;

class RefreshThread {
 public:
  explicit RefreshThread(std::function<void()> refresh) : refresh_(std::move(refresh)) {}
  // Stops the thread, waiting for a refresh in progress.
  ~RefreshThread() {
    {
      const std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    changed_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  RefreshThread(const RefreshThread&) = delete;
  RefreshThread& operator=(const RefreshThread&) = delete;

  // Asks for a refresh soon (starts the thread on first use). Never blocks
  // for long; safe from pub/sub handlers.
  void request() {
    {
      const std::lock_guard lock(mutex_);
      if (stopping_) return;
      requested_ = true;
      if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
    }
    changed_.notify_all();
  }

 private:
  void run() {
    Backoff backoff;
    int failures = 0;
    std::unique_lock lock(mutex_);
    for (;;) {
      changed_.wait(lock, [this] { return stopping_ || requested_; });
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
      if (changed_.wait_for(lock, backoff.next(), [this] { return stopping_; })) return;
      requested_ = true;
    }
  }

  const std::function<void()> refresh_;
  std::mutex mutex_;
  std::condition_variable changed_;
  bool requested_ = false;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace turnstile::redis

#endif  // TURNSTILE_REDIS_REFRESH_THREAD_H_
