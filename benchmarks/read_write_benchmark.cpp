// Read-mostly: 8 reader threads and 1 writer thread loop acquire -> release
// on one read-write lock against a real redis-server started here, beside
// the reentrant lock with the same 9 threads all exclusive (the same key
// shape, one key). Readers take the read half, the writer the write half,
// all with the watchdog's lease (lock() as most callers use it), nothing
// held between a release and the next acquire.
//
// Reported: reads/s, writes/s, the writer's wait (acquire call -> return,
// median, p99 and the longest) and the readers'; for the exclusive
// baseline, acquisitions/s and the waits of all 9 threads and of the ninth
// (the writer's seat). Writers do not queue ahead of readers
// (read_write_lock.h): under overlapping readers a write waits for a
// moment with no reader, so its wait is the figure to watch. A wait still
// running when the measurement ends is reported apart (unfinished), not
// counted as a write.
//
// Output: one JSON object per line on stdout (benchmarks/report.py reads
// read_write.jsonl), progress on stderr.
//
//   read_write_benchmark [--duration-ms=2000] [--readers=8] [--writers=1]

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <exception>
#include <functional>
#include <iostream>
#include <latch>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "latency.h"
#include "redis_server.h"
#include "turnstile/client.h"
#include "turnstile/read_write_lock.h"
#include "turnstile/redis_backend.h"

namespace {

namespace bench = turnstile::benchmarks;
using bench::SteadyClock;
using nlohmann::json;

void emit(const json& line) { std::cout << line.dump() << std::endl; }

// What one thread did.
struct Loop {
  std::int64_t acquisitions = 0;
  std::vector<double> waits_us;
  double unfinished_wait_us = 0;  // a wait the end of the measurement cut short
};

// One contender: acquire (waiting at most until the end), note the wait,
// release; until the end.
struct Contender {
  std::function<bool(turnstile::Duration)> acquire;  // try_lock with that wait
  std::function<void()> release;
  Loop loop;
};

// Runs every contender on a thread of its own for `duration`, all started
// together. Returns the seconds measured; throws the first error a thread
// met (after joining them all).
double run(std::vector<Contender>& contenders, std::chrono::milliseconds duration) {
  std::latch ready(static_cast<std::ptrdiff_t>(contenders.size()) + 1);
  std::atomic<std::int64_t> end_ns{0};
  std::mutex error_mutex;
  std::exception_ptr error;
  std::vector<std::thread> threads;
  for (Contender& contender : contenders) {
    threads.emplace_back([&] {
      try {
        ready.arrive_and_wait();
        const SteadyClock::time_point end{std::chrono::nanoseconds(end_ns.load())};
        for (SteadyClock::time_point start = SteadyClock::now(); start < end; start = SteadyClock::now()) {
          const bool acquired = contender.acquire(end - start);
          const SteadyClock::time_point returned = SteadyClock::now();
          if (!acquired) {
            contender.loop.unfinished_wait_us = bench::micros_between(start, returned);
            break;
          }
          contender.loop.waits_us.push_back(bench::micros_between(start, returned));
          ++contender.loop.acquisitions;
          contender.release();
        }
      } catch (...) {
        std::lock_guard guard(error_mutex);
        if (!error) error = std::current_exception();
      }
    });
  }
  const SteadyClock::time_point start = SteadyClock::now();
  end_ns = std::chrono::duration_cast<std::chrono::nanoseconds>((start + duration).time_since_epoch()).count();
  ready.arrive_and_wait();
  for (std::thread& thread : threads) thread.join();
  if (error) std::rethrow_exception(error);
  return std::chrono::duration<double>(SteadyClock::now() - start).count();
}

// The totals of some contenders.
struct Totals {
  std::int64_t acquisitions = 0;
  std::vector<double> waits_us;
  double longest_unfinished_us = 0;
};

Totals totals(const std::vector<Contender>& contenders, std::size_t from, std::size_t to) {
  Totals out;
  for (std::size_t i = from; i < to; ++i) {
    const Loop& loop = contenders[i].loop;
    out.acquisitions += loop.acquisitions;
    out.waits_us.insert(out.waits_us.end(), loop.waits_us.begin(), loop.waits_us.end());
    out.longest_unfinished_us = std::max(out.longest_unfinished_us, loop.unfinished_wait_us);
  }
  return out;
}

double longest(const std::vector<double>& samples) {
  return samples.empty() ? 0 : *std::max_element(samples.begin(), samples.end());
}

void read_mostly(turnstile::Client& client, int readers, int writers, std::chrono::milliseconds duration) {
  std::vector<std::unique_ptr<turnstile::ReadWriteLock>> locks;
  std::vector<Contender> contenders;
  for (int i = 0; i < readers + writers; ++i) {
    locks.push_back(std::make_unique<turnstile::ReadWriteLock>(client.read_write_lock("bench:read-mostly")));
    turnstile::Lock& half = i < readers ? static_cast<turnstile::Lock&>(locks.back()->read())
                                        : static_cast<turnstile::Lock&>(locks.back()->write());
    contenders.push_back({.acquire = [&half](turnstile::Duration wait) { return half.try_lock({.wait = wait}); },
                          .release = [&half] { half.unlock(); }});
  }
  const double seconds = run(contenders, duration);
  const Totals read = totals(contenders, 0, static_cast<std::size_t>(readers));
  const Totals write = totals(contenders, static_cast<std::size_t>(readers), contenders.size());
  const json line = {
      {"kind", "read_mostly"},
      {"flavor", "read-write"},
      {"readers", readers},
      {"writers", writers},
      {"seconds", seconds},
      {"reads", read.acquisitions},
      {"reads_per_s", static_cast<double>(read.acquisitions) / seconds},
      {"writes", write.acquisitions},
      {"writes_per_s", static_cast<double>(write.acquisitions) / seconds},
      {"writer_wait_median_us", bench::percentile_us(write.waits_us, 0.5)},
      {"writer_wait_p99_us", bench::percentile_us(write.waits_us, 0.99)},
      {"writer_wait_max_us", longest(write.waits_us)},
      {"writer_unfinished_wait_us", write.longest_unfinished_us},
      {"reader_wait_median_us", bench::percentile_us(read.waits_us, 0.5)},
      {"reader_wait_p99_us", bench::percentile_us(read.waits_us, 0.99)},
  };
  emit(line);
  std::fprintf(stderr,
               "  read-write, %d readers + %d writer(s): %.0f reads/s, %.0f writes/s; writer wait median %.0f us, "
               "p99 %.0f us, longest %.0f us (unfinished %.0f us); reader wait median %.0f us p99 %.0f us\n",
               readers, writers, line["reads_per_s"].get<double>(), line["writes_per_s"].get<double>(),
               line["writer_wait_median_us"].get<double>(), line["writer_wait_p99_us"].get<double>(),
               line["writer_wait_max_us"].get<double>(), write.longest_unfinished_us,
               line["reader_wait_median_us"].get<double>(), line["reader_wait_p99_us"].get<double>());
}

void all_exclusive(turnstile::Client& client, int threads, std::chrono::milliseconds duration) {
  std::vector<std::unique_ptr<turnstile::ReentrantLock>> locks;
  std::vector<Contender> contenders;
  for (int i = 0; i < threads; ++i) {
    locks.push_back(std::make_unique<turnstile::ReentrantLock>(client.lock("bench:all-exclusive")));
    turnstile::ReentrantLock& lock = *locks.back();
    contenders.push_back({.acquire = [&lock](turnstile::Duration wait) { return lock.try_lock({.wait = wait}); },
                          .release = [&lock] { lock.unlock(); }});
  }
  const double seconds = run(contenders, duration);
  const Totals all = totals(contenders, 0, contenders.size());
  const Totals ninth = totals(contenders, contenders.size() - 1, contenders.size());
  const json line = {
      {"kind", "read_mostly"},
      {"flavor", "reentrant"},
      {"threads", threads},
      {"seconds", seconds},
      {"acquisitions", all.acquisitions},
      {"acquisitions_per_s", static_cast<double>(all.acquisitions) / seconds},
      {"wait_median_us", bench::percentile_us(all.waits_us, 0.5)},
      {"wait_p99_us", bench::percentile_us(all.waits_us, 0.99)},
      {"ninth_acquisitions", ninth.acquisitions},
      {"ninth_wait_median_us", bench::percentile_us(ninth.waits_us, 0.5)},
      {"ninth_wait_p99_us", bench::percentile_us(ninth.waits_us, 0.99)},
      {"unfinished_wait_us", all.longest_unfinished_us},
  };
  emit(line);
  std::fprintf(stderr,
               "  reentrant, %d threads exclusive: %.0f acquisitions/s; wait median %.0f us p99 %.0f us; the "
               "ninth thread: %lld acquisitions, wait median %.0f us p99 %.0f us\n",
               threads, line["acquisitions_per_s"].get<double>(), line["wait_median_us"].get<double>(),
               line["wait_p99_us"].get<double>(), static_cast<long long>(ninth.acquisitions),
               line["ninth_wait_median_us"].get<double>(), line["ninth_wait_p99_us"].get<double>());
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("read-mostly read-write lock beside the exclusive lock (JSON lines on stdout)");
  int duration_ms = 2000;
  int readers = 8;
  int writers = 1;
  app.add_option("--duration-ms", duration_ms, "length of each measurement")->check(CLI::Range(50, 60'000));
  app.add_option("--readers", readers, "reader threads")->check(CLI::Range(0, 64));
  app.add_option("--writers", writers, "writer threads")->check(CLI::Range(1, 64));
  CLI11_PARSE(app, argc, argv);
  try {
    turnstile::testing::RedisServer server;
    std::shared_ptr<turnstile::Backend> backend =
        turnstile::make_redis_backend(turnstile::RedisOptions::from_url(server.url()));
    turnstile::Client client(backend);
    const double ping_us = bench::ping_round_trip_us(*backend);
    emit({{"kind", "ping_round_trip"}, {"median_us", ping_us}});
    std::fprintf(stderr, "read_write_benchmark: redis-server, ping %.0f us\n", ping_us);
    const auto duration = std::chrono::milliseconds(duration_ms);
    read_mostly(client, readers, writers, duration);
    all_exclusive(client, readers + writers, duration);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "read_write_benchmark: %s\n", e.what());
    return 1;
  }
  return 0;
}
