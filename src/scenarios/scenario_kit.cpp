#include "scenarios/scenario_kit.h"

#include <openssl/evp.h>

#include <cassert>
#include <cstdio>

#include "turnstile/errors.h"
#include "turnstile/client.h"
#include "turnstile/fair_lock.h"
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

// Reentrant, fenced, token and fair locks share the Lock interface.
class PlainLock final : public ScenarioLock {
 public:
  template <class LockType>
  explicit PlainLock(LockType lock) : lock_(std::make_unique<LockType>(std::move(lock))) {}
  void lock() override { lock_->lock(); }
  void lock(Duration lease) override { lock_->lock(lease); }
  bool try_lock(Duration wait) override {
    AcquireOptions acquire;
    acquire.wait = wait;
    return lock_->try_lock(acquire);
  }
  void unlock() override { lock_->unlock(); }
  std::optional<std::int64_t> fencing_token() override { return lock_->fencing_token(); }
  void set_lost_handler(std::function<void()> on_lost) override {
    lock_->set_lost_handler([on_lost = std::move(on_lost)](const LockLost&) { on_lost(); });
  }

 private:
  std::unique_ptr<Lock> lock_;
};

// One permit of the crash-safe semaphore; unlock releases it
// (PermitNotHeldError, a NotOwnerError, if it expired meanwhile).
class PermitLock final : public ScenarioLock {
 public:
  PermitLock(PermitSemaphore semaphore, std::int64_t permits) : semaphore_(std::move(semaphore)) {
    (void)semaphore_.try_set_permits_or_get(permits);
  }
  void lock() override { permit_ = semaphore_.acquire(); }
  void lock(Duration lease) override { permit_ = semaphore_.acquire(lease); }
  bool try_lock(Duration wait) override {
    AcquireOptions acquire;
    acquire.wait = wait;
    permit_ = semaphore_.try_acquire(acquire);
    return permit_.has_value();
  }
  void unlock() override {
    assert(permit_.has_value());
    const PermitId permit = *permit_;
    permit_.reset();
    semaphore_.release(permit);
  }
  std::optional<std::int64_t> fencing_token() override { return std::nullopt; }
  void set_lost_handler(std::function<void()> on_lost) override {
    semaphore_.set_lost_handler([on_lost = std::move(on_lost)](const PermitLost&) { on_lost(); });
  }

 private:
  PermitSemaphore semaphore_;
  std::optional<PermitId> permit_;
};

// One permit of the plain counting semaphore: no owner, no lease (scenarios
// that need a lease refuse this flavor).
class CountingLock final : public ScenarioLock {
 public:
  CountingLock(Semaphore semaphore, std::int64_t permits) : semaphore_(std::move(semaphore)) {
    (void)semaphore_.try_set_permits(permits);
  }
  void lock() override { semaphore_.acquire(); }
  void lock(Duration) override {
    throw InvalidArgumentError("the counting semaphore's permits have no lease (use --lock semaphore)");
  }
  bool try_lock(Duration wait) override { return semaphore_.try_acquire(1, wait); }
  void unlock() override { semaphore_.release(); }
  std::optional<std::int64_t> fencing_token() override { return std::nullopt; }
  void set_lost_handler(std::function<void()>) override {}  // no lease: nothing to lose

 private:
  Semaphore semaphore_;
};

// A RedLock of one reentrant lock per server, each on the member's Client
// for that server.
class MajorityLock final : public ScenarioLock {
 public:
  MajorityLock(Member& member, const std::string& name) : redlock_(node_locks(member, name)) {}
  void lock() override { redlock_.lock(); }
  void lock(Duration lease) override { redlock_.lock(lease); }
  bool try_lock(Duration wait) override {
    AcquireOptions acquire;
    acquire.wait = wait;
    return redlock_.try_lock(acquire);
  }
  void unlock() override { redlock_.unlock(); }
  std::optional<std::int64_t> fencing_token() override { return std::nullopt; }
  void set_lost_handler(std::function<void()> on_lost) override {
    redlock_.set_lost_handler([on_lost = std::move(on_lost)](const LockLost&) { on_lost(); });
  }

 private:
  static std::vector<std::unique_ptr<Lock>> node_locks(Member& member, const std::string& name) {
    std::vector<std::unique_ptr<Lock>> nodes;
    nodes.push_back(std::make_unique<ReentrantLock>(member.client->lock(name)));
    for (const auto& client : member.node_clients) nodes.push_back(std::make_unique<ReentrantLock>(client->lock(name)));
    return nodes;
  }
  RedLock redlock_;
};

std::string sha256_hex(std::string_view bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  const int ok = EVP_Digest(bytes.data(), bytes.size(), digest, &length, EVP_sha256(), nullptr);
  assert(ok == 1 && length == 32);
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

bool is_semaphore(LockFlavor flavor) {
  return flavor == LockFlavor::semaphore || flavor == LockFlavor::counting_semaphore;
}

void refuse_flavors(const ScenarioOptions& options, std::initializer_list<LockFlavor> refused, std::string_view why) {
  for (const LockFlavor flavor : refused) {
    if (options.lock == flavor) {
      throw InvalidArgumentError(options.scenario + ": --lock " + std::string(flavor_name(flavor)) + " " +
                                 std::string(why));
    }
  }
}

namespace {

std::unique_ptr<ScenarioLock> make_flavor_lock(ScenarioWorld& sw, Member& member, const std::string& name, bool fenced) {
  const ScenarioOptions& options = sw.options();
  if (fenced && options.lock != LockFlavor::reentrant && options.lock != LockFlavor::fair) {
    throw InvalidArgumentError("--lock " + std::string(flavor_name(options.lock)) +
                               " draws no fencing tokens; use --lock reentrant or fair");
  }
  Client& client = *member.client;
  switch (options.lock) {
    case LockFlavor::reentrant:
      return std::make_unique<PlainLock>(fenced ? client.fenced_lock(name) : client.lock(name));
    case LockFlavor::token:
      return std::make_unique<PlainLock>(client.token_lock(name));
    case LockFlavor::fair:
      return std::make_unique<PlainLock>(client.fair_lock(name, FairLockOptions{.fenced = fenced}));
    case LockFlavor::semaphore:
      return std::make_unique<PermitLock>(client.permit_semaphore(name), options.permits);
    case LockFlavor::counting_semaphore:
      return std::make_unique<CountingLock>(client.semaphore(name), options.permits);
    case LockFlavor::redlock:
      return std::make_unique<MajorityLock>(member, name);
  }
  assert(false && "every flavor is handled");
  return nullptr;
}

}  // namespace

std::unique_ptr<ScenarioLock> make_lock(ScenarioWorld& sw, Member& member, const std::string& name, bool fenced) {
  std::unique_ptr<ScenarioLock> lock = make_flavor_lock(sw, member, name, fenced);
  lock->set_lost_handler([&sw, &member, name] { sw.lost(member, name); });
  return lock;
}

StateReader state_reader(LockFlavor flavor, const std::string& name) {
  switch (flavor) {
    case LockFlavor::token: return string_lock_reader(name);
    case LockFlavor::fair: return fair_lock_reader(name, "redisson_lock_queue:{" + name + "}");
    case LockFlavor::semaphore: return permit_semaphore_reader(name);
    case LockFlavor::counting_semaphore: return counting_semaphore_reader(name);
    case LockFlavor::reentrant:
    case LockFlavor::redlock: return hash_lock_reader(name);
  }
  return hash_lock_reader(name);
}

// ---- ScenarioWorld ----

namespace {

WorldOptions scenario_world_options(const ScenarioOptions& options, WorldOptions world_options) {
  if (options.lock == LockFlavor::redlock) world_options.servers = std::max(world_options.servers, options.nodes);
  if (options.replica_sync) world_options.replica_sync_timeout = kReplicaSyncTimeout;
  return world_options;
}

}  // namespace

ScenarioWorld::ScenarioWorld(const ScenarioOptions& options, std::size_t clients, WorldOptions world_options)
    : world(options.seed, scenario_world_options(options, world_options)), checkers(world), options_(options) {
  if (!options.trace_path.empty()) timeline = std::make_unique<Timeline>(world);
  members_.reserve(clients);
  for (std::size_t i = 0; i < clients; ++i) {
    auto member = std::make_unique<Member>();
    char name[32];
    std::snprintf(name, sizeof name, "client-%02zu", i + 1);
    member->sim = &world.add_client(name);
    ClientOptions client_options;
    Member* self = member.get();
    // Renewal failures after faults are expected here; they are counted,
    // and lost locks show in the checkers and the trace.
    client_options.on_background_error = [self](std::exception_ptr) { ++self->background_errors; };
    member->client = std::make_unique<Client>(member->sim->backend_ptr(), member->sim->runtime_ptr(), client_options);
    checkers.name_holder(member->client->id(), name);
    const std::size_t nodes = options.lock == LockFlavor::redlock ? options.nodes : 1;
    for (std::size_t node = 1; node < nodes; ++node) {
      member->node_clients.push_back(
          std::make_unique<Client>(member->sim->backend_ptr(node), member->sim->runtime_ptr(), client_options));
      checkers.name_holder(member->node_clients.back()->id(), name);
    }
    members_.push_back(std::move(member));
  }
}

ScenarioWorld::~ScenarioWorld() {
  members_.clear();  // turnstile clients before the world
}

void ScenarioWorld::watch(const std::string& name, bool fifo) {
  WatchOptions watch;
  watch.resource = name;
  watch.reader = state_reader(options_.lock, name);
  watch.capacity = is_semaphore(options_.lock) ? options_.permits : 1;
  watch.permits = is_semaphore(options_.lock);
  watch.permits_expire = options_.lock == LockFlavor::semaphore;
  watch.fifo = fifo;
  if (options_.lock == LockFlavor::redlock) watch.quorum = options_.nodes / 2 + 1;
  checkers.watch(std::move(watch));
}

void ScenarioWorld::waiting(Member& member, const std::string& resource) {
  checkers.waiting(*member.sim, resource);
  if (timeline) timeline->waiting(*member.sim, resource);
}

void ScenarioWorld::acquired(Member& member, const std::string& resource, std::optional<std::int64_t> token) {
  ++acquisitions;
  if (last_holder_ != member.sim->id()) ++handoffs;
  last_holder_ = member.sim->id();
  world.note("acquired " + resource + (token ? " with fencing token " + std::to_string(*token) : std::string()));
  checkers.acquired(*member.sim, resource, token);
  if (timeline) timeline->acquired(*member.sim, resource, token);
}

void ScenarioWorld::lost(Member& member, const std::string& resource) {
  world.note("learned " + resource + " is lost");
  checkers.lost(*member.sim, resource);
  if (on_lost) on_lost(member, resource);
}

void ScenarioWorld::releasing(Member& member, const std::string& resource) {
  checkers.releasing(*member.sim, resource);
}

void ScenarioWorld::released(Member& member, const std::string& resource) {
  checkers.released(*member.sim, resource);
  if (timeline) timeline->released(*member.sim, resource);
}

void ScenarioWorld::gave_up(Member& member, const std::string& resource) {
  checkers.gave_up(*member.sim, resource);
  if (timeline) timeline->gave_up(*member.sim, resource);
}

Round hold_round(ScenarioWorld& sw, Member& member, ScenarioLock& lock, const std::string& resource,
                 const RoundOptions& options) {
  Round round;
  sw.waiting(member, resource);
  const Instant call_started = sw.world.now();
  try {
    if (options.lease) {
      lock.lock(*options.lease);
    } else {
      lock.lock();
    }
  } catch (const ReplicaSyncError&) {
    round.replica_sync_error = true;
    sw.world.note("acquisition of " + resource + " undone: no replica acknowledged it");
    sw.checkers.withdrawn(*member.sim, resource);
    if (sw.timeline) sw.timeline->gave_up(*member.sim, resource);
    return round;
  } catch (const Error&) {
    ++round.failed_calls;
    sw.gave_up(member, resource);
    return round;
  }
  round.acquired = true;
  sw.acquired(member, resource, lock.fencing_token());
  // A fixed lease ends by itself, counted at the latest from the call.
  if (options.lease) sw.checkers.believes_until(*member.sim, resource, call_started + *options.lease);
  if (options.while_held) options.while_held();
  sw.releasing(member, resource);
  try {
    lock.unlock();
  } catch (const NotOwnerError&) {
    round.lost_before_unlock = true;
    sw.world.note("unlock of " + resource + " found the lock lost");
  } catch (const Error&) {
    ++round.failed_calls;
  }
  sw.released(member, resource);
  return round;
}

void ScenarioWorld::run_until(Instant limit, Instant total_end) {
  // The fault mix, for the scenario's whole time, so that liveness is
  // checked after faults healed.
  if (!faults_applied_) {
    faults_applied_ = true;
    if (const std::optional<FaultPlan> plan = fault_mix(options_.faults, total_end)) world.apply_fault_plan(*plan);
  }
  const Duration total = total_end - Instant{};
  const Duration slice = std::max<Duration>(total / kProgressSlices, std::chrono::milliseconds(1));
  while (world.now() < limit && !world.stopped()) {
    world.run_until(std::min(limit, world.now() + slice));
    if (options_.progress && total > Duration::zero()) {
      options_.progress(std::min(1.0, static_cast<double>((world.now() - Instant{}).count()) /
                                          static_cast<double>(total.count())));
    }
  }
}

void ScenarioWorld::finish(ScenarioResult& result) {
  result.scenario = options_.scenario;
  result.seed = options_.seed;
  result.clients = members_.size();
  result.lock = std::string(flavor_name(options_.lock));
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
  result.trace_hash = world.trace_hash();
  result.trace_sha256 = trace_digest(world.trace_text(), result.trace_hash);
  const auto& lines = world.trace();
  for (std::size_t i = lines.size() > kTraceTailLines ? lines.size() - kTraceTailLines : 0; i < lines.size(); ++i) {
    result.trace_tail.push_back(lines[i]);
  }
  if (timeline) timeline->write_chrome_trace(options_.trace_path);
}

}  // namespace turnstile::sim::scenarios
