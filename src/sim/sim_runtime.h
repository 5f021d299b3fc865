// sim/sim_runtime.h
//
// The Runtime of one simulated client (see turnstile/runtime.h for the
// contract). Everything goes through the world's Scheduler:
//
//   * now():           the world's VirtualClock (one monotonic clock for all).
//   * wall_clock_ms(): the servers' Unix time plus this client's clock error:
//                      a fixed offset and a drift rate in parts per million
//                      of elapsed virtual time. Only deadlines that clients
//                      compute and store in Redis see it.
//   * sleep_until, Event waits: park the calling simulated task (they throw
//                      SimulationError outside a task).
//   * schedule_at:     a timer of this client whose callback runs as a new
//                      task of this client (so it may block), frozen by a
//                      pause, dropped by a crash.
//   * spawn:           a new task of this client.
//   * current_task_id(): the simulated task id (0 outside any task).
//   * random_u64():    this client's xoshiro256** stream of the world seed.
//   * buggify(point):  the world's BUGGIFY draw (sim/buggify.h), if it has one.
//
// Not thread-safe: used only from the world's scheduler thread.

#ifndef TURNSTILE_SIM_SIM_RUNTIME_H_
#define TURNSTILE_SIM_SIM_RUNTIME_H_

#include <cstdint>

#include "sim/buggify.h"
#include "sim/random.h"
#include "sim/scheduler.h"
#include "turnstile/runtime.h"

namespace turnstile::sim {

class SimRuntime final : public Runtime {
 public:
  // Drift beyond this is not a clock, it is a bug in the scenario.
  static constexpr std::int64_t kMaxDriftPpm = 1'000'000;

  // `seed`/`stream` select the random stream (World passes its seed and the
  // client id).
  SimRuntime(Scheduler& scheduler, ClientId client, std::uint64_t seed, std::uint64_t stream);

  Instant now() override;
  std::int64_t wall_clock_ms() override;
  void sleep_until(Instant deadline) override;
  std::unique_ptr<Event> make_event() override;
  TimerId schedule_at(Instant when, std::function<void()> callback) override;
  bool cancel(TimerId id) override;
  void spawn(std::function<void()> task) override;
  std::uint64_t current_task_id() override;
  std::uint64_t random_u64() override;
  // The world's BUGGIFY points (sim/buggify.h); none set: never fires.
  bool buggify(std::string_view point) override;
  void set_buggify(Buggify* buggify) { buggify_ = buggify; }

  ClientId client() const { return client_; }

  // Clock error of this client's wall clock (both zero by default).
  void set_wall_clock_offset(Duration offset) { wall_clock_offset_ = offset; }
  void set_clock_drift_ppm(std::int64_t drift_ppm);

 private:
  Scheduler& scheduler_;
  ClientId client_;
  Random random_;
  Duration wall_clock_offset_{0};
  std::int64_t drift_ppm_ = 0;
  Buggify* buggify_ = nullptr;
};

}  // namespace turnstile::sim

#endif  // TURNSTILE_SIM_SIM_RUNTIME_H_
