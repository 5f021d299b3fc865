// turnstile/sim/swarm.h
//
// Swarm testing: many short simulations, each a random scenario × lock
// flavor × fault mix × client count × duration drawn from its own seed,
// with every checker on. A run the checkers fail is reported with the one
// `turnstile sim` command that replays it exactly.
//
//   turnstile::sim::SwarmOptions options;
//   options.runs = 500;
//   options.seed = 1;                      // run i uses seed 1 + i
//   options.on_run = [](const turnstile::sim::SwarmRun& run) {
//     if (run.failed()) std::puts(run.replay.c_str());
//   };
//   turnstile::sim::SwarmSummary summary = turnstile::sim::run_swarm(options);
//   // summary.runs_by_flavor_and_fault, summary.buggify: what was drawn
//
// Draws, only among combinations run_scenario() accepts (scenario_accepts):
// a flavor (every one, uniformly), a scenario that takes faults and that
// flavor, a fault mix (fault_mix_names(), or the ones given; "random", a mix
// drawn from the run's seed, in one run in two where it may be drawn),
// 2..max_clients clients (at most the scenario's default), 1..max_duration
// whole minutes, 1..4 permits, 3 or 5 composite nodes; BUGGIFY on
// (SwarmOptions::buggify). A run fails when a checker reports a violation
// its scenario does not expect, or when it throws anything else.
//
// Same options, same runs: the swarm is as deterministic as its runs.

#ifndef TURNSTILE_SIM_SWARM_H_
#define TURNSTILE_SIM_SWARM_H_

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "turnstile/export.h"
#include "turnstile/sim/buggify.h"
#include "turnstile/sim/checkers.h"
#include "turnstile/sim/scenarios.h"

namespace turnstile::sim {

struct TURNSTILE_EXPORT SwarmRun {
  std::uint64_t index = 0;  // 0-based, in the swarm
  ScenarioOptions options;  // clients and duration set
  bool skipped = false;     // refused combination (never drawn: a bug)
  std::string skip_reason;
  std::string error;      // set if the run threw (a failure)
  ScenarioResult result;  // when it ran
  std::string replay;     // "turnstile sim --scenario ... --seed ..."
  bool failed() const { return !skipped && (!error.empty() || result.unexpected_violations > 0); }
};

struct TURNSTILE_EXPORT SwarmOptions {
  static constexpr std::uint64_t kMaxRuns = 100'000'000;
  static constexpr std::size_t kMaxFailuresKept = 100;

  std::uint64_t runs = 100;
  std::uint64_t seed = 1;  // run i draws from, and runs with, seed + i
  // Scenarios to draw from, each taking faults; empty: every one that does.
  std::vector<std::string> scenarios = {};
  // Fault mixes to draw from; empty: every one of fault_mix_names().
  std::vector<std::string> fault_mixes = {};
  std::size_t max_clients = 8;
  std::chrono::minutes max_duration{5};
  // BUGGIFY in every run (turnstile/sim/buggify.h).
  bool buggify = true;
  // Every run's ScenarioOptions::fair_handoff.
  Handoff fair_handoff = FairLockOptions{}.handoff;
  // Every run's ScenarioOptions::fleet_handoff.
  Handoff fleet_handoff = ClientOptions{}.fleet_handoff;
  // Stop early, after the run that brings the handoffs simulated to this
  // (0: run all `runs`).
  std::uint64_t until_handoffs = 0;
  // Asked before every run but the first: false stops the swarm there (a
  // wall-time limit kept by the caller; the swarm reads no clock).
  std::function<bool()> keep_going = {};
  // Told after every run, skipped ones included.
  std::function<void(const SwarmRun&)> on_run = {};
};

// Per BUGGIFY point, over a swarm's runs.
struct TURNSTILE_EXPORT SwarmBuggify {
  std::string_view point;
  std::uint64_t runs_enabled = 0;
  std::uint64_t runs_reached = 0;
  std::uint64_t runs_fired = 0;
  std::uint64_t fired = 0;  // times, over all runs
};

struct TURNSTILE_EXPORT SwarmSummary {
  std::uint64_t runs = 0;  // run, skipped ones excluded
  std::uint64_t skipped = 0;
  std::uint64_t failed = 0;
  std::uint64_t acquisitions = 0;
  std::uint64_t handoffs = 0;
  std::uint64_t events = 0;
  std::uint64_t faults_injected = 0;
  std::uint64_t belief_overlaps_while_paused = 0;
  std::int64_t virtual_ms = 0;
  // Violations by ViolationKind.
  std::array<std::uint64_t, kViolationKinds> unexpected{};
  std::array<std::uint64_t, kViolationKinds> expected{};
  // "<first unexpected report or error>; replay: <command>", first first.
  std::vector<std::string> failures;
  // Runs by flavor name, and by flavor name and fault kind
  // (fault_kind_names(), "none" for a run without faults).
  std::map<std::string, std::uint64_t> runs_by_flavor;
  std::map<std::string, std::map<std::string, std::uint64_t>> runs_by_flavor_and_fault;
  // Runs by scenario name.
  std::map<std::string, std::uint64_t> runs_by_scenario;
  // Runs whose clients armed a lock-delay (ScenarioOptions::lock_delay).
  std::uint64_t runs_with_lock_delay = 0;
  // In buggify_point_names() order.
  std::vector<SwarmBuggify> buggify;
};

// InvalidArgumentError for runs beyond kMaxRuns, an unknown fault mix, a
// scenario that takes no faults, scenarios and mixes with no combination
// any flavor runs, or max_clients < 2.
TURNSTILE_EXPORT SwarmSummary run_swarm(const SwarmOptions& options);

// The `turnstile sim` command line that replays a run of these options:
// every option that shapes the run (clients and duration when set, each
// duration in the largest unit that renders it exactly, the flavor's
// permits or nodes, nodes-down's down nodes, replica sync and lag, the
// fault mix, BUGGIFY, a wake scope other than the default). The one
// builder: swarm runs and `turnstile sim`'s report print it.
TURNSTILE_EXPORT std::string replay_command(const ScenarioOptions& options);

}  // namespace turnstile::sim

#endif  // TURNSTILE_SIM_SWARM_H_
