#include "turnstile/sim/world.h"

#include <algorithm>
#include <cstdio>
#include <utility>

#include "core/check.h"
#include "sim/buggify.h"
#include "sim/fake_backend.h"
#include "sim/random.h"
#include "sim/replication.h"
#include "sim/scheduler.h"
#include "fake_redis/server.h"
#include "sim/sim_runtime.h"
#include "fake_redis/virtual_clock.h"
#include "turnstile/errors.h"

namespace turnstile::sim {
namespace {

constexpr std::uint64_t kHashPrime = 0x100000001b3ULL;
// The world's own random stream; client streams are their ids (1, 2, ...).
constexpr std::uint64_t kWorldRandomStream = 0;

RunStats to_stats(const Scheduler::RunResult& result) {
  return RunStats{result.events, result.idle, result.stuck_tasks};
}

// "<ms>.<µs>": virtual time since zero, exact, without floating point.
std::string format_virtual_time(Instant when) {
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(when.time_since_epoch()).count();
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%lld.%03lld", static_cast<long long>(us / 1000),
                static_cast<long long>(us % 1000));
  return buffer;
}

}  // namespace

// ---- SimClient ----

SimClient::~SimClient() = default;

Runtime& SimClient::runtime() { return *runtime_; }
std::shared_ptr<Runtime> SimClient::runtime_ptr() { return runtime_; }

FakeBackend& SimClient::link(std::size_t server) {
  TURNSTILE_CHECK(server < links_.size());
  return *links_[server];
}
Backend& SimClient::backend(std::size_t server) { return link(server); }
std::shared_ptr<Backend> SimClient::backend_ptr(std::size_t server) {
  TURNSTILE_CHECK(server < links_.size());
  return links_[server];
}

// ---- World ----

struct World::RandomState {
  Random random;
};

World::World(std::uint64_t seed, WorldOptions options)
    : seed_(seed),
      options_(options),
      clock_(std::make_unique<VirtualClock>(options.unix_ms_at_zero)),
      random_(std::make_unique<RandomState>(RandomState{Random(seed, kWorldRandomStream)})),
      buggify_(std::make_unique<Buggify>(seed, options.buggify)) {
  if (options_.servers == 0 || options_.servers > kMaxServers) {
    throw InvalidArgumentError("a world has 1.." + std::to_string(kMaxServers) + " servers, not " +
                               std::to_string(options_.servers));
  }
  for (std::size_t i = 0; i < options_.servers; ++i) {
    servers_.push_back(std::make_unique<Server>(*clock_, options_.server));
    install_fault_hook(*servers_.back());
  }
  replications_.resize(options_.servers);
  server_epochs_.assign(options_.servers, 1);
  server_epoch_starts_.assign(options_.servers, {});
  Scheduler::Options scheduler_options;
  scheduler_options.virtual_time_budget = options_.virtual_time_budget;
  scheduler_options.event_budget = options_.event_budget;
  scheduler_options.seed = seed_;
  scheduler_ = std::make_unique<Scheduler>(*clock_, scheduler_options);
  scheduler_->set_observer([this](const Scheduler::Record& record) {
    using Happening = Scheduler::Happening;
    switch (record.happening) {
      case Happening::client_paused:
        add_trace(record.client, "paused");
        break;
      case Happening::client_resumed:
        add_trace(record.client, "resumed");
        break;
      case Happening::client_killed:
        add_trace(record.client, "crashed");
        break;
      case Happening::task_failed:
        add_trace(record.client, "task " + std::to_string(record.id) + " failed");
        break;
      case Happening::task_started:
      case Happening::task_finished:
      case Happening::task_unwound:
        if (options_.trace_tasks) {
          const char* what = record.happening == Happening::task_started    ? " started"
                             : record.happening == Happening::task_finished ? " finished"
                                                                            : " unwound";
          add_trace(record.client, "task " + std::to_string(record.id) + what);
        }
        break;
      case Happening::task_woken:
      case Happening::timer_fired:
        break;  // too many for lines; the schedule hash covers them
    }
  });
}

World::~World() {
  // Close every link first: nothing a task does while it unwinds reaches a
  // server. Then unwind the tasks (they may hold subscriptions on the
  // links), then free links and runtimes, then servers.
  for (const auto& client : clients_) {
    for (const auto& link : client->links_) link->kill();
  }
  scheduler_.reset();
  clients_.clear();
  replications_.clear();
  servers_.clear();
  retired_servers_.clear();
}

SimClient& World::add_client(std::string name) {
  if (name.empty()) throw InvalidArgumentError("a simulated client needs a name");
  for (const auto& client : clients_) {
    if (client->name() == name) throw InvalidArgumentError("two simulated clients named '" + name + "'");
  }
  if (clients_.size() >= kMaxClients) throw InvalidArgumentError("too many simulated clients");
  const ClientId id = scheduler_->add_client();
  TURNSTILE_CHECK(id == clients_.size() + 1);
  std::unique_ptr<SimClient> client(new SimClient(std::move(name), id));
  client->runtime_ = std::make_shared<SimRuntime>(*scheduler_, id, seed_, id);
  client->runtime_->set_buggify(buggify_.get());
  FakeBackend::Options link_options;
  link_options.request_delay = options_.request_delay;
  link_options.reply_delay = options_.reply_delay;
  link_options.pubsub_delay = options_.pubsub_delay;
  link_options.command_timeout = options_.command_timeout;
  link_options.replica_sync_timeout = options_.replica_sync_timeout;
  link_options.aof_sync_timeout = options_.aof_sync_timeout;
  link_options.sharded_pubsub = options_.sharded_pubsub;
  for (std::size_t i = 0; i < servers_.size(); ++i) {
    client->links_.push_back(
        std::make_shared<FakeBackend>(*servers_[i], "server-" + std::to_string(i), *scheduler_, id, link_options));
    if (replications_[i] != nullptr) client->links_.back()->set_replica_lag(replications_[i]->lag());
    client->links_.back()->set_buggify(buggify_.get());
    client->links_.back()->set_call_listener(&call_listener_, i);
  }
  clients_.push_back(std::move(client));
  return *clients_.back();
}

void World::install_fault_hook(Server& server) {
  server.set_fault_hook([buggify = buggify_.get()](std::string_view point) { return buggify->fires(point); });
}

const std::vector<BuggifyCount>& World::buggify_counts() const { return buggify_->counts(); }

namespace {

void check_buggify_point(std::string_view point) {
  const std::vector<std::string_view>& names = buggify_point_names();
  if (std::find(names.begin(), names.end(), point) == names.end()) {
    throw InvalidArgumentError("no BUGGIFY point named '" + std::string(point) + "'");
  }
}

}  // namespace

void World::buggify_never(std::string_view point) {
  check_buggify_point(point);
  buggify_->disable(point);
}

void World::buggify_always(std::string_view point) {
  check_buggify_point(point);
  buggify_->force(point);
}

SimClient& World::client(std::string_view name) {
  for (const auto& client : clients_) {
    if (client->name() == name) return *client;
  }
  throw InvalidArgumentError("no simulated client named '" + std::string(name) + "'");
}

Server& World::server(std::size_t index) {
  if (index >= servers_.size()) {
    throw InvalidArgumentError("no server " + std::to_string(index) + " in a world of " +
                               std::to_string(servers_.size()));
  }
  return *servers_[index];
}

const std::string& World::name_of(ClientId id) const {
  static const std::string world_name = "world";
  if (id == kWorldClient) return world_name;
  TURNSTILE_CHECK(id <= clients_.size());
  return clients_[id - 1]->name();
}

void World::spawn(SimClient& client, std::function<void()> task) { scheduler_->spawn(client.id(), std::move(task)); }

void World::at(Instant when, std::function<void()> action) {
  scheduler_->schedule_at(kWorldClient, when, std::move(action), Scheduler::RunAs::inline_action);
}

void World::after(Duration delay, std::function<void()> action) {
  at(now() + std::max(delay, Duration::zero()), std::move(action));
}

RunStats World::run_for(Duration duration) { return run_until(now() + std::max(duration, Duration::zero())); }
RunStats World::run_until(Instant limit) {
  return within_budget([&] { return to_stats(scheduler_->run_until(limit)); });
}
RunStats World::run_until_idle() {
  return within_budget([&] { return to_stats(scheduler_->run_until_idle()); });
}

RunStats World::within_budget(const std::function<RunStats()>& run) {
  try {
    return run();
  } catch (const SimulationBudgetError& exceeded) {
    SimulationBudgetError::Details details = exceeded.details();
    details.trace_tail.assign(recent_trace_.begin(), recent_trace_.end());
    throw SimulationBudgetError(std::move(details));
  }
}

SimulationBudgetError::SimulationBudgetError(Details details)
    : Error([&] {
        const bool time = details.budget == Budget::virtual_time;
        std::string text = "simulation budget exceeded: ";
        text +=
            time ? "the next event is past the virtual-time budget of " +
                       std::to_string(
                           std::chrono::duration_cast<std::chrono::milliseconds>(details.virtual_time_budget).count()) +
                       " ms"
                 : "the event budget of " + std::to_string(details.event_budget) + " events is spent";
        text += " (at " + std::to_string(details.virtual_ms) + " virtual ms, " + std::to_string(details.events) +
                " events); replay with seed " + std::to_string(details.seed);
        if (!details.trace_tail.empty()) {
          text += "; last trace lines:";
          for (const std::string& line : details.trace_tail) text += "\n  " + line;
        }
        return text;
      }()),
      details_(std::move(details)) {}

void World::crash(SimClient& client) {
  if (client.crashed_) return;
  client.crashed_ = true;
  client.crashed_at_ = now();
  for (const auto& link : client.links_) link->kill();  // before any unwinding
  scheduler_->kill_client(client.id());
}

void World::pause(SimClient& client, Duration duration) {
  if (client.crashed_) return;
  scheduler_->pause_client(client.id());
  const ClientId id = client.id();
  after(duration, [this, id] { scheduler_->resume_client(id); });
}

void World::resume(SimClient& client) { scheduler_->resume_client(client.id()); }

void World::partition(SimClient& client, std::size_t index) {
  (void)server(index);  // range check
  FakeBackend& link = client.link(index);
  if (client.crashed_ || link.hanging()) return;
  add_trace(client.id(), "link to server-" + std::to_string(index) + " hangs (partition)");
  link.set_hanging(true);
}

void World::heal(SimClient& client, std::size_t index) {
  (void)server(index);
  FakeBackend& link = client.link(index);
  if (client.crashed_ || !link.hanging()) return;
  add_trace(client.id(), "link to server-" + std::to_string(index) + " healed");
  link.set_hanging(false);
}

void World::restart_server(std::size_t index) {
  Server& restarted = server(index);
  // A new epoch only when writes were lost: with appendfsync always (or
  // everysec and every write fsynced) every grant still stands.
  const bool lost = restarted.restart();
  if (lost) {
    server_epoch_starts_[index].push_back(now());
    ++server_epochs_[index];
    observe_state_loss(index);
  }
  const Persistence persistence = restarted.options().persistence;
  add_trace(kWorldClient,
            "server-" + std::to_string(index) + " restarted" +
                (persistence == Persistence::none ? std::string()
                                                  : " (AOF " + std::string(persistence_name(persistence)) + ")") +
                (lost ? "" : ", nothing lost"));
  for (const auto& client : clients_) client->link(index).on_server_restart();
}

void World::set_server_clock_skew(std::size_t index, Duration offset, std::int64_t drift_ppm) {
  Server& skewed = server(index);
  if (drift_ppm < -ServerClock::kMaxDriftPpm || drift_ppm > ServerClock::kMaxDriftPpm) {
    throw InvalidArgumentError("a server clock drifts at most " + std::to_string(ServerClock::kMaxDriftPpm) +
                               " ppm, not " + std::to_string(drift_ppm));
  }
  if (offset % std::chrono::milliseconds(1) != Duration::zero()) {
    throw InvalidArgumentError("a server clock's offset is whole milliseconds");
  }
  skewed.set_clock_skew(offset, drift_ppm);
  add_trace(kWorldClient, "server-" + std::to_string(index) + " clock off by " +
                              std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(offset).count()) +
                              " ms, drifting " + std::to_string(drift_ppm) + " ppm");
}

Instant World::server_epoch_began(std::size_t index, std::uint64_t epoch) const {
  const std::vector<Instant>& starts = server_epoch_starts_.at(index);
  if (epoch < 1 || epoch > starts.size() + 1) {
    throw InvalidArgumentError("server-" + std::to_string(index) + " has not reached epoch " + std::to_string(epoch));
  }
  return epoch == 1 ? Instant{} : starts[epoch - 2];
}

void World::add_replica(std::size_t index, Duration lag) {
  Server& master = server(index);
  if (lag < Duration::zero()) throw InvalidArgumentError("a replica's lag cannot be negative");
  if (replications_[index] != nullptr) {
    throw InvalidArgumentError("server-" + std::to_string(index) + " already has a replica");
  }
  replications_[index] = std::make_unique<Replication>(master, *clock_, lag);
  for (const auto& client : clients_) client->link(index).set_replica_lag(lag);
  add_trace(kWorldClient, "server-" + std::to_string(index) + " replica added (lag " +
                              std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(lag).count()) +
                              " ms)");
}

std::size_t World::failover(std::size_t index) {
  (void)server(index);  // range check
  if (replications_[index] == nullptr) {
    throw InvalidArgumentError("server-" + std::to_string(index) + " has no replica to fail over to");
  }
  std::unique_ptr<Server> promoted;
  const std::size_t lost = replications_[index]->promote(promoted);
  replications_[index].reset();
  retired_servers_.push_back(std::move(servers_[index]));
  retired_servers_.back()->set_command_hook(nullptr);
  servers_[index] = std::move(promoted);
  // Configured as its master was (a replica made before a fault plan set
  // the persistence would otherwise restart with nothing).
  servers_[index]->set_persistence(retired_servers_.back()->options().persistence);
  server_epoch_starts_[index].push_back(now());
  ++server_epochs_[index];
  install_command_hook(index);
  install_fault_hook(*servers_[index]);
  add_trace(kWorldClient, "server-" + std::to_string(index) + " failed over to its replica (" + std::to_string(lost) +
                              " writes lost)");
  for (const auto& client : clients_) client->link(index).switch_server(*servers_[index]);
  observe_state_loss(index);
  return lost;
}

std::size_t World::failover(std::size_t index, Duration rejoin_after) {
  (void)server(index);
  if (rejoin_after < Duration::zero())
    throw InvalidArgumentError("a negative delay before a failed-over server rejoins");
  // Out of reach first, so that no link talks to the promoted server before
  // it rejoins.
  for (const auto& client : clients_) client->link(index).set_held_out(true);
  const std::size_t lost = failover(index);
  add_trace(kWorldClient,
            "server-" + std::to_string(index) + " held out of reach for " +
                std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(rejoin_after).count()) +
                " ms (delayed restart)");
  after(rejoin_after, [this, index] {
    add_trace(kWorldClient, "server-" + std::to_string(index) + " rejoined after its delayed restart");
    for (const auto& client : clients_) client->link(index).set_held_out(false);
  });
  return lost;
}

void World::set_command_observer(CommandObserver observer) {
  command_observer_ = std::move(observer);
  for (std::size_t index = 0; index < servers_.size(); ++index) install_command_hook(index);
}

void World::observe_state_loss(std::size_t index) {
  if (command_observer_) command_observer_(index);
}

void World::install_command_hook(std::size_t index) {
  if (!command_observer_) {
    servers_[index]->set_command_hook(nullptr);
    return;
  }
  servers_[index]->set_command_hook([this, index] { command_observer_(index); });
}

std::uint64_t World::scheduler_events() const { return scheduler_->events_dispatched(); }

void World::stop() { scheduler_->request_stop(); }
bool World::stopped() const { return scheduler_->stop_requested(); }

std::uint64_t World::FaultCounts::total() const {
  return crashes + pauses + links_down + server_restarts + requests_dropped + replies_dropped + requests_duplicated +
         replies_duplicated + requests_delayed + messages_dropped + messages_duplicated + messages_delayed + partitions;
}

Instant World::now() const { return clock_->now(); }

std::int64_t World::now_ms() const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(now().time_since_epoch()).count();
}

std::uint64_t World::random_u64() { return random_->random.next_u64(); }

void World::note(std::string_view text) {
  const ClientId who = scheduler_->current_client();
  add_trace(who, text);
}

void World::add_trace(ClientId who, std::string_view what) {
  std::string line = format_virtual_time(now());
  line += ' ';
  line += name_of(who);
  line += ' ';
  line += what;
  for (const char c : line) trace_line_hash_ = (trace_line_hash_ ^ static_cast<unsigned char>(c)) * kHashPrime;
  trace_line_hash_ = (trace_line_hash_ ^ '\n') * kHashPrime;
  ++trace_line_count_;
  if (trace_listener_) trace_listener_(now(), who, what);
  if (recent_trace_.size() == SimulationBudgetError::kTraceTailLines) recent_trace_.pop_front();
  recent_trace_.push_back(line);
  if (trace_.size() < options_.trace_line_limit) trace_.push_back(std::move(line));
}

std::string World::trace_text() const {
  std::string text;
  for (const std::string& line : trace_) {
    text += line;
    text += '\n';
  }
  return text;
}

std::uint64_t World::trace_hash() const { return (trace_line_hash_ ^ scheduler_->schedule_hash()) * kHashPrime; }

}  // namespace turnstile::sim
