// What holders believe, checked by the belief-interval checker over whole
// scenarios: partitioned-holder before and after the library's client-side
// lease deadline (issue #17), fault mixes, the expected overlaps of
// failover, and the paused overlaps of gc-pause counted apart.
//
// The library fix is detected at compile time (kLibraryHasClientLeaseDeadline:
// LockLostReason::lease_expired exists), so the "after" tests run by
// themselves once it is merged and the "before" test stops running.

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "library_features.h"
#include "turnstile/errors.h"
#include "turnstile/sim/scenarios.h"

namespace turnstile::sim {
namespace {

using namespace std::chrono_literals;

std::map<std::string, std::int64_t> facts(const ScenarioResult& result) {
  return {result.facts.begin(), result.facts.end()};
}

std::string reports(const ScenarioResult& result) {
  std::string text;
  for (const Violation& violation : result.violations) text += violation.report() + "\n";
  for (const std::string& line : result.trace_tail) text += "  " + line + "\n";
  return text;
}

ScenarioOptions partitioned(std::uint64_t seed, LockFlavor lock = LockFlavor::reentrant) {
  ScenarioOptions options;
  options.scenario = "partitioned-holder";
  options.seed = seed;
  options.lock = lock;
  return options;
}

TEST(BeliefTest, BeforeTheFixAPartitionedHolderStillBelievesAfterItsLockMovedOn) {
  if (kLibraryHasClientLeaseDeadline) GTEST_SKIP() << "the library has its client-side lease deadline";
  const ScenarioResult result = run_scenario(partitioned(1));
  EXPECT_GE(result.belief_violations, 1u) << reports(result);
  EXPECT_GE(result.unexpected_violations, 1u);
  EXPECT_EQ(result.mutual_exclusion_violations, 0u) << "the servers never granted it twice";
  // The frozen holder had not learned of the loss when its lease ran out on
  // the server and another client took the lock (the run stops there).
  ASSERT_FALSE(result.violations.empty());
  const Violation& overlap = result.violations[0];
  EXPECT_EQ(overlap.kind, ViolationKind::belief_overlap);
  EXPECT_EQ(overlap.clients, (std::vector<std::string>{"client-02", "client-01"})) << overlap.report();
  EXPECT_GT(overlap.virtual_ms, facts(result)["partition_at_ms"] + 10'000);
  EXPECT_EQ(facts(result)["loss_learned_after_ms"], -1) << result.summary;
}

class AfterTheFix : public ::testing::TestWithParam<LockFlavor> {};

TEST_P(AfterTheFix, APartitionedHolderStopsBelievingBeforeItsLockMovesOn) {
  if (!kLibraryHasClientLeaseDeadline) GTEST_SKIP() << "needs the library's client-side lease deadline (issue #17)";
  for (const std::uint64_t seed : {1, 2, 3, 42}) {
    const ScenarioResult result = run_scenario(partitioned(seed, GetParam()));
    EXPECT_EQ(result.unexpected_violations, 0u) << "seed " << seed << "\n" << reports(result);
    EXPECT_EQ(result.belief_violations, 0u) << "seed " << seed;
    EXPECT_GE(facts(result)["loss_learned_after_ms"], 0) << "seed " << seed << ": " << result.summary;
  }
}

INSTANTIATE_TEST_SUITE_P(Flavors, AfterTheFix,
                         ::testing::Values(LockFlavor::reentrant, LockFlavor::token, LockFlavor::fair,
                                           LockFlavor::semaphore, LockFlavor::redlock),
                         [](const auto& info) {
                           std::string name(flavor_name(info.param));
                           std::erase(name, '-');
                           return name;
                         });

TEST(BeliefTest, TheCountingSemaphoreIsRefusedForPartitionsAndFaults) {
  EXPECT_THROW((void)run_scenario(partitioned(1, LockFlavor::counting_semaphore)), InvalidArgumentError);
  ScenarioOptions options;
  options.scenario = "semaphore-pool";
  options.lock = LockFlavor::counting_semaphore;
  options.faults = "lossy";
  EXPECT_THROW((void)run_scenario(options), InvalidArgumentError);
  options.lock = LockFlavor::semaphore;
  options.faults = "floods";
  EXPECT_THROW((void)run_scenario(options), InvalidArgumentError);
  options.scenario = "seckill";
  options.lock = LockFlavor::reentrant;
  options.faults = "lossy";
  EXPECT_THROW((void)run_scenario(options), InvalidArgumentError);
}

TEST(BeliefTest, FailoverWithoutReplicaSyncMakesTwoBelieversAsExpected) {
  ScenarioOptions options;
  options.scenario = "failover";
  options.seed = 1;
  const ScenarioResult result = run_scenario(options);
  EXPECT_GT(result.belief_violations, 0u) << reports(result);
  EXPECT_EQ(result.unexpected_violations, 0u) << reports(result);
}

TEST(BeliefTest, GcPauseOverlapsNeedAPausedHolderAndAreCountedApart) {
  ScenarioOptions options;
  options.scenario = "gc-pause";
  options.seed = 3;
  const ScenarioResult result = run_scenario(options);
  EXPECT_GT(result.belief_overlaps_while_paused, 0u) << reports(result);
  EXPECT_EQ(result.belief_violations, 0u) << reports(result);
  EXPECT_GT(result.stale_writes_rejected, 0u);
}

TEST(BeliefTest, EveryFlavorKeepsBeliefsApartUnderLossyLinksAndCrashes) {
  for (const LockFlavor lock : {LockFlavor::reentrant, LockFlavor::token, LockFlavor::fair, LockFlavor::redlock}) {
    for (const char* faults : {"lossy", "crashes"}) {
      ScenarioOptions options;
      options.scenario = "contention";
      options.seed = 11;
      options.lock = lock;
      options.clients = 6;
      options.duration = 5min;
      options.faults = faults;
      const ScenarioResult result = run_scenario(options);
      EXPECT_EQ(result.unexpected_violations, 0u) << flavor_name(lock) << " " << faults << "\n" << reports(result);
      EXPECT_GT(result.faults_injected, 0u) << flavor_name(lock) << " " << faults;
      EXPECT_GT(result.acquisitions, 10u) << flavor_name(lock) << " " << faults;
    }
  }
}

}  // namespace
}  // namespace turnstile::sim
