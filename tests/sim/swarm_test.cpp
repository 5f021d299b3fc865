// A small swarm (turnstile/sim/swarm.h) in the default test run: random
// scenario × flavor × fault mix runs with every checker on, no unexpected
// violation; the same seed runs the same swarm; refused combinations are
// skipped; replay commands name every option a run used.
//
// Hanging partitions (and partitioned-holder) join the draws once the
// library has its client-side lease deadline (issue #17): before it, they
// find the defect (AFailingRunIsReportedWithItsReplayCommand, belief_test).

#include "turnstile/sim/swarm.h"

#include <gtest/gtest.h>

#include <string>

#include "turnstile/errors.h"

namespace turnstile::sim {
namespace {

using namespace std::chrono_literals;

SwarmOptions small_swarm(std::uint64_t seed) {
  SwarmOptions options;
  options.runs = 24;
  options.seed = seed;
  options.max_clients = 4;
  options.max_duration = 2min;
  options.fault_mixes = {"none", "lossy", "crashes", "partitions", "chaos"};
  options.scenarios = {"contention", "fair-fifo", "semaphore-pool", "watchdog-crash", "failover", "partitioned-holder"};
  return options;
}

std::string failures(const SwarmSummary& summary) {
  std::string text;
  for (const std::string& line : summary.failures) text += line + "\n";
  return text;
}

TEST(SwarmTest, ASmallSwarmFindsNoUnexpectedViolation) {
  SwarmOptions options = small_swarm(1);
  std::uint64_t told = 0;
  options.on_run = [&told](const SwarmRun& run) {
    ++told;
    EXPECT_FALSE(run.failed()) << run.replay;
  };
  const SwarmSummary summary = run_swarm(options);
  EXPECT_EQ(summary.failed, 0u) << failures(summary);
  EXPECT_EQ(told, options.runs);
  EXPECT_EQ(summary.runs + summary.skipped, options.runs);
  EXPECT_GE(summary.runs, options.runs / 3);
  EXPECT_GT(summary.handoffs, 100u);
  EXPECT_GT(summary.faults_injected, 0u);
}

TEST(SwarmTest, TheSameSeedRunsTheSameSwarm) {
  SwarmOptions options = small_swarm(5);
  options.runs = 6;
  const SwarmSummary one = run_swarm(options);
  const SwarmSummary two = run_swarm(options);
  EXPECT_EQ(one.events, two.events);
  EXPECT_EQ(one.handoffs, two.handoffs);
  EXPECT_EQ(one.skipped, two.skipped);
  options.seed = 6;
  EXPECT_NE(run_swarm(options).events, one.events);
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

}  // namespace
}  // namespace turnstile::sim
