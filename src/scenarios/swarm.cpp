// run_swarm(): random scenario × flavor × fault mix runs, each from its own
// seed (turnstile/sim/swarm.h).

#include "turnstile/sim/swarm.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <exception>

#include "sim/random.h"
#include "turnstile/errors.h"

namespace turnstile::sim {
namespace {

// The swarm's draws for a run come from this stream of the run's seed, far
// from the world's and its clients' streams.
constexpr std::uint64_t kSwarmStream = 1ULL << 42;
constexpr std::int64_t kMaxSwarmPermits = 4;
constexpr std::size_t kMinClients = 2;
// The flavors a swarm run draws from (FlavorTraits::in_swarm), in the
// enum's order: a seed replays the same run.
constexpr std::size_t kSwarmFlavorCount = [] {
  std::size_t count = 0;
  for (const FlavorTraits& traits : kFlavorTable) count += traits.in_swarm ? 1 : 0;
  return count;
}();
constexpr std::array<Flavor, kSwarmFlavorCount> kSwarmFlavors = [] {
  std::array<Flavor, kSwarmFlavorCount> flavors{};
  std::size_t next = 0;
  for (const FlavorTraits& traits : kFlavorTable) {
    if (traits.in_swarm) flavors[next++] = traits.flavor;
  }
  return flavors;
}();

std::string minutes_text(Duration duration) {
  return std::to_string(std::chrono::duration_cast<std::chrono::minutes>(duration).count()) + "m";
}

// One run's options, drawn from its seed.
ScenarioOptions draw_options(const SwarmOptions& swarm, std::uint64_t seed,
                             const std::vector<std::string_view>& scenarios, const std::vector<std::string>& mixes) {
  Random random(seed, kSwarmStream);
  ScenarioOptions options;
  options.seed = seed;
  options.scenario = std::string(scenarios[random.below(scenarios.size())]);
  options.flavor = kSwarmFlavors[random.below(kSwarmFlavors.size())];
  options.faults = mixes[random.below(mixes.size())];
  std::size_t default_clients = swarm.max_clients;
  for (const ScenarioInfo& info : scenario_catalog()) {
    if (info.name == options.scenario) default_clients = info.default_clients;
  }
  const std::size_t most = std::max(kMinClients, std::min(swarm.max_clients, default_clients));
  options.clients = kMinClients + random.below(most - kMinClients + 1);
  options.duration = std::chrono::minutes(1 + random.below(static_cast<std::uint64_t>(swarm.max_duration.count())));
  options.permits = 1 + static_cast<std::int64_t>(random.below(kMaxSwarmPermits));
  options.nodes = random.below(2) == 0 ? 3 : 5;
  return options;
}

void add_result(SwarmSummary& summary, const ScenarioResult& result) {
  summary.acquisitions += result.acquisitions;
  summary.handoffs += result.handoffs;
  summary.events += result.events;
  summary.faults_injected += result.faults_injected;
  summary.belief_overlaps_while_paused += result.belief_overlaps_while_paused;
  summary.virtual_ms += result.virtual_ms;
  for (const Violation& violation : result.violations) {
    auto& counts = violation.expected ? summary.expected : summary.unexpected;
    ++counts[static_cast<std::size_t>(violation.kind)];
  }
}

std::string failure_line(const SwarmRun& run) {
  std::string what = run.error;
  if (what.empty()) {
    for (const Violation& violation : run.result.violations) {
      if (!violation.expected) {
        what = violation.report();
        break;
      }
    }
  }
  return what + "; replay: " + run.replay;
}

}  // namespace

std::string replay_command(const ScenarioOptions& options) {
  std::string command = "turnstile sim --scenario " + options.scenario + " --seed " + std::to_string(options.seed) +
                        " --flavor " + std::string(flavor_name(options.flavor));
  if (options.clients) command += " --clients " + std::to_string(*options.clients);
  if (options.duration) command += " --duration " + minutes_text(*options.duration);
  if (!options.faults.empty()) command += " --faults " + options.faults;
  if (is_semaphore(options.flavor)) command += " --permits " + std::to_string(options.permits);
  if (is_composite(options.flavor)) command += " --nodes " + std::to_string(options.nodes);
  return command;
}

SwarmSummary run_swarm(const SwarmOptions& options) {
  if (options.runs > SwarmOptions::kMaxRuns) {
    throw InvalidArgumentError("--swarm runs must be within 0.." + std::to_string(SwarmOptions::kMaxRuns));
  }
  if (options.max_clients < kMinClients) throw InvalidArgumentError("a swarm needs at least 2 clients per run");
  if (options.max_duration.count() < 1) throw InvalidArgumentError("a swarm's runs last at least a minute");
  std::vector<std::string> mixes = options.fault_mixes;
  if (mixes.empty()) {
    for (const std::string_view name : fault_mix_names()) mixes.emplace_back(name);
  }
  for (const std::string& mix : mixes) (void)fault_mix(mix, Instant{});  // unknown names throw
  std::vector<std::string_view> scenarios(options.scenarios.begin(), options.scenarios.end());
  for (const std::string_view scenario : scenarios) {
    if (!scenario_takes_faults(scenario)) {
      throw InvalidArgumentError("a swarm draws scenarios that take faults, not '" + std::string(scenario) + "'");
    }
  }
  if (scenarios.empty()) {
    // Scenarios about a flavor the swarm does not draw (the read-write
    // lock's) are left out: they would refuse every draw, and old seeds
    // replay the same runs.
    for (const ScenarioInfo& info : scenario_catalog()) {
      const bool drawn =
          std::find(kSwarmFlavors.begin(), kSwarmFlavors.end(), info.default_flavor) != kSwarmFlavors.end();
      if (scenario_takes_faults(info.name) && drawn) scenarios.push_back(info.name);
    }
  }
  assert(!scenarios.empty());

  SwarmSummary summary;
  for (std::uint64_t index = 0; index < options.runs; ++index) {
    SwarmRun run;
    run.index = index;
    run.options = draw_options(options, options.seed + index, scenarios, mixes);
    run.replay = replay_command(run.options);
    try {
      run.result = run_scenario(run.options);
    } catch (const InvalidArgumentError& refused) {
      run.skipped = true;
      run.skip_reason = refused.what();
    } catch (const std::exception& error) {
      run.error = std::string("the run threw: ") + error.what() + " (seed " + std::to_string(run.options.seed) + ")";
    }
    if (run.skipped) {
      ++summary.skipped;
    } else {
      ++summary.runs;
      add_result(summary, run.result);
      if (run.failed()) {
        ++summary.failed;
        if (summary.failures.size() < SwarmOptions::kMaxFailuresKept) summary.failures.push_back(failure_line(run));
      }
    }
    if (options.on_run) options.on_run(run);
  }
  return summary;
}

}  // namespace turnstile::sim
