// sim/drifting_runtime.h
//
// A Runtime whose monotonic clock runs at a different rate from the world's:
// a client clock that is `drift_ppm` parts per million fast (positive) or
// slow (negative) against the servers', which measure leases. It wraps the
// client's own runtime: now() is scaled from the moment of construction,
// and every deadline handed to it (sleeps, Event waits, timers) is scaled
// back, so code on it sees one consistent, drifting clock. This is the
// failure the RedLock drift allowance budgets for: a client whose clock
// runs slow believes its lock valid after the servers expired it.
//
// wall_clock_ms() is the wrapped runtime's (SimRuntime has its own wall
// clock error). Like every simulated runtime: one thread only.

#ifndef TURNSTILE_SIM_DRIFTING_RUNTIME_H_
#define TURNSTILE_SIM_DRIFTING_RUNTIME_H_

#include <cstdint>
#include <memory>

#include "turnstile/runtime.h"

namespace turnstile::sim {

class DriftingRuntime final : public Runtime {
 public:
  // Half speed or double speed is not a clock any more.
  static constexpr std::int64_t kMaxDriftPpm = 500'000;

  DriftingRuntime(std::shared_ptr<Runtime> inner, std::int64_t drift_ppm);

  Instant now() override;
  std::int64_t wall_clock_ms() override;
  void sleep_until(Instant deadline) override;
  std::unique_ptr<Event> make_event() override;
  TimerId schedule_at(Instant when, std::function<void()> callback) override;
  bool cancel(TimerId id) override;
  void spawn(std::function<void()> task) override;
  std::uint64_t current_task_id() override;
  std::uint64_t random_u64() override;
  bool buggify(std::string_view point) override;

  std::int64_t drift_ppm() const { return drift_ppm_; }
  // The world instant at which this clock reads `local` (rounded up, so a
  // wait until it never returns early); kNoDeadline stays kNoDeadline.
  Instant to_world(Instant local) const;
  // What this clock reads at world instant `world`.
  Instant to_local(Instant world) const;

 private:
  std::shared_ptr<Runtime> inner_;
  std::int64_t drift_ppm_;
  Instant origin_;  // both clocks agree here
};

}  // namespace turnstile::sim

#endif  // TURNSTILE_SIM_DRIFTING_RUNTIME_H_
