// Lock+unlock over the three deployment modes, in one run:
//
//   * uncontended lock+unlock pairs on a 3-master Redis Cluster against the
//     same on a single redis-server (goal: cluster >= 0.9 of single);
//   * the cost of replica-sync safety: lock+unlock on a master with one
//     replica with replica_sync on (EVALSHA + WAIT 1 pipelined on one
//     connection) and off.
//
// Rounds alternate the variants, best of kRounds each, so a burst of load
// elsewhere on the shared machine hits every side.

#include <benchmark/benchmark.h>

#include <cstdio>
#include <memory>

#include "ceiling.h"
#include "redis_cluster.h"
#include "turnstile/client.h"
#include "turnstile/redis_backend.h"

namespace {

using turnstile::benchmarks::BestRateReporter;

constexpr int kRounds = 3;
constexpr double kMinTimeS = 1.0;
constexpr double kClusterGoal = 0.9;

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

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  using turnstile::testing::RedisServer;

  RedisServer single;
  turnstile::testing::RedisCluster cluster;
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

  turnstile::Client single_client(turnstile::make_redis_backend(turnstile::RedisOptions::from_url(single.url())));
  turnstile::Client cluster_client(turnstile::make_redis_backend(turnstile::RedisOptions::from_url(cluster.url())));
  turnstile::Client synced_client(turnstile::make_redis_backend(synced));
  turnstile::Client unsynced_client(turnstile::make_redis_backend(unsynced));
  g_single = &single_client;
  g_cluster = &cluster_client;
  g_synced = &synced_client;
  g_unsynced = &unsynced_client;

  BestRateReporter reporter;
  for (int round = 0; round < kRounds; ++round) benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();

  const double single_rate = reporter.best("BM_Single");
  const double cluster_rate = reporter.best("BM_Cluster");
  const double on = reporter.best("BM_ReplicaSyncOn");
  const double off = reporter.best("BM_ReplicaSyncOff");
  std::printf("\ncluster %8.0f pairs/s vs single %8.0f pairs/s: ratio %.2f (goal >= %.2f)\n", cluster_rate, single_rate,
              cluster_rate / single_rate, kClusterGoal);
  std::printf("replica sync on %8.0f pairs/s, off %8.0f pairs/s: %.1f us more per acquisition (ratio %.2f)\n", on, off,
              (1e6 / on - 1e6 / off), on / off);
  g_single = g_cluster = g_synced = g_unsynced = nullptr;
  return 0;
}
