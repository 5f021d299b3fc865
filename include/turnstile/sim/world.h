// turnstile/sim/world.h
//
// A simulated world: the entry point of turnstile's deterministic
// simulation. A World owns one virtual clock, a deterministic scheduler,
// N fake Redis servers and any number of simulated clients. A simulated
// client is ordinary blocking code, the very same lock code that runs in
// production, running as tasks (fibers) on the world's scheduler: only one
// task runs at a time, and every wait (sleep, Event, timer) advances virtual
// time to the next event instead of sleeping. An hour of contention runs in
// milliseconds, and the same seed and options replay a run exactly.
//
//   turnstile::sim::World world(/*seed=*/42);
//   turnstile::sim::SimClient& alice = world.add_client("alice");
//   world.spawn(alice, [&] {
//     turnstile::Client locks(alice.backend_ptr(), alice.runtime_ptr());
//     turnstile::ReentrantLock lock = locks.lock("orders");
//     lock.lock();
//     alice.runtime().sleep_for(5s);        // virtual seconds
//     lock.unlock();
//   });
//   world.run_for(1h);                      // or run_until_idle()
//   EXPECT_EQ(world.now_ms(), 3'600'000);
//
// Each client has one Runtime (virtual clock, optional wall-clock drift, a
// random stream derived from the world seed and the client's number) and one
// Backend per server (a FakeBackend: that client's link to that server).
//
// Faults: crash(client) (the client stops at once: its links are closed
// first, so nothing it does while its tasks unwind reaches a server; its
// timers, watchdogs included, never fire), pause(client, duration) (a GC
// pause: its tasks and timers freeze, then everything that came due runs),
// restart_server(i) (scripts lost, the keyspace too unless the server's
// ServerOptions::persistence keeps it; subscribers are told `resubscribed`),
// set_server_clock_skew(i, offset, drift), partition(client, i) /
// heal(client, i) (a hanging link: calls block until the command timeout,
// nothing arrives either way), and
// the per-link hooks of FakeBackend (down, delays, dropped requests,
// replies and messages). at()/after() run an action at an
// exact virtual instant, e.g. a fault.
//
// Trace: one text line per notable event ("<virtual ms> <who> <what>"):
// crashes, pauses, resumes, server restarts, task failures, notes added with
// note(), and task starts/ends if WorldOptions::trace_tasks. trace_hash()
// covers every line and the order of every scheduler event, so two runs
// with equal hashes made the same schedule.
//
// Rules for code running in a world: block only through the client's
// Runtime and Backend (never a real mutex wait, sleep or thread); everything
// obtained from a world (runtimes, backends, locks, subscriptions) must be
// destroyed before it. Tasks must not swallow sim::TaskKilled (it does not
// derive from std::exception). Not thread-safe: one thread drives a world.

#ifndef TURNSTILE_SIM_WORLD_H_
#define TURNSTILE_SIM_WORLD_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "turnstile/export.h"
#include "turnstile/backend.h"
#include "turnstile/errors.h"
#include "turnstile/runtime.h"
#include "turnstile/sim/buggify.h"
#include "turnstile/sim/server_options.h"

namespace turnstile::sim {

class Buggify;
class FakeBackend;
class Replication;
class Scheduler;
struct FaultPlan;
class Server;
class SimRuntime;
class VirtualClock;

using ClientId = std::uint32_t;

// One call of a client on a server, for a trace (Timeline with commands):
// a script (its name and KEYS) or a plain command (its name), when it was
// sent and when its reply (or failure) came back, and how it ended.
struct TURNSTILE_EXPORT CallSpan {
  ClientId client = 0;
  std::size_t server = 0;
  std::string name;               // the script's name, or the command's first word
  bool script = false;            // an EVALSHA of an embedded script
  std::vector<std::string> keys;  // a script's KEYS
  Instant sent{};
  Instant finished{};
  // The reply's kind ("nil", "integer", "bulk", "status", "array", or
  // "error <first word of the message>"), or the call's failure
  // ("timeout", "connection error", "failed").
  std::string outcome;
};

struct TURNSTILE_EXPORT WorldOptions {
  // Fake Redis servers, numbered 0..servers-1, named "server-<i>".
  std::size_t servers = 1;
  // Unix time at virtual zero (2026-01-01T00:00:00Z).
  std::int64_t unix_ms_at_zero = 1'767'225'600'000;
  // Every server's options (turnstile/sim/server_options.h): its costs in
  // virtual time, BUSY threshold, persistence across restart_server() and
  // clock skew. A world is idealised (no cost) unless it opts in with
  // `server = ServerOptions()`, the measured costs: many tests and the
  // scenarios pin exact instants.
  ServerOptions server = ServerOptions::idealised();
  // Defaults of every client's links.
  Duration request_delay{0};
  Duration reply_delay{0};
  Duration pubsub_delay{0};
  // How long a call waits for a reply that will not come (a dropped request
  // or reply, a hanging partition): the real backend's command_timeout_ms.
  Duration command_timeout{std::chrono::milliseconds(2000)};
  // Replica-sync safety (turnstile/backend.h eval_synced): set, a link to a
  // server with a replica waits up to this long (WAIT 1 <timeout>) for the
  // replica to apply a lock acquisition, and reports whether it did. Unset
  // (the default, unlike RedisBackendOptions): no waiting, so scenarios show
  // what asynchronous replication alone does.
  std::optional<Duration> replica_sync_timeout = std::nullopt;
  // Durable grants (RedisOptions::aof_sync): set, acquisitions wait up to
  // this long (WAITAOF 1 0 <timeout>) for their server's append-only file
  // to fsync them (ServerOptions::persistence); a server without
  // persistence refuses them.
  std::optional<Duration> aof_sync_timeout = std::nullopt;
  // Wake-ups as on a Redis 7 Cluster (the cluster backend's path): scripts
  // publish with SPUBLISH and subscribers use SSUBSCRIBE.
  bool sharded_pubsub = false;
  // Every run's budgets (SimulationBudgetError past either): no event is
  // dispatched later than virtual zero + virtual_time_budget, and at most
  // event_budget events are dispatched over the world's life. A run_for()
  // or run_until() to a later instant stops with the error at the budget;
  // a run_until_idle() that never idles (a watchdog renewing for ever)
  // fails there instead of hanging. Scenarios set theirs from their
  // duration (turnstile/sim/scenarios.h).
  Duration virtual_time_budget = std::chrono::hours(48);
  std::uint64_t event_budget = 50'000'000;
  // Trace lines kept in memory (the hash covers all of them).
  std::size_t trace_line_limit = 100'000;
  // One trace line per task start and end.
  bool trace_tasks = false;
  // BUGGIFY (turnstile/sim/buggify.h): the library's and the fake's fault
  // points, each enabled or not and with its odds drawn from the seed.
  // Off: no point ever fires (they are still counted when reached).
  bool buggify = false;
};

// One simulated client: a name, a Runtime, and one Backend per server.
class TURNSTILE_EXPORT SimClient {
 public:
  SimClient(const SimClient&) = delete;
  SimClient& operator=(const SimClient&) = delete;
  ~SimClient();

  const std::string& name() const { return name_; }
  ClientId id() const { return id_; }
  bool crashed() const { return crashed_; }
  // When crash() stopped it (nullopt: running).
  std::optional<Instant> crashed_at() const { return crashed_at_; }

  Runtime& runtime();
  std::shared_ptr<Runtime> runtime_ptr();
  SimRuntime& sim_runtime() { return *runtime_; }

  std::size_t server_count() const { return links_.size(); }
  Backend& backend(std::size_t server = 0);
  std::shared_ptr<Backend> backend_ptr(std::size_t server = 0);
  // The same object as backend(server), with its fault hooks.
  FakeBackend& link(std::size_t server = 0);

 private:
  friend class World;
  SimClient(std::string name, ClientId id) : name_(std::move(name)), id_(id) {}

  std::string name_;
  ClientId id_;
  bool crashed_ = false;
  std::optional<Instant> crashed_at_;
  std::shared_ptr<SimRuntime> runtime_;
  std::vector<std::shared_ptr<FakeBackend>> links_;
};

// A simulated run that would go past one of its budgets (WorldOptions):
// thrown by the run call, before the event that would exceed it. what()
// names the budget, where the run was, the seed to replay it with and the
// last trace lines.
class TURNSTILE_EXPORT SimulationBudgetError : public Error {
 public:
  enum class Budget : std::uint8_t { virtual_time, events };
  static constexpr std::size_t kTraceTailLines = 20;
  struct Details {
    Budget budget = Budget::virtual_time;
    std::uint64_t seed = 0;
    std::int64_t virtual_ms = 0;  // the virtual time when it stopped
    std::uint64_t events = 0;     // dispatched until then
    Duration virtual_time_budget{};
    std::uint64_t event_budget = 0;
    // The last trace lines (at most kTraceTailLines), oldest first; empty
    // for a scheduler run outside a World.
    std::vector<std::string> trace_tail;
  };
  explicit SimulationBudgetError(Details details);
  const Details& details() const { return details_; }

 private:
  Details details_;
};

struct TURNSTILE_EXPORT RunStats {
  std::uint64_t events = 0;     // scheduler events dispatched by this call
  bool idle = false;            // nothing left queued
  std::size_t stuck_tasks = 0;  // when idle: tasks parked forever
};

class TURNSTILE_EXPORT World {
 public:
  static constexpr std::size_t kMaxServers = 64;
  static constexpr std::size_t kMaxClients = 100'000;

  explicit World(std::uint64_t seed) : World(seed, WorldOptions()) {}
  World(std::uint64_t seed, WorldOptions options);
  // Closes every link, unwinds every task, then frees clients and servers.
  ~World();
  World(const World&) = delete;
  World& operator=(const World&) = delete;

  std::uint64_t seed() const { return seed_; }
  const WorldOptions& options() const { return options_; }

  // ---- population ----
  // A new client; names are unique and non-empty (InvalidArgumentError).
  SimClient& add_client(std::string name);
  // The client called `name` (InvalidArgumentError if none).
  SimClient& client(std::string_view name);
  std::size_t client_count() const { return clients_.size(); }
  std::size_t server_count() const { return servers_.size(); }
  Server& server(std::size_t index);

  // ---- tasks and actions ----
  // Runs `task` as a new task of `client` (after the running one yields).
  void spawn(SimClient& client, std::function<void()> task);
  // Runs `action` at `when` on the scheduler's own stack (it must not
  // block): for faults and checks at exact instants.
  void at(Instant when, std::function<void()> action);
  void after(Duration delay, std::function<void()> action);

  // ---- running ----
  // Each throws SimulationBudgetError (with the last trace lines) at a
  // budget of WorldOptions.
  RunStats run_for(Duration duration);
  RunStats run_until(Instant limit);
  RunStats run_until_idle();

  // ---- faults ----
  // From anywhere in the world's thread. Called from a task of `client`
  // itself, crash() does not return (the task unwinds).
  void crash(SimClient& client);
  void pause(SimClient& client, Duration duration);
  void resume(SimClient& client);
  void restart_server(std::size_t index);
  // Server `index`'s clock runs `drift_ppm` fast (+) or slow (-) from now
  // on, and its Unix time is off by `offset` (whole ms): a trace line.
  // InvalidArgumentError for a bad index, a drift beyond 100'000 ppm or an
  // offset that is not whole milliseconds.
  void set_server_clock_skew(std::size_t index, Duration offset, std::int64_t drift_ppm);
  // A hanging partition between `client` and server `index`
  // (FakeBackend::set_hanging): requests are neither answered nor refused,
  // each call fails with TimeoutError after the command timeout, messages
  // are lost, until heal(). Both are trace lines; no-ops on a crashed client
  // or a link already in that state. InvalidArgumentError for a bad index.
  void partition(SimClient& client, std::size_t index);
  void heal(SimClient& client, std::size_t index);
  // Gives server `index` an asynchronous replica that applies the master's
  // writes `lag` after they happen (sim/replication.h); with
  // WorldOptions::replica_sync_timeout, acquisitions wait for it. One replica per
  // server; InvalidArgumentError for a second one or a negative lag.
  void add_replica(std::size_t index, Duration lag);
  // The master `index` dies and its replica takes its place for every
  // client (links reconnect, subscribers get `resubscribed`); writes of the
  // last `lag` are lost. Returns how many write effects were lost.
  // InvalidArgumentError if the server has no replica.
  std::size_t failover(std::size_t index);
  // The same, with the promoted replica kept out of reach of every client
  // that exists now for `rejoin_after` (each link down, calls refused with
  // ConnectionError; link faults healing meanwhile do not bring it back):
  // RedLock's "delayed restart", which a node that lost acknowledged writes
  // needs before it votes again, so that no lease it granted is still live
  // elsewhere when it rejoins. Two trace lines (held out, rejoined).
  std::size_t failover(std::size_t index, Duration rejoin_after);
  // Random faults from the seed (turnstile/sim/faults.h), for the clients
  // that exist now.
  void apply_fault_plan(const FaultPlan& plan);
  // Fault counters of apply_fault_plan, by kind, in a stable order.
  struct FaultCounts {
    std::uint64_t crashes = 0, pauses = 0, links_down = 0, server_restarts = 0;
    std::uint64_t requests_dropped = 0, replies_dropped = 0, requests_duplicated = 0;
    std::uint64_t replies_duplicated = 0, requests_delayed = 0;
    std::uint64_t messages_dropped = 0, messages_duplicated = 0, messages_delayed = 0;
    std::uint64_t partitions = 0;
    std::uint64_t total() const;
  };
  const FaultCounts& fault_counts() const { return fault_counts_; }
  // Per BUGGIFY point (buggify_point_names() order): enabled in this run,
  // times reached, times fired.
  const std::vector<BuggifyCount>& buggify_counts() const;
  // The BUGGIFY point named never fires in this world (InvalidArgumentError
  // for a name not in buggify_point_names()).
  void buggify_never(std::string_view point);
  // The BUGGIFY point named fires every time it is reached, BUGGIFY on or
  // not (a test of the point itself).
  void buggify_always(std::string_view point);

  // ---- observing servers (checkers) ----
  // Called after every top-level command on any server, with its index;
  // follows failovers; also at once when a server loses its state (a new
  // server_epoch: what it lists then is what it kept, granted by nobody
  // now). One observer per world.
  using CommandObserver = std::function<void(std::size_t server_index)>;
  void set_command_observer(CommandObserver observer);
  // Bumped when server `index` loses its state (a failover, a restart
  // that lost writes: without persistence, or with everysec and writes
  // not yet fsynced; never with always): what an older epoch granted may
  // not be in the current keyspace.
  std::uint64_t server_epoch(std::size_t index) const { return server_epochs_.at(index); }
  // When server `index` entered `epoch` (virtual zero for the first): the
  // instant it lost what epoch - 1 held. InvalidArgumentError for an epoch
  // it has not reached.
  Instant server_epoch_began(std::size_t index, std::uint64_t epoch) const;

  // ---- stopping (checkers) ----
  // The running run_*() returns after the current event; later ones return
  // at once. For a checker that found a violation.
  void stop();
  bool stopped() const;

  // ---- time, randomness, trace ----
  Instant now() const;
  std::int64_t now_ms() const;  // virtual milliseconds since zero
  // The world's own random stream (for scenario choices); clients have theirs.
  std::uint64_t random_u64();
  void note(std::string_view text);  // a trace line from the test or scenario
  // Told every trace line as it is made (e.g. a timeline recorder): the
  // instant, the client (0 = the world) and the text after the name.
  using TraceListener = std::function<void(Instant when, ClientId who, std::string_view what)>;
  void set_trace_listener(TraceListener listener) { trace_listener_ = std::move(listener); }
  // Told every call of every client's links when it ends (nullptr: none,
  // the default, which costs nothing). One listener per world.
  using CallListener = std::function<void(const CallSpan& span)>;
  void set_call_listener(CallListener listener) { call_listener_ = std::move(listener); }
  const std::string& client_name(ClientId id) const { return name_of(id); }
  const std::vector<std::string>& trace() const { return trace_; }
  std::string trace_text() const;  // the kept lines, each ending in '\n'
  std::uint64_t trace_hash() const;
  std::uint64_t trace_lines() const { return trace_line_count_; }
  // Scheduler events dispatched since the world began.
  std::uint64_t scheduler_events() const;

  Scheduler& scheduler() { return *scheduler_; }
  VirtualClock& clock() { return *clock_; }

 private:
  struct RandomState;
  void add_trace(ClientId who, std::string_view what);
  // `run`, its SimulationBudgetError given the last trace lines.
  RunStats within_budget(const std::function<RunStats()>& run);
  const std::string& name_of(ClientId id) const;

  std::uint64_t seed_;
  WorldOptions options_;
  // Read by every link through a pointer (FakeBackend::set_call_listener).
  CallListener call_listener_;
  std::unique_ptr<VirtualClock> clock_;
  std::vector<std::unique_ptr<Server>> servers_;
  // Replicas by server index (null: none); masters replaced by a failover,
  // kept until the clients' sessions on them are gone.
  std::vector<std::unique_ptr<Replication>> replications_;
  std::vector<std::unique_ptr<Server>> retired_servers_;
  FaultCounts fault_counts_;
  std::vector<std::uint64_t> server_epochs_;
  // Per server, when each epoch after the first began (server_epoch_began).
  std::vector<std::vector<Instant>> server_epoch_starts_;
  CommandObserver command_observer_;
  void install_command_hook(std::size_t index);
  // Tells the observer that server `index` entered a new epoch.
  void observe_state_loss(std::size_t index);
  void install_fault_hook(Server& server);
  TraceListener trace_listener_;
  std::unique_ptr<Scheduler> scheduler_;
  std::vector<std::unique_ptr<SimClient>> clients_;  // index = ClientId - 1
  std::unique_ptr<RandomState> random_;
  std::unique_ptr<Buggify> buggify_;
  std::vector<std::string> trace_;
  std::deque<std::string> recent_trace_;  // the last kTraceTailLines lines
  std::uint64_t trace_line_count_ = 0;
  std::uint64_t trace_line_hash_ = 0xcbf29ce484222325ULL;
};

}  // namespace turnstile::sim

#endif  // TURNSTILE_SIM_WORLD_H_
