// The fake Redis's scripting hot path: EVALSHA of the lock-acquire script
// (lua/reentrant_lock_acquire.lua: TYPE/HEXISTS, HINCRBY, PEXPIRE, PTTL)
// through Server::execute, on the paths a lock takes:
//
//   * Acquire/NewKey:    a free lock each time (TYPE, HINCRBY, PEXPIRE);
//   * Acquire/Reentrant: the holder again (TYPE, HEXISTS, HINCRBY, PEXPIRE);
//   * HeldBySomeoneElse: TYPE, HEXISTS, then the lock-shape check (PTTL,
//     HGETALL) and PTTL.
//
// BackendEval* run the same script calls through the Backend interface
// (sim::make_standalone_fake_backend, what a Client on the fake uses):
// Backend::eval -> EVALSHA argv -> FakeBackend::send -> Server::execute,
// reply checks included. Their items/s are script evaluations per second
// through the Backend.
//
// MemoryPerIdleLock reports the heap bytes (mallinfo2 delta) each held,
// idle lock key costs in the fake.
//
// Goal: at least 300,000 evaluations/s on one core.

#include <benchmark/benchmark.h>
#include <malloc.h>

#include <string>
#include <vector>

#include "fake_redis/server.h"
#include "fake_redis/virtual_clock.h"
#include "lua_scripts.h"
#include "turnstile/backend.h"
#include "turnstile/sim/standalone.h"

namespace {

using turnstile::Reply;
namespace sim = turnstile::sim;

constexpr const char* kLeaseMs = "30000";
constexpr int kIdleLocks = 100'000;
// Owner ids as the scripts require them ("<uuid>:<n>", lua/lib/lock_shape.lua).
constexpr const char* kOwner1 = "9f0c6a52-1c1e-4f7e-9a43-2b1d5e8c7a10:1";
constexpr const char* kOwner2 = "9f0c6a52-1c1e-4f7e-9a43-2b1d5e8c7a10:2";

struct FakeWorld {
  sim::VirtualClock clock;
  sim::Server server{clock};
  std::unique_ptr<sim::Session> session = server.connect();

  FakeWorld() {
    const auto& script = turnstile::scripts::reentrant_lock_acquire;
    const Reply loaded = server.execute(*session, {"SCRIPT", "LOAD", std::string(script.source)});
    if (!loaded.is_bulk()) std::abort();
  }
  // EVALSHA <acquire> 1 <lock> <lease> <owner>, reusing one argv.
  std::vector<std::string> argv{
      "EVALSHA", std::string(turnstile::scripts::reentrant_lock_acquire.sha1), "1", "lock", kLeaseMs, kOwner1};
  Reply acquire() { return server.execute(*session, argv); }
};

void BM_AcquireNewKey(benchmark::State& state) {
  FakeWorld world;
  std::int64_t next = 0;
  for (auto _ : state) {
    world.argv[3] = "lock:" + std::to_string(next++);
    benchmark::DoNotOptimize(world.acquire());
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_AcquireNewKey);

void BM_AcquireReentrant(benchmark::State& state) {
  FakeWorld world;
  world.acquire();
  for (auto _ : state) benchmark::DoNotOptimize(world.acquire());
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_AcquireReentrant);

void BM_HeldBySomeoneElse(benchmark::State& state) {
  FakeWorld world;
  world.acquire();
  world.argv[5] = kOwner2;
  if (!world.acquire().is_integer()) state.SkipWithError("the lock was not held by the first owner");
  for (auto _ : state) benchmark::DoNotOptimize(world.acquire());
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_HeldBySomeoneElse);

// The holder again (EXISTS, HEXISTS, HINCRBY, PEXPIRE) through the Backend.
void BM_BackendEvalReentrant(benchmark::State& state) {
  const std::shared_ptr<turnstile::Backend> backend = turnstile::sim::make_standalone_fake_backend("bench");
  const turnstile::Script& acquire = turnstile::scripts::reentrant_lock_acquire;
  const std::vector<std::string> keys = {"lock"};
  const std::vector<std::string> args = {kLeaseMs, kOwner1};
  backend->eval(acquire, keys, args);
  for (auto _ : state) benchmark::DoNotOptimize(backend->eval(acquire, keys, args));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_BackendEvalReentrant);

// A waiter's attempt on a held lock (EXISTS, HEXISTS, PTTL) through the
// Backend.
void BM_BackendEvalHeldBySomeoneElse(benchmark::State& state) {
  const std::shared_ptr<turnstile::Backend> backend = turnstile::sim::make_standalone_fake_backend("bench");
  const turnstile::Script& acquire = turnstile::scripts::reentrant_lock_acquire;
  const std::vector<std::string> keys = {"lock"};
  backend->eval(acquire, keys, {kLeaseMs, kOwner1});
  const std::vector<std::string> args = {kLeaseMs, kOwner2};
  if (!backend->eval(acquire, keys, args).is_integer()) state.SkipWithError("the lock was not held by the first owner");
  for (auto _ : state) benchmark::DoNotOptimize(backend->eval(acquire, keys, args));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_BackendEvalHeldBySomeoneElse);

void BM_MemoryPerIdleLock(benchmark::State& state) {
  for (auto _ : state) {
    state.PauseTiming();
    auto world = std::make_unique<FakeWorld>();
    const std::size_t before = mallinfo2().uordblks;
    state.ResumeTiming();
    for (int i = 0; i < kIdleLocks; ++i) {
      world->argv[3] = "turnstile_lock:{order-" + std::to_string(i) + "}";
      world->acquire();
    }
    state.PauseTiming();
    const std::size_t after = mallinfo2().uordblks;
    state.counters["bytes_per_idle_lock"] = static_cast<double>(after - before) / static_cast<double>(kIdleLocks);
    world.reset();
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations() * kIdleLocks);
}
BENCHMARK(BM_MemoryPerIdleLock)->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
