// Semaphores against a real redis-server on loopback. Uncontended
// acquire+release pairs of both kinds, compared in the same run with the
// ceiling of two EVALSHA round trips (redis-benchmark -c 1, rate / 2; goal at
// least 0.85). Then 16 threads on 4 permits of each kind: pairs per second,
// and the wait from a release to the acquire it lets through (median goal:
// at most three ping round trips).

#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "ceiling.h"
#include "latency.h"
#include "redis_server.h"
#include "turnstile/client.h"
#include "turnstile/redis_backend.h"

namespace {

using turnstile::benchmarks::BestRateReporter;

constexpr int kRounds = 3;
constexpr double kMinTimeS = 1.0;
constexpr double kGoal = 0.85;

turnstile::Client* g_client = nullptr;

void BM_SemaphoreAcquireRelease(benchmark::State& state) {
  turnstile::CountingSemaphore semaphore = g_client->counting_semaphore("bench:semaphore");
  (void)semaphore.try_set_permits(1);
  for (auto _ : state) {
    semaphore.acquire();
    semaphore.release();
  }
  state.SetItemsProcessed(state.iterations());
}

// Watchdog lease: each permit is registered with the watchdog while held.
void BM_PermitSemaphoreAcquireRelease(benchmark::State& state) {
  turnstile::PermitSemaphore semaphore = g_client->permit_semaphore("bench:permits");
  (void)semaphore.try_set_permits(1);
  for (auto _ : state) {
    const turnstile::PermitId permit = semaphore.acquire();
    semaphore.release(permit);
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_PermitSemaphoreAcquireReleaseWithLease(benchmark::State& state) {
  turnstile::PermitSemaphore semaphore = g_client->permit_semaphore("bench:permits-lease");
  (void)semaphore.try_set_permits(1);
  for (auto _ : state) {
    const turnstile::PermitId permit = semaphore.acquire(std::chrono::seconds(30));
    semaphore.release(permit);
  }
  state.SetItemsProcessed(state.iterations());
}

BENCHMARK(BM_SemaphoreAcquireRelease)->UseRealTime()->MinTime(kMinTimeS);
BENCHMARK(BM_PermitSemaphoreAcquireRelease)->UseRealTime()->MinTime(kMinTimeS);
BENCHMARK(BM_PermitSemaphoreAcquireReleaseWithLease)->UseRealTime()->MinTime(kMinTimeS);

// ---- contended: 16 threads on 4 permits -------------------------------------------

constexpr int kContendedThreads = 16;
constexpr int kContendedPermits = 4;
constexpr auto kContendedRun = std::chrono::seconds(2);
constexpr double kHandoffGoalPings = 3.0;

using turnstile::benchmarks::percentile_us;
using turnstile::benchmarks::SteadyClock;

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(SteadyClock::now().time_since_epoch()).count();
}

struct ContendedResult {
  double pairs_per_s = 0;
  double handoff_median_us = 0;
  double handoff_p99_us = 0;
  std::size_t handoffs = 0;
};

// Each thread loops: acquire (one permit), release. A handoff is an acquire
// during which some release started; its wait runs from the latest such
// release's start to the acquire's return.
ContendedResult run_contended(const std::function<std::function<void()>(int thread)>& make_acquire_release_pair,
                              std::vector<double>& handoff_us, std::mutex& handoff_mutex) {
  std::atomic<bool> stop{false};
  std::atomic<std::int64_t> pairs{0};
  std::vector<std::thread> threads;
  const std::int64_t start = now_ns();
  for (int thread = 0; thread < kContendedThreads; ++thread) {
    threads.emplace_back([&, pair = make_acquire_release_pair(thread)] {
      while (!stop.load()) {
        pair();
        pairs.fetch_add(1);
      }
    });
  }
  std::this_thread::sleep_for(kContendedRun);
  stop = true;
  for (std::thread& thread : threads) thread.join();
  const double seconds = static_cast<double>(now_ns() - start) / 1e9;
  ContendedResult result;
  result.pairs_per_s = static_cast<double>(pairs.load()) / seconds;
  std::lock_guard guard(handoff_mutex);
  result.handoffs = handoff_us.size();
  result.handoff_median_us = percentile_us(handoff_us, 0.5);
  result.handoff_p99_us = percentile_us(handoff_us, 0.99);
  return result;
}

template <typename Acquire, typename Release>
ContendedResult contended(Acquire acquire, Release release) {
  std::atomic<std::int64_t> last_release_start_ns{0};
  std::vector<double> handoff_us;
  std::mutex handoff_mutex;
  return run_contended(
      [&](int) -> std::function<void()> {
        return [&] {
          const std::int64_t acquire_start = now_ns();
          auto held = acquire();
          const std::int64_t acquired = now_ns();
          const std::int64_t release_start = last_release_start_ns.load();
          if (release_start > acquire_start) {
            std::lock_guard guard(handoff_mutex);
            handoff_us.push_back(static_cast<double>(acquired - release_start) / 1e3);
          }
          std::int64_t previous = last_release_start_ns.load();
          const std::int64_t this_release = now_ns();
          while (previous < this_release && !last_release_start_ns.compare_exchange_weak(previous, this_release)) {
          }
          release(held);
        };
      },
      handoff_us, handoff_mutex);
}

// The wait is also shown in EVALSHA round trips (1 / the single-client
// EVALSHA rate): a handoff is at least the release script, the message and
// the winning acquire script.
void report_contended(const char* kind, const ContendedResult& result, double ping_us, double evalsha_us) {
  std::printf(
      "%-16s %d threads on %d permits: %8.0f pairs/s; release->acquire wait median %.0f us "
      "(%.2f pings, goal <= %.0f; %.2f EVALSHA round trips), p99 %.0f us (%.2f pings), %zu handoffs\n",
      kind, kContendedThreads, kContendedPermits, result.pairs_per_s, result.handoff_median_us,
      result.handoff_median_us / ping_us, kHandoffGoalPings, result.handoff_median_us / evalsha_us,
      result.handoff_p99_us, result.handoff_p99_us / ping_us, result.handoffs);
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;

  turnstile::testing::RedisServer server;
  std::shared_ptr<turnstile::Backend> backend =
      turnstile::make_redis_backend(turnstile::RedisOptions::from_url(server.url()));
  turnstile::Client client(backend);
  g_client = &client;
  BestRateReporter reporter;
  const double evalsha_rate =
      turnstile::benchmarks::run_rounds_beside_evalsha_ceiling(*backend, server.port(), reporter, kRounds);
  benchmark::Shutdown();
  g_client = nullptr;

  const double ceiling = evalsha_rate / 2;
  std::printf("\nceiling: redis-benchmark -c 1 EVALSHA %.0f requests/s -> %.0f acquire+release pairs/s\n", evalsha_rate,
              ceiling);
  for (const char* name : {"BM_SemaphoreAcquireRelease", "BM_PermitSemaphoreAcquireRelease",
                           "BM_PermitSemaphoreAcquireReleaseWithLease"}) {
    const double ours = reporter.best(name);
    std::printf("%-42s %8.0f pairs/s  ratio %.2f (goal >= %.2f)\n", name, ours, ours / ceiling, kGoal);
  }

  // Contended: a client per run, so the first run's watchdog and
  // subscriptions do not weigh on the second.
  std::printf("\n");
  const double ping_us = turnstile::benchmarks::ping_round_trip_us(*backend);
  const double evalsha_us = 1e6 / evalsha_rate;
  std::printf("ping round trip (median of %d): %.0f us; EVALSHA round trip (1 / rate): %.1f us\n",
              turnstile::benchmarks::kPingSamples, ping_us, evalsha_us);
  {
    turnstile::Client contended_client(backend);
    turnstile::CountingSemaphore semaphore = contended_client.counting_semaphore("bench:contended-semaphore");
    (void)semaphore.try_set_permits(kContendedPermits);
    report_contended("CountingSemaphore",
                     contended(
                         [&] {
                           semaphore.acquire();
                           return 0;
                         },
                         [&](int) { semaphore.release(); }),
                     ping_us, evalsha_us);
  }
  {
    turnstile::Client contended_client(backend);
    turnstile::PermitSemaphore semaphore = contended_client.permit_semaphore("bench:contended-permits");
    (void)semaphore.try_set_permits(kContendedPermits);
    report_contended("PermitSemaphore",
                     contended([&] { return semaphore.acquire(); },
                               [&](const turnstile::PermitId& permit) { semaphore.release(permit); }),
                     ping_us, evalsha_us);
  }
  return 0;
}
