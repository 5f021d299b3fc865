// The revocation scenario: a batch job holds the lock for minutes and
// watches release requests (turnstile/revocation.h); urgent clients that do
// not get the lock in a moment ask it to let go, then wait. The checkers
// judge the lock as in every scenario (one holder believed, permits,
// liveness); the facts say how many requests were made and honoured, and
// how long an urgent client waited after asking.

#include <algorithm>
#include <string>

#include "scenarios/scenario_kit.h"
#include "scenarios/scenario_list.h"
#include "turnstile/errors.h"
#include "turnstile/revocation.h"

namespace turnstile::sim::scenarios {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr auto kBatchHold = std::chrono::minutes(5);  // how long the batch job holds unless asked
constexpr auto kBatchStep = seconds(1);               // its work between checks of its watch
constexpr auto kCheckpoint = milliseconds(100);       // what it does before letting go
constexpr std::uint64_t kBatchRestMs = 20'000;        // its rest between holds: up to 20 s
constexpr auto kUrgentPatience = seconds(2);          // an urgent client's wait before it asks
constexpr std::uint64_t kUrgentThinkMs = 40'000;      // between its needs: 20..60 s
constexpr auto kUrgentThinkMin = seconds(20);
constexpr auto kUrgentHold = seconds(1);

}  // namespace

ScenarioResult revocation(const ScenarioOptions& options, std::size_t clients, Duration duration) {
  refuse_flavors(options, {Flavor::redlock, Flavor::multilock},
                 "takes requests on one node's client only; watch each node's (turnstile/revocation.h)");
  ScenarioWorld sw(options, clients);
  const std::string name = "lock:batch";
  sw.watch(name);
  const Instant end = at_offset(duration);
  std::int64_t requested = 0, heard = 0, honoured = 0, failed_calls = 0, max_wait_after_request_ms = 0;
  // Client 0: the batch job.
  Member& batch = sw.member(0);
  sw.world.spawn(*batch.sim, [&, end] {
    Runtime& runtime = batch.sim->runtime();
    auto lock = make_lock(sw, batch, name, false);
    RoundOptions round;
    round.while_held = [&](const LockHold& hold) {
      RevocationWatch asked;
      try {
        asked = batch.client->watch_release_requests(name);
      } catch (const Error&) {
        ++failed_calls;  // not watched this time: it holds its whole time
      }
      const Instant until = runtime.now() + kBatchHold;
      while (runtime.now() < until && !hold.loss_token().stop_requested() && !asked.token().stop_requested()) {
        runtime.sleep_for(kBatchStep);
      }
      if (asked.token().stop_requested()) {
        ++heard;
        runtime.sleep_for(kCheckpoint);
        ++honoured;
      }
    };
    while (runtime.now() < end) {
      const Round done = hold_round(sw, batch, *lock, name, round);
      failed_calls += static_cast<std::int64_t>(done.failed_calls);
      runtime.sleep_for(milliseconds(runtime.random_u64() % kBatchRestMs));
    }
  });
  // The others: urgent clients.
  for (std::size_t i = 1; i < clients; ++i) {
    Member& member = sw.member(i);
    sw.world.spawn(*member.sim, [&, end] {
      Runtime& runtime = member.sim->runtime();
      auto lock = make_lock(sw, member, name, false);
      while (runtime.now() < end) {
        runtime.sleep_for(kUrgentThinkMin + milliseconds(runtime.random_u64() % kUrgentThinkMs));
        if (runtime.now() >= end) break;
        sw.waiting(member, name);
        LockHold hold;
        std::optional<Instant> asked_at;
        try {
          hold = lock->try_acquire_hold({.wait = kUrgentPatience, .lease = std::nullopt, .stop = {}});
          if (!hold) {
            asked_at = runtime.now();
            ++requested;
            (void)member.client->request_release(name, member.sim->name() + " is urgent");
            hold = lock->try_acquire_hold({.wait = kWaitForever, .lease = std::nullopt, .stop = {}});
          }
        } catch (const ReplicaSyncError&) {
          sw.withdrawn(member, name);
          continue;
        } catch (const Error&) {
          ++failed_calls;
          sw.gave_up(member, name);
          continue;
        }
        if (asked_at) max_wait_after_request_ms = std::max(max_wait_after_request_ms, to_ms(runtime.now() - *asked_at));
        sw.acquired(member, name, hold.fencing_token());
        runtime.sleep_for(kUrgentHold);
        sw.releasing(member, name);
        hold.release();
        sw.released(member, name);
      }
    });
  }
  sw.run_until(end, end);
  drain_and_check(sw, end, kBatchHold);
  ScenarioResult result;
  sw.finish(result);
  result.facts = {{"release_requests", requested},
                  {"requests_heard", heard},
                  {"requests_honoured", honoured},
                  {"max_wait_after_request_ms", max_wait_after_request_ms},
                  {"failed_calls", failed_calls}};
  result.summary = std::to_string(requested) + " release requests by " + std::to_string(clients - 1) +
                   " urgent clients, " + std::to_string(honoured) + " honoured by the batch job; the longest wait " +
                   "after asking " + std::to_string(max_wait_after_request_ms) + " ms";
  return result;
}

}  // namespace turnstile::sim::scenarios
