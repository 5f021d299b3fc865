// locks/engine/metrics_recorder.h
//
// The counters and histograms behind Client::metrics() (turnstile/metrics.h):
// relaxed atomics, safe from any thread, a fixed amount of memory. Every
// part of a client records into its ClientCore's one recorder; snapshot()
// reads them (each figure exact, the set not a consistent cut).

#ifndef TURNSTILE_LOCKS_ENGINE_METRICS_RECORDER_H_
#define TURNSTILE_LOCKS_ENGINE_METRICS_RECORDER_H_

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>

#include "turnstile/flavor.h"
#include "turnstile/metrics.h"
#include "turnstile/runtime.h"

namespace turnstile::detail {

// A histogram over fixed `Bounds` (microseconds), snapshot as `Histogram`.
template <const auto& Bounds, typename Histogram>
class HistogramRecorder {
 public:
  // Records one observation; a negative one (a clock that went back) as 0.
  void record(Duration value);
  Histogram snapshot() const;

 private:
  std::array<std::atomic<std::uint64_t>, Bounds.size() + 1> counts_{};
  std::atomic<std::int64_t> sum_us_{0};
};
using LatencyRecorder = HistogramRecorder<kLatencyBucketBoundsUs, LatencyHistogram>;
using HoldTimeRecorder = HistogramRecorder<kHoldBucketBoundsUs, HoldTimeHistogram>;

// How one acquisition that succeeded went (locks/engine/acquire_wait.h fills it).
struct AcquisitionTiming {
  Instant started{};
  // When the release message that woke the waiter arrived, if one did.
  std::optional<Instant> woken_at;
};

class MetricsRecorder {
 public:
  // A hold taken at `now`, `timing` telling how the wait went.
  void acquired(Flavor flavor, const AcquisitionTiming& timing, Instant now);
  void failed_try() { failed_tries_.fetch_add(1, std::memory_order_relaxed); }
  void unreplicated_grant() { unreplicated_grants_.fetch_add(1, std::memory_order_relaxed); }
  void renewed(std::uint64_t leases) { renewals_.fetch_add(leases, std::memory_order_relaxed); }
  void renewal_failed(std::uint64_t leases) { renewal_failures_.fetch_add(leases, std::memory_order_relaxed); }
  void lost(LockLostReason reason);
  void script_round_trip(Duration latency) { script_round_trip_.record(latency); }
  // Gauges: a hold began / ended after `held` (the watchdog's entries); a
  // waiter went to sleep / left.
  void hold_started(Flavor flavor) { holds_[static_cast<std::size_t>(flavor)].fetch_add(1, std::memory_order_relaxed); }
  void hold_ended(Flavor flavor, Duration held);
  void waiter_joined(Flavor flavor) {
    waiters_[static_cast<std::size_t>(flavor)].fetch_add(1, std::memory_order_relaxed);
  }
  void waiter_left(Flavor flavor) {
    waiters_[static_cast<std::size_t>(flavor)].fetch_sub(1, std::memory_order_relaxed);
  }

  // Everything but the backend's counters (Client::metrics adds those).
  MetricsSnapshot snapshot() const;

 private:
  std::array<std::atomic<std::uint64_t>, kFlavorCount> acquisitions_{};
  std::atomic<std::uint64_t> failed_tries_{0};
  std::atomic<std::uint64_t> unreplicated_grants_{0};
  std::atomic<std::uint64_t> handoffs_received_{0};
  std::atomic<std::uint64_t> renewals_{0};
  std::atomic<std::uint64_t> renewal_failures_{0};
  std::array<std::atomic<std::uint64_t>, kLockLostReasonCount> locks_lost_{};
  LatencyRecorder acquire_wait_;
  LatencyRecorder script_round_trip_;
  LatencyRecorder handoff_gap_;
  std::array<std::atomic<std::int64_t>, kFlavorCount> holds_{};
  std::array<std::atomic<std::int64_t>, kFlavorCount> waiters_{};
  HoldTimeRecorder hold_time_;
};

}  // namespace turnstile::detail

#endif  // TURNSTILE_LOCKS_ENGINE_METRICS_RECORDER_H_
