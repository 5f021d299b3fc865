// fake_redis/virtual_clock.h
//
// The one clock of a simulated world. Time moves only when the scheduler (or
// a test) advances it; nothing here reads the real clock. The servers of a
// world read it for expiry and TIME; simulated clients read it through their
// runtime, possibly with a drift of their own.

#ifndef TURNSTILE_FAKE_REDIS_VIRTUAL_CLOCK_H_
#define TURNSTILE_FAKE_REDIS_VIRTUAL_CLOCK_H_

#include <cstdint>

#include "core/check.h"
#include "turnstile/runtime.h"

namespace turnstile::sim {

class VirtualClock {
 public:
  // 2026-01-01T00:00:00Z: a fixed, realistic Unix time at virtual zero, so
  // wall-clock values in traces are identical from run to run.
  static constexpr std::int64_t kDefaultEpochMs = 1'767'225'600'000;

  explicit VirtualClock(std::int64_t unix_ms_at_zero = kDefaultEpochMs) : unix_ms_at_zero_(unix_ms_at_zero) {}

  Instant now() const { return now_; }

  // Moves time forward to `instant`; time never goes back.
  void advance_to(Instant instant) {
    TURNSTILE_CHECK_MSG(instant >= now_, "virtual time never goes back");
    now_ = instant;
  }
  void advance_by(Duration duration) {
    TURNSTILE_CHECK_MSG(duration >= Duration::zero(), "virtual time never goes back");
    now_ += duration;
  }

  // Unix time at now(), as the servers see it.
  std::int64_t unix_time_us() const {
    return unix_ms_at_zero_ * 1000 +
           std::chrono::duration_cast<std::chrono::microseconds>(now_.time_since_epoch()).count();
  }
  std::int64_t unix_time_ms() const { return unix_time_us() / 1000; }

 private:
  std::int64_t unix_ms_at_zero_;
  Instant now_{};
};

}  // namespace turnstile::sim

#endif  // TURNSTILE_FAKE_REDIS_VIRTUAL_CLOCK_H_
