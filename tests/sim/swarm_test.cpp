// The CI swarm (turnstile/sim/swarm.h) in the default test run: a fixed
// number of random scenario x flavor x fault runs with BUGGIFY and every
// checker on (sized to about two minutes of wall time on a loaded 2-core
// machine; a count of runs, not seconds, so that it is deterministic): no
// unexpected violation, no refused combination drawn, every flavor and
// every fault kind drawn, every BUGGIFY point reached and fired. Also: the
// same seed runs the same swarm; replay commands name every option a run
// used; nonsense is refused.

#include "turnstile/sim/swarm.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <optional>
#include <string>

#include "env_count.h"
#include "sanitized_build.h"
#include "turnstile/errors.h"
#include "turnstile/sim/buggify.h"
#include "turnstile/sim/faults.h"

namespace turnstile::sim {
namespace {

using namespace std::chrono_literals;

// Runs of the CI swarm: seeds 1..13000, about 100 s of wall time on the
// loaded 2-core machine (7.6 ms a run; the rest of the sim suite takes
// about 13 s). Under a sanitizer (.ci/run's ASan + UBSan build) a run
// costs about 18 times as much (1,300 runs took 180 s of the sim suite's
// 309 s there; 300 took 54 s on the 2-core machine, the sim suite the
// long pole of that build's tests): there the swarm runs seeds 1..200, a
// third more than the 150 that already draw every flavor and fault kind
// and reach and fire every BUGGIFY point (the test checks it). The logic is the normal build's
// to check; the sanitizer looks for memory errors and undefined behaviour
// on the same paths. TURNSTILE_SIM_SWARM_RUNS=<n> runs n instead.
constexpr int kCiSwarmRuns = testing::sanitized_or(13000, 200);
// Seeds 1..3000 draw every flavor x fault kind pair not left out (the
// rarest, a counting semaphore with restarts that keep every write, in 12).
constexpr std::uint64_t kRunsThatDrawEveryPair = 3000;

// The CI swarm runs in kCiSwarmParts tests of consecutive seeds, which
// the sim suite's GoogleTest shards (tests/meson.build, test_shards) run
// side by side: one test of 13,000 runs was the suite's long pole. The
// first part draws seeds 1..kRunsThatDrawEveryPair and more, and checks
// that everything is drawn; every part checks that nothing unexpected
// happened. A sanitizer's few runs stay in one part.
constexpr int kCiSwarmParts = testing::sanitized_or(4, 1);

SwarmOptions ci_swarm(std::uint64_t seed) {
  SwarmOptions options;
  options.runs = static_cast<std::uint64_t>(testing::count_from_environment("TURNSTILE_SIM_SWARM_RUNS", kCiSwarmRuns));
  options.seed = seed;
  options.max_clients = 4;
  options.max_duration = 2min;
  return options;
}

// Part `part` of the CI swarm: its share of the runs, from its first seed.
SwarmOptions ci_swarm_part(int part) {
  SwarmOptions options = ci_swarm(1);
  const std::uint64_t total = options.runs;
  const std::uint64_t first = total * static_cast<std::uint64_t>(part) / kCiSwarmParts;
  const std::uint64_t end = total * static_cast<std::uint64_t>(part + 1) / kCiSwarmParts;
  options.seed = 1 + first;
  options.runs = end - first;
  return options;
}

std::string failures(const SwarmSummary& summary) {
  std::string text;
  for (const std::string& line : summary.failures) text += line + "\n";
  return text;
}

// Every flavor, every flavor x fault kind pair but those left out on
// purpose (fault_kind_left_out, never drawn), every BUGGIFY point reached
// and fired, runs with a lock-delay and without: what the first part of
// the CI swarm must have drawn. Seeds 1..kRunsThatDrawEveryPair draw every
// pair; fewer runs (a sanitizer's) draw every kind.
void expect_everything_drawn(const SwarmSummary& summary, std::uint64_t runs) {
  for (const FlavorTraits& traits : kFlavorTable) {
    EXPECT_GT(summary.runs_by_flavor.count(std::string(flavor_name(traits.flavor))), 0u) << flavor_name(traits.flavor);
  }
  std::map<std::string_view, std::uint64_t> runs_by_kind;
  for (const FlavorTraits& traits : kFlavorTable) {
    const auto by_kind = summary.runs_by_flavor_and_fault.find(std::string(traits.name));
    for (const std::string_view kind : fault_kind_names()) {
      std::uint64_t kind_runs = 0;
      if (by_kind != summary.runs_by_flavor_and_fault.end()) {
        const auto found = by_kind->second.find(std::string(kind));
        kind_runs = found == by_kind->second.end() ? 0 : found->second;
      }
      runs_by_kind[kind] += kind_runs;
      if (const std::optional<std::string_view> reason = fault_kind_left_out(traits.flavor, kind)) {
        EXPECT_EQ(kind_runs, 0u) << traits.name << " x " << kind << " is left out: " << *reason;
      } else if (runs >= kRunsThatDrawEveryPair) {
        EXPECT_GT(kind_runs, 0u) << traits.name << " x " << kind;
      }
    }
  }
  for (const std::string_view kind : fault_kind_names()) {
    const bool everywhere_left_out = std::all_of(kFlavorTable.begin(), kFlavorTable.end(), [kind](const auto& traits) {
      return fault_kind_left_out(traits.flavor, kind).has_value();
    });
    if (!everywhere_left_out) {
      EXPECT_GT(runs_by_kind[kind], 0u) << kind;
    }
  }
  ASSERT_EQ(summary.buggify.size(), buggify_point_names().size());
  for (const SwarmBuggify& point : summary.buggify) {
    EXPECT_GT(point.runs_reached, 0u) << point.point;
    EXPECT_GT(point.runs_fired, 0u) << point.point;
  }
  EXPECT_GT(summary.runs_with_lock_delay, 0u);
  EXPECT_LT(summary.runs_with_lock_delay, summary.runs);
}

class CiSwarm : public ::testing::TestWithParam<int> {};

TEST_P(CiSwarm, FindsNoUnexpectedViolationAndDrawsEverything) {
  SwarmOptions options = ci_swarm_part(GetParam());
  std::uint64_t told = 0;
  options.on_run = [&told](const SwarmRun& run) {
    ++told;
    EXPECT_FALSE(run.failed()) << run.replay;
    EXPECT_FALSE(run.skipped) << run.replay << ": " << run.skip_reason;
  };
  const SwarmSummary summary = run_swarm(options);
  EXPECT_EQ(summary.failed, 0u) << failures(summary);
  EXPECT_EQ(told, options.runs);
  EXPECT_EQ(summary.skipped, 0u) << "only valid combinations are drawn";
  EXPECT_EQ(summary.runs, options.runs);
  EXPECT_GT(summary.handoffs, 1'000u);
  EXPECT_GT(summary.faults_injected, 0u);
  if (GetParam() == 0) expect_everything_drawn(summary, options.runs);
}

INSTANTIATE_TEST_SUITE_P(Parts, CiSwarm, ::testing::Range(0, kCiSwarmParts));

TEST(SwarmTest, TheSameSeedRunsTheSameSwarm) {
  SwarmOptions options = ci_swarm(5);
  options.runs = 6;
  const SwarmSummary one = run_swarm(options);
  const SwarmSummary two = run_swarm(options);
  EXPECT_EQ(one.events, two.events);
  EXPECT_EQ(one.handoffs, two.handoffs);
  EXPECT_EQ(one.runs_by_flavor, two.runs_by_flavor);
  options.seed = 6;
  EXPECT_NE(run_swarm(options).events, one.events);
}

TEST(SwarmTest, ItStopsAtTheHandoffsAskedOrWhenTold) {
  SwarmOptions options = ci_swarm(9);
  options.runs = 1'000;
  options.until_handoffs = 50;
  const SwarmSummary enough = run_swarm(options);
  EXPECT_GE(enough.handoffs, 50u);
  EXPECT_LT(enough.runs, options.runs);
  options.until_handoffs = 0;
  std::uint64_t asked = 0;
  options.keep_going = [&asked] { return ++asked < 3; };
  EXPECT_EQ(run_swarm(options).runs, 3u);
}

TEST(SwarmTest, AFailoverRunExpectsOnlyTheKindsItLoses) {
  ScenarioOptions options;
  options.scenario = "failover";
  options.seed = 1;
  const ScenarioResult result = run_scenario(options);
  for (const Violation& violation : result.violations) {
    const bool lost_lock_kind = violation.kind == ViolationKind::mutual_exclusion ||
                                violation.kind == ViolationKind::fencing_order ||
                                violation.kind == ViolationKind::belief_overlap;
    EXPECT_EQ(violation.expected, lost_lock_kind) << violation.report();
  }
  EXPECT_GT(result.mutual_exclusion_violations, 0u);
}

TEST(SwarmTest, ReplayCommandsNameEveryOptionARunUses) {
  ScenarioOptions options;
  options.scenario = "semaphore-pool";
  options.seed = 17;
  options.flavor = Flavor::semaphore;
  options.clients = 3;
  options.duration = 2min;
  options.faults = "chaos";
  options.permits = 2;
  EXPECT_EQ(replay_command(options),
            "turnstile sim --scenario semaphore-pool --seed 17 --flavor semaphore --clients 3 "
            "--duration 2m --faults chaos --permits 2");
  options.buggify = true;
  options.faults = "random";
  EXPECT_EQ(replay_command(options),
            "turnstile sim --scenario semaphore-pool --seed 17 --flavor semaphore --clients 3 "
            "--duration 2m --faults random --permits 2 --buggify");
  options.lock_delay = 10s;
  EXPECT_EQ(replay_command(options),
            "turnstile sim --scenario semaphore-pool --seed 17 --flavor semaphore --clients 3 "
            "--duration 2m --faults random --permits 2 --lock-delay 10s --buggify");
}

TEST(SwarmTest, ReplayCommandsKeepDurationsExactAndNameTheScenariosOwnOptions) {
  ScenarioOptions options;
  options.scenario = "failover";
  options.seed = 3;
  options.duration = 90s;
  options.replica_sync = true;
  options.replica_lag = 1500ms;
  EXPECT_EQ(replay_command(options),
            "turnstile sim --scenario failover --seed 3 --flavor reentrant --duration 90s --replica-sync "
            "--replica-lag 1500ms");
  options = ScenarioOptions();
  options.scenario = "nodes-down";
  options.flavor = Flavor::redlock;
  options.nodes = 7;
  options.down_nodes = 4;
  options.duration = 2h;
  EXPECT_EQ(replay_command(options),
            "turnstile sim --scenario nodes-down --seed 1 --flavor redlock --duration 2h --nodes 7 --down-nodes 4");
}

TEST(SwarmTest, NonsenseIsRejected) {
  SwarmOptions options;
  options.fault_mixes = {"floods"};
  EXPECT_THROW((void)run_swarm(options), InvalidArgumentError);
  options = SwarmOptions();
  options.scenarios = {"seckill"};  // stops at the first failed call
  EXPECT_THROW((void)run_swarm(options), InvalidArgumentError);
  options = SwarmOptions();
  options.max_clients = 1;
  EXPECT_THROW((void)run_swarm(options), InvalidArgumentError);
  options = SwarmOptions();
  options.runs = SwarmOptions::kMaxRuns + 1;
  EXPECT_THROW((void)run_swarm(options), InvalidArgumentError);
}

TEST(SwarmTest, OnlyCombinationsTheScenariosAcceptAreValid) {
  ScenarioOptions options;
  options.scenario = "fair-fifo";
  options.flavor = Flavor::token;
  EXPECT_FALSE(scenario_accepts(options));
  options.flavor = Flavor::fair;
  EXPECT_TRUE(scenario_accepts(options));
  options.scenario = "contention";
  options.flavor = Flavor::counting_semaphore;
  options.faults = "chaos";
  EXPECT_FALSE(scenario_accepts(options)) << "a failed release loses a permit for good";
  options.faults = "random";
  EXPECT_TRUE(scenario_accepts(options));
  const std::optional<FaultPlan> plan = scenario_fault_plan(options, Instant{});
  ASSERT_TRUE(plan.has_value());
  EXPECT_EQ(plan->request_drop + plan->reply_drop, 0.0);
  EXPECT_EQ(plan->crash_per_client_hour + plan->partition_per_client_hour + plan->link_down_per_client_hour, 0.0);
  EXPECT_GT(plan->message_drop, 0.0) << "the fleet's waiters try again: a lost release message is found";
  options.wake_scope = WakeScope::process;
  EXPECT_EQ(scenario_fault_plan(options, Instant{})->message_drop, 0.0) << "without the fleet's retries";
  // A restart that keeps every write keeps its permits; one that loses
  // writes loses them for good.
  int restarting = 0;
  for (std::uint64_t seed = 1; seed <= 200; ++seed) {
    options.seed = seed;
    const std::optional<FaultPlan> drawn = scenario_fault_plan(options, Instant{});
    if (drawn->server_restart_per_hour > 0) {
      ++restarting;
      EXPECT_EQ(drawn->server_persistence, Persistence::always) << seed;
    }
  }
  EXPECT_GT(restarting, 0);
}

}  // namespace
}  // namespace turnstile::sim
