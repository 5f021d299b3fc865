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
  std::int64_t unix_ms_at_zero() const { return unix_ms_at_zero_; }

 private:
  std::int64_t unix_ms_at_zero_;
  Instant now_{};
};

// One server's own clock over the world's (ServerOptions::clock_offset and
// clock_drift_ppm): its expiries run on now_ms(), which drifts from the
// world's time (a fast clock expires keys early), and TIME and the *AT
// expiries read unix_time_us(), which also carries the offset. Without
// skew both are the world's. A change of drift is anchored at the instant
// it is made: the server's time never jumps.
class ServerClock {
 public:
  static constexpr std::int64_t kMaxDriftPpm = 100'000;  // 10 %

  explicit ServerClock(const VirtualClock& world) : world_(&world) {}

  const VirtualClock& world() const { return *world_; }

  // Nanoseconds since virtual zero by this server's clock.
  std::int64_t now_ns() const { return server_ns(world_ns()); }
  // The server's milliseconds, as Redis's mstime() (expiry decisions).
  std::int64_t now_ms() const { return now_ns() / kNsPerMs; }
  std::int64_t unix_time_us() const { return world_->unix_ms_at_zero() * 1000 + offset_ns_ / 1000 + now_ns() / 1000; }
  std::int64_t unix_time_ms() const { return unix_time_us() / 1000; }

  // Whole milliseconds, so that Unix ms and now_ms() differ by a constant.
  void set_offset(Duration offset) {
    TURNSTILE_CHECK_MSG(offset.count() % kNsPerMs == 0, "a server clock's offset is whole milliseconds");
    offset_ns_ = offset.count();
  }
  void set_drift_ppm(std::int64_t drift_ppm) {
    TURNSTILE_CHECK_MSG(drift_ppm >= -kMaxDriftPpm && drift_ppm <= kMaxDriftPpm, "a server clock drifts at most 10 %");
    const std::int64_t now = world_ns();
    anchor_server_ns_ = server_ns(now);
    anchor_world_ns_ = now;
    drift_ppm_ = drift_ppm;
  }
  Duration offset() const { return Duration(offset_ns_); }
  std::int64_t drift_ppm() const { return drift_ppm_; }

  // The last world millisecond that this clock reads as at most
  // `server_ms` throughout (a key with that deadline is live all through
  // it, and gone at some instant of the next: what checkers that judge in
  // whole world ms need, so that a grant made in the next ms does not
  // overlap it). The identity without drift.
  std::int64_t world_ms(std::int64_t server_ms) const {
    if (drift_ppm_ == 0 && anchor_server_ns_ == anchor_world_ns_) return server_ms;
    if (server_ms > kMaxConvertedMs || server_ms < 0) return server_ms;  // no key lives that long
    const auto live_throughout = [this, server_ms](std::int64_t world) {
      return server_ns((world + 1) * kNsPerMs - 1) / kNsPerMs <= server_ms;
    };
    const long double scale = 1.0L + static_cast<long double>(drift_ppm_) / 1e6L;
    const long double since_anchor_ns = static_cast<long double>(server_ms * kNsPerMs - anchor_server_ns_) / scale;
    std::int64_t guess = (anchor_world_ns_ + static_cast<std::int64_t>(since_anchor_ns)) / kNsPerMs;
    // The estimate is within a millisecond or two: settle it exactly.
    for (int step = 0; step < 4 && !live_throughout(guess); ++step) --guess;
    for (int step = 0; step < 4 && live_throughout(guess + 1); ++step) ++guess;
    return guess;
  }

 private:
  static constexpr std::int64_t kNsPerMs = 1'000'000;
  static constexpr std::int64_t kMaxConvertedMs = INT64_MAX / kNsPerMs / 4;
  std::int64_t world_ns() const { return world_->now().time_since_epoch().count(); }
  std::int64_t server_ns(std::int64_t world_ns) const {
    const std::int64_t since = world_ns - anchor_world_ns_;
    if (drift_ppm_ == 0) return anchor_server_ns_ + since;
    // since * ppm / 1e6 without overflow for any run length.
    const std::int64_t skew = since / 1'000'000 * drift_ppm_ + since % 1'000'000 * drift_ppm_ / 1'000'000;
    return anchor_server_ns_ + since + skew;
  }

  const VirtualClock* world_;
  std::int64_t offset_ns_ = 0;
  std::int64_t drift_ppm_ = 0;
  std::int64_t anchor_world_ns_ = 0;
  std::int64_t anchor_server_ns_ = 0;
};

}  // namespace turnstile::sim

#endif  // TURNSTILE_FAKE_REDIS_VIRTUAL_CLOCK_H_
