// scenarios/scenario_list.h
//
// The scenario functions run_scenario() dispatches to, by file:
// lock_scenarios.cpp (no faults), election_scenarios.cpp, revocation_scenarios.cpp,
// fault_scenarios.cpp and
// majority_scenarios.cpp, read_write_scenarios.cpp. Each takes the
// options and the resolved client count and duration.

#ifndef TURNSTILE_SCENARIOS_SCENARIO_LIST_H_
#define TURNSTILE_SCENARIOS_SCENARIO_LIST_H_

#include <cstddef>

#include "scenarios/scenario_kit.h"
#include "turnstile/sim/scenarios.h"

namespace turnstile::sim::scenarios {

ScenarioResult seckill(const ScenarioOptions& options, std::size_t clients, Duration duration);
ScenarioResult one_order_per_user(const ScenarioOptions& options, std::size_t clients, Duration duration);
ScenarioResult contention(const ScenarioOptions& options, std::size_t clients, Duration duration);
ScenarioResult fair_fifo(const ScenarioOptions& options, std::size_t clients, Duration duration);
ScenarioResult semaphore_pool(const ScenarioOptions& options, std::size_t clients, Duration duration);
// Leader election (election_scenarios.cpp).
ScenarioResult election(const ScenarioOptions& options, std::size_t clients, Duration duration);
// Revocation (revocation_scenarios.cpp).
ScenarioResult revocation(const ScenarioOptions& options, std::size_t clients, Duration duration);
ScenarioResult watchdog_crash(const ScenarioOptions& options, std::size_t clients, Duration duration);
ScenarioResult gc_pause(const ScenarioOptions& options, std::size_t clients, Duration duration);
ScenarioResult failover(const ScenarioOptions& options, std::size_t clients, Duration duration);
ScenarioResult partitioned_holder(const ScenarioOptions& options, std::size_t clients, Duration duration);
ScenarioResult frozen_waiter(const ScenarioOptions& options, std::size_t clients, Duration duration);
// The read-write lock's (read_write_scenarios.cpp).
ScenarioResult read_mostly(const ScenarioOptions& options, std::size_t clients, Duration duration);
ScenarioResult reader_crash(const ScenarioOptions& options, std::size_t clients, Duration duration);
ScenarioResult writer_starvation(const ScenarioOptions& options, std::size_t clients, Duration duration);
// The RedLock scenarios of redlock_scenarios.h (majority_scenarios.cpp):
// fixed casts, run until idle (clients and duration are not options).
ScenarioResult nodes_down(const ScenarioOptions& options, std::size_t clients, Duration duration);
ScenarioResult client_pause(const ScenarioOptions& options, std::size_t clients, Duration duration);
ScenarioResult clock_drift(const ScenarioOptions& options, std::size_t clients, Duration duration);

// Runs past `end` long enough for every client to finish its last round,
// then checks liveness (unless a violation stopped the world). `hold`: how
// long a round holds, when longer than a second or two: each client may
// still wait for every other one's last hold, and the last of them for a
// lost wake-up (the holder's ttl) after it.
void drain_and_check(ScenarioWorld& sw, Instant end, Duration hold = Duration::zero());

}  // namespace turnstile::sim::scenarios

#endif  // TURNSTILE_SCENARIOS_SCENARIO_LIST_H_
