#include "sim/sim_runtime.h"

#include <utility>

#include "core/check.h"

namespace turnstile::sim {

SimRuntime::SimRuntime(Scheduler& scheduler, ClientId client, std::uint64_t seed, std::uint64_t stream)
    : scheduler_(scheduler), client_(client), random_(seed, stream) {}

Instant SimRuntime::now() { return scheduler_.now(); }

std::int64_t SimRuntime::wall_clock_ms() {
  const VirtualClock& clock = scheduler_.clock();
  const std::int64_t elapsed_us =
      std::chrono::duration_cast<std::chrono::microseconds>(clock.now().time_since_epoch()).count();
  // |elapsed_us * drift| < 2^63 for ~100 days of virtual time at the maximal drift.
  const std::int64_t drift_us = elapsed_us / 1'000'000 * drift_ppm_ + elapsed_us % 1'000'000 * drift_ppm_ / 1'000'000;
  const std::int64_t offset_us = std::chrono::duration_cast<std::chrono::microseconds>(wall_clock_offset_).count();
  return (clock.unix_time_us() + drift_us + offset_us) / 1000;
}

void SimRuntime::set_clock_drift_ppm(std::int64_t drift_ppm) {
  TURNSTILE_CHECK(drift_ppm >= -kMaxDriftPpm && drift_ppm <= kMaxDriftPpm);
  drift_ppm_ = drift_ppm;
}

void SimRuntime::sleep_until(Instant deadline) { scheduler_.sleep_until(deadline); }

std::unique_ptr<Event> SimRuntime::make_event() { return scheduler_.make_event(); }

Runtime::TimerId SimRuntime::schedule_at(Instant when, std::function<void()> callback) {
  return scheduler_.schedule_at(client_, when, std::move(callback), Scheduler::RunAs::task);
}

bool SimRuntime::cancel(TimerId id) { return scheduler_.cancel(id); }

void SimRuntime::spawn(std::function<void()> task) { scheduler_.spawn(client_, std::move(task)); }

std::uint64_t SimRuntime::current_task_id() { return scheduler_.current_task(); }

std::uint64_t SimRuntime::random_u64() { return random_.next_u64(); }

bool SimRuntime::buggify(std::string_view point) { return buggify_ != nullptr && buggify_->fires(point); }

}  // namespace turnstile::sim
