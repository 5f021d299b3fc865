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
#include <thread>
#include <utility>

#include "turnstile/mutex.h"

namespace turnstile::redis {

inline constexpr int kMaxRefreshRetries = 20;

class RefreshThread {
 public:
  explicit RefreshThread(std::function<void()> refresh) : refresh_(std::move(refresh)) {}
  // Stops the thread, waiting for a refresh in progress.
  ~RefreshThread();
  // The same, before the destructor (idempotent): later requests do nothing.
  void stop();
  RefreshThread(const RefreshThread&) = delete;
  RefreshThread& operator=(const RefreshThread&) = delete;

  // Asks for a refresh soon (starts the thread on first use). Never blocks
  // for long; safe from pub/sub handlers.
  void request();

 private:
  void run();

  const std::function<void()> refresh_;
  Mutex mutex_;
  std::condition_variable changed_;
  bool requested_ TURNSTILE_GUARDED_BY(mutex_) = false;
  bool stopping_ TURNSTILE_GUARDED_BY(mutex_) = false;
  // Started under mutex_ unless stopping_; stop() joins it unlocked, once
  // stopping_ is set and no request() can start it any more.
  std::thread thread_;
};

}  // namespace turnstile::redis

#endif  // TURNSTILE_REDIS_REFRESH_THREAD_H_
