// turnstile/sim/scenarios.h
//
// Ready-made simulations of the failure modes distributed locks are chosen
// against, each a function of a few options returning a result, run on a
// World with the checkers on (turnstile/sim/checkers.h). `turnstile sim`
// is a thin shell over run_scenario().
//
//   turnstile::sim::ScenarioOptions options;
//   options.scenario = "gc-pause";
//   options.seed = 7;
//   turnstile::sim::ScenarioResult result = turnstile::sim::run_scenario(options);
//   // result.stale_writes_rejected > 0: the paused holder's fenced write lost.
//
// Scenarios (defaults in scenario_catalog()):
//   seckill             a stock of 10, buyers decrement it under the lock
//   one-order-per-user  fail-fast try_lock per user key; one order each
//   contention          clients loop lock / work / unlock
//   fair-fifo           waiters of a fair lock are served in arrival order
//   semaphore-pool      clients share N permits
//   watchdog-crash      holders crash; others take over after the lease
//   gc-pause            a holder pauses past its lease; two believe they
//                       hold; fencing rejects the stale writer
//   failover            the master dies; a lagging replica is promoted and
//                       the lock is granted twice (expected violation);
//                       with replica_sync, no lost lock (or the acquisition
//                       is undone with ReplicaSyncError); with redlock, a
//                       minority of nodes fail over and nothing is lost
//   partitioned-holder  a holder's links hang (requests neither answered nor
//                       refused) for longer than its lease while others
//                       contend: a holder still believing after the lock
//                       expired and went to another is a belief overlap
//   frozen-waiter       a fair lock's head dies while the waiter behind it
//                       is frozen (still subscribed) past its liveness
//                       deadline: the live waiter behind them is granted
//                       the lock, never the frozen one (FIFO check)
//   read-mostly         readers (9 rounds in 10) and writers of the
//                       read-write lock: readers together, writers alone
//   reader-crash        a reader crashes mid-hold; the waiting writer gets
//                       in within the reader's watchdog lease
//   writer-starvation   a steady stream of overlapping readers and one
//                       writer: how long the writer waits (it starves:
//                       readers are admitted while the lock is in read
//                       mode, writers do not queue ahead)
//   nodes-down          RedLock with `down_nodes` of `nodes` unreachable
//   client-pause        a RedLock holder paused longer than its validity
//   clock-drift         a RedLock holder's clock runs slower than allowed
//
// Lock flavors (--flavor) plug in at one place (scenario_kit): reentrant,
// token, fair, semaphore (the crash-safe PermitSemaphore, `permits`),
// counting-semaphore (CountingSemaphore), redlock (`nodes` servers, one
// Client per server per simulated process) and read-write (write holds in
// the lock scenarios; the read-write scenarios mix in read holds, judged
// by the readers-writers checker). A scenario refuses a flavor it
// cannot use with a one-line InvalidArgumentError saying why.
//
// Fault mixes (--faults, ScenarioOptions::faults): random faults of a
// FaultPlan (turnstile/sim/faults.h) for the scenario's whole duration, on
// top of its own: "none", "lossy" (dropped and delayed requests, replies
// and messages), "crashes" (crashes, pauses under the lease, links down),
// "partitions" (hanging links, up to a minute) and "chaos" (all of them).
// Left out on purpose: duplicated requests or replies (a RESP stream out
// of step, not something a TCP link does). "random" draws a mix from the
// run's seed (scenario_fault_plan): each kind in or out, each rate scaled
// from a quarter to four times the fixed mixes', longest pauses, outages
// and partitions drawn, clock skew (wall-clock offsets and drift per
// client, and per server), and in one run in four server restarts, each
// run's servers keeping nothing, the last second's writes lost (everysec)
// or every write (always). A lock on a server that lost writes cannot
// survive them, like failover: such a run expects a double grant and two
// holders believing where a restart explains them, within a lease and the
// longest fault after it, and nothing else
// (Checkers::expect(ExpectedViolation)). Scenarios whose clients stop at
// the first failed call refuse faults. What a flavor is never drawn with,
// and why, is fault_kind_left_out(): the semaphores take no restart that
// loses their permit count, and the counting semaphore (a permit whose
// release failed or was lost never comes back) takes "random" only,
// without dropped requests or replies, crashes, links down, partitions or
// restarts that lose writes (nor lost messages with process wake-ups).
//
// Every result carries the seed: run_scenario with the same options
// replays the run exactly (check_determinism() proves it on one run).

#ifndef TURNSTILE_SIM_SCENARIOS_H_
#define TURNSTILE_SIM_SCENARIOS_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "turnstile/client.h"
#include "turnstile/export.h"
#include "turnstile/flavor.h"
#include "turnstile/metrics.h"
#include "turnstile/runtime.h"
#include "turnstile/sim/buggify.h"
#include "turnstile/sim/checkers.h"
#include "turnstile/sim/faults.h"
#include "turnstile/sim/world.h"

namespace turnstile::sim {

struct TURNSTILE_EXPORT ScenarioOptions {
  static constexpr std::size_t kMaxClients = 10'000;
  static constexpr std::int64_t kMaxPermits = 10'000;
  static constexpr Duration kMaxDuration = std::chrono::hours(24 * 7);
  static constexpr std::size_t kMaxNodes = 15;

  std::string scenario = {};
  std::uint64_t seed = 1;
  std::optional<std::size_t> clients = {};  // default: the scenario's
  std::optional<Duration> duration = {};    // default: the scenario's
  Flavor flavor = Flavor::reentrant;
  std::int64_t permits = 3;    // the semaphores' permits
  std::size_t nodes = 5;       // redlock: independent servers (odd, 1..kMaxNodes)
  std::size_t down_nodes = 2;  // nodes-down: how many are unreachable (0..nodes)
  // failover: acquisitions wait for the replica (WAIT, 500 ms timeout) and are
  // undone when it does not acknowledge (ReplicaSyncError).
  bool replica_sync = false;
  std::optional<Duration> replica_lag = {};  // failover; default 6 s
  // Every client's ClientOptions::wake_scope (fleet, the library's
  // default: the wake registry).
  WakeScope wake_scope = WakeScope::fleet;
  // How every fair lock's waiters take a released lock
  // (FairLockOptions::handoff; default: the library's).
  Handoff fair_handoff = FairLockOptions{}.handoff;
  // How every client's reentrant locks hand on a release to a registered
  // process (ClientOptions::fleet_handoff; default: the library's).
  Handoff fleet_handoff = ClientOptions{}.fleet_handoff;
  // Every client's lock-delay (gc-pause: a paused holder's lock stays
  // closed this long beyond its lease), armed by every other client as
  // ClientOptions::lock_delay and by the rest per lock (LockOptions).
  // Zero (the default): none.
  Duration lock_delay = Duration::zero();
  // A fault mix by name (see the file comment); empty or "none": none.
  std::string faults = {};
  // BUGGIFY (turnstile/sim/buggify.h): the fault points inside the library
  // and the fake, each enabled or not from the seed. The counting
  // semaphore's runs leave out the points that lose a permit for good
  // (fake.reply_dropped_after_apply, fake.publish_lost).
  bool buggify = false;
  // Where to write a Chrome trace-event file (turnstile/sim/timeline.h);
  // empty: none.
  std::string trace_path = {};
  // With trace_path: a span per script or command call in the trace too
  // (TimelineOptions::commands).
  bool trace_commands = false;
  // Told the fraction of virtual time done, about every 1%.
  std::function<void(double fraction)> progress = {};
};

struct TURNSTILE_EXPORT ScenarioResult {
  std::string scenario;
  std::uint64_t seed = 0;
  std::size_t clients = 0;
  std::string flavor;  // flavor_name() of ScenarioOptions::flavor
  std::int64_t virtual_ms = 0;
  std::uint64_t events = 0;        // scheduler events dispatched
  std::uint64_t acquisitions = 0;  // grants clients saw
  std::uint64_t handoffs = 0;      // acquisitions by a client other than the previous holder
  std::uint64_t mutual_exclusion_violations = 0;
  std::uint64_t fifo_violations = 0;
  std::uint64_t fencing_violations = 0;
  std::uint64_t permit_violations = 0;
  std::uint64_t liveness_violations = 0;
  // Holders believing at once beyond capacity (Checkers, belief_overlap);
  // overlaps that needed a paused holder are counted apart.
  std::uint64_t belief_violations = 0;
  std::uint64_t belief_overlaps_while_paused = 0;
  std::uint64_t unexpected_violations = 0;  // non-zero: the run failed
  std::uint64_t stale_writes_rejected = 0;
  std::uint64_t faults_injected = 0;
  // The fault kinds of the run's plan (fault_kind_names()), and per
  // BUGGIFY point whether it was enabled, reached and fired.
  std::vector<std::string_view> fault_kinds;
  std::vector<BuggifyCount> buggify;
  std::string trace_sha256;           // of the text trace and the schedule hash
  std::uint64_t trace_hash = 0;       // World::trace_hash()
  std::vector<Violation> violations;  // reports, first first
  // Scenario-specific numbers, in a stable order ("sold", "oversold", ...).
  std::vector<std::pair<std::string, std::int64_t>> facts;
  // One line saying what the run shows.
  std::string summary;
  std::vector<std::string> trace_tail;  // last lines of the text trace
  // Each simulated client's metrics (turnstile/metrics.h), the same figures
  // a real Client reports: by client name, in the order the clients were
  // made; a RedLock or MultiLock client's Clients on every server summed.
  std::vector<std::pair<std::string, MetricsSnapshot>> client_metrics;
};

struct TURNSTILE_EXPORT ScenarioInfo {
  std::string_view name;
  std::string_view description;
  std::size_t default_clients;
  Duration default_duration;
  // The flavor the scenario is about (what `turnstile sim` uses without --flavor).
  Flavor default_flavor = Flavor::reentrant;
  // The fewest clients it runs with (scenario_catalog() sets it).
  std::size_t min_clients = 1;
};
TURNSTILE_EXPORT const std::vector<ScenarioInfo>& scenario_catalog();
// Whether the scenario takes a fault mix (its clients survive failed calls).
TURNSTILE_EXPORT bool scenario_takes_faults(std::string_view scenario);

// "none", "lossy", "crashes", "partitions", "chaos", "random".
TURNSTILE_EXPORT const std::vector<std::string_view>& fault_mix_names();
// The plan of the named mix with faults starting before `until`
// (InvalidArgumentError for an unknown name); nullopt for "none" or "".
// "random": the mix seed 0 draws for a reentrant lock.
TURNSTILE_EXPORT std::optional<FaultPlan> fault_mix(std::string_view name, Instant until);
// The plan a run of these options applies: fault_mix(), or for "random"
// the mix drawn from the options' seed for the options' flavor.
TURNSTILE_EXPORT std::optional<FaultPlan> scenario_fault_plan(const ScenarioOptions& options, Instant until);

// Why the swarm never draws the fault kind (fault_kind_names()) with the
// flavor, in one line; nullopt when it may. Every other pair is drawn by
// the CI swarm (tests/sim/swarm_test.cpp); the swarm's report prints these
// as "-" with the reason.
TURNSTILE_EXPORT std::optional<std::string_view> fault_kind_left_out(Flavor flavor, std::string_view kind);

// Whether run_scenario() would accept these options (the swarm draws
// only combinations it accepts).
TURNSTILE_EXPORT bool scenario_accepts(const ScenarioOptions& options);

// Runs one scenario. InvalidArgumentError (one line) for an unknown
// scenario, numbers out of range, a flavor not built in or one the scenario
// cannot use; turnstile::Error if the trace file cannot be written.
TURNSTILE_EXPORT ScenarioResult run_scenario(const ScenarioOptions& options);

// Runs the scenario twice (without trace file) and returns whether both
// runs made the same trace hash; `first`, if given, gets the first result.
TURNSTILE_EXPORT bool check_determinism(const ScenarioOptions& options, ScenarioResult* first = nullptr);

}  // namespace turnstile::sim

#endif  // TURNSTILE_SIM_SCENARIOS_H_
