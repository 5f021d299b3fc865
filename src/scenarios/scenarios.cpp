// The scenario catalog and run_scenario(): option checks, defaults, dispatch.

#include "turnstile/sim/scenarios.h"

#include <array>

#include "scenarios/scenario_list.h"
#include "turnstile/errors.h"

namespace turnstile::sim {
namespace {

using std::chrono::minutes;
using std::chrono::seconds;

using ScenarioFunction = ScenarioResult (*)(const ScenarioOptions&, std::size_t, Duration);

struct Entry {
  ScenarioInfo info;
  ScenarioFunction run;
  std::size_t min_clients;
  bool takes_faults = false;  // its clients survive failed calls
};

const std::vector<Entry>& entries() {
  static const std::vector<Entry> list = {
      {{"seckill", "a stock of 10; buyers decrement it under the lock; reports sold and oversold", 100, minutes(1)},
       scenarios::seckill,
       1},
      {{"one-order-per-user", "fail-fast try_lock per user key; each user gets exactly one order", 100, minutes(1)},
       scenarios::one_order_per_user,
       1},
      {{"contention", "clients loop lock / 1 s of work / unlock", 16, minutes(10)}, scenarios::contention, 1, true},
      {{"fair-fifo", "waiters of a fair lock are served in arrival order", 16, minutes(10), Flavor::fair},
       scenarios::fair_fifo,
       2,
       true},
      {{"semaphore-pool", "clients share --permits permits", 16, minutes(10), Flavor::semaphore},
       scenarios::semaphore_pool,
       1,
       true},
      {{"watchdog-crash", "holders crash mid-hold; others take over after the watchdog timeout", 8, minutes(10)},
       scenarios::watchdog_crash,
       2,
       true},
      {{"gc-pause", "a holder pauses past its lease; fencing rejects its stale write", 3, minutes(5)},
       scenarios::gc_pause,
       2},
      {{"failover", "the master dies; a lagging replica is promoted and the lock is granted twice", 4, minutes(2)},
       scenarios::failover,
       2,
       true},
      {{"partitioned-holder", "a holder's link hangs (no reset) past its lease; does it stop believing in time?", 3,
        minutes(3)},
       scenarios::partitioned_holder,
       2,
       true},
      {{"read-mostly",
        "readers (9 rounds in 10) and writers of a read-write lock; reports readers together and writer waits", 8,
        minutes(10), Flavor::read_write},
       scenarios::read_mostly,
       2,
       true},
      {{"reader-crash", "a reader crashes mid-hold; the waiting writer gets in within the reader's watchdog lease", 4,
        minutes(3), Flavor::read_write},
       scenarios::reader_crash,
       3},
      {{"writer-starvation",
        "a steady stream of overlapping readers and one writer: writers can starve (readers are admitted in read "
        "mode, writers do not queue ahead); reports the writer's waits",
        5, minutes(2), Flavor::read_write},
       scenarios::writer_starvation,
       3},
      {{"nodes-down", "RedLock with --down-nodes of --nodes unreachable: acquires with a majority up", 1, seconds(0),
        Flavor::redlock},
       scenarios::nodes_down,
       1},
      {{"client-pause", "a RedLock holder paused longer than its validity writes after the next holder took over", 2,
        seconds(0), Flavor::redlock},
       scenarios::client_pause,
       2},
      {{"clock-drift", "a RedLock holder whose clock runs 5% slow (allowance 1%) writes after its lock expired", 2,
        seconds(0), Flavor::redlock},
       scenarios::clock_drift,
       2},
  };
  return list;
}

constexpr std::array<std::string_view, 5> kFaultMixNames = {"none", "lossy", "crashes", "partitions", "chaos"};

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
  const bool lossy = name == "lossy" || name == "chaos";
  const bool crashes = name == "crashes" || name == "chaos";
  const bool partitions = name == "partitions" || name == "chaos";
  if (!lossy && !crashes && !partitions) {
    if (name.empty() || name == "none") return std::nullopt;
    throw InvalidArgumentError("--faults must be none, lossy, crashes, partitions or chaos, not '" + std::string(name) +
                               "'");
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

bool scenario_takes_faults(std::string_view scenario) {
  const Entry* entry = find_entry(scenario);
  return entry != nullptr && entry->takes_faults;
}

const std::vector<ScenarioInfo>& scenario_catalog() {
  static const std::vector<ScenarioInfo> catalog = [] {
    std::vector<ScenarioInfo> infos;
    for (const Entry& entry : entries()) infos.push_back(entry.info);
    return infos;
  }();
  return catalog;
}

ScenarioResult run_scenario(const ScenarioOptions& options) {
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
    if (options.flavor == Flavor::counting_semaphore) {
      throw InvalidArgumentError(options.scenario +
                                 ": --flavor counting-semaphore cannot take --faults: a permit whose "
                                 "release failed never comes back (use --flavor semaphore)");
    }
  }
  return found->run(options, clients, duration);
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
