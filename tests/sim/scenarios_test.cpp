// Every scenario over a fixed list of seeds (CI); TURNSTILE_SIM_SEEDS=N
// runs N seeds instead, for a longer run on demand.

#include "turnstile/sim/scenarios.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>

#include "turnstile/errors.h"

namespace turnstile::sim {
namespace {

using namespace std::chrono_literals;

std::vector<std::uint64_t> seeds() {
  if (const char* count = std::getenv("TURNSTILE_SIM_SEEDS")) {
    std::vector<std::uint64_t> many;
    for (std::uint64_t seed = 1; seed <= std::strtoull(count, nullptr, 10); ++seed) many.push_back(seed);
    return many;
  }
  return {1, 2, 3, 42, 1234, 99991};
}

std::map<std::string, std::int64_t> facts(const ScenarioResult& result) {
  return {result.facts.begin(), result.facts.end()};
}

ScenarioResult run(std::string scenario, std::uint64_t seed, std::optional<Duration> duration = std::nullopt) {
  ScenarioOptions options;
  options.scenario = std::move(scenario);
  options.seed = seed;
  options.duration = duration;
  return run_scenario(options);
}

std::string reports(const ScenarioResult& result) {
  std::string text;
  for (const Violation& violation : result.violations) text += violation.report() + "\n";
  return text;
}

class ScenarioSeeds : public ::testing::TestWithParam<std::uint64_t> {};

TEST_P(ScenarioSeeds, SeckillSellsExactlyTheStock) {
  const ScenarioResult result = run("seckill", GetParam());
  EXPECT_EQ(result.unexpected_violations, 0u) << reports(result);
  EXPECT_EQ(facts(result)["sold"], 10);
  EXPECT_EQ(facts(result)["oversold"], 0);
  EXPECT_EQ(result.acquisitions, 100u);
}

TEST_P(ScenarioSeeds, OneOrderPerUser) {
  const ScenarioResult result = run("one-order-per-user", GetParam());
  EXPECT_EQ(result.unexpected_violations, 0u) << reports(result);
  EXPECT_EQ(facts(result)["orders"], facts(result)["users"]);
  EXPECT_EQ(facts(result)["duplicate_orders"], 0);
  EXPECT_GT(facts(result)["rejected_requests"], 0);
}

TEST_P(ScenarioSeeds, ContentionKeepsMutualExclusionAndEveryoneGetsIn) {
  const ScenarioResult result = run("contention", GetParam(), 5min);
  EXPECT_EQ(result.unexpected_violations, 0u) << reports(result);
  EXPECT_EQ(result.mutual_exclusion_violations, 0u);
  EXPECT_EQ(result.liveness_violations, 0u);
  // 1 s holds back to back for 5 minutes, handoffs cost a few ms.
  EXPECT_GT(result.acquisitions, 250u);
}

TEST_P(ScenarioSeeds, WatchdogCrashTakeoverWithinTheWatchdogTimeout) {
  const ScenarioResult result = run("watchdog-crash", GetParam());
  EXPECT_EQ(result.unexpected_violations, 0u) << reports(result);
  EXPECT_GT(facts(result)["crashes"], 0);
  EXPECT_GT(facts(result)["max_takeover_ms"], 20'000);  // waited for the lease, not less
  EXPECT_LE(facts(result)["max_takeover_ms"], 30'000 + 100);
}

TEST_P(ScenarioSeeds, GcPauseMakesTwoBelievedHoldersAndFencingRejectsTheStaleOne) {
  const ScenarioResult result = run("gc-pause", GetParam());
  EXPECT_EQ(result.unexpected_violations, 0u) << reports(result);
  EXPECT_EQ(result.mutual_exclusion_violations, 0u);  // the server never granted twice
  EXPECT_GE(facts(result)["max_believed_holders"], 2);
  EXPECT_GT(result.stale_writes_rejected, 0u);
}

TEST_P(ScenarioSeeds, FailoverToALaggingReplicaGrantsTheLockTwice) {
  const ScenarioResult result = run("failover", GetParam());
  EXPECT_EQ(result.unexpected_violations, 0u) << reports(result);
  EXPECT_GT(result.mutual_exclusion_violations, 0u);
  EXPECT_GT(facts(result)["lost_writes"], 0);
  for (const Violation& violation : result.violations) EXPECT_TRUE(violation.expected);
}

INSTANTIATE_TEST_SUITE_P(FixedSeeds, ScenarioSeeds, ::testing::ValuesIn(seeds()));

TEST(ScenariosTest, TheSameSeedReplaysTheSameTrace) {
  for (const ScenarioInfo& info : scenario_catalog()) {
    if (info.name == "fair-fifo" || info.name == "semaphore-pool") continue;
    ScenarioOptions options;
    options.scenario = std::string(info.name);
    options.seed = 5;
    ScenarioResult first;
    EXPECT_TRUE(check_determinism(options, &first)) << info.name;
    EXPECT_EQ(first.trace_sha256.size(), 64u);
  }
  EXPECT_NE(run("contention", 1, 1min).trace_sha256, run("contention", 2, 1min).trace_sha256);
}

TEST(ScenariosTest, TheTokenLockFlavorPlugsIn) {
  ScenarioOptions options;
  options.scenario = "contention";
  options.lock = LockFlavor::token;
  options.duration = 2min;
  const ScenarioResult result = run_scenario(options);
  EXPECT_EQ(result.lock, "token");
  EXPECT_EQ(result.unexpected_violations, 0u) << reports(result);
  EXPECT_GT(result.acquisitions, 100u);
}

TEST(ScenariosTest, BadInputIsAOneLineError) {
  ScenarioOptions options;
  options.scenario = "nope";
  try {
    (void)run_scenario(options);
    FAIL();
  } catch (const InvalidArgumentError& error) {
    EXPECT_NE(std::string(error.what()).find("unknown scenario 'nope' (known: seckill,"), std::string::npos);
  }
  options.scenario = "contention";
  options.clients = 0;
  EXPECT_THROW((void)run_scenario(options), InvalidArgumentError);
  options.clients = ScenarioOptions::kMaxClients + 1;
  EXPECT_THROW((void)run_scenario(options), InvalidArgumentError);
  options.clients.reset();
  options.duration = 0ms;
  EXPECT_THROW((void)run_scenario(options), InvalidArgumentError);
  options.duration.reset();
  options.permits = 0;
  EXPECT_THROW((void)run_scenario(options), InvalidArgumentError);
  options.permits = 3;
  options.scenario = "gc-pause";
  options.lock = LockFlavor::token;
  EXPECT_THROW((void)run_scenario(options), InvalidArgumentError);  // no fencing tokens
  EXPECT_EQ(parse_flavor("fair"), LockFlavor::fair);
  EXPECT_EQ(parse_flavor("nope"), std::nullopt);
}

}  // namespace
}  // namespace turnstile::sim
