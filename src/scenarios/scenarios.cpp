// The scenario catalog and run_scenario(): option checks, defaults, dispatch.

#include "turnstile/sim/scenarios.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "scenarios/scenario_list.h"
#include "sim/random.h"
#include "turnstile/errors.h"

namespace turnstile::sim {
namespace {

using std::chrono::minutes;
using std::chrono::seconds;

using ScenarioFunction = ScenarioResult (*)(const ScenarioOptions&, std::size_t, Duration);

// The flavors a scenario runs with (its function refuses the others with
// its own words; the swarm draws only these).
using FlavorFilter = bool (*)(Flavor);

bool any_flavor(Flavor) { return true; }
bool fair_only(Flavor flavor) { return queues_waiters(flavor); }
bool semaphores_only(Flavor flavor) { return is_semaphore(flavor); }
bool read_write_only(Flavor flavor) { return has_shared_holds(flavor); }
bool redlock_only(Flavor flavor) { return flavor_traits(flavor).quorum == Quorum::majority; }
bool leased_only(Flavor flavor) { return has_lease(flavor); }
bool locks_only(Flavor flavor) { return !is_semaphore(flavor); }
bool fenced_only(Flavor flavor) { return can_be_fenced(flavor); }
bool not_composite(Flavor flavor) { return !is_composite(flavor); }

struct Entry {
  ScenarioInfo info;
  ScenarioFunction run;
  std::size_t min_clients;
  bool takes_faults = false;  // its clients survive failed calls
  FlavorFilter accepts = any_flavor;
};

const std::vector<Entry>& entries() {
  static const std::vector<Entry> list = {
      {{"seckill", "a stock of 10; buyers decrement it under the lock; reports sold and oversold", 100, minutes(1)},
       scenarios::seckill,
       1,
       false,
       locks_only},
      {{"one-order-per-user", "fail-fast try_lock per user key; each user gets exactly one order", 100, minutes(1)},
       scenarios::one_order_per_user,
       1,
       false,
       locks_only},
      {{"contention", "clients loop lock / 1 s of work / unlock", 16, minutes(10)}, scenarios::contention, 1, true},
      {{"fair-fifo", "waiters of a fair lock are served in arrival order", 16, minutes(10), Flavor::fair},
       scenarios::fair_fifo,
       2,
       true,
       fair_only},
      {{"semaphore-pool", "clients share --permits permits", 16, minutes(10), Flavor::semaphore},
       scenarios::semaphore_pool,
       1,
       true,
       semaphores_only},
      {{"election",
        "candidates campaign for one name, lead 1-3 s and resign; an observer follows; one leader believed at a "
        "time, terms increasing",
        5, minutes(10), Flavor::fair},
       scenarios::election,
       2,
       true,
       fair_only},
      {{"revocation",
        "a batch job holds for minutes and watches release requests; urgent clients that wait 2 s ask it to let go", 4,
        minutes(10)},
       scenarios::revocation,
       2,
       true,
       not_composite},
      {{"watchdog-crash", "holders crash mid-hold; others take over after the watchdog timeout", 8, minutes(10)},
       scenarios::watchdog_crash,
       2,
       true,
       leased_only},
      {{"gc-pause", "a holder pauses past its lease; fencing rejects its stale write", 3, minutes(5)},
       scenarios::gc_pause,
       2,
       false,
       fenced_only},
      {{"failover", "the master dies; a lagging replica is promoted and the lock is granted twice", 4, minutes(2)},
       scenarios::failover,
       2,
       true,
       leased_only},
      {{"partitioned-holder", "a holder's link hangs (no reset) past its lease; does it stop believing in time?", 3,
        minutes(3)},
       scenarios::partitioned_holder,
       2,
       true,
       leased_only},
      {{"frozen-waiter",
        "a fair lock's head dies while the waiter behind it is frozen past its liveness deadline; the live waiter "
        "behind them gets the lock",
        5, minutes(2), Flavor::fair},
       scenarios::frozen_waiter,
       4,
       true,
       fair_only},
      {{"read-mostly",
        "readers (9 rounds in 10) and writers of a read-write lock; reports readers together and writer waits", 8,
        minutes(10), Flavor::read_write},
       scenarios::read_mostly,
       2,
       true,
       read_write_only},
      {{"reader-crash", "a reader crashes mid-hold; the waiting writer gets in within the reader's watchdog lease", 4,
        minutes(3), Flavor::read_write},
       scenarios::reader_crash,
       3,
       false,
       read_write_only},
      {{"writer-starvation",
        "a steady stream of overlapping readers and one writer: writers can starve (readers are admitted in read "
        "mode, writers do not queue ahead); reports the writer's waits",
        5, minutes(2), Flavor::read_write},
       scenarios::writer_starvation,
       3,
       false,
       read_write_only},
      {{"nodes-down", "RedLock with --down-nodes of --nodes unreachable: acquires with a majority up", 1, seconds(0),
        Flavor::redlock},
       scenarios::nodes_down,
       1,
       false,
       redlock_only},
      {{"client-pause", "a RedLock holder paused longer than its validity writes after the next holder took over", 2,
        seconds(0), Flavor::redlock},
       scenarios::client_pause,
       2,
       false,
       redlock_only},
      {{"clock-drift", "a RedLock holder whose clock runs 5% slow (allowance 1%) writes after its lock expired", 2,
        seconds(0), Flavor::redlock},
       scenarios::clock_drift,
       2,
       false,
       redlock_only},
  };
  return list;
}

constexpr std::array<std::string_view, 6> kFaultMixNames = {"none",       "lossy", "crashes",
                                                            "partitions", "chaos", "random"};

// The random mix's draws come from this stream of the run's seed.
constexpr std::uint64_t kRandomMixStream = 1ULL << 45;

// A rate of the fixed mixes scaled by 1/4, 1/2, 1, 2 or 4.
double scaled(Random& random, double rate) { return rate * std::ldexp(1.0, static_cast<int>(random.below(5)) - 2); }

Duration between(Random& random, Duration low, Duration high) {
  const auto low_ms = std::chrono::duration_cast<std::chrono::milliseconds>(low).count();
  const auto high_ms = std::chrono::duration_cast<std::chrono::milliseconds>(high).count();
  return std::chrono::milliseconds(
      low_ms + static_cast<std::int64_t>(random.below(static_cast<std::uint64_t>(high_ms - low_ms + 1))));
}

// "random": every kind drawn in or out, in a fixed order whatever the
// flavor (a seed draws the same numbers), then what the flavor cannot take
// left out (fault_kind_left_out): the semaphores lose their permit count
// in a restart that empties the keyspace, and the counting semaphore loses
// a permit for good to a failed call, a crash or a lost write. (A lost
// release message it takes: its waiters try again every
// kFleetSemaphoreRetryMs. The swarm draws fleet wake-ups only.)
// The crash-safe semaphore's permits expire by the clients' wall clocks
// (Redisson's Unix-ms scores): its safety assumes they agree within the
// holder's margin (docs/safety.md, "Wall clocks and permit semaphores"), so
// its random mixes keep every client within half of kPermitClockAgreement
// of true time for the run and its drain (the offset, then the drift).
// A permit semaphore with clocks beyond the bound: the permit-clock-skew
// scenario.
constexpr Duration kPermitClockAgreement = std::chrono::milliseconds(40);  // the 5 s failover lease's margin is 52 ms
constexpr Duration kPermitClockOffsetMax = std::chrono::milliseconds(15);
constexpr Duration kPermitDriftDrain = std::chrono::minutes(10);  // scenario_kit's kToleranceDrain

void keep_permit_clocks_agreeing(FaultPlan& plan, Duration run) {
  plan.wall_clock_offset_max = std::min(plan.wall_clock_offset_max, kPermitClockOffsetMax);
  const auto drift_budget_us =
      std::chrono::duration_cast<std::chrono::microseconds>(kPermitClockAgreement / 2 - kPermitClockOffsetMax).count();
  const auto span_s = std::max<std::int64_t>(1, std::chrono::duration_cast<seconds>(run + kPermitDriftDrain).count());
  plan.clock_drift_ppm_max = std::min<std::int64_t>(plan.clock_drift_ppm_max, drift_budget_us / span_s);
}

FaultPlan random_mix(std::uint64_t seed, Flavor flavor, Instant until, Duration run) {
  Random random(seed, kRandomMixStream);
  const auto in = [&random] { return random.below(2) == 0; };
  FaultPlan plan;
  plan.until = until;
  if (in()) {
    plan.request_drop = scaled(random, 0.002);
    plan.reply_drop = scaled(random, 0.002);
  }
  if (in()) {
    plan.request_delay = scaled(random, 0.02);
    plan.delay_max = between(random, std::chrono::milliseconds(20), std::chrono::milliseconds(1000));
  }
  if (in()) {
    plan.message_drop = scaled(random, 0.01);
    plan.message_duplicate = scaled(random, 0.01);
    plan.message_delay = scaled(random, 0.02);
  }
  if (in()) plan.crash_per_client_hour = scaled(random, 1);
  if (in()) {
    plan.pause_per_client_hour = scaled(random, 6);
    plan.pause_max = between(random, seconds(1), seconds(25));  // under the 30 s lease
  }
  if (in()) {
    plan.link_down_per_client_hour = scaled(random, 6);
    plan.link_down_max = between(random, seconds(1), seconds(10));
  }
  if (in()) {
    plan.partition_per_client_hour = scaled(random, 4);
    plan.partition_max = between(random, seconds(5), minutes(1));
  }
  if (in()) {
    plan.wall_clock_offset_max = between(random, std::chrono::milliseconds(1), seconds(1));
    plan.clock_drift_ppm_max = static_cast<std::int64_t>(random.below(1'001));
  }
  if (random.below(4) == 0) plan.server_restart_per_hour = scaled(random, 2);
  // What a restart keeps (drawn in every mix, so that the draws after it
  // stay put), and the servers' own clocks, within the clients' 1 %
  // clock_drift_factor.
  plan.server_persistence = static_cast<Persistence>(random.below(3));
  if (in()) {
    plan.server_clock_offset_max = between(random, std::chrono::milliseconds(1), seconds(1));
    plan.server_clock_drift_ppm_max = static_cast<std::int64_t>(random.below(1'001));
  }
  // A restart that empties the keyspace takes the semaphore's permit count
  // (trySetPermits) with it: nobody acquires again until an operator sets
  // it again. The counting semaphore also loses for good a release written
  // in the last second (everysec).
  const Persistence keeps_permits = has_lease(flavor) ? Persistence::everysec : Persistence::always;
  if (is_semaphore(flavor) && *plan.server_persistence < keeps_permits) plan.server_restart_per_hour = 0;
  if (has_leased_permits(flavor)) keep_permit_clocks_agreeing(plan, run);
  if (is_semaphore(flavor) && !has_lease(flavor)) {
    plan.request_drop = plan.reply_drop = 0;
    plan.crash_per_client_hour = plan.link_down_per_client_hour = plan.partition_per_client_hour = 0;
  }
  return plan;
}

constexpr std::string_view kNoDuplicateOnTcp =
    "TCP delivers each request and reply once (a duplicate puts RESP out of step)";
constexpr std::string_view kCountingPermitLostForGood =
    "the counting semaphore has no lease: a permit whose release is lost or never sent never comes back";
constexpr std::string_view kPermitCountLost =
    "a restart that empties the keyspace loses the permit count (trySetPermits): an operator must set it again";

}  // namespace

std::optional<std::string_view> fault_kind_left_out(Flavor flavor, std::string_view kind) {
  if (kind == "request-duplicate" || kind == "reply-duplicate") return kNoDuplicateOnTcp;
  if (is_semaphore(flavor) && !has_lease(flavor) &&
      (kind == "crash" || kind == "link-down" || kind == "partition" || kind == "request-drop" ||
       kind == "reply-drop" || kind == "server-restart-everysec")) {
    return kCountingPermitLostForGood;
  }
  if (is_semaphore(flavor) && kind == "server-restart") return kPermitCountLost;
  return std::nullopt;
}

namespace {

const Entry* find_entry(std::string_view name) {
  for (const Entry& entry : entries()) {
    if (entry.info.name == name) return &entry;
  }
  return nullptr;
}

}  // namespace

const std::vector<std::string_view>& fault_mix_names() {
  static const std::vector<std::string_view> names(kFaultMixNames.begin(), kFaultMixNames.end());
  return names;
}

std::optional<FaultPlan> fault_mix(std::string_view name, Instant until) {
  if (name == "random") return random_mix(0, Flavor::reentrant, until, Duration::zero());
  const bool lossy = name == "lossy" || name == "chaos";
  const bool crashes = name == "crashes" || name == "chaos";
  const bool partitions = name == "partitions" || name == "chaos";
  if (!lossy && !crashes && !partitions) {
    if (name.empty() || name == "none") return std::nullopt;
    throw InvalidArgumentError("--faults must be none, lossy, crashes, partitions, chaos or random, not '" +
                               std::string(name) + "'");
  }
  FaultPlan plan;
  plan.until = until;
  if (lossy) {
    plan.request_drop = 0.002;
    plan.reply_drop = 0.002;
    plan.request_delay = 0.02;
    plan.message_drop = 0.01;
    plan.message_duplicate = 0.01;
    plan.message_delay = 0.02;
  }
  if (crashes) {
    plan.crash_per_client_hour = 1;
    plan.pause_per_client_hour = 6;
    plan.pause_max = seconds(10);  // under the 30 s lease; gc-pause shows longer ones
    plan.link_down_per_client_hour = 6;
  }
  if (partitions) {
    plan.partition_per_client_hour = 4;
    plan.partition_max = minutes(1);
  }
  return plan;
}

std::optional<FaultPlan> scenario_fault_plan(const ScenarioOptions& options, Instant until) {
  if (options.faults == "random") {
    Duration run = options.duration.value_or(Duration::zero());
    if (const Entry* entry = find_entry(options.scenario); entry != nullptr && !options.duration) {
      run = entry->info.default_duration;
    }
    FaultPlan plan = random_mix(options.seed, options.flavor, until, run);
    // Without the fleet's retries a counting semaphore's waiter that missed
    // a release waits for the next one.
    if (is_semaphore(options.flavor) && !has_lease(options.flavor) && options.wake_scope == WakeScope::process) {
      plan.message_drop = 0;
    }
    return plan;
  }
  return fault_mix(options.faults, until);
}

bool scenario_takes_faults(std::string_view scenario) {
  const Entry* entry = find_entry(scenario);
  return entry != nullptr && entry->takes_faults;
}

const std::vector<ScenarioInfo>& scenario_catalog() {
  static const std::vector<ScenarioInfo> catalog = [] {
    std::vector<ScenarioInfo> infos;
    for (const Entry& entry : entries()) {
      infos.push_back(entry.info);
      infos.back().min_clients = entry.min_clients;
    }
    return infos;
  }();
  return catalog;
}

namespace {

// What run_scenario() checks before the scenario's own function runs.
const Entry& check_options(const ScenarioOptions& options) {
  const Entry* found = find_entry(options.scenario);
  if (found == nullptr) {
    std::string names;
    for (const Entry& entry : entries()) names += (names.empty() ? "" : ", ") + std::string(entry.info.name);
    throw InvalidArgumentError("unknown scenario '" + options.scenario + "' (known: " + names + ")");
  }
  const std::size_t clients = options.clients.value_or(found->info.default_clients);
  if (clients < found->min_clients || clients > ScenarioOptions::kMaxClients) {
    throw InvalidArgumentError("--clients for " + options.scenario + " must be within " +
                               std::to_string(found->min_clients) + ".." +
                               std::to_string(ScenarioOptions::kMaxClients));
  }
  const Duration duration = options.duration.value_or(found->info.default_duration);
  if (options.duration && (duration < std::chrono::milliseconds(1) || duration > ScenarioOptions::kMaxDuration)) {
    throw InvalidArgumentError("--duration must be within 1ms..168h");
  }
  if (options.permits < 1 || options.permits > ScenarioOptions::kMaxPermits) {
    throw InvalidArgumentError("--permits must be within 1.." + std::to_string(ScenarioOptions::kMaxPermits));
  }
  if (options.nodes < 1 || options.nodes > ScenarioOptions::kMaxNodes || options.nodes % 2 == 0) {
    throw InvalidArgumentError("--nodes must be odd and within 1.." + std::to_string(ScenarioOptions::kMaxNodes));
  }
  if (options.down_nodes > options.nodes) throw InvalidArgumentError("--down-nodes cannot exceed --nodes");
  if (options.replica_lag &&
      (*options.replica_lag < Duration::zero() || *options.replica_lag > std::chrono::hours(1))) {
    throw InvalidArgumentError("--replica-lag must be within 0..1h");
  }
  if (fault_mix(options.faults, Instant{}).has_value()) {
    if (!found->takes_faults) {
      throw InvalidArgumentError(options.scenario + ": --faults needs a scenario whose clients survive failed calls");
    }
    if (is_semaphore(options.flavor) && !has_lease(options.flavor) && options.faults != "random") {
      throw InvalidArgumentError(options.scenario +
                                 ": --flavor counting-semaphore takes --faults random only: a permit whose "
                                 "release failed never comes back (use --flavor semaphore)");
    }
  }
  return *found;
}

}  // namespace

bool scenario_accepts(const ScenarioOptions& options) {
  try {
    const Entry& entry = check_options(options);
    return entry.accepts(options.flavor) && !(options.replica_sync && is_semaphore(options.flavor));
  } catch (const InvalidArgumentError&) {
    return false;
  }
}

ScenarioResult run_scenario(const ScenarioOptions& options) {
  const Entry& entry = check_options(options);
  const std::size_t clients = options.clients.value_or(entry.info.default_clients);
  const Duration duration = options.duration.value_or(entry.info.default_duration);
  return entry.run(options, clients, duration);
}

bool check_determinism(const ScenarioOptions& options, ScenarioResult* first) {
  ScenarioOptions quiet = options;
  quiet.trace_path.clear();
  quiet.progress = nullptr;
  ScenarioResult one = run_scenario(quiet);
  const ScenarioResult two = run_scenario(quiet);
  const bool same = one.trace_hash == two.trace_hash && one.trace_sha256 == two.trace_sha256;
  if (first != nullptr) *first = std::move(one);
  return same;
}

}  // namespace turnstile::sim
