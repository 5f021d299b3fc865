// The read-write lock's scenarios (--flavor read-write) over seeds 1..5:
// readers and writers mixed keep the readers-writers rule, readers are
// together, a crashed reader blocks a writer at most one lease, and the
// writer-starvation measurement reports its numbers.

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "turnstile/errors.h"
#include "turnstile/sim/scenarios.h"

namespace turnstile::sim {
namespace {

using namespace std::chrono_literals;

constexpr std::int64_t kWatchdogMs = 30'000;
constexpr std::int64_t kTakeoverSlackMs = 100;

std::map<std::string, std::int64_t> facts(const ScenarioResult& result) {
  return {result.facts.begin(), result.facts.end()};
}

std::string reports(const ScenarioResult& result) {
  std::string text = "seed " + std::to_string(result.seed) + ": " + result.summary + "\n";
  for (const Violation& violation : result.violations) text += violation.report() + "\n";
  return text;
}

ScenarioResult run(std::string scenario, std::uint64_t seed, std::optional<Duration> duration = std::nullopt,
                   Flavor lock = Flavor::read_write) {
  ScenarioOptions options;
  options.scenario = std::move(scenario);
  options.seed = seed;
  options.flavor = lock;
  options.duration = duration;
  return run_scenario(options);
}

class ReadWriteSeeds : public ::testing::TestWithParam<std::uint64_t> {};

TEST_P(ReadWriteSeeds, ReadMostlyKeepsWritersAloneAndReadersTogether) {
  const ScenarioResult result = run("read-mostly", GetParam(), 3min);
  EXPECT_EQ(result.unexpected_violations, 0u) << reports(result);
  EXPECT_EQ(result.mutual_exclusion_violations, 0u) << reports(result);
  EXPECT_EQ(result.belief_violations, 0u) << reports(result);
  EXPECT_GT(facts(result)["max_readers_together"], 1) << reports(result);
  EXPECT_GT(facts(result)["reads"], 5 * facts(result)["writes"]) << reports(result);
  EXPECT_GT(facts(result)["writes"], 0) << reports(result);
  EXPECT_GE(facts(result)["writer_wait_max_ms"], facts(result)["writer_wait_median_ms"]) << reports(result);
}

TEST_P(ReadWriteSeeds, ACrashedReaderBlocksTheWriterAtMostOneLease) {
  const ScenarioResult result = run("reader-crash", GetParam());
  EXPECT_EQ(result.unexpected_violations, 0u) << reports(result);
  EXPECT_EQ(facts(result)["crashes"], 2) << reports(result);
  EXPECT_EQ(facts(result)["writes"], 2) << reports(result);
  EXPECT_EQ(facts(result)["max_readers_together"], 2) << reports(result);  // the crasher and the steady reader
  // The writer waited for the crashed reader's lease, and no longer.
  EXPECT_GT(facts(result)["max_writer_wait_after_crash_ms"], 20'000) << reports(result);
  EXPECT_LE(facts(result)["max_writer_wait_after_crash_ms"], kWatchdogMs + kTakeoverSlackMs) << reports(result);
  EXPECT_EQ(facts(result)["writer_in_within_lease"], 1) << reports(result);
}

TEST_P(ReadWriteSeeds, WriterStarvationIsMeasured) {
  const ScenarioResult result = run("writer-starvation", GetParam(), 1min);
  EXPECT_EQ(result.unexpected_violations, 0u) << reports(result);
  EXPECT_GT(facts(result)["max_readers_together"], 1) << reports(result);
  EXPECT_GT(facts(result)["reads"], 50) << reports(result);
  EXPECT_GE(facts(result)["writes"], 1) << reports(result);  // it gets in, at the latest once the stream stops
  EXPECT_GT(facts(result)["writer_wait_max_ms"], 0) << reports(result);
  EXPECT_GE(facts(result)["writer_wait_max_ms"], facts(result)["writer_wait_median_ms"]) << reports(result);
  EXPECT_EQ(facts(result)["stream_ms"], 60'000);
  // What docs/simulation.md reports, measured: readers are admitted while the lock
  // is in read mode and writers do not queue ahead (Redisson's design), so
  // the writer gets in only once the stream stops. A design that lets
  // writers in changes this and that page.
  EXPECT_EQ(facts(result)["starved"], 1) << reports(result);
  EXPECT_EQ(facts(result)["writes_during_stream"], 0) << reports(result);
  EXPECT_GT(facts(result)["writer_wait_max_ms"], 50'000) << reports(result);
}

INSTANTIATE_TEST_SUITE_P(Seeds1To5, ReadWriteSeeds, ::testing::Values(1, 2, 3, 4, 5));

TEST(ReadWriteScenariosTest, TheLockScenariosTakeWriteHoldsOfTheReadWriteLock) {
  for (const char* scenario : {"contention", "watchdog-crash", "seckill"}) {
    const ScenarioResult result = run(scenario, 3, 2min);
    EXPECT_EQ(result.flavor, "read-write");
    EXPECT_EQ(result.unexpected_violations, 0u) << scenario << " " << reports(result);
    EXPECT_GT(result.acquisitions, 10u) << scenario;
  }
}

TEST(ReadWriteScenariosTest, TheReadWriteScenariosRefuseOtherFlavors) {
  for (const char* scenario : {"read-mostly", "reader-crash", "writer-starvation"}) {
    try {
      (void)run(scenario, 1, std::nullopt, Flavor::reentrant);
      ADD_FAILURE() << scenario << " took --flavor reentrant";
    } catch (const InvalidArgumentError& error) {
      EXPECT_EQ(
          std::string(error.what()),
          std::string(scenario) + ": --flavor reentrant has no read half; this scenario needs --flavor read-write");
    }
  }
}

}  // namespace
}  // namespace turnstile::sim
