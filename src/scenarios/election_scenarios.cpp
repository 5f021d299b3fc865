// The election scenario: candidates campaign for one name
// (turnstile/election.h), lead for a while and resign, under the fault mix;
// an observer follows the leader. The checkers judge the election's fair
// lock: at most one leader believed at any instant (belief_overlap), terms
// strictly increasing (fencing_order: a term is the leader hold's fencing
// token), candidates served in the order they came (fifo), and a live
// candidate leads within the liveness bound (liveness).

#include <algorithm>
#include <string>

#include "scenarios/scenario_kit.h"
#include "scenarios/scenario_list.h"
#include "turnstile/election.h"
#include "turnstile/errors.h"

namespace turnstile::sim::scenarios {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr auto kShortestLead = seconds(1);
constexpr std::uint64_t kLeadSpreadMs = 2'000;   // leads last 1..3 s
constexpr auto kLeaderStep = milliseconds(200);  // a leader's work between checks of its loss token
constexpr std::uint64_t kProclaimOneIn = 4;      // steps that proclaim a new value
constexpr std::uint64_t kMaxThinkMs = 100;
constexpr auto kDrainHold = seconds(3);

}  // namespace

ScenarioResult election(const ScenarioOptions& options, std::size_t clients, Duration duration) {
  if (!queues_waiters(options.flavor) || !can_be_fenced(options.flavor)) {
    throw InvalidArgumentError("election: --flavor " + std::string(flavor_name(options.flavor)) +
                               " is not what an election runs on (a fenced fair lock); use --flavor fair");
  }
  ScenarioWorld sw(options, clients + 1);  // the candidates, and an observer
  const std::string name = "election:leader";
  sw.watch(name, /*fifo=*/true);
  const Instant end = at_offset(duration);
  std::int64_t terms = 0, leaders = 0, most_leaders = 0, failed_calls = 0, proclaimed = 0, deposed = 0;
  for (std::size_t i = 0; i < clients; ++i) {
    Member& member = sw.member(i);
    sw.world.spawn(*member.sim, [&, end] {
      Runtime& runtime = member.sim->runtime();
      runtime.sleep_for(milliseconds(static_cast<std::int64_t>(member.sim->id())));
      Election election = member.client->election(name, {.lock_delay = member.lock_delay});
      // Whether this candidate believes it leads: from its election to its
      // resignation or the instant it is told of a loss.
      bool believes = false;
      const auto stop_believing = [&believes, &leaders] {
        if (believes) --leaders;
        believes = false;
      };
      election.set_lost_handler([&sw, &member, name, &stop_believing](const LockLost&) {
        stop_believing();
        sw.lost(member, name);
      });
      const std::string value = member.sim->name();
      while (runtime.now() < end) {
        sw.waiting(member, name);
        Leadership leading;
        try {
          leading = election.try_campaign(value, {.wait = kWaitForever, .lease = std::nullopt, .stop = {}});
        } catch (const ReplicaSyncError&) {
          sw.withdrawn(member, name);
          continue;
        } catch (const Error&) {
          ++failed_calls;
          sw.gave_up(member, name);
          continue;
        }
        sw.acquired(member, name, leading.term());
        ++terms;
        believes = true;
        most_leaders = std::max(most_leaders, ++leaders);
        const Instant lead_end = runtime.now() + kShortestLead + milliseconds(runtime.random_u64() % kLeadSpreadMs);
        while (!leading.loss_token().stop_requested() && runtime.now() < lead_end) {
          runtime.sleep_for(kLeaderStep);
          if (runtime.random_u64() % kProclaimOneIn != 0 || leading.loss_token().stop_requested()) continue;
          try {
            leading.proclaim(value + ":" + std::to_string(leading.term()));
            ++proclaimed;
          } catch (const NotOwnerError&) {
            ++deposed;
          } catch (const Error&) {
            ++failed_calls;
          }
        }
        stop_believing();
        sw.releasing(member, name);
        leading.resign();
        sw.released(member, name);
        runtime.sleep_for(milliseconds(runtime.random_u64() % kMaxThinkMs));
      }
    });
  }
  // The observer: what it was told, in order; a term it saw go back.
  Member& observer = sw.member(clients);
  std::int64_t changes = 0, observed_terms_back = 0, last_observed_term = 0;
  const Instant drained = end + seconds(90) + 3 * options.lock_delay + (seconds(2) + kDrainHold) * (clients + 1);
  sw.world.spawn(*observer.sim, [&, drained] {
    Election election = observer.client->election(name);
    Observation observing;
    try {
      observing = election.observe([&](const std::optional<Leader>& leader) {
        ++changes;
        if (!leader) return;
        if (leader->term < last_observed_term) ++observed_terms_back;
        last_observed_term = std::max(last_observed_term, leader->term);
      });
    } catch (const Error&) {
      return;  // its subscription failed under the fault mix: no observer this run
    }
    observer.sim->runtime().sleep_until(drained);
  });
  sw.run_until(end, end);
  drain_and_check(sw, end, kDrainHold);
  ScenarioResult result;
  sw.finish(result);
  result.clients = clients;
  result.facts = {{"terms", terms},
                  {"most_leaders_believed", most_leaders},
                  {"proclamations", proclaimed},
                  {"proclamations_refused_deposed", deposed},
                  {"failed_calls", failed_calls},
                  {"observed_changes", changes},
                  {"observed_terms_back", observed_terms_back}};
  result.summary = std::to_string(terms) + " terms led by " + std::to_string(clients) + " candidates, at most " +
                   std::to_string(most_leaders) + " believing they led at once; the observer saw " +
                   std::to_string(changes) + " changes";
  return result;
}

}  // namespace turnstile::sim::scenarios
