// run_swarm(): random scenario × flavor × fault mix runs, each from its own
// seed (turnstile/sim/swarm.h).

#include "turnstile/sim/swarm.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <exception>
#include <utility>

#include "sim/random.h"
#include "turnstile/errors.h"

namespace turnstile::sim {
namespace {

// The swarm's draws for a run come from this stream of the run's seed, far
// from the world's and its clients' streams.
constexpr std::uint64_t kSwarmStream = 1ULL << 42;
constexpr std::int64_t kMaxSwarmPermits = 4;
constexpr std::size_t kMinClients = 2;
// "random" is drawn in one run in two where it may be.
constexpr std::string_view kRandomMix = "random";
constexpr std::uint64_t kRandomMixOneIn = 2;
// One run in four (bar the composite locks) has every client arm a
// lock-delay, which the checkers judge (checkers.h, lock_delay): shorter
// than a renewal period, a third of the lease, longer than it.
constexpr std::uint64_t kLockDelayOneIn = 4;
constexpr std::array<Duration, 3> kLockDelays = {std::chrono::seconds(1), std::chrono::seconds(10),
                                                 std::chrono::seconds(45)};

// A duration as `turnstile sim` reads it back: the largest unit that
// renders it exactly ("2m", "90s", "1500ms").
std::string duration_text(Duration duration) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(duration).count();
  constexpr std::array<std::pair<std::int64_t, const char*>, 3> kUnits = {
      {{3'600'000, "h"}, {60'000, "m"}, {1'000, "s"}}};
  for (const auto& [unit_ms, unit] : kUnits) {
    if (ms != 0 && ms % unit_ms == 0) return std::to_string(ms / unit_ms) + unit;
  }
  return std::to_string(ms) + "ms";
}

// The fewest clients a run of `scenario` is drawn with: kMinClients, or
// more if the scenario needs more.
std::size_t fewest_clients(std::string_view scenario) {
  for (const ScenarioInfo& info : scenario_catalog()) {
    if (info.name == scenario) return std::max(kMinClients, info.min_clients);
  }
  return kMinClients;
}

// What may be drawn with one flavor: each scenario that runs it, with the
// mixes it takes there.
struct FlavorDraws {
  Flavor flavor;
  std::vector<std::pair<std::string, std::vector<std::string>>> scenarios;
};

// Every flavor (in the table's order, so a seed replays the same run) with
// the scenario × mix combinations run_scenario() accepts for it.
std::vector<FlavorDraws> valid_draws(const std::vector<std::string_view>& scenarios,
                                     const std::vector<std::string>& mixes) {
  std::vector<FlavorDraws> draws;
  for (const FlavorTraits& traits : kFlavorTable) {
    FlavorDraws flavor{traits.flavor, {}};
    for (const std::string_view scenario : scenarios) {
      std::vector<std::string> accepted;
      for (const std::string& mix : mixes) {
        ScenarioOptions probe;
        probe.scenario = std::string(scenario);
        probe.flavor = traits.flavor;
        probe.faults = mix;
        probe.clients = fewest_clients(scenario);
        probe.duration = std::chrono::minutes(1);
        if (scenario_accepts(probe)) accepted.push_back(mix);
      }
      if (!accepted.empty()) flavor.scenarios.emplace_back(std::string(scenario), std::move(accepted));
    }
    if (!flavor.scenarios.empty()) draws.push_back(std::move(flavor));
  }
  return draws;
}

// One run's options, drawn from its seed among the valid combinations.
ScenarioOptions draw_options(const SwarmOptions& swarm, std::uint64_t seed, const std::vector<FlavorDraws>& draws) {
  Random random(seed, kSwarmStream);
  ScenarioOptions options;
  options.seed = seed;
  options.buggify = swarm.buggify;
  options.fair_handoff = swarm.fair_handoff;
  options.fleet_handoff = swarm.fleet_handoff;
  const FlavorDraws& flavor = draws[random.below(draws.size())];
  options.flavor = flavor.flavor;
  const auto& [scenario, mixes] = flavor.scenarios[random.below(flavor.scenarios.size())];
  options.scenario = scenario;
  const bool random_mix_drawable = std::find(mixes.begin(), mixes.end(), kRandomMix) != mixes.end();
  if (random_mix_drawable && (mixes.size() == 1 || random.below(kRandomMixOneIn) == 0)) {
    options.faults = std::string(kRandomMix);
  } else {
    std::vector<std::string> fixed;
    for (const std::string& mix : mixes) {
      if (mix != kRandomMix) fixed.push_back(mix);
    }
    options.faults = fixed[random.below(fixed.size())];
  }
  std::size_t default_clients = swarm.max_clients;
  for (const ScenarioInfo& info : scenario_catalog()) {
    if (info.name == options.scenario) default_clients = info.default_clients;
  }
  const std::size_t least = fewest_clients(options.scenario);
  const std::size_t most = std::max(least, std::min(swarm.max_clients, default_clients));
  options.clients = least + random.below(most - least + 1);
  options.duration = std::chrono::minutes(1 + random.below(static_cast<std::uint64_t>(swarm.max_duration.count())));
  options.permits = 1 + static_cast<std::int64_t>(random.below(kMaxSwarmPermits));
  options.nodes = random.below(2) == 0 ? 3 : 5;
  // Drawn last, so the draws above stay what they were before it. Not for
  // the composite locks: the checkers judge their grants by quorum, and a
  // node key a failed release left behind, kept by the delay, makes a
  // quorum nobody believes in with a failed-over node's stale one.
  if (!is_composite(options.flavor) && random.below(kLockDelayOneIn) == 0) {
    options.lock_delay = kLockDelays[random.below(kLockDelays.size())];
  }
  return options;
}

void add_result(SwarmSummary& summary, const ScenarioOptions& options, const ScenarioResult& result) {
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
  const std::string flavor(flavor_name(options.flavor));
  ++summary.runs_by_flavor[flavor];
  ++summary.runs_by_scenario[options.scenario];
  if (options.lock_delay > Duration::zero()) ++summary.runs_with_lock_delay;
  auto& by_fault = summary.runs_by_flavor_and_fault[flavor];
  if (result.fault_kinds.empty()) ++by_fault["none"];
  for (const std::string_view kind : result.fault_kinds) ++by_fault[std::string(kind)];
  for (const BuggifyCount& count : result.buggify) {
    for (SwarmBuggify& point : summary.buggify) {
      if (point.point != count.point) continue;
      point.runs_enabled += count.enabled ? 1 : 0;
      point.runs_reached += count.reached > 0 ? 1 : 0;
      point.runs_fired += count.fired > 0 ? 1 : 0;
      point.fired += count.fired;
    }
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
  if (options.duration) command += " --duration " + duration_text(*options.duration);
  if (!options.faults.empty()) command += " --faults " + options.faults;
  if (is_semaphore(options.flavor)) command += " --permits " + std::to_string(options.permits);
  if (is_composite(options.flavor)) command += " --nodes " + std::to_string(options.nodes);
  if (options.scenario == "nodes-down") command += " --down-nodes " + std::to_string(options.down_nodes);
  if (options.replica_sync) command += " --replica-sync";
  if (options.replica_lag) command += " --replica-lag " + duration_text(*options.replica_lag);
  if (options.wake_scope == WakeScope::process) command += " --wake-scope process";
  if (options.fair_handoff != FairLockOptions{}.handoff && queues_waiters(options.flavor)) {
    command += options.fair_handoff == Handoff::direct ? " --fair-handoff direct" : " --fair-handoff announce";
  }
  if (options.fleet_handoff != ClientOptions{}.fleet_handoff && flavor_traits(options.flavor).fleet_handoff) {
    command += options.fleet_handoff == Handoff::direct ? " --fleet-handoff direct" : " --fleet-handoff announce";
  }
  if (options.lock_delay > Duration::zero()) command += " --lock-delay " + duration_text(options.lock_delay);
  if (options.buggify) command += " --buggify";
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
    for (const ScenarioInfo& info : scenario_catalog()) {
      if (scenario_takes_faults(info.name)) scenarios.push_back(info.name);
    }
  }
  const std::vector<FlavorDraws> draws = valid_draws(scenarios, mixes);
  if (draws.empty()) throw InvalidArgumentError("no flavor runs any of these scenarios with any of these fault mixes");

  SwarmSummary summary;
  for (const std::string_view point : buggify_point_names()) summary.buggify.push_back(SwarmBuggify{point});
  for (std::uint64_t index = 0; index < options.runs; ++index) {
    if (index > 0 && options.keep_going && !options.keep_going()) break;
    SwarmRun run;
    run.index = index;
    run.options = draw_options(options, options.seed + index, draws);
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
      add_result(summary, run.options, run.result);
      if (run.failed()) {
        ++summary.failed;
        if (summary.failures.size() < SwarmOptions::kMaxFailuresKept) summary.failures.push_back(failure_line(run));
      }
    }
    if (options.on_run) options.on_run(run);
    if (options.until_handoffs > 0 && summary.handoffs >= options.until_handoffs) break;
  }
  return summary;
}

}  // namespace turnstile::sim
