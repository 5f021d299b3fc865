// Throughput of the simulation's foundation: fiber switches, scheduler
// events, Event handoffs between tasks, and task spawning; then whole
// scenarios and a swarm of a million handoffs with faults. All in virtual
// time, so the numbers are pure CPU cost per simulated step.

#include <benchmark/benchmark.h>

#include <cstdio>

#include <memory>
#include <string>
#include <vector>

#include "sim/scheduler.h"
#include "fake_redis/virtual_clock.h"
#include "turnstile/sim/scenarios.h"
#include "turnstile/sim/swarm.h"

namespace turnstile::sim {
namespace {

using namespace std::chrono_literals;

// A fresh scheduler with one client, per benchmark iteration.
struct Setup {
  VirtualClock clock;
  Scheduler scheduler{clock};
  ClientId client = scheduler.add_client();
};

// One task yielding (zero wait) over and over: one queue entry and two fiber
// switches (in and out) per iteration.
void BM_FiberYield(benchmark::State& state) {
  constexpr int kYieldsPerRun = 10'000;
  std::uint64_t switches = 0;
  for (auto _ : state) {
    Setup setup;
    Scheduler& scheduler = setup.scheduler;
    const ClientId client = setup.client;
    scheduler.spawn(client, [&] {
      for (int i = 0; i < kYieldsPerRun; ++i) scheduler.sleep_until(scheduler.now());
    });
    scheduler.run_until_idle();
    switches += scheduler.context_switches();
  }
  state.counters["resumes_per_s"] = benchmark::Counter(static_cast<double>(switches), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_FiberYield)->Unit(benchmark::kMillisecond);

// 64 tasks sleeping interleaved intervals: events through a busy queue.
void BM_SchedulerEvents(benchmark::State& state) {
  constexpr int kTasks = 64;
  constexpr int kSleepsPerTask = 1000;
  std::uint64_t events = 0;
  for (auto _ : state) {
    Setup setup;
    Scheduler& scheduler = setup.scheduler;
    const ClientId client = setup.client;
    for (int t = 0; t < kTasks; ++t) {
      scheduler.spawn(client, [&, t] {
        for (int i = 0; i < kSleepsPerTask; ++i) {
          scheduler.sleep_until(scheduler.now() + std::chrono::milliseconds(1 + (t * 7 + i) % 13));
        }
      });
    }
    events += scheduler.run_until_idle().events;
  }
  state.counters["events_per_s"] = benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_SchedulerEvents)->Unit(benchmark::kMillisecond);

// Two tasks passing a baton through two Events (the shape of a lock handoff
// woken by pub/sub).
void BM_EventHandoff(benchmark::State& state) {
  constexpr int kHandoffs = 10'000;
  std::uint64_t handoffs = 0;
  for (auto _ : state) {
    Setup setup;
    Scheduler& scheduler = setup.scheduler;
    const ClientId a = setup.client;
    const ClientId b = scheduler.add_client();
    auto to_a = scheduler.make_event();
    auto to_b = scheduler.make_event();
    scheduler.spawn(a, [&] {
      for (int i = 0; i < kHandoffs / 2; ++i) {
        to_b->notify();
        (void)to_a->wait_until(scheduler.now() + 1s);
      }
    });
    scheduler.spawn(b, [&] {
      for (int i = 0; i < kHandoffs / 2; ++i) {
        (void)to_b->wait_until(scheduler.now() + 1s);
        to_a->notify();
      }
    });
    scheduler.run_until_idle();
    handoffs += kHandoffs;
  }
  state.counters["handoffs_per_s"] = benchmark::Counter(static_cast<double>(handoffs), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_EventHandoff)->Unit(benchmark::kMillisecond);

// Spawning and finishing short tasks (stack from the pool, one switch each).
void BM_SpawnTasks(benchmark::State& state) {
  constexpr int kTasks = 1000;
  std::uint64_t tasks = 0;
  for (auto _ : state) {
    Setup setup;
    Scheduler& scheduler = setup.scheduler;
    const ClientId client = setup.client;
    int finished = 0;
    for (int i = 0; i < kTasks; ++i) scheduler.spawn(client, [&] { ++finished; });
    scheduler.run_until_idle();
    benchmark::DoNotOptimize(finished);
    tasks += kTasks;
  }
  state.counters["tasks_per_s"] = benchmark::Counter(static_cast<double>(tasks), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_SpawnTasks)->Unit(benchmark::kMillisecond);

// The yardstick: one hour of virtual time, 64 clients contending on
// one lock (30 s watchdog, 1 s holds, up to 100 ms between rounds), with
// the checkers on. Wall time per run, simulated events and lock handoffs
// per wall second. The flavor is the benchmark's argument (Flavor): the
// fair lock is the case (a release wakes only the queue's head);
// the reentrant lock (every release wakes all 63 waiters) and the token
// lock are kept for comparison. The second argument is 1 for the opt-in
// wake scope process (the default is fleet: one release wakes one waiter
// of all 64 clients, which are 64 processes); such a row's label says so.
// Each row runs kHourRepetitions times, one hour each; the report takes the
// least CPU of them (benchmarks/report.py, contention_hours): the work is
// deterministic, so a slower repetition measured the shared VM, not the code.
constexpr int kHourRepetitions = 5;

void BM_ContentionHour64Clients(benchmark::State& state) {
  ScenarioOptions options;
  options.scenario = "contention";
  options.clients = 64;
  options.duration = std::chrono::hours(1);
  options.flavor = static_cast<Flavor>(state.range(0));
  if (state.range(1) == 1) options.wake_scope = WakeScope::process;
  std::uint64_t events = 0, handoffs = 0, violations = 0;
  for (auto _ : state) {
    const ScenarioResult result = run_scenario(options);
    events += result.events;
    handoffs += result.handoffs;
    violations += result.unexpected_violations;
  }
  state.SetLabel(std::string(flavor_name(options.flavor)) + (state.range(1) == 1 ? ", process" : ""));
  state.counters["events_per_s"] = benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsRate);
  state.counters["handoffs_per_s"] = benchmark::Counter(static_cast<double>(handoffs), benchmark::Counter::kIsRate);
  state.counters["handoffs"] = benchmark::Counter(static_cast<double>(handoffs), benchmark::Counter::kAvgIterations);
  state.counters["violations"] = static_cast<double>(violations);
}
BENCHMARK(BM_ContentionHour64Clients)
    ->Args({static_cast<int>(Flavor::fair), 0})
    ->Args({static_cast<int>(Flavor::reentrant), 0})
    ->Args({static_cast<int>(Flavor::token), 0})
    ->Args({static_cast<int>(Flavor::reentrant), 1})
    ->Args({static_cast<int>(Flavor::token), 1})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1)
    ->Repetitions(kHourRepetitions);

// A big swarm (turnstile/sim/swarm.h): random scenario x flavor x fault mix
// runs, every checker on, until at least a million simulated lock handoffs.
// Reports the total, handoffs per wall second and the failed runs, each
// printed with the command that replays it (the goal is none: before the
// library's client-side lease deadline, hanging partitions failed some).
void BM_SwarmMillionHandoffs(benchmark::State& state) {
  constexpr std::uint64_t kHandoffs = 1'000'000;
  constexpr std::uint64_t kRunsPerBatch = 50;
  constexpr std::uint64_t kMaxBatches = 10'000;
  std::uint64_t handoffs = 0, runs = 0, skipped = 0, failed = 0, faults = 0, events = 0;
  for (auto _ : state) {
    SwarmOptions options;
    options.runs = kRunsPerBatch;
    options.max_clients = 16;
    options.max_duration = std::chrono::minutes(10);
    std::uint64_t batch_handoffs = 0;
    for (std::uint64_t batch = 0; batch < kMaxBatches && batch_handoffs < kHandoffs; ++batch) {
      options.seed = 1 + batch * kRunsPerBatch;
      const SwarmSummary summary = run_swarm(options);
      for (const std::string& failure : summary.failures) std::fprintf(stderr, "swarm: %s\n", failure.c_str());
      batch_handoffs += summary.handoffs;
      runs += summary.runs;
      skipped += summary.skipped;
      failed += summary.failed;
      faults += summary.faults_injected;
      events += summary.events;
    }
    handoffs += batch_handoffs;
  }
  state.counters["handoffs"] = benchmark::Counter(static_cast<double>(handoffs), benchmark::Counter::kAvgIterations);
  state.counters["handoffs_per_s"] = benchmark::Counter(static_cast<double>(handoffs), benchmark::Counter::kIsRate);
  state.counters["events_per_s"] = benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsRate);
  state.counters["runs"] = benchmark::Counter(static_cast<double>(runs), benchmark::Counter::kAvgIterations);
  state.counters["skipped"] = benchmark::Counter(static_cast<double>(skipped), benchmark::Counter::kAvgIterations);
  state.counters["failed_runs"] = benchmark::Counter(static_cast<double>(failed), benchmark::Counter::kAvgIterations);
  state.counters["faults"] = benchmark::Counter(static_cast<double>(faults), benchmark::Counter::kAvgIterations);
}
BENCHMARK(BM_SwarmMillionHandoffs)->Unit(benchmark::kSecond)->Iterations(1)->UseRealTime();

}  // namespace
}  // namespace turnstile::sim

BENCHMARK_MAIN();
