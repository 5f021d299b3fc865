// The watchdog's renewal tick against a real redis-server on loopback
// (issue #33): 1k, 10k and 100k held locks (reentrant, watchdog lease),
// how long one tick takes to renew them all, beside the renewal period and
// beside what one batch after another would take in the same run (the
// measured round trip of one batch of 100 renewals, times the batches).
//
// A tick's duration is read from ClientOptions::on_lease_deadline: each
// confirmed renewal tells its key's new deadline, so a tick is a burst of
// N calls; reported is the time from its first to its last, plus one batch
// round trip (the first batch's own). The machine may be loaded (other
// builds, CI runs): compare the ratios of one run, not absolute times
// across runs.
//
//   watchdog_benchmark [--benchmark_filter=...]
// Output: Google Benchmark rows BM_WatchdogTick/<held locks>, manual time
// = the tick; counters tick_over_period, sequential_ms (the estimate),
// speedup (sequential_ms / tick).

#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "redis_server.h"
#include "turnstile/client.h"
#include "turnstile/redis_backend.h"
#include "turnstile/script.h"

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// A short lease so that ticks come often: the period is window / 3.
constexpr auto kWatchdogTimeout = milliseconds(6000);
constexpr int kAcquiringThreads = 4;
constexpr int kBatchSamples = 20;
constexpr std::size_t kBatch = 100;  // the watchdog's batch (Redisson's)

std::shared_ptr<turnstile::Backend>* g_backend = nullptr;

const turnstile::Script& renew_script() {
  for (const turnstile::Script* script : turnstile::embedded_scripts()) {
    if (script->name == "reentrant_lock_renew") return *script;
  }
  std::fprintf(stderr, "no embedded script reentrant_lock_renew\n");
  std::abort();
}

// The median round trip of one renewal batch of kBatch held keys (lock
// hashes written here, renewed as the watchdog renews its own).
double batch_round_trip_ms(turnstile::Backend& backend) {
  std::vector<std::string> keys;
  std::vector<std::string> args{std::to_string(kWatchdogTimeout.count())};
  for (std::size_t i = 0; i < kBatch; ++i) {
    keys.push_back("bench:watchdog:batch:" + std::to_string(i));
    (void)backend.command({"HSET", keys.back(), "bench-owner", "1"});
    args.push_back("bench-owner");
  }
  std::vector<double> samples;
  for (int i = 0; i < kBatchSamples; ++i) {
    const auto start = Clock::now();
    (void)backend.eval(renew_script(), keys, args);
    samples.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
  }
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

// Confirmed renewals' instants, in bursts (ticks).
class RenewalClock {
 public:
  void told() {
    const auto now = Clock::now();
    const std::lock_guard guard(mutex_);
    if (armed_) told_.push_back(now);
  }
  void arm() {
    const std::lock_guard guard(mutex_);
    told_.clear();
    armed_ = true;
  }
  // The first complete burst of `n` calls (gaps inside under `gap`), as
  // first-to-last milliseconds; negative if none was complete.
  double first_tick_ms(std::size_t n, Clock::duration gap) {
    const std::lock_guard guard(mutex_);
    armed_ = false;
    std::size_t begin = 0;
    for (std::size_t i = 1; i <= told_.size(); ++i) {
      if (i == told_.size() || told_[i] - told_[i - 1] > gap) {
        if (i - begin == n && begin > 0) {  // not the burst armed midway
          return std::chrono::duration<double, std::milli>(told_[i - 1] - told_[begin]).count();
        }
        begin = i;
      }
    }
    return -1;
  }

 private:
  std::mutex mutex_;
  bool armed_ = false;
  std::vector<Clock::time_point> told_;
};

void BM_WatchdogTick(benchmark::State& state) {
  const auto held = static_cast<std::size_t>(state.range(0));
  RenewalClock renewals;
  turnstile::ClientOptions options;
  options.watchdog_timeout = kWatchdogTimeout;
  options.on_lease_deadline = [&renewals](const turnstile::LeaseDeadline&) { renewals.told(); };
  (void)(*g_backend)->command({"FLUSHALL"});
  for (auto _ : state) {
    turnstile::Client client(*g_backend, options);
    // Each thread holds its share (held by the thread that took them).
    std::vector<std::thread> holders;
    std::atomic<std::size_t> acquired{0};
    std::atomic<bool> release{false};
    for (int t = 0; t < kAcquiringThreads; ++t) {
      holders.emplace_back([&, t] {
        std::vector<turnstile::ReentrantLock> locks;
        for (std::size_t i = static_cast<std::size_t>(t); i < held; i += kAcquiringThreads) {
          locks.push_back(client.lock("bench:watchdog:" + std::to_string(i)));
          locks.back().lock();
          acquired.fetch_add(1);
        }
        while (!release.load()) std::this_thread::sleep_for(milliseconds(10));
        for (turnstile::ReentrantLock& lock : locks) lock.unlock();
      });
    }
    while (acquired.load() < held) std::this_thread::sleep_for(milliseconds(10));
    const double batch_ms = batch_round_trip_ms(**g_backend);
    // window / 3, window = lease - the margin (clock drift, stop margin).
    const auto lease = std::chrono::duration_cast<turnstile::Duration>(kWatchdogTimeout);
    const turnstile::Duration period = (lease -
                                        turnstile::Duration(static_cast<turnstile::Duration::rep>(
                                            static_cast<double>(lease.count()) * options.clock_drift_factor)) -
                                        options.stop_margin) /
                                       3;
    renewals.arm();
    std::this_thread::sleep_for(period * 3);  // a complete tick after a partial one
    const double tick_ms = renewals.first_tick_ms(held, period / 3) + batch_ms;
    release = true;
    for (std::thread& holder : holders) holder.join();
    const double period_ms = std::chrono::duration<double, std::milli>(period).count();
    const double sequential_ms = batch_ms * static_cast<double>((held + kBatch - 1) / kBatch);
    state.SetIterationTime(tick_ms / 1000);
    state.counters["period_ms"] = period_ms;
    state.counters["tick_over_period"] = tick_ms / period_ms;
    state.counters["batch_ms"] = batch_ms;
    state.counters["sequential_ms"] = sequential_ms;
    state.counters["speedup"] = sequential_ms / tick_ms;
    state.counters["us_per_lock"] = tick_ms * 1000 / static_cast<double>(held);
  }
}

BENCHMARK(BM_WatchdogTick)
    ->Arg(1'000)
    ->Arg(10'000)
    ->Arg(100'000)
    ->Iterations(1)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  turnstile::testing::RedisServer server;
  std::shared_ptr<turnstile::Backend> backend =
      turnstile::make_redis_backend(turnstile::RedisOptions::from_url(server.url()));
  g_backend = &backend;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  g_backend = nullptr;
  return 0;
}
