// Expected violations only of the expected kind (issue #34): a scenario
// whose servers lose their state (a restart without persistence, a
// failover to a lagging replica) expects the violations that loss
// explains, Checkers::expect(ExpectedViolation): a double grant standing on
// a lost grant, within a window of the loss; beliefs begun before it; a
// fencing token below one drawn before it. The same kind for another
// reason, later than the window, or another kind still fails the run.

#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "turnstile/errors.h"
#include "turnstile/fair_lock.h"
#include "turnstile/sim/checkers.h"
#include "turnstile/sim/server_options.h"
#include "turnstile/sim/swarm.h"
#include "turnstile/sim/scenarios.h"
#include "turnstile/sim/world.h"

namespace turnstile::sim {
namespace {

using namespace std::chrono_literals;

constexpr std::int64_t kRestartMs = 500;

// Alice holds "t" (30 s lease) from 0; the server restarts at `restart_ms`
// (without persistence: forgetting it); `second_grant` later bob is
// granted it (SET NX): a double grant standing on the restart. `force`:
// bob's SET without NX, as a broken script would grant it beside a grant
// that survived.
struct DoubleGrantStory {
  Duration second_grant = 1s;
  std::optional<Duration> within = 1min;
  Persistence persistence = Persistence::none;
  std::int64_t restart_ms = kRestartMs;
  bool force = false;
};

struct DoubleGrant {
  std::uint64_t count = 0;
  std::uint64_t unexpected = 0;
  std::optional<std::int64_t> state_lost_ms;
};

DoubleGrant grant_again_after_a_restart(const DoubleGrantStory& story) {
  WorldOptions options;
  options.server.persistence = story.persistence;
  World world(1, options);
  Checkers checkers(world);
  checkers.watch({.resource = "t", .reader = string_lock_reader("t")});
  checkers.expect(ExpectedViolation{ViolationKind::mutual_exclusion, story.within});
  SimClient& client = world.add_client("client");
  world.spawn(client, [&] {
    client.backend().command({"SET", "t", "alice", "PX", "30000"});
    client.runtime().sleep_for(story.second_grant);
    if (story.force) {
      client.backend().command({"SET", "t", "bob", "PX", "30000"});
    } else {
      client.backend().command({"SET", "t", "bob", "NX", "PX", "30000"});
    }
  });
  world.at(Instant{} + std::chrono::milliseconds(story.restart_ms), [&] { world.restart_server(0); });
  world.run_until_idle();
  DoubleGrant outcome{checkers.count(ViolationKind::mutual_exclusion), checkers.unexpected_count(), std::nullopt};
  if (!checkers.violations().empty()) outcome.state_lost_ms = checkers.violations()[0].state_lost_ms;
  return outcome;
}

DoubleGrant grant_again_after_a_restart(Duration second_grant, std::optional<Duration> within) {
  return grant_again_after_a_restart(DoubleGrantStory{.second_grant = second_grant, .within = within});
}

TEST(ExpectedViolationsTest, ADoubleGrantStandingOnARestartIsExpectedWithinItsWindow) {
  const DoubleGrant outcome = grant_again_after_a_restart(1s, 10s);
  EXPECT_EQ(outcome.count, 1u);
  EXPECT_EQ(outcome.unexpected, 0u);
  EXPECT_EQ(outcome.state_lost_ms, kRestartMs);
}

TEST(ExpectedViolationsTest, TheSameDoubleGrantPastTheWindowFails) {
  const DoubleGrant outcome = grant_again_after_a_restart(20s, 10s);
  EXPECT_EQ(outcome.count, 1u);
  EXPECT_EQ(outcome.unexpected, 1u);
  EXPECT_EQ(outcome.state_lost_ms, kRestartMs);  // it stands on the loss, but too late
  EXPECT_EQ(grant_again_after_a_restart(20s, std::nullopt).unexpected, 0u) << "no window: any time after";
}

// The same story on a server with an append-only file: whether the
// restart lost alice's grant decides whether bob's grant is a violation,
// and whether it is excused.
DoubleGrant grant_again_after_a_restart_with(Persistence persistence, std::int64_t restart_ms, bool force) {
  return grant_again_after_a_restart(DoubleGrantStory{.second_grant = std::chrono::milliseconds(restart_ms) + 1s,
                                                      .persistence = persistence,
                                                      .restart_ms = restart_ms,
                                                      .force = force});
}

TEST(ExpectedViolationsTest, AnEverysecRestartExcusesOnlyWhatItsLastSecondLost) {
  // Alice's grant at 0 ms is not fsynced at 500 ms: lost, bob's grant expected.
  DoubleGrant outcome = grant_again_after_a_restart_with(Persistence::everysec, kRestartMs, false);
  EXPECT_EQ(outcome.count, 1u);
  EXPECT_EQ(outcome.unexpected, 0u);
  EXPECT_EQ(outcome.state_lost_ms, kRestartMs);
  // Fsynced at 1 s, it survives a restart at 1.5 s: bob is refused, and a
  // grant forced beside it stands on nothing lost.
  outcome = grant_again_after_a_restart_with(Persistence::everysec, 1'500, false);
  EXPECT_EQ(outcome.count, 0u);
  outcome = grant_again_after_a_restart_with(Persistence::everysec, 1'500, true);
  EXPECT_EQ(outcome.count, 1u);
  EXPECT_EQ(outcome.unexpected, 1u);
  EXPECT_FALSE(outcome.state_lost_ms.has_value());
}

TEST(ExpectedViolationsTest, AnAlwaysRestartLosesNothingAndExcusesNothing) {
  DoubleGrant outcome = grant_again_after_a_restart_with(Persistence::always, kRestartMs, false);
  EXPECT_EQ(outcome.count, 0u);
  outcome = grant_again_after_a_restart_with(Persistence::always, kRestartMs, true);
  EXPECT_EQ(outcome.count, 1u);
  EXPECT_EQ(outcome.unexpected, 1u);
  EXPECT_FALSE(outcome.state_lost_ms.has_value());
}

TEST(ExpectedViolationsTest, ADoubleGrantOfTheNewServerStillFails) {
  World world(1);
  Checkers checkers(world);
  checkers.watch({.resource = "orders", .reader = hash_lock_reader("orders")});
  checkers.name_holder("uuid-a", "alice");
  checkers.name_holder("uuid-b", "bob");
  checkers.expect(ExpectedViolation{ViolationKind::mutual_exclusion, 1min});
  SimClient& client = world.add_client("client");
  world.spawn(client, [&] {
    client.runtime().sleep_for(1s);  // after the restart
    client.backend().command({"HSET", "orders", "uuid-a:1", "1"});
    client.backend().command({"PEXPIRE", "orders", "30000"});
    client.runtime().sleep_for(1s);
    client.backend().command({"HSET", "orders", "uuid-b:1", "1"});  // a broken script would do this
  });
  world.at(Instant{} + std::chrono::milliseconds(kRestartMs), [&] { world.restart_server(0); });
  world.run_until_idle();
  ASSERT_EQ(checkers.count(ViolationKind::mutual_exclusion), 1u);
  EXPECT_EQ(checkers.unexpected_count(), 1u);
  EXPECT_FALSE(checkers.violations()[0].state_lost_ms.has_value()) << checkers.violations()[0].report();
  EXPECT_TRUE(world.stopped());
}

TEST(ExpectedViolationsTest, AnotherKindAfterARestartStillFails) {
  World world(1);
  Checkers checkers(world);
  checkers.watch({.resource = "orders", .reader = hash_lock_reader("orders")});
  checkers.expect(ExpectedViolation{ViolationKind::mutual_exclusion, 1min});
  checkers.expect(ExpectedViolation{ViolationKind::belief_overlap, 1min});
  SimClient& alice = world.add_client("alice");
  SimClient& bob = world.add_client("bob");
  // A restart's fencing counter starts above every token drawn
  // (lua/lib/fencing_counter.lua): a token going back is not its doing.
  world.at(Instant{} + 100ms, [&] { checkers.acquired(alice, "orders", 5); });
  world.at(Instant{} + 200ms, [&] { checkers.released(alice, "orders"); });
  world.at(Instant{} + std::chrono::milliseconds(kRestartMs), [&] { world.restart_server(0); });
  world.at(Instant{} + 1s, [&] { checkers.acquired(bob, "orders", 3); });
  world.run_for(1min);
  ASSERT_EQ(checkers.count(ViolationKind::fencing_order), 1u);
  EXPECT_EQ(checkers.unexpected_count(), 1u);
  EXPECT_EQ(checkers.violations()[0].state_lost_ms, kRestartMs) << "it stands on the loss, of a kind not expected";
  EXPECT_TRUE(world.stopped());
}

TEST(ExpectedViolationsTest, TokensBelowOneDrawnBeforeTheLossAreExpectedOthersFail) {
  World world(1);
  Checkers checkers(world);
  checkers.watch({.resource = "orders", .reader = hash_lock_reader("orders")});
  checkers.expect(ExpectedViolation{ViolationKind::fencing_order, std::nullopt});
  SimClient& alice = world.add_client("alice");
  SimClient& bob = world.add_client("bob");
  const auto hold = [&](SimClient& client, std::int64_t token) {
    checkers.acquired(client, "orders", token);
    checkers.released(client, "orders");
  };
  world.at(Instant{} + 100ms, [&] { hold(alice, 5); });
  world.at(Instant{} + std::chrono::milliseconds(kRestartMs), [&] { world.restart_server(0); });
  world.at(Instant{} + 1s, [&] { hold(bob, 4); });      // the counter came back behind: expected
  world.at(Instant{} + 2min, [&] { hold(alice, 5); });  // still behind 5, any time after
  world.at(Instant{} + 3min, [&] { hold(bob, 6); });
  world.at(Instant{} + 4min, [&] { hold(alice, 6); });  // behind a token drawn after the loss
  world.run_for(5min);
  ASSERT_EQ(checkers.count(ViolationKind::fencing_order), 3u);
  EXPECT_EQ(checkers.unexpected_count(), 1u);
  EXPECT_EQ(checkers.violations()[2].virtual_ms, 240'000);
  EXPECT_FALSE(checkers.violations()[2].expected);
}

TEST(ExpectedViolationsTest, OnlyBeliefsBegunBeforeTheLossAreExcused) {
  World world(1);
  Checkers checkers(world);
  checkers.watch({.resource = "orders", .reader = hash_lock_reader("orders")});
  checkers.expect(ExpectedViolation{ViolationKind::belief_overlap, 30s});
  SimClient& alice = world.add_client("alice");
  SimClient& bob = world.add_client("bob");
  SimClient& carol = world.add_client("carol");
  world.at(Instant{} + 100ms, [&] { checkers.acquired(alice, "orders"); });
  world.at(Instant{} + std::chrono::milliseconds(kRestartMs), [&] { world.restart_server(0); });
  world.at(Instant{} + 2s, [&] { checkers.acquired(bob, "orders"); });  // beside alice's old belief
  world.at(Instant{} + 3s, [&] { checkers.lost(alice, "orders"); });
  world.at(Instant{} + 4s, [&] { checkers.acquired(carol, "orders"); });  // beside bob's, begun after
  world.run_for(1min);
  ASSERT_EQ(checkers.count(ViolationKind::belief_overlap), 2u);
  EXPECT_TRUE(checkers.violations()[0].expected) << checkers.violations()[0].report();
  EXPECT_FALSE(checkers.violations()[1].expected) << checkers.violations()[1].report();
  EXPECT_EQ(checkers.unexpected_count(), 1u);
}

TEST(ExpectedViolationsTest, TheFailoverScenarioExpectsOnlyWhatItsLostWritesExplain) {
  ScenarioOptions options;
  options.scenario = "failover";
  for (const std::uint64_t seed : {1, 2, 3}) {
    options.seed = seed;
    const ScenarioResult result = run_scenario(options);
    EXPECT_EQ(result.unexpected_violations, 0u) << "seed " << seed;
    for (const Violation& violation : result.violations) {
      EXPECT_TRUE(violation.state_lost_ms.has_value()) << violation.report();
      EXPECT_NE(violation.report().find("after a server lost its state at"), std::string::npos);
    }
  }
}

// A swarm run's replay (BUGGIFY on).
struct SwarmReplay {
  std::string scenario;
  std::uint64_t seed = 0;
  Flavor flavor = Flavor::reentrant;
  std::size_t clients = 0;
  Duration duration{};
  std::string faults;
  bool buggify = true;
  Handoff fair_handoff = FairLockOptions{}.handoff;
};

ScenarioResult replay(const SwarmReplay& run) {
  ScenarioOptions options;
  options.scenario = run.scenario;
  options.seed = run.seed;
  options.flavor = run.flavor;
  options.clients = run.clients;
  options.duration = run.duration;
  options.faults = run.faults;
  options.buggify = run.buggify;
  options.fair_handoff = run.fair_handoff;
  return run_scenario(options);
}

std::string first_report(const ScenarioResult& result) {
  return result.violations.empty() ? "" : result.violations[0].report();
}

bool drew(const ScenarioResult& result, std::string_view kind) {
  return std::find(result.fault_kinds.begin(), result.fault_kinds.end(), kind) != result.fault_kinds.end();
}

// Swarm seeds 900 and 5718: an acquisition sent before the failover and
// answered after it (a slow script, a delayed reply) was granted, and drew
// its token, on the lost master: what overlaps it stands on the loss.
// (Seed 5718's read-write run changed with the read-write lock's fleet
// wake-ups, and seed 218's with the wipe check; seed 214 has the same
// shape: a write begun 1.5 s after the failover over a hold the lost
// master granted, whose holder's presence key the lagging replica had.)
// Since every token is floored by the server's clock
// (lua/lib/fencing_counter.lua), the tokens drawn after the failover rise
// above the lost master's: seed 900's lock is granted twice, its fencing
// order holds (it went back before).
TEST(ExpectedViolationsTest, AGrantAnsweredAfterTheFailoverStillStandsOnIt) {
  ScenarioResult result = replay({"failover", 900, Flavor::reentrant, 2, 3min, "chaos"});
  EXPECT_EQ(result.unexpected_violations, 0u) << first_report(result);
  EXPECT_GT(result.mutual_exclusion_violations, 0u);
  EXPECT_EQ(result.fencing_violations, 0u);
  result = replay({"failover", 214, Flavor::read_write, 4, 5min, "lossy"});
  EXPECT_EQ(result.unexpected_violations, 0u) << first_report(result);
  EXPECT_GT(result.belief_violations, 0u);
}

// Swarm seed 5526: a server restarts with appendfsync everysec and its
// last second is lost, among it client-03's unlock of the fair lock. The
// restart brings that hold back under the same owner id. The checkers take it as kept by
// the loss (no new grant, no FIFO judgement); the library, told of the
// restart, gives back a stale hold of its owner before its next attempt,
// which would otherwise stack on it as a reentrant hold, keep it renewed
// and starve every other waiter.
TEST(ExpectedViolationsTest, AHoldBroughtBackByAnEverysecRestartStarvesNobody) {
  ScenarioResult result = replay({"fair-fifo", 5526, Flavor::fair, 4, 1min, "random"});
  EXPECT_EQ(result.unexpected_violations, 0u) << first_report(result);
  EXPECT_EQ(result.fifo_violations, 0u);
  EXPECT_EQ(result.liveness_violations, 0u);
  EXPECT_TRUE(drew(result, "server-restart-everysec"));
}

// Swarm seeds 7738 and 100219 (read-mostly, read-write): an everysec
// restart brought back client-01's released read hold under the same owner
// id; each read of that task stacked on it and its renewals re-armed it,
// so under continuous reads the writers starved. An unlock answered "still
// held" on the last hold its task believed gives the rest back, and a read
// unlock drops a read field whose timeout keys are all gone. (Both runs
// changed with main's read-write wake-ups; kept as they were found.)
TEST(ExpectedViolationsTest, AReadHoldBroughtBackByAnEverysecRestartStarvesNoWriter) {
  ScenarioResult result = replay({"read-mostly", 7738, Flavor::read_write, 4, 2min, "random"});
  EXPECT_EQ(result.unexpected_violations, 0u) << first_report(result);
  EXPECT_EQ(result.liveness_violations, 0u);
  EXPECT_TRUE(drew(result, "server-restart-everysec"));
  SwarmOptions swarm;
  swarm.runs = 1;
  swarm.seed = 100219;
  std::vector<SwarmRun> runs;
  swarm.on_run = [&](const SwarmRun& run) { runs.push_back(run); };
  EXPECT_EQ(run_swarm(swarm).failed, 0u);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].options.scenario, "read-mostly") << runs[0].replay;
  EXPECT_EQ(runs[0].result.liveness_violations, 0u);
  EXPECT_TRUE(drew(runs[0].result, "server-restart-everysec"));
}

// Seed 5057 (contention, fair, direct handoff): client-03's try was
// answered "not acquired" and queued it with a grant offer; its next try's
// request was dropped. A release granted client-03 (naming the first
// try); client-03, settling the failed try, found that hold, gave it back
// (the lock passed to client-04) and tried again, then took the grant
// message it had heard meanwhile and believed beside client-04. A grant
// naming a try older than a later "not acquired" answer, or heard before a
// settlement gave holds back, is stale (Holding::grant_floor): refused.
TEST(ExpectedViolationsTest, AGrantGivenBackBySettlingIsNotTakenFromItsMessage) {
  const ScenarioResult result = replay({"contention", 5057, Flavor::fair, 4, 2min, "random", true, Handoff::direct});
  EXPECT_EQ(result.unexpected_violations, 0u) << first_report(result);
  EXPECT_EQ(result.belief_violations, 0u);
  EXPECT_TRUE(drew(result, "request-drop"));
}

// Seed 3278 (fair-fifo, direct handoff): a FIFO report, found before
// main's fault-cost merge changed what the seed draws. It no longer
// reproduces, even with the two fixes made for the swarm's direct-handoff
// reports taken out (the grant floor above, and a stale head's own try
// that evicts it and re-queues it only waking the next head rather than
// granting it ahead of the re-queued caller, lua/fair_lock_acquire.lua),
// so its first cause is not confirmed from its trace. Kept as found.
TEST(ExpectedViolationsTest, AFairFifoRunWithDirectHandoffServesInOrder) {
  const ScenarioResult result = replay({"fair-fifo", 3278, Flavor::fair, 16, 10min, "random", false, Handoff::direct});
  EXPECT_EQ(result.unexpected_violations, 0u) << first_report(result);
  EXPECT_EQ(result.fifo_violations, 0u);
  EXPECT_GT(result.acquisitions, 500u);
}

TEST(ExpectedViolationsTest, ANegativeWindowIsRefused) {
  World world(1);
  Checkers checkers(world);
  EXPECT_THROW(checkers.expect(ExpectedViolation{ViolationKind::liveness, -1s}), InvalidArgumentError);
}

}  // namespace
}  // namespace turnstile::sim
