// Lock+unlock over the three deployment modes, in one run:
//
//   * uncontended lock+unlock pairs on a 3-master Redis Cluster against the
//     same on a single redis-server (goal, issue #52: cluster >= 0.95 of
//     single);
//   * what one uncontended acquisition costs the whole deployment, a single
//     server against the 3-master Cluster (issue #52: a scaling measure
//     that holds on 2 cores): lock+unlock of kCostNames distinct names
//     round robin, one client thread, and around it, summed over every
//     master, the Redis CPU (INFO cpu, used_cpu_user + used_cpu_sys, less
//     what the masters spend idle in as long, measured right before), the
//     commands Redis ran (INFO commandstats calls, every command but the
//     probes' INFO; Redis 7 counts a script's commands too), the script
//     calls and the calls refused (rejected_calls: a MOVED or ASK reply),
//     and the client's round trips (every backend call the client made,
//     counted by a ForwardingBackend). From them, the acquisitions/s each
//     master adds: 1 / (Redis CPU per acquisition summed over the
//     masters), assuming one core per master, the client side not the
//     bottleneck and the keys spread evenly over the masters. This machine
//     cannot run three busy masters on cores of their own, so cost is
//     measured, not throughput; at one request at a time a server spends
//     more CPU per request (an event-loop wake-up each) than when it is
//     saturated, so the projection errs low. Beside them a Cluster of one
//     master (cluster mode, every slot on one redis-server): what cluster
//     mode itself costs, apart from three masters taking turns on two
//     cores (each request finds its server's caches cold, so even the
//     script's own time inside Redis, INFO commandstats usec, grows);
//   * the cost of replica-sync safety: lock+unlock on a master with one
//     replica with replica_sync on (EVALSHA + WAIT 1 pipelined on one
//     connection) and off.
//
// Rounds alternate the pair-rate variants, best of kRounds each, so a
// burst of load elsewhere on the shared machine hits every side; the cost
// is measured after them, in windows that alternate the deployments the
// same way (load elsewhere moves the CPU a request costs too: caches, the
// scheduler), added up per deployment.
//
//   deployment_benchmark [--rounds=N] [--cost-pairs=N] [--benchmark_filter=...]
// Output: Google Benchmark rows (BM_Single, BM_Cluster, BM_ReplicaSync*),
// then summary lines, each beside a JSON line: {"kind": "cluster_ratio",
// ...} (the goal) and {"kind": "acquisition_cost", "deployment": "single"
// | "cluster-1" | "cluster", ...} (the cost per acquisition and the
// projection).

#include <benchmark/benchmark.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "ceiling.h"
#include "server_counters.h"
#include "redis_cluster.h"
#include "turnstile/client.h"
#include "turnstile/redis_backend.h"

namespace {

using turnstile::benchmarks::BestRateReporter;

constexpr int kRounds = 3;
constexpr double kMinTimeS = 1.0;
constexpr double kClusterGoal = 0.95;
// The cost measure: distinct names taken round robin, and pairs measured.
constexpr int kCostNames = 1'000;
constexpr int kCostPairs = 5'000;
// The cost's windows per deployment, alternating the deployments
// (kCostPairs / this pairs each).
constexpr int kCostWindows = 5;
constexpr auto kCostLease = std::chrono::seconds(30);
// How long each deployment's idle CPU is read for, before its windows.
constexpr auto kIdleWindow = std::chrono::milliseconds(500);
constexpr double kUsPerS = 1e6;
constexpr int kClusterSlots = 16'384;

turnstile::Client* g_single = nullptr;
turnstile::Client* g_cluster = nullptr;
turnstile::Client* g_synced = nullptr;
turnstile::Client* g_unsynced = nullptr;

void lock_unlock(benchmark::State& state, turnstile::Client* client) {
  turnstile::ReentrantLock lock = client->lock("bench:deployment");
  for (auto _ : state) {
    lock.lock(std::chrono::seconds(30));
    lock.unlock();
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_Single(benchmark::State& state) { lock_unlock(state, g_single); }
void BM_Cluster(benchmark::State& state) { lock_unlock(state, g_cluster); }
void BM_ReplicaSyncOn(benchmark::State& state) { lock_unlock(state, g_synced); }
void BM_ReplicaSyncOff(benchmark::State& state) { lock_unlock(state, g_unsynced); }

BENCHMARK(BM_Single)->UseRealTime()->MinTime(kMinTimeS);
BENCHMARK(BM_Cluster)->UseRealTime()->MinTime(kMinTimeS);
BENCHMARK(BM_ReplicaSyncOn)->UseRealTime()->MinTime(kMinTimeS);
BENCHMARK(BM_ReplicaSyncOff)->UseRealTime()->MinTime(kMinTimeS);

// Every call the client makes to its backend, each one round trip (the
// uncontended path pipelines nothing). The bounded variants
// (*_within) fall back to the counted ones (turnstile/backend.h).
class RoundTripCounter final : public turnstile::ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;

  turnstile::Reply eval(const turnstile::Script& script, const std::vector<std::string>& keys,
                        const std::vector<std::string>& args) override {
    ++calls;
    return ForwardingBackend::eval(script, keys, args);
  }
  turnstile::SyncedReply eval_synced(const turnstile::Script& script, const std::vector<std::string>& keys,
                                     const std::vector<std::string>& args) override {
    ++calls;
    return ForwardingBackend::eval_synced(script, keys, args);
  }
  std::unique_ptr<turnstile::PendingReply> send_eval(const turnstile::Script& script,
                                                     const std::vector<std::string>& keys,
                                                     const std::vector<std::string>& args,
                                                     turnstile::EvalSync sync) override {
    ++calls;
    return ForwardingBackend::send_eval(script, keys, args, sync);
  }
  turnstile::Reply command(const std::vector<std::string>& argv) override {
    ++calls;
    return ForwardingBackend::command(argv);
  }
  turnstile::Subscription subscribe(std::string_view channel, turnstile::PubSubHandler handler) override {
    ++calls;
    return ForwardingBackend::subscribe(channel, std::move(handler));
  }

  std::atomic<long long> calls{0};
};

using turnstile::benchmarks::command_delta;
using turnstile::benchmarks::delta_of;
using turnstile::benchmarks::process_cpu_s;
using turnstile::benchmarks::server_counters;
using turnstile::benchmarks::ServerCounters;

struct AcquisitionCost {
  std::string deployment;
  int masters = 0;
  int pairs = 0;
  double pairs_per_s = 0;
  double idle_cpu_us_per_s = 0;  // every master together, before the windows
  double redis_cpu_us = 0;       // per acquisition, every master, idle CPU taken out
  double commands = 0;           // per acquisition
  double script_calls = 0;       // per acquisition, EVALSHA and EVAL
  double script_us = 0;          // per acquisition, their time inside Redis (commandstats usec)
  double rejected_calls = 0;     // per acquisition (MOVED, ASK)
  double round_trips = 0;        // per acquisition, the client's backend calls
  double client_cpu_us = 0;      // per acquisition, this whole process
};

// Lock+unlock of kCostNames names round robin on a client of its own over
// `inner` (its calls counted), in windows whose counters add up.
class CostMeter {
 public:
  CostMeter(std::string deployment, int masters, std::shared_ptr<turnstile::Backend> inner)
      : inner_(std::move(inner)), counter_(std::make_shared<RoundTripCounter>(inner_)), client_(counter_) {
    total_.deployment = std::move(deployment);
    total_.masters = masters;
    locks_.reserve(kCostNames);
    for (int i = 0; i < kCostNames; ++i) locks_.push_back(client_.lock("bench:deployment:cost:" + std::to_string(i)));
  }

  // One round over every name (the scripts loaded on every master, a
  // connection to each, the server check), then the masters' idle CPU.
  void warm_up() {
    for (turnstile::ReentrantLock& lock : locks_) pair(lock);
    const ServerCounters before = server_counters(*inner_);
    std::this_thread::sleep_for(kIdleWindow);
    const ServerCounters after = server_counters(*inner_);
    total_.idle_cpu_us_per_s =
        (after.cpu_s - before.cpu_s) * kUsPerS / std::chrono::duration<double>(kIdleWindow).count();
  }

  // `pairs` more, their costs added to the totals.
  void window(int pairs) {
    const ServerCounters before = server_counters(*inner_);
    const double client_before = process_cpu_s();
    const long long calls_before = counter_->calls.load();
    const auto started = std::chrono::steady_clock::now();
    for (int i = 0; i < pairs; ++i) pair(locks_[static_cast<std::size_t>(next_++ % kCostNames)]);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    const long long round_trips = counter_->calls.load() - calls_before;
    const double client_after = process_cpu_s();
    const ServerCounters after = server_counters(*inner_);
    total_.pairs += pairs;
    seconds_ += seconds;
    total_.redis_cpu_us += (after.cpu_s - before.cpu_s) * kUsPerS - total_.idle_cpu_us_per_s * seconds;
    total_.commands += command_delta(before.calls, after.calls);
    total_.script_calls += delta_of(before.calls, after.calls, "evalsha") + delta_of(before.calls, after.calls, "eval");
    total_.script_us += delta_of(before.usec, after.usec, "evalsha") + delta_of(before.usec, after.usec, "eval");
    total_.rejected_calls += command_delta(before.rejected, after.rejected);
    total_.round_trips += static_cast<double>(round_trips);
    total_.client_cpu_us += (client_after - client_before) * kUsPerS;
  }

  // The totals per acquisition.
  AcquisitionCost per_acquisition() const {
    AcquisitionCost cost = total_;
    const double n = total_.pairs;
    cost.pairs_per_s = n / seconds_;
    for (double* value : {&cost.redis_cpu_us, &cost.commands, &cost.script_calls, &cost.script_us, &cost.rejected_calls,
                          &cost.round_trips, &cost.client_cpu_us}) {
      *value /= n;
    }
    return cost;
  }

 private:
  static void pair(turnstile::ReentrantLock& lock) {
    lock.lock(kCostLease);
    lock.unlock();
  }

  std::shared_ptr<turnstile::Backend> inner_;
  std::shared_ptr<RoundTripCounter> counter_;
  turnstile::Client client_;
  std::vector<turnstile::ReentrantLock> locks_;
  AcquisitionCost total_;
  double seconds_ = 0;
  long long next_ = 0;
};

void report(const AcquisitionCost& cost, double single_cpu_us) {
  const double per_master = kUsPerS / cost.redis_cpu_us;
  std::printf(
      "cost %-9s (%d master%s): %d pairs over %d names, %.0f pairs/s: Redis CPU %.1f us (idle %.0f us/s taken out), "
      "%.1f commands (%.2f script calls running %.1f us, %.2f refused), %.2f round trips, client CPU %.1f us "
      "per acquisition; projected %.0f acquisitions/s per master, %.0f with %d (one core per master, client not "
      "the bottleneck, keys spread evenly); CPU per acquisition / single's %.2f\n",
      cost.deployment.c_str(), cost.masters, cost.masters == 1 ? "" : "s", cost.pairs, kCostNames, cost.pairs_per_s,
      cost.redis_cpu_us, cost.idle_cpu_us_per_s, cost.commands, cost.script_calls, cost.script_us, cost.rejected_calls,
      cost.round_trips, cost.client_cpu_us, per_master, per_master * cost.masters, cost.masters,
      cost.redis_cpu_us / single_cpu_us);
  std::printf(
      "{\"kind\": \"acquisition_cost\", \"deployment\": \"%s\", \"masters\": %d, \"names\": %d, \"pairs\": %d, "
      "\"pairs_per_s\": %.1f, \"idle_cpu_us_per_s\": %.1f, \"redis_cpu_us_per_acquisition\": %.2f, "
      "\"commands_per_acquisition\": %.3f, \"script_calls_per_acquisition\": %.3f, "
      "\"script_us_per_acquisition\": %.2f, \"rejected_calls_per_acquisition\": %.4f, "
      "\"round_trips_per_acquisition\": %.3f, \"client_cpu_us_per_acquisition\": %.2f, "
      "\"projected_acquisitions_per_s_per_master\": %.0f, "
      "\"projected_acquisitions_per_s\": %.0f, \"cpu_over_single\": %.3f, \"assumptions\": \"one core per master, "
      "the client side not the bottleneck, keys spread evenly over the masters\"}\n",
      cost.deployment.c_str(), cost.masters, kCostNames, cost.pairs, cost.pairs_per_s, cost.idle_cpu_us_per_s,
      cost.redis_cpu_us, cost.commands, cost.script_calls, cost.script_us, cost.rejected_calls, cost.round_trips,
      cost.client_cpu_us, per_master, per_master * cost.masters, cost.redis_cpu_us / single_cpu_us);
}

// Makes `server` (started with --cluster-enabled yes) a Cluster of one
// master serving every slot; false if it does not report cluster_state:ok
// in time.
bool serve_every_slot(turnstile::testing::RedisServer& server) {
  std::vector<std::string> add_slots{"CLUSTER", "ADDSLOTS"};
  for (int slot = 0; slot < kClusterSlots; ++slot) add_slots.push_back(std::to_string(slot));
  (void)server.command(add_slots);
  return turnstile::testing::wait_until(
      [&] {
        return server.command({"CLUSTER", "INFO"}).find("cluster_state:ok") != std::string::npos;
      },
      turnstile::testing::kDeploymentTimeout);
}

// Takes "--<name>=N" out of argv (before Google Benchmark reads it);
// `fallback` if absent.
int take_flag(int& argc, char** argv, const std::string& name, int fallback) {
  const std::string prefix = "--" + name + "=";
  int value = fallback;
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    if (std::string_view(argv[i]).rfind(prefix, 0) == 0) {
      value = std::atoi(argv[i] + prefix.size());
    } else {
      argv[kept++] = argv[i];
    }
  }
  argc = kept;
  return value;
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = take_flag(argc, argv, "rounds", kRounds);
  const int cost_pairs = take_flag(argc, argv, "cost-pairs", kCostPairs);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  using turnstile::testing::RedisServer;

  RedisServer single;
  turnstile::testing::RedisCluster cluster;
  RedisServer one_master({"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"});
  if (!serve_every_slot(one_master)) {
    std::fprintf(stderr, "the one-master cluster did not come up\n");
    return 1;
  }
  RedisServer master;
  RedisServer replica({"--replicaof", "127.0.0.1", std::to_string(master.port())});
  if (!turnstile::testing::wait_until(
          [&] {
            return replica.command({"INFO", "replication"}).find("master_link_status:up") != std::string::npos;
          },
          turnstile::testing::kDeploymentTimeout)) {
    std::fprintf(stderr, "replica did not sync\n");
    return 1;
  }
  turnstile::RedisOptions synced = turnstile::RedisOptions::from_url(master.url());
  turnstile::RedisOptions unsynced = synced;
  unsynced.replica_sync = false;

  const std::shared_ptr<turnstile::Backend> single_backend =
      turnstile::make_redis_backend(turnstile::RedisOptions::from_url(single.url()));
  const std::shared_ptr<turnstile::Backend> cluster_backend =
      turnstile::make_redis_backend(turnstile::RedisOptions::from_url(cluster.url()));
  turnstile::Client single_client(single_backend);
  turnstile::Client cluster_client(cluster_backend);
  turnstile::Client synced_client(turnstile::make_redis_backend(synced));
  turnstile::Client unsynced_client(turnstile::make_redis_backend(unsynced));
  g_single = &single_client;
  g_cluster = &cluster_client;
  g_synced = &synced_client;
  g_unsynced = &unsynced_client;

  BestRateReporter reporter;
  for (int round = 0; round < rounds; ++round) benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();

  const double single_rate = reporter.best("BM_Single");
  const double cluster_rate = reporter.best("BM_Cluster");
  const double on = reporter.best("BM_ReplicaSyncOn");
  const double off = reporter.best("BM_ReplicaSyncOff");
  if (single_rate > 0 && cluster_rate > 0) {
    std::printf("\ncluster %8.0f pairs/s vs single %8.0f pairs/s: ratio %.2f (goal >= %.2f)\n", cluster_rate,
                single_rate, cluster_rate / single_rate, kClusterGoal);
    std::printf(
        "{\"kind\": \"cluster_ratio\", \"cluster_pairs_per_s\": %.1f, \"single_pairs_per_s\": %.1f, \"ratio\": %.4f, "
        "\"goal\": %.2f, \"rounds\": %d}\n",
        cluster_rate, single_rate, cluster_rate / single_rate, kClusterGoal, rounds);
  }
  if (on > 0 && off > 0) {
    std::printf("replica sync on %8.0f pairs/s, off %8.0f pairs/s: %.1f us more per acquisition (ratio %.2f)\n", on,
                off, (1e6 / on - 1e6 / off), on / off);
  }
  if (cost_pairs > 0) {
    // Windows alternate the deployments, so load elsewhere hits both.
    CostMeter single_meter("single", 1, single_backend);
    CostMeter one_master_meter("cluster-1", 1,
                               turnstile::make_redis_backend(turnstile::RedisOptions::from_url(
                                   "redis+cluster://127.0.0.1:" + std::to_string(one_master.port()))));
    CostMeter cluster_meter("cluster", turnstile::testing::RedisCluster::kMasters, cluster_backend);
    const std::vector<CostMeter*> meters{&single_meter, &one_master_meter, &cluster_meter};
    for (CostMeter* meter : meters) meter->warm_up();
    for (int window = 0; window < kCostWindows; ++window) {
      for (CostMeter* meter : meters) meter->window(cost_pairs / kCostWindows);
    }
    const AcquisitionCost single_cost = single_meter.per_acquisition();
    for (const CostMeter* meter : meters) report(meter->per_acquisition(), single_cost.redis_cpu_us);
  }
  std::fflush(stdout);
  g_single = g_cluster = g_synced = g_unsynced = nullptr;
  return 0;
}
