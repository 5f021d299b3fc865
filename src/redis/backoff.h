// redis/backoff.h
//
// The delay between reconnection attempts: kInitialReconnectBackoffMs after
// the first failure, doubling with each further failure up to
// kMaxReconnectBackoffMs, back to the start after a success. Bounded, so a
// server that comes back is found again within kMaxReconnectBackoffMs; growing,
// so a dead server is not hammered by every caller.
//
// Not thread-safe; its owner guards it.

#ifndef TURNSTILE_REDIS_BACKOFF_H_
#define TURNSTILE_REDIS_BACKOFF_H_

#include <algorithm>
#include <chrono>

#include "core/check.h"
#include "turnstile/redis_backend.h"

namespace turnstile::redis {

class Backoff {
 public:
  // The delay to wait after the failure just seen.
  std::chrono::milliseconds next() {
    const std::chrono::milliseconds delay = delay_;
    TURNSTILE_CHECK(delay >= kInitial && delay <= kMax);
    delay_ = std::min(delay_ * 2, kMax);
    return delay;
  }

  void reset() { delay_ = kInitial; }

 private:
  static constexpr std::chrono::milliseconds kInitial{kInitialReconnectBackoffMs};
  static constexpr std::chrono::milliseconds kMax{kMaxReconnectBackoffMs};

  std::chrono::milliseconds delay_ = kInitial;
};

}  // namespace turnstile::redis

#endif  // TURNSTILE_REDIS_BACKOFF_H_
