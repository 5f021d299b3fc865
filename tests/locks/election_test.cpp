// Leader election (turnstile/election.h, issue #53): one leader at a time,
// terms strictly increasing, the leader's value as proclaimed, observers
// told each change. Bodies run in virtual time and against a real
// redis-server; crashes and pauses in simulation only (the CLI's tests kill
// and stop real processes).

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include "lock_environment.h"
#include "turnstile/client.h"
#include "turnstile/election.h"
#include "turnstile/errors.h"
#include "turnstile/key_layout.h"

namespace turnstile::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::seconds;

// What an observer was told, in order ("-" for nobody, else the value).
class Seen {
 public:
  LeaderHandler handler() {
    return [this](const std::optional<Leader>& leader) {
      std::lock_guard guard(mutex_);
      values_.push_back(leader ? leader->value : "-");
      if (leader) terms_.push_back(leader->term);
    };
  }
  std::vector<std::string> values() {
    std::lock_guard guard(mutex_);
    return values_;
  }
  std::vector<std::int64_t> terms() {
    std::lock_guard guard(mutex_);
    return terms_;
  }
  std::string last() {
    std::lock_guard guard(mutex_);
    return values_.empty() ? "" : values_.back();
  }

 private:
  std::mutex mutex_;
  std::vector<std::string> values_;
  std::vector<std::int64_t> terms_;
};

using ElectionTest = LockTest;

TEST_P(ElectionTest, OneLeadsAndTheNextLeadsOnceItResigns) {
  Client& first = env().add_client();
  Client& second = env().add_client();
  env().spawn(first, [&] {
    Election election = first.election("election:basic");
    Leadership leading = election.campaign("first:8080");
    ASSERT_TRUE(leading);
    EXPECT_TRUE(leading.held());
    EXPECT_GT(leading.term(), 0);
    EXPECT_EQ(leading.value(), "first:8080");
    const std::optional<Leader> seen = election.leader();
    ASSERT_TRUE(seen.has_value());
    EXPECT_EQ(seen->owner, leading.owner());
    EXPECT_EQ(seen->term, leading.term());
    EXPECT_EQ(seen->value, "first:8080");
    EXPECT_GT(seen->since_epoch_ms, 0);
    EXPECT_GT(seen->remaining, seconds(20));
    const std::int64_t first_term = leading.term();

    Election other = second.election("election:basic");
    EXPECT_FALSE(other.try_campaign("second:8080", {.wait = milliseconds(200)})) << "two leaders at once";
    leading.resign();
    EXPECT_FALSE(leading);
    EXPECT_FALSE(election.leader().has_value()) << "a resigned leader leads no more";
    Leadership next = other.campaign("second:8080");
    EXPECT_GT(next.term(), first_term) << "terms strictly increase";
    ASSERT_TRUE(election.leader().has_value());
    EXPECT_EQ(election.leader()->value, "second:8080");
    EXPECT_EQ(inspect({"HGET", leader_record_key("election:basic"), "term"}).as_string(), std::to_string(next.term()));
  });
  env().run();
}

TEST_P(ElectionTest, ProclaimChangesWhatObserversSee) {
  Client& leader = env().add_client();
  Client& watcher = env().add_client();
  Seen seen;
  env().spawn(watcher, [&] {
    Election election = watcher.election("election:observed");
    Observation observing = election.observe(seen.handler());
    ASSERT_TRUE(eventually(watcher, [&] { return seen.values().size() == 1; }));
    EXPECT_EQ(seen.values(), std::vector<std::string>{"-"}) << "told at once that nobody leads";

    Election candidate = leader.election("election:observed");
    Leadership leading = candidate.campaign("v1");
    ASSERT_TRUE(eventually(watcher, [&] { return seen.last() == "v1"; }));
    leading.proclaim("v2");
    ASSERT_TRUE(eventually(watcher, [&] { return seen.last() == "v2"; }));
    EXPECT_EQ(leading.value(), "v2");
    leading.resign();
    ASSERT_TRUE(eventually(watcher, [&] { return seen.last() == "-"; }));
    observing.stop();
    Leadership again = candidate.campaign("v3");
    watcher.runtime().sleep_for(milliseconds(200));
    EXPECT_EQ(seen.values(), (std::vector<std::string>{"-", "v1", "v2", "-"})) << "told after stop()";
    EXPECT_EQ(seen.terms().size(), 2U);
  });
  env().run();
}

TEST_P(ElectionTest, TermsIncreaseAcrossManyLeaders) {
  constexpr int kClients = 3;
  constexpr int kTerms = 4;
  std::mutex mutex;
  std::vector<std::int64_t> terms;
  std::atomic<int> leaders{0};
  std::atomic<int> most_leaders{0};
  for (int i = 0; i < kClients; ++i) {
    Client& client = env().add_client();
    env().spawn(client, [&, i] {
      Election election = client.election("election:terms");
      for (int round = 0; round < kTerms; ++round) {
        Leadership leading = election.campaign("client-" + std::to_string(i));
        const int now = ++leaders;
        most_leaders = std::max(most_leaders.load(), now);
        {
          std::lock_guard guard(mutex);
          terms.push_back(leading.term());
        }
        client.runtime().sleep_for(milliseconds(5));
        --leaders;
        leading.resign();
      }
    });
  }
  env().run();
  EXPECT_EQ(most_leaders.load(), 1);
  ASSERT_EQ(terms.size(), static_cast<std::size_t>(kClients * kTerms));
  for (std::size_t i = 1; i < terms.size(); ++i) EXPECT_GT(terms[i], terms[i - 1]) << "term " << i;
}

TEST_P(ElectionTest, AnAsynchronousCampaignWaitsOnNoThread) {
  Client& first = env().add_client();
  Client& second = env().add_client();
  env().spawn(first, [&] {
    Leadership leading = first.election("election:async").campaign("first");
    Future<Leadership> waiting = second.election("election:async").campaign_async("second");
    first.runtime().sleep_for(milliseconds(100));
    EXPECT_FALSE(waiting.is_ready());
    leading.resign();
    Leadership next = waiting.get();
    ASSERT_TRUE(next);
    EXPECT_EQ(next.value(), "second");
    EXPECT_EQ(first.election("election:async").leader()->value, "second");
  });
  env().run();
}

TEST_P(ElectionTest, ACampaignStopsWhenAskedAndLeavesNothing) {
  Client& first = env().add_client();
  Client& second = env().add_client();
  env().spawn(first, [&] {
    Election election = first.election("election:stop");
    Leadership leading = election.campaign("first");
    std::stop_source stop;
    Future<Leadership> waiting =
        second.election("election:stop").campaign_async("second", {.wait = kWaitForever, .stop = stop.get_token()});
    first.runtime().sleep_for(milliseconds(50));
    stop.request_stop();
    EXPECT_FALSE(waiting.get());
    EXPECT_EQ(inspect({"LLEN", key_layout(Flavor::fair, "election:stop").fair_queue}).as_integer(), 0)
        << "a stopped candidate leaves the line";
    EXPECT_EQ(election.leader()->value, "first");
  });
  env().run();
}

TEST_P(ElectionTest, BadValuesAndOptionsAreRefused) {
  Client& client = env().add_client();
  env().spawn(client, [&] {
    Election election = client.election("election:refused");
    EXPECT_THROW((void)election.campaign(std::string(kMaxLeaderValueBytes + 1, 'x')), InvalidArgumentError);
    EXPECT_THROW((void)client.election("election:refused", {.observe_period = milliseconds(1)}), InvalidArgumentError);
    EXPECT_THROW((void)client.election(""), InvalidArgumentError);
    Leadership leading = election.campaign("ok");
    EXPECT_THROW(leading.proclaim(std::string(kMaxLeaderValueBytes + 1, 'x')), InvalidArgumentError);
    EXPECT_EQ(election.leader()->value, "ok");
    leading.resign();
    EXPECT_THROW(leading.proclaim("late"), NotOwnerError) << "a resigned leader proclaims nothing";
    // A leader record of another type is someone's data: refused, kept.
    ASSERT_TRUE(inspect({"SET", leader_record_key("election:foreign"), "data"}).is_status());
    Election foreign = client.election("election:foreign");
    EXPECT_THROW((void)foreign.campaign("x"), ServerError);
    EXPECT_EQ(inspect({"GET", leader_record_key("election:foreign")}).as_string(), "data");
    EXPECT_FALSE(foreign.leader().has_value());
  });
  env().run();
}

// A leader that crashed publishes nothing: observers learn of it when its
// lease ends on the server, and the next candidate leads then.
TEST_P(ElectionTest, ACrashedLeaderIsSucceededAtItsLeaseEnd) {
  TURNSTILE_SIM_ONLY();
  Client& crashing = env().add_client();
  Client& next = env().add_client();
  Seen seen;
  std::optional<Instant> elected_at;
  std::optional<std::int64_t> first_term;
  env().spawn(crashing, [&] {
    Leadership leading = crashing.election("election:crash").campaign("doomed");
    first_term = leading.term();
    elected_at = crashing.runtime().now();
    crashing.runtime().sleep_for(minutes(5));  // crashed meanwhile
  });
  env().spawn(next, [&] {
    Election election = next.election("election:crash");
    Observation observing = election.observe(seen.handler());
    ASSERT_TRUE(eventually(next, [&] { return elected_at.has_value(); }));
    ASSERT_TRUE(eventually(next, [&] { return seen.last() == "doomed"; }));
    env().crash(crashing);
    // Nobody else campaigns yet: the observer is told at the lease's end.
    ASSERT_TRUE(eventually(
        next, [&] { return seen.last() == "-"; }, minutes(1)));
    const Duration told_after = next.runtime().now() - *elected_at;
    EXPECT_GE(told_after, seconds(30) - milliseconds(10)) << "told before the crashed leader's lease ended";
    EXPECT_LE(told_after, seconds(31));
    Leadership leading = election.campaign("heir");
    EXPECT_GT(leading.term(), *first_term);
    ASSERT_TRUE(eventually(next, [&] { return seen.last() == "heir"; }));
  });
  env().run();
}

// The case leader election is for: a leader paused past its lease (GC,
// SIGSTOP). A successor is elected at the lease's end; the paused leader,
// when it runs again, finds its leadership lost before its next step, and
// can proclaim nothing.
TEST_P(ElectionTest, APausedLeaderIsDeposedBeforeItActs) {
  TURNSTILE_SIM_ONLY();
  Client& paused = env().add_client();
  Client& next = env().add_client();
  std::vector<std::string> acted;  // each step: who acted, in which term
  std::optional<Instant> successor_at;
  std::atomic<bool> elected{false};
  std::vector<LockLostReason> lost;
  env().spawn(paused, [&] {
    Election election = paused.election("election:paused");
    election.set_lost_handler([&](const LockLost& event) { lost.push_back(event.reason); });
    Leadership leading = election.campaign("old");
    elected = true;
    acted.push_back("old:" + std::to_string(leading.term()));
    env().freeze(paused);  // 40 s: past its 30 s lease
    paused.runtime().sleep_for(milliseconds(1));
    // Running again: the step it would take next.
    if (leading.held() && !leading.loss_token().stop_requested()) {
      acted.push_back("old:" + std::to_string(leading.term()));
    }
    EXPECT_TRUE(leading.loss_token().stop_requested());
    EXPECT_THROW(leading.proclaim("still me"), NotOwnerError);
  });
  env().spawn(next, [&] {
    ASSERT_TRUE(eventually(next, [&] { return elected.load(); }));
    next.runtime().schedule_after(seconds(40), [&] { env().thaw(paused); });
    Election election = next.election("election:paused");
    Leadership leading = election.campaign("new");
    successor_at = next.runtime().now();
    acted.push_back("new:" + std::to_string(leading.term()));
    next.runtime().sleep_for(seconds(20));  // leads past the thaw
    EXPECT_EQ(election.leader()->value, "new");
  });
  env().run();
  ASSERT_EQ(acted.size(), 2U) << "the paused leader acted after its deposition";
  EXPECT_EQ(acted[0].substr(0, 4), "old:");
  EXPECT_EQ(acted[1].substr(0, 4), "new:");
  EXPECT_EQ(lost, std::vector<LockLostReason>{LockLostReason::lease_expired});
}

INSTANTIATE_TEST_SUITE_P(Environments, ElectionTest, ::testing::ValuesIn(lock_environments()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace turnstile::testing
