#include "sim/scenarios/scenario_kit.h"

#include <openssl/evp.h>

#include <cassert>
#include <cstdio>

#include "turnstile/errors.h"
#include "turnstile/lock.h"

namespace turnstile::sim::scenarios {
namespace {

constexpr int kProgressSlices = 100;
constexpr std::size_t kTraceTailLines = 12;

// Reentrant, fenced reentrant and token locks share the Lock interface.
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

 private:
  std::unique_ptr<Lock> lock_;
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

void require_flavor(LockFlavor flavor) {
  switch (flavor) {
    case LockFlavor::reentrant:
    case LockFlavor::token:
      return;
    case LockFlavor::fair:
      throw InvalidArgumentError("--lock fair: the fair lock (issue #5) is not in this build");
    case LockFlavor::semaphore:
      throw InvalidArgumentError("--lock semaphore: the semaphore (issue #6) is not in this build");
    case LockFlavor::redlock:
      throw InvalidArgumentError("--lock redlock: RedLock (issue #10) is not in this build");
  }
}

std::unique_ptr<ScenarioLock> make_lock(LockFlavor flavor, Client& client, const std::string& name, bool fenced) {
  require_flavor(flavor);
  if (flavor == LockFlavor::token) {
    if (fenced) throw InvalidArgumentError("the token lock draws no fencing tokens; use --lock reentrant");
    return std::make_unique<PlainLock>(client.token_lock(name));
  }
  return std::make_unique<PlainLock>(fenced ? client.fenced_lock(name) : client.lock(name));
}

StateReader state_reader(LockFlavor flavor, const std::string& name) {
  require_flavor(flavor);
  return flavor == LockFlavor::token ? string_lock_reader(name) : hash_lock_reader(name);
}

// ---- ScenarioWorld ----

ScenarioWorld::ScenarioWorld(const ScenarioOptions& options, std::size_t clients, WorldOptions world_options)
    : world(options.seed, world_options), checkers(world), options_(options) {
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
    members_.push_back(std::move(member));
  }
}

ScenarioWorld::~ScenarioWorld() {
  members_.clear();  // turnstile clients before the world
}

void ScenarioWorld::watch(const std::string& name, std::int64_t capacity, bool fifo) {
  WatchOptions watch;
  watch.resource = name;
  watch.reader = state_reader(options_.lock, name);
  watch.capacity = capacity;
  watch.fifo = fifo;
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
  try {
    if (options.lease) {
      lock.lock(*options.lease);
    } else {
      lock.lock();
    }
  } catch (const Error&) {
    ++round.failed_calls;
    sw.gave_up(member, resource);
    return round;
  }
  round.acquired = true;
  sw.acquired(member, resource, lock.fencing_token());
  if (options.while_held) options.while_held();
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
  result.unexpected_violations = checkers.unexpected_count();
  result.violations = checkers.violations();
  result.faults_injected += world.fault_counts().total();
  result.trace_hash = world.trace_hash();
  char hash[24];
  std::snprintf(hash, sizeof hash, "%016llx", static_cast<unsigned long long>(result.trace_hash));
  result.trace_sha256 = sha256_hex(world.trace_text() + hash);
  const auto& lines = world.trace();
  for (std::size_t i = lines.size() > kTraceTailLines ? lines.size() - kTraceTailLines : 0; i < lines.size(); ++i) {
    result.trace_tail.push_back(lines[i]);
  }
  if (timeline) timeline->write_chrome_trace(options_.trace_path);
}

}  // namespace turnstile::sim::scenarios
