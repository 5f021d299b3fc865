#include "scenarios/scenario_kit.h"

#include <openssl/evp.h>

#include <algorithm>
#include <cstdio>

#include "core/check.h"
#include "turnstile/errors.h"
#include "turnstile/client.h"
#include "turnstile/fair_lock.h"
#include "turnstile/key_layout.h"
#include "turnstile/lock.h"
#include "turnstile/multi_lock.h"
#include "turnstile/redis_backend.h"
#include "turnstile/semaphore.h"

namespace turnstile::sim::scenarios {
namespace {

constexpr int kProgressSlices = 100;
constexpr std::size_t kTraceTailLines = 12;
// WAIT's timeout with --replica-sync: the real backend's default.
constexpr Duration kReplicaSyncTimeout = std::chrono::milliseconds(kDefaultReplicaSyncTimeoutMs);

std::string sha256_hex(std::string_view bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  const int ok = EVP_Digest(bytes.data(), bytes.size(), digest, &length, EVP_sha256(), nullptr);
  TURNSTILE_CHECK(ok == 1 && length == 32);
  (void)ok;
  std::string hex;
  char pair[3];
  for (unsigned int i = 0; i < length; ++i) {
    std::snprintf(pair, sizeof pair, "%02x", digest[i]);
    hex += pair;
  }
  return hex;
}

}  // namespace

std::string trace_digest(const std::string& trace_text, std::uint64_t trace_hash) {
  char hash[24];
  std::snprintf(hash, sizeof hash, "%016llx", static_cast<unsigned long long>(trace_hash));
  return sha256_hex(trace_text + hash);
}

void refuse_flavors(const ScenarioOptions& options, std::initializer_list<Flavor> refused, std::string_view why) {
  for (const Flavor flavor : refused) {
    if (options.flavor == flavor) {
      throw InvalidArgumentError(options.scenario + ": --flavor " + std::string(flavor_name(flavor)) + " " +
                                 std::string(why));
    }
  }
}

std::unique_ptr<Holdable> make_lock(ScenarioWorld& sw, Member& member, const std::string& name, bool fenced,
                                    bool shared) {
  const ScenarioOptions& options = sw.options();
  if (shared && !flavor_traits(options.flavor).has_shared_holds) {
    throw InvalidArgumentError(options.scenario + ": --flavor " + std::string(flavor_name(options.flavor)) +
                               " has no read half; use --flavor read-write");
  }
  if (fenced && !can_be_fenced(options.flavor)) {
    throw InvalidArgumentError("--flavor " + std::string(flavor_name(options.flavor)) +
                               " draws no fencing tokens; use --flavor reentrant or fair");
  }
  HoldableOptions holdable{.fenced = fenced};
  holdable.fair.handoff = options.fair_handoff;
  holdable.shared = shared;
  if (is_semaphore(options.flavor)) holdable.permits = options.permits;
  if (has_lease(options.flavor)) holdable.lock_delay = member.lock_delay;
  if (is_composite(options.flavor)) {
    for (const auto& client : member.node_clients) holdable.nodes.push_back(client.get());
  }
  std::unique_ptr<Holdable> lock = member.client->holdable(options.flavor, name, holdable);
  lock->set_lost_handler([&sw, &member, name, shared](const LockLost&) { sw.lost(member, name, shared); });
  return lock;
}

// ---- ScenarioWorld ----

namespace {

// The longest a waiter may see the lock free without getting it: a lease
// (a lost wake-up is made up for at the holder's ttl), the longest fault
// that keeps a waiter from the server (a pause, a link down, a partition
// and the command timeout it ends with, a delay), and slack for backoffs,
// retry delays and slow scripts; for the fair lock, a waiter timeout per
// client (queued waiters that crashed are evicted one timeout apart); and
// the lock-delay, which every ttl a waiter sleeps on includes.
constexpr Duration kLivenessLease = std::chrono::seconds(30);
constexpr Duration kLivenessSlack = std::chrono::seconds(30);
constexpr Duration kLivenessFairPerClient = std::chrono::seconds(5);
// After a server lost its state, beyond the lease and the longest fault:
// replies and retries in flight (ScenarioWorld::expect_state_loss).
constexpr Duration kStateLossSlack = std::chrono::seconds(5);
// How long after its duration a scenario may still run (drain), for clock
// drift.
constexpr Duration kToleranceDrain = std::chrono::minutes(10);

}  // namespace

Duration ScenarioWorld::longest_fault() const {
  Duration fault = Duration::zero();
  if (plan_) {
    if (plan_->pause_per_client_hour > 0) fault = std::max(fault, plan_->pause_max);
    if (plan_->link_down_per_client_hour > 0) fault = std::max(fault, plan_->link_down_max);
    if (plan_->partition_per_client_hour > 0) {
      fault = std::max(fault, plan_->partition_max + world.options().command_timeout);
    }
    if (plan_->request_delay > 0 || plan_->message_delay > 0) fault = std::max(fault, plan_->delay_max);
  }
  return fault;
}

Duration ScenarioWorld::liveness_bound() const {
  Duration bound = kLivenessLease + options_.lock_delay + longest_fault() + kLivenessSlack;
  if (queues_waiters(options_.flavor)) bound += kLivenessFairPerClient * static_cast<int>(members_.size());
  return bound;
}

namespace {

// A scenario's budgets (WorldOptions): twice its duration plus what its
// clients may take to drain (every scenario stops by then), and at least
// as many events as its clients make at a generous rate.
constexpr Duration kBudgetDrainPerClient = std::chrono::seconds(4);
constexpr Duration kBudgetSlack = std::chrono::hours(1);
constexpr std::uint64_t kBudgetEventsPerClientSecond = 1'000;

Duration scenario_duration(const ScenarioOptions& options) {
  if (options.duration) return *options.duration;
  for (const ScenarioInfo& info : scenario_catalog()) {
    if (info.name == options.scenario) return info.default_duration;
  }
  return Duration::zero();  // unknown: refused before it runs
}

WorldOptions scenario_world_options(const ScenarioOptions& options, std::size_t clients, WorldOptions world_options) {
  if (is_composite(options.flavor)) world_options.servers = std::max(world_options.servers, options.nodes);
  world_options.virtual_time_budget =
      2 * scenario_duration(options) + kBudgetDrainPerClient * static_cast<int>(clients) + kBudgetSlack;
  const auto budget_seconds = static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::seconds>(world_options.virtual_time_budget).count());
  world_options.event_budget = std::max(
      world_options.event_budget, kBudgetEventsPerClientSecond * std::max<std::uint64_t>(clients, 1) * budget_seconds);
  if (options.replica_sync) world_options.replica_sync_timeout = kReplicaSyncTimeout;
  world_options.buggify = options.buggify;
  return world_options;
}

}  // namespace

ScenarioWorld::ScenarioWorld(const ScenarioOptions& options, std::size_t clients, WorldOptions world_options,
                             MemberOptions member_options)
    : world(options.seed, scenario_world_options(options, clients, world_options)), checkers(world), options_(options) {
  if (!options.trace_path.empty()) {
    timeline = std::make_unique<Timeline>(world, TimelineOptions{.commands = options.trace_commands});
  }
  if (is_semaphore(options.flavor) && !has_lease(options.flavor)) {
    // A permit acquired without the caller hearing is gone for good: out
    // of this flavor's model. A release nobody is told of is found by the
    // fleet's waiters, which try again every kFleetSemaphoreRetryMs; with
    // process wake-ups it waits for the next release.
    world.buggify_never("fake.reply_dropped_after_apply");
    if (options.wake_scope == WakeScope::process) world.buggify_never("fake.publish_lost");
  }
  plan_ = scenario_fault_plan(options, Instant{});
  const Persistence persistence =
      plan_ ? plan_->server_persistence.value_or(world.options().server.persistence) : Persistence::always;
  if (plan_ && plan_->server_restart_per_hour > 0 && persistence != Persistence::always) {
    // A restart without persistence loses the lock, as a failover does (with
    // appendfsync everysec, what was written within the last second): two
    // grants, two holders believing, within a lease of the restart; only
    // these. A counter lost outright starts above every token drawn; one
    // that lost its last second's increments comes back behind them. With
    // appendfsync always nothing is lost and nothing is expected.
    expect_state_loss({.lease = ClientOptions().lease, .tokens_go_back = persistence == Persistence::everysec});
  }
  members_.reserve(clients);
  for (std::size_t i = 0; i < clients; ++i) {
    auto member = std::make_unique<Member>();
    char name[32];
    std::snprintf(name, sizeof name, "client-%02zu", i + 1);
    member->sim = &world.add_client(name);
    ClientOptions client_options;
    client_options.wake_scope = options.wake_scope;
    client_options.fleet_handoff = options.fleet_handoff;
    client_options.permit_handoff = options.fleet_handoff;  // the crash-safe semaphore's too
    // Every other member arms the run's lock-delay per lock, the others
    // per client.
    if (i % 2 == 1 && options.lock_delay > Duration::zero()) {
      member->lock_delay = options.lock_delay;
    } else {
      client_options.lock_delay = options.lock_delay;
    }
    Member* self = member.get();
    if (member_options.lease_warning > Duration::zero()) {
      client_options.lease_warning = member_options.lease_warning;
      client_options.on_lease_at_risk = [self, this](const LeaseAtRisk&) { self->warned_at.push_back(world.now()); };
    }
    // Renewal failures after faults are expected here; they are counted,
    // and lost locks show in the checkers and the trace.
    client_options.on_background_error = [self](std::exception_ptr) { ++self->background_errors; };
    const std::size_t nodes = is_composite(options.flavor) ? options.nodes : 1;
    member->told_deadlines.assign(nodes, std::nullopt);
    // The library's local deadline of each acquisition, per node.
    const auto tell_deadlines_of = [&client_options, self, this](std::size_t node) -> ClientOptions& {
      client_options.on_lease_deadline = [self, node, this](const LeaseDeadline& told) {
        self->told_deadlines.at(node) = LeaseDeadlineTold{.key = std::string(told.key), .deadline = told.deadline};
        // One server's lock: its key is the watched name (lock_delay).
        if (node == 0) checkers.lease_deadline(*self->sim, told.key, told.deadline);
      };
      return client_options;
    };
    member->client =
        std::make_unique<Client>(member->sim->backend_ptr(), member->sim->runtime_ptr(), tell_deadlines_of(0));
    checkers.name_holder(member->client->id(), name);
    for (std::size_t node = 1; node < nodes; ++node) {
      member->node_clients.push_back(std::make_unique<Client>(member->sim->backend_ptr(node),
                                                              member->sim->runtime_ptr(), tell_deadlines_of(node)));
      checkers.name_holder(member->node_clients.back()->id(), name);
    }
    members_.push_back(std::move(member));
  }
}

ScenarioWorld::~ScenarioWorld() {
  members_.clear();  // turnstile clients before the world
}

void ScenarioWorld::expect_state_loss(const StateLossExpectation& expectation) {
  const Duration window = expectation.lease + options_.lock_delay + longest_fault() + kStateLossSlack;
  checkers.expect(ExpectedViolation{ViolationKind::mutual_exclusion, window});
  checkers.expect(ExpectedViolation{ViolationKind::belief_overlap, window});
  checkers.expect(ExpectedViolation{ViolationKind::lock_delay, window});
  if (expectation.tokens_go_back) checkers.expect(ExpectedViolation{ViolationKind::fencing_order, std::nullopt});
}

void ScenarioWorld::watch(const std::string& name, bool fifo) {
  WatchOptions watch;
  watch.resource = name;
  watch.reader = state_reader(options_.flavor, name);
  watch.capacity = is_semaphore(options_.flavor) ? options_.permits : 1;
  watch.permits = is_semaphore(options_.flavor);
  watch.permits_expire = is_semaphore(options_.flavor) && has_lease(options_.flavor);  // the crash-safe one
  watch.fifo = fifo;
  watch.quorum = required_nodes(options_.flavor, options_.nodes);
  watch.readers_writers = flavor_traits(options_.flavor).has_shared_holds;
  watch.liveness_bound = liveness_bound();
  watch.lock_delay = options_.lock_delay;
  if (plan_) {
    // Permit expiries and fair waiters' liveness deadlines are written and
    // read by the clients' wall clocks: two of them may be off by twice
    // the offset and the drift over the run (its duration and the drain
    // after it) apart.
    const Duration run = scenario_duration(options_) + kToleranceDrain;
    const Duration drift = run * plan_->clock_drift_ppm_max / 1'000'000;
    const Duration clocks_apart = 2 * (plan_->wall_clock_offset_max + drift);
    if (has_leased_permits(options_.flavor)) watch.deadline_tolerance = clocks_apart;
    watch.waiter_deadline_tolerance = clocks_apart;
    // A release's clock reading may be older than its execution by a
    // delay in transit, or a wait behind a slow script (BUGGIFY).
    if (plan_->request_delay > 0) watch.waiter_deadline_tolerance.reset();
  }
  if (options_.buggify) watch.waiter_deadline_tolerance.reset();
  checkers.watch(std::move(watch));
}

void ScenarioWorld::waiting(Member& member, const std::string& resource) {
  checkers.waiting(*member.sim, resource);
  if (timeline) timeline->waiting(*member.sim, resource);
}

void ScenarioWorld::acquired(Member& member, const std::string& resource, std::optional<std::int64_t> token,
                             bool shared) {
  ++acquisitions;
  if (shared) {
    reading_.insert(member.sim);
    std::erase_if(reading_, [](const SimClient* reader) { return reader->crashed(); });
    max_readers = std::max(max_readers, static_cast<std::int64_t>(reading_.size()));
  }
  if (last_holder_ != member.sim->id()) ++handoffs;
  last_holder_ = member.sim->id();
  world.note((shared ? "acquired a read hold of " : "acquired ") + resource +
             (token ? " with fencing token " + std::to_string(*token) : std::string()));
  checkers.acquired(*member.sim, resource, token, 1, shared);
  if (timeline) timeline->acquired(*member.sim, resource, token);
}

void ScenarioWorld::lost(Member& member, const std::string& resource, bool shared) {
  world.note("learned " + resource + " is lost");
  checkers.lost(*member.sim, resource, shared);
  if (on_lost) on_lost(member, resource);
}

void ScenarioWorld::releasing(Member& member, const std::string& resource, bool shared) {
  if (shared) reading_.erase(member.sim);
  checkers.releasing(*member.sim, resource, 1, shared);
}

void ScenarioWorld::released(Member& member, const std::string& resource, bool shared) {
  checkers.released(*member.sim, resource, 1, shared);
  if (timeline) timeline->released(*member.sim, resource);
}

void ScenarioWorld::gave_up(Member& member, const std::string& resource) {
  checkers.gave_up(*member.sim, resource);
  if (timeline) timeline->gave_up(*member.sim, resource);
}

void ScenarioWorld::withdrawn(Member& member, const std::string& resource) {
  world.note("acquisition of " + resource + " undone: no replica acknowledged it");
  checkers.withdrawn(*member.sim, resource);
  if (timeline) timeline->gave_up(*member.sim, resource);
}

namespace {

// When a holder of `resource` with a fixed lease stops believing, timed as
// the library times it: the local deadline its clients told at the
// acquisition (lock.h, "The local deadline": from the successful try's
// send instant, less the safety margin), for a composite the instant its
// quorum of nodes is lost. `fallback` (the call's start + the lease) where
// nothing was told (a flavor without a lease of its own).
Instant belief_deadline(const ScenarioWorld& sw, const Member& member, const std::string& resource, Instant fallback) {
  const ScenarioOptions& options = sw.options();
  const KeyLayout layout = key_layout(options.flavor, resource);
  std::vector<Instant> told;
  for (const std::optional<LeaseDeadlineTold>& deadline : member.told_deadlines) {
    if (deadline && (deadline->key == layout.name || deadline->key == layout.permit_timeouts)) {
      told.push_back(deadline->deadline);
    }
  }
  const std::size_t quorum = required_nodes(options.flavor, options.nodes);
  if (told.size() < quorum) return fallback;
  // Lost once fewer than `quorum` nodes still hold: the quorum-th latest.
  std::sort(told.begin(), told.end(), std::greater<>());
  return told[quorum - 1];
}

}  // namespace

Round hold_round(ScenarioWorld& sw, Member& member, Holdable& lock, const std::string& resource,
                 const RoundOptions& options) {
  Round round;
  sw.waiting(member, resource);
  const Instant call_started = sw.world.now();
  std::fill(member.told_deadlines.begin(), member.told_deadlines.end(), std::nullopt);
  LockHold hold;
  try {
    hold = lock.try_acquire_hold(AcquireOptions{.wait = kWaitForever, .lease = options.lease, .stop = {}});
    TURNSTILE_CHECK(hold.owns_hold());
  } catch (const ReplicaSyncError&) {
    round.replica_sync_error = true;
    sw.withdrawn(member, resource);
    return round;
  } catch (const Error&) {
    ++round.failed_calls;
    sw.gave_up(member, resource);
    return round;
  }
  round.acquired = true;
  sw.acquired(member, resource, hold.fencing_token(), options.shared);
  // A fixed lease ends by itself, when the library says it does.
  if (options.lease) {
    sw.checkers.believes_until(*member.sim, resource,
                               belief_deadline(sw, member, resource, call_started + *options.lease));
  }
  if (options.while_held) options.while_held(hold);
  sw.releasing(member, resource, options.shared);
  try {
    hold.release_or_throw();
  } catch (const NotOwnerError&) {
    round.lost_before_unlock = true;
    sw.world.note("unlock of " + resource + " found the lock lost");
  } catch (const Error&) {
    ++round.failed_calls;
  }
  sw.released(member, resource, options.shared);
  return round;
}

void ScenarioWorld::run_until(Instant limit, Instant total_end) {
  // The fault mix, for the scenario's whole time, so that liveness is
  // checked after faults healed.
  if (!faults_applied_) {
    faults_applied_ = true;
    if (plan_) {
      FaultPlan plan = *plan_;
      plan.until = total_end;
      world.apply_fault_plan(plan);
    }
  }
  const Duration total = total_end - Instant{};
  const Duration slice = std::max<Duration>(total / kProgressSlices, std::chrono::milliseconds(1));
  while (world.now() < limit && !world.stopped()) {
    world.run_until(std::min(limit, world.now() + slice));
    if (options_.progress && total > Duration::zero()) {
      options_.progress(
          std::min(1.0, static_cast<double>((world.now() - Instant{}).count()) / static_cast<double>(total.count())));
    }
  }
}

void ScenarioWorld::finish(ScenarioResult& result) {
  result.scenario = options_.scenario;
  result.seed = options_.seed;
  result.clients = members_.size();
  result.flavor = std::string(flavor_name(options_.flavor));
  result.virtual_ms = world.now_ms();
  result.events = world.scheduler_events();
  result.acquisitions = acquisitions;
  result.handoffs = handoffs;
  result.mutual_exclusion_violations = checkers.count(ViolationKind::mutual_exclusion);
  result.fifo_violations = checkers.count(ViolationKind::fifo);
  result.fencing_violations = checkers.count(ViolationKind::fencing_order);
  result.permit_violations = checkers.count(ViolationKind::permit_conservation);
  result.liveness_violations = checkers.count(ViolationKind::liveness);
  result.belief_violations = checkers.count(ViolationKind::belief_overlap);
  result.belief_overlaps_while_paused = checkers.overlaps_while_paused();
  result.unexpected_violations = checkers.unexpected_count();
  result.violations = checkers.violations();
  result.faults_injected += world.fault_counts().total();
  if (plan_) result.fault_kinds = fault_kinds(*plan_);
  result.buggify = world.buggify_counts();
  result.trace_hash = world.trace_hash();
  result.trace_sha256 = trace_digest(world.trace_text(), result.trace_hash);
  const auto& lines = world.trace();
  for (std::size_t i = lines.size() > kTraceTailLines ? lines.size() - kTraceTailLines : 0; i < lines.size(); ++i) {
    result.trace_tail.push_back(lines[i]);
  }
  for (const std::unique_ptr<Member>& member : members_) {
    MetricsSnapshot metrics = member->client->metrics();
    for (const std::unique_ptr<Client>& node : member->node_clients) metrics += node->metrics();
    result.client_metrics.emplace_back(member->sim->name(), metrics);
  }
  if (timeline) timeline->write_chrome_trace(options_.trace_path);
}

}  // namespace turnstile::sim::scenarios
