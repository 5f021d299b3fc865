// The hiredis backend's script path against its ceiling.
//
// Starts a local redis-server, then measures EVALSHA of
// lua/reentrant_lock_acquire.lua through turnstile's backend (1 thread, and 8
// threads sharing the pool), and in the same run `redis-benchmark` sending the
// very same EVALSHA with 1 and 8 connections, which is as fast as a client can
// drive this server. Prints each ratio ours / redis-benchmark (goal: >= 0.9).
//
// Each round measures every variant and its ceiling back to back; after
// kRounds rounds the best of each counts, so a burst of load from elsewhere
// on the machine does not decide a ratio by hitting only one side of it.

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "ceiling.h"
#include "redis_server.h"
#include "turnstile/redis_backend.h"

namespace {

constexpr int kRounds = 3;
constexpr double kMinTimeS = 1.0;
constexpr double kGoalRatio = 0.9;

// The benchmark registered for each thread count, and the ceiling's clients.
struct Variant {
  const char* name;
  int threads;
};
constexpr Variant kVariants[] = {{"BM_EvalshaReentrantLockAcquire_1_thread", 1},
                                 {"BM_EvalshaReentrantLockAcquire_8_threads", 8}};

turnstile::Backend* g_backend = nullptr;

void BM_EvalshaReentrantLockAcquire(benchmark::State& state) {
  const turnstile::Script& script = turnstile::benchmarks::embedded_script("reentrant_lock_acquire");
  // The arguments redis-benchmark sends: the same key and owner every time.
  const std::vector<std::string> keys = {"key"};
  const std::vector<std::string> args = {"30000", "owner"};
  for (auto _ : state) benchmark::DoNotOptimize(g_backend->eval(script, keys, args));
  state.SetItemsProcessed(state.iterations());
}

}  // namespace

int main(int argc, char** argv) {
  for (const Variant& variant : kVariants) {
    benchmark::RegisterBenchmark(variant.name, BM_EvalshaReentrantLockAcquire)
        ->Threads(variant.threads)
        ->UseRealTime()
        ->MinTime(kMinTimeS);
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;

  turnstile::testing::RedisServer server;
  turnstile::RedisOptions options = turnstile::RedisOptions::from_url(server.url());
  options.pool_size = kVariants[1].threads;
  const auto backend = turnstile::make_redis_backend(options);
  g_backend = backend.get();
  // Loads the script, so redis-benchmark's EVALSHA finds it too.
  const turnstile::Script& acquire = turnstile::benchmarks::embedded_script("reentrant_lock_acquire");
  backend->eval(acquire, {"key"}, {"30000", "owner"});

  const std::vector<std::string> evalsha = {"EVALSHA", std::string(acquire.sha1), "1", "key", "30000", "owner"};
  turnstile::benchmarks::BestRateReporter reporter;
  double ceilings[std::size(kVariants)] = {};
  for (int round = 0; round < kRounds; ++round) {
    for (std::size_t i = 0; i < std::size(kVariants); ++i) {
      benchmark::RunSpecifiedBenchmarks(&reporter, std::string("^") + kVariants[i].name + "/");
      ceilings[i] = std::max(ceilings[i],
                             turnstile::benchmarks::redis_benchmark_rate(server.port(), kVariants[i].threads, evalsha));
    }
  }
  benchmark::Shutdown();

  bool all_met = true;
  for (std::size_t i = 0; i < std::size(kVariants); ++i) {
    const Variant& variant = kVariants[i];
    const double ceiling = ceilings[i];
    const double ours = reporter.best(variant.name);
    const double ratio = ours / ceiling;
    all_met = all_met && ratio >= kGoalRatio;
    std::printf(
        "EVALSHA reentrant_lock_acquire, %d thread(s): turnstile %.0f calls/s, "
        "redis-benchmark -c %d %.0f requests/s, ratio %.2f (goal >= %.2f)\n",
        variant.threads, ours, variant.threads, ceiling, ratio, kGoalRatio);
  }
  g_backend = nullptr;
  std::printf("%s\n", all_met ? "all ratios met the goal" : "some ratio is below the goal");
  return 0;
}
