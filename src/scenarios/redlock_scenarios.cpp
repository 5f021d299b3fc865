#include "scenarios/redlock_scenarios.h"

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/check.h"
#include "sim/drifting_runtime.h"
#include "sim/fake_backend.h"
#include "fake_redis/server.h"
#include "turnstile/client.h"
#include "turnstile/errors.h"
#include "turnstile/lock.h"
#include "turnstile/multi_lock.h"
#include "turnstile/sim/world.h"

namespace turnstile::sim::redlock_scenarios {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr char kLockName[] = "scenario-lock";
// How long one protected write takes: a careful holder starts one only if
// more validity than this is left. Short, so that a validity promised a few
// milliseconds too long shows as an overlap.
constexpr Duration kWriteTime = milliseconds(10);
// Scenarios run until idle; this bounds a scenario that would not end.
constexpr Duration kScenarioLimit = std::chrono::hours(1);

// One simulated process's lock: one turnstile Client per server (or just
// server 0 for the reentrant lock), all on the process's runtime.
class ProcessLock {
 public:
  ProcessLock(SimClient& process, const ScenarioOptions& options, std::shared_ptr<Runtime> runtime)
      : runtime_(std::move(runtime)) {
    const std::size_t nodes = options.lock == ScenarioLock::redlock ? options.nodes : 1;
    std::vector<std::unique_ptr<Lock>> node_locks;
    for (std::size_t i = 0; i < nodes; ++i) {
      clients_.push_back(std::make_unique<Client>(process.backend_ptr(i), runtime_));
      node_locks.push_back(std::make_unique<ReentrantLock>(clients_.back()->lock(kLockName)));
    }
    if (options.lock == ScenarioLock::redlock) {
      redlock_.emplace(std::move(node_locks), options.redlock);
    } else {
      single_ = std::move(node_locks.front());
    }
    // Every loss is told here, whichever call finds it (a deadline, the
    // unlock finding it gone).
    const LockLostHandler lost = [this](const LockLost& loss) {
      problems_.push_back("the hold of " + std::string(loss.lock_name) + " was lost before its unlock");
    };
    if (redlock_) {
      redlock_->set_lost_handler(lost);
    } else {
      single_->set_lost_handler(lost);
    }
  }

  bool try_lock(const AcquireOptions& acquire) {
    TURNSTILE_CHECK(acquire.lease.has_value());  // scenarios hold with leases: validity is finite
    problems_.clear();
    if (redlock_) return redlock_->try_lock(acquire);
    const Instant start = runtime_->now();
    if (!single_->try_lock(acquire)) return false;
    single_valid_until_ = start + *acquire.lease;
    return true;
  }

  Duration remaining_validity() {
    if (redlock_) return redlock_->remaining_validity();
    return std::max(Duration::zero(), single_valid_until_ - runtime_->now());
  }

  // The release; a loss of the hold since it was taken (told the one way,
  // to the lost handler, whichever call found it: a deadline, this unlock
  // finding it gone) is the scenario's unlock error.
  std::optional<std::string> unlock() {
    if (redlock_) {
      redlock_->unlock();
    } else {
      single_->unlock();
    }
    if (problems_.empty()) return std::nullopt;
    return problems_.front();
  }

  Runtime& runtime() { return *runtime_; }

 private:
  std::shared_ptr<Runtime> runtime_;
  std::vector<std::unique_ptr<Client>> clients_;
  std::optional<RedLock> redlock_;
  std::unique_ptr<Lock> single_;
  Instant single_valid_until_{};
  std::vector<std::string> problems_;  // since the latest acquisition
};

// The checker: every acquisition's writes, in world time.
class Recorder {
 public:
  explicit Recorder(World& world) : world_(world) {}

  // Acquires, writes every kWriteTime for up to `work` while the validity
  // allows it, then unlocks; counts everything.
  void hold(ProcessLock& lock, const AcquireOptions& acquire, Duration work) {
    bool acquired = false;
    try {
      acquired = lock.try_lock(acquire);
    } catch (const Error& error) {
      ++result_.acquire_errors;
      world_.note(std::string("acquire failed: ") + error.what());
      return;
    }
    if (!acquired) {
      ++result_.refusals;
      world_.note("refused");
      return;
    }
    ++result_.acquisitions;
    world_.note("acquired");
    Runtime& runtime = lock.runtime();
    const std::size_t span = spans_.size();
    spans_.push_back(Span{.first = world_.now(), .last = world_.now()});
    const std::int64_t steps = work / kWriteTime;
    for (std::int64_t step = 0; step < steps; ++step) {
      if (lock.remaining_validity() <= kWriteTime) break;
      runtime.sleep_for(kWriteTime);  // the write under way: a pause here falls between check and write
      write(span, lock.remaining_validity() == Duration::zero());
    }
    try {
      if (const std::optional<std::string> problem = lock.unlock()) {
        ++result_.unlock_errors;
        world_.note("unlock failed: " + *problem);
      } else {
        world_.note("unlocked");
      }
    } catch (const Error& error) {
      ++result_.unlock_errors;
      world_.note(std::string("unlock failed: ") + error.what());
    }
  }

  ScenarioResult finish() {
    const RunStats stats = world_.run_for(kScenarioLimit);
    TURNSTILE_CHECK(stats.idle);
    (void)stats;
    for (std::size_t a = 0; a < spans_.size(); ++a) {
      for (std::size_t b = a + 1; b < spans_.size(); ++b) {
        if (spans_[a].first <= spans_[b].last && spans_[b].first <= spans_[a].last) ++result_.overlapping_holders;
      }
    }
    for (std::size_t i = 0; i < world_.server_count(); ++i) {
      Server& server = world_.server(i);
      const std::unique_ptr<Session> session = server.connect();
      if (server.execute(*session, {"EXISTS", kLockName}) == Reply::integer(1)) ++result_.keys_left;
    }
    result_.virtual_ms = world_.now_ms();
    result_.events = world_.scheduler_events();
    result_.trace_hash = world_.trace_hash();
    result_.trace = world_.trace_text();
    return result_;
  }

 private:
  // From the acquisition to the last write, in world time.
  struct Span {
    Instant first{};
    Instant last{};
  };

  void write(std::size_t span, bool late) {
    spans_[span].last = world_.now();
    ++result_.writes;
    if (late) {
      ++result_.late_writes;
      world_.note("late write");
    }
  }

  World& world_;
  ScenarioResult result_;
  std::vector<Span> spans_;
};

WorldOptions world_options(const ScenarioOptions& options) {
  WorldOptions world;
  world.servers = options.nodes;
  return world;
}

void validate(const ScenarioOptions& options) {
  if (options.nodes < 1 || options.nodes > World::kMaxServers) {
    throw InvalidArgumentError("scenario nodes must be within [1, " + std::to_string(World::kMaxServers) + "], got " +
                               std::to_string(options.nodes));
  }
}

}  // namespace

namespace {

// When and how one client holds the lock.
struct HoldPlan {
  Instant start{};
  AcquireOptions acquire;
  Duration work{};
};

// Alice and Bob each hold the lock once; `faults` sets up what goes wrong.
struct Duel {
  HoldPlan alice;
  HoldPlan bob;
  std::int64_t alice_clock_drift_ppm = 0;
  std::function<void(World& world, SimClient& alice)> faults;
};

ScenarioResult run_duel(const ScenarioOptions& options, const Duel& duel) {
  validate(options);
  World world(options.seed, world_options(options));
  Recorder recorder(world);
  SimClient& alice = world.add_client("alice");
  SimClient& bob = world.add_client("bob");
  const auto start = [&](SimClient& process, const HoldPlan& plan, std::int64_t drift_ppm) {
    world.at(plan.start, [&world, &recorder, &options, &process, &plan, drift_ppm] {
      world.spawn(process, [&recorder, &options, &process, &plan, drift_ppm] {
        std::shared_ptr<Runtime> runtime = process.runtime_ptr();
        if (drift_ppm != 0) runtime = std::make_shared<DriftingRuntime>(std::move(runtime), drift_ppm);
        ProcessLock lock(process, options, std::move(runtime));
        recorder.hold(lock, plan.acquire, plan.work);
      });
    });
  };
  start(alice, duel.alice, duel.alice_clock_drift_ppm);
  start(bob, duel.bob, 0);
  if (duel.faults) duel.faults(world, alice);
  return recorder.finish();
}

}  // namespace

ScenarioResult failover_scenario(const ScenarioOptions& options, std::size_t restarted_servers) {
  if (restarted_servers > options.nodes) throw InvalidArgumentError("more servers to restart than servers");
  return run_duel(options, Duel{
                               .alice = {.start = Instant{},
                                         .acquire = {.wait = Duration::zero(), .lease = seconds(10)},
                                         .work = seconds(3)},
                               .bob = {.start = Instant(seconds(1)),
                                       .acquire = {.wait = milliseconds(1500), .lease = seconds(10)},
                                       .work = seconds(1)},
                               .faults =
                                   [restarted_servers](World& world, SimClient&) {
                                     world.at(Instant(milliseconds(500)), [&world, restarted_servers] {
                                       for (std::size_t i = 0; i < restarted_servers; ++i) world.restart_server(i);
                                     });
                                   },
                           });
}

ScenarioResult nodes_down_scenario(const ScenarioOptions& options, std::size_t down_servers) {
  validate(options);
  if (down_servers > options.nodes) throw InvalidArgumentError("more servers down than servers");
  World world(options.seed, world_options(options));
  Recorder recorder(world);
  SimClient& alice = world.add_client("alice");
  for (std::size_t i = 0; i < down_servers; ++i) alice.link(i).set_down(true);
  world.spawn(alice, [&] {
    ProcessLock lock(alice, options, alice.runtime_ptr());
    recorder.hold(lock, {.wait = Duration::zero(), .lease = seconds(10)}, kWriteTime);
  });
  return recorder.finish();
}

ScenarioResult client_pause_scenario(const ScenarioOptions& options, Duration pause) {
  return run_duel(
      options,
      Duel{
          .alice = {.start = Instant{}, .acquire = {.wait = Duration::zero(), .lease = seconds(2)}, .work = seconds(1)},
          .bob = {.start = Instant(milliseconds(100)),
                  .acquire = {.wait = seconds(10), .lease = seconds(2)},
                  .work = seconds(1)},
          .faults =
              [pause](World& world, SimClient& alice) {
                // Alice checks at 550 ms and writes at 560 ms: the pause falls between.
                if (pause <= Duration::zero()) return;
                world.at(Instant(milliseconds(555)), [&world, &alice, pause] { world.pause(alice, pause); });
              },
      });
}

ScenarioResult clock_drift_scenario(const ScenarioOptions& options, std::int64_t drift_ppm) {
  if (drift_ppm < -DriftingRuntime::kMaxDriftPpm || drift_ppm > DriftingRuntime::kMaxDriftPpm) {
    throw InvalidArgumentError("drift must be within +-" + std::to_string(DriftingRuntime::kMaxDriftPpm) + " ppm");
  }
  return run_duel(options, Duel{
                               .alice = {.start = Instant{},
                                         .acquire = {.wait = Duration::zero(), .lease = seconds(10)},
                                         .work = seconds(20)},
                               .bob = {.start = Instant(seconds(1)),
                                       .acquire = {.wait = seconds(20), .lease = seconds(10)},
                                       .work = seconds(1)},
                               .alice_clock_drift_ppm = drift_ppm,
                               .faults = nullptr,
                           });
}

ScenarioResult contention_scenario(const ScenarioOptions& options, const ContentionOptions& contention) {
  validate(options);
  World world(options.seed, world_options(options));
  Recorder recorder(world);
  std::vector<SimClient*> processes;
  for (std::size_t c = 0; c < contention.clients; ++c) {
    SimClient& process = world.add_client("client-" + std::to_string(c));
    processes.push_back(&process);
    const auto jitter_ns = static_cast<std::uint64_t>(std::max(contention.jitter, Duration::zero()).count());
    for (std::size_t i = 0; i < process.server_count(); ++i) {
      process.link(i).set_request_filter([&world, jitter_ns](const std::vector<std::string>&) {
        return FakeBackend::RequestFate{.extra_request_delay =
                                            Duration(static_cast<Duration::rep>(world.random_u64() % (jitter_ns + 1)))};
      });
    }
    world.spawn(process, [&, &process = process] {
      ProcessLock lock(process, options, process.runtime_ptr());
      for (int round = 0; round < contention.rounds; ++round) {
        recorder.hold(lock, {.wait = contention.wait, .lease = contention.lease}, contention.work);
        process.runtime().sleep_for(milliseconds(process.runtime().random_u64() % 50));
      }
    });
  }
  return recorder.finish();
}

}  // namespace turnstile::sim::redlock_scenarios
