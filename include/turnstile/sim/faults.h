// turnstile/sim/faults.h
//
// Random faults drawn from a world's seed: a FaultPlan gives a rate per
// fault kind, World::apply_fault_plan() schedules or installs them for a
// window of virtual time, and the same seed draws the same faults.
//
//   turnstile::sim::FaultPlan plan;
//   plan.crash_per_client_hour = 0.5;     // timed faults: Poisson arrivals
//   plan.pause_per_client_hour = 2;
//   plan.request_drop = 0.001;            // per-call and per-message odds
//   plan.message_duplicate = 0.01;
//   plan.until = 50min;                   // faults heal after this instant
//   world.apply_fault_plan(plan);
//
// Every injected fault is a trace line. After `until`, no new fault starts
// (pauses and link outages already begun end on their own schedule), so a
// run can check liveness once faults heal.
//
// Fault kinds at chosen instants are World's methods (crash, pause,
// restart_server, failover) and FakeBackend's hooks (per-link filters).

#ifndef TURNSTILE_SIM_FAULTS_H_
#define TURNSTILE_SIM_FAULTS_H_

#include <chrono>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "turnstile/export.h"
#include "turnstile/runtime.h"
#include "turnstile/sim/server_options.h"

namespace turnstile::sim {

struct TURNSTILE_EXPORT FaultPlan {
  // Rates beyond this are a typo, not a plan (InvalidArgumentError).
  static constexpr double kMaxRatePerHour = 100'000;

  // ---- timed faults: mean arrivals per virtual hour ----
  double crash_per_client_hour = 0;      // the client stops for good
  double pause_per_client_hour = 0;      // a GC pause of up to pause_max
  double link_down_per_client_hour = 0;  // one link breaks for up to link_down_max
  // A server restarts: its keyspace is lost, or kept as server_persistence
  // says (turnstile/sim/server_options.h).
  double server_restart_per_hour = 0;
  // One link hangs (World::partition: calls time out, nothing arrives) for
  // up to partition_max, then heals.
  double partition_per_client_hour = 0;
  Duration pause_max{std::chrono::seconds(40)};
  Duration link_down_max{std::chrono::seconds(5)};
  Duration partition_max{std::chrono::seconds(60)};

  // ---- per-call and per-message odds, each 0..1 ----
  double request_drop = 0;
  double reply_drop = 0;
  double request_duplicate = 0;
  double reply_duplicate = 0;
  double request_delay = 0;  // an extra delay of up to delay_max
  double message_drop = 0;
  double message_duplicate = 0;
  double message_delay = 0;
  Duration delay_max{std::chrono::milliseconds(200)};

  // ---- clock skew, drawn once per client ----
  // Each client's wall clock (SimRuntime: what clients compute and store in
  // Redis) is off by up to this either way, and drifts by up to
  // clock_drift_ppm_max either way.
  Duration wall_clock_offset_max{0};
  std::int64_t clock_drift_ppm_max = 0;
  static constexpr std::int64_t kMaxClockDriftPpm = 100'000;

  // ---- the servers, set once per server ----
  // What every server keeps across a restart (its AOF setting); nullopt:
  // as the servers are configured (WorldOptions::server).
  std::optional<Persistence> server_persistence = std::nullopt;
  // Each server's own clock (ServerOptions::clock_offset, clock_drift_ppm):
  // off by up to this either way (whole ms), drifting by up to this either
  // way; a drift beyond the clients' clock_drift_factor lets a lease end
  // on the server before its holder's local deadline (docs/safety.md).
  Duration server_clock_offset_max{0};
  std::int64_t server_clock_drift_ppm_max = 0;

  // Faults start in [now, until); a default plan (zero) means "an hour".
  Instant until{};

  // Throws InvalidArgumentError naming the first bad field.
  void validate() const;
};

// Every fault kind's name, in a stable order: "crash", "pause",
// "link-down", "server-restart" (without persistence), "partition",
// "request-drop", "reply-drop", "request-duplicate", "reply-duplicate",
// "request-delay", "message-drop", "message-duplicate", "message-delay",
// "clock-skew", "server-clock-skew", "server-restart-everysec",
// "server-restart-always" (restarts with an append-only file).
TURNSTILE_EXPORT const std::vector<std::string_view>& fault_kind_names();
// The kinds `plan` injects (non-zero rate or odds), in that order.
TURNSTILE_EXPORT std::vector<std::string_view> fault_kinds(const FaultPlan& plan);

}  // namespace turnstile::sim

#endif  // TURNSTILE_SIM_FAULTS_H_
