// The RedLock scenarios of redlock_scenarios.h, as `turnstile sim`
// scenarios: nodes-down, client-pause, clock-drift. Their checker is the
// Recorder's: two acquisitions overlap when their spans of protected writes
// intersect (mutual_exclusion_violations), and a write made after the
// writer's own validity ran out is late.

#include <optional>
#include <string>

#include "scenarios/redlock_scenarios.h"
#include "scenarios/scenario_kit.h"
#include "scenarios/scenario_list.h"
#include "turnstile/errors.h"

namespace turnstile::sim::scenarios {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// Longer than the 2 s lease of client_pause_scenario's holder.
constexpr Duration kPauseBeyondValidity = seconds(3);
// 5% slow, against the RedLock's 1% drift allowance.
constexpr std::int64_t kDriftBeyondAllowancePpm = -50'000;
constexpr std::size_t kTraceTailLines = 12;

// The lock a duel compares: a RedLock's majority or one server's
// reentrant lock. A switch, so that a new flavor is decided here.
std::optional<redlock_scenarios::ScenarioLock> duel_lock(Flavor flavor) {
  switch (flavor) {
    case Flavor::redlock:
      return redlock_scenarios::ScenarioLock::redlock;
    case Flavor::reentrant:
      return redlock_scenarios::ScenarioLock::reentrant;
    case Flavor::token:
    case Flavor::fair:
    case Flavor::semaphore:
    case Flavor::counting_semaphore:
    case Flavor::multilock:
    case Flavor::read_write:
      break;
  }
  return std::nullopt;
}

redlock_scenarios::ScenarioOptions duel_options(const ScenarioOptions& options, std::size_t cast, std::size_t clients) {
  const std::optional<redlock_scenarios::ScenarioLock> lock = duel_lock(options.flavor);
  if (!lock) {
    throw InvalidArgumentError(options.scenario + ": --flavor " + std::string(flavor_name(options.flavor)) +
                               " is not compared here; use --flavor redlock or reentrant");
  }
  if (options.clients && clients != cast) {
    throw InvalidArgumentError(options.scenario + " runs exactly " + std::to_string(cast) + " client(s)");
  }
  if (options.duration) throw InvalidArgumentError(options.scenario + " runs until it is done; drop --duration");
  if (options.replica_sync) throw InvalidArgumentError("--replica-sync applies to the failover scenario only");
  redlock_scenarios::ScenarioOptions duel;
  duel.lock = *lock;
  duel.nodes = options.nodes;
  duel.seed = options.seed;
  return duel;
}

ScenarioResult to_result(const ScenarioOptions& options, std::size_t cast, const redlock_scenarios::ScenarioResult& run,
                         bool overlap_expected) {
  ScenarioResult result;
  result.scenario = options.scenario;
  result.seed = options.seed;
  result.clients = cast;
  result.flavor = std::string(flavor_name(options.flavor));
  result.virtual_ms = run.virtual_ms;
  result.events = run.events;
  result.acquisitions = run.acquisitions;
  result.handoffs = run.acquisitions;  // every acquisition here is by another client
  result.mutual_exclusion_violations = run.overlapping_holders;
  result.unexpected_violations = overlap_expected ? 0 : run.overlapping_holders;
  for (std::uint64_t i = 0; i < run.overlapping_holders; ++i) {
    Violation violation;
    violation.kind = ViolationKind::mutual_exclusion;
    violation.virtual_ms = run.virtual_ms;
    violation.resource = "scenario-lock";
    violation.what = "two holders wrote to the protected resource in overlapping spans";
    violation.seed = options.seed;
    violation.expected = overlap_expected;
    result.violations.push_back(std::move(violation));
  }
  result.trace_hash = run.trace_hash;
  result.trace_sha256 = trace_digest(run.trace, run.trace_hash);
  result.facts = {{"nodes", static_cast<std::int64_t>(is_composite(options.flavor) ? options.nodes : 1)},
                  {"refusals", static_cast<std::int64_t>(run.refusals)},
                  {"acquire_errors", static_cast<std::int64_t>(run.acquire_errors)},
                  {"unlock_errors", static_cast<std::int64_t>(run.unlock_errors)},
                  {"writes", static_cast<std::int64_t>(run.writes)},
                  {"late_writes", static_cast<std::int64_t>(run.late_writes)},
                  {"overlapping_holders", static_cast<std::int64_t>(run.overlapping_holders)},
                  {"keys_left", static_cast<std::int64_t>(run.keys_left)}};
  std::vector<std::string> lines;
  for (std::size_t at = 0; at < run.trace.size();) {
    const std::size_t next = std::min(run.trace.find('\n', at), run.trace.size());
    lines.push_back(run.trace.substr(at, next - at));
    at = next + 1;
  }
  const std::size_t first = lines.size() > kTraceTailLines ? lines.size() - kTraceTailLines : 0;
  result.trace_tail.assign(lines.begin() + static_cast<std::ptrdiff_t>(first), lines.end());
  return result;
}

}  // namespace

ScenarioResult nodes_down(const ScenarioOptions& options, std::size_t clients, Duration) {
  const redlock_scenarios::ScenarioResult run =
      redlock_scenarios::nodes_down_scenario(duel_options(options, 1, clients), options.down_nodes);
  ScenarioResult result = to_result(options, 1, run, false);
  result.facts.insert(result.facts.begin(), {"down_nodes", static_cast<std::int64_t>(options.down_nodes)});
  result.summary = std::to_string(options.down_nodes) + " of " + std::to_string(result.facts[1].second) +
                   " nodes down: " +
                   (run.acquisitions > 0 ? "acquired and released"
                                         : "not acquired (" + std::to_string(run.acquire_errors) + " error(s))") +
                   ", " + std::to_string(run.keys_left) + " key(s) left behind";
  return result;
}

ScenarioResult client_pause(const ScenarioOptions& options, std::size_t clients, Duration) {
  const redlock_scenarios::ScenarioResult run =
      redlock_scenarios::client_pause_scenario(duel_options(options, 2, clients), kPauseBeyondValidity);
  // Validity cannot help a holder paused after checking it: expected.
  ScenarioResult result = to_result(options, 2, run, true);
  result.facts.insert(result.facts.begin(),
                      {"pause_ms", std::chrono::duration_cast<milliseconds>(kPauseBeyondValidity).count()});
  result.summary =
      "alice paused 3000 ms between checking her 2 s lock's validity and writing: " + std::to_string(run.late_writes) +
      " late write(s), " + std::to_string(run.overlapping_holders) +
      " overlap(s) with bob (fencing tokens would reject them; RedLock has none)";
  return result;
}

ScenarioResult clock_drift(const ScenarioOptions& options, std::size_t clients, Duration) {
  const redlock_scenarios::ScenarioResult run =
      redlock_scenarios::clock_drift_scenario(duel_options(options, 2, clients), kDriftBeyondAllowancePpm);
  // A clock slower than the allowance breaks the RedLock's assumption: expected.
  ScenarioResult result = to_result(options, 2, run, true);
  result.facts.insert(result.facts.begin(), {"clock_drift_ppm", kDriftBeyondAllowancePpm});
  result.summary = "alice's clock ran 5% slow (allowance 1%): she wrote on after the servers expired her lock, " +
                   std::to_string(run.overlapping_holders) + " overlap(s) with bob";
  return result;
}

}  // namespace turnstile::sim::scenarios
