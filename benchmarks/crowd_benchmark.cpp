// A crowd of waiting acquisitions in one process (issue #49), against a
// real redis-server on loopback:
//
//   * wide: 100,000 Asio coroutines on one io_context thread waiting on 100
//     reentrant locks held by another client;
//   * fair: 10,000 waiting on one fair lock;
//   * held: 20,000 locks held at once by one client (watchdog leases).
//
// Each crowd is then served to the last coroutine. Reported per crowd: the
// process's OS threads (peak while it waited and was served: the engine is
// a few fixed threads whatever the crowd), memory per waiting acquisition
// (or per held lock), on both sides (issue #52): the client's heap in use
// (glibc's mallinfo2, everything the process allocated for it, Asio's
// coroutine frame included), its resident memory (/proc/self/statm, after
// malloc_trim gave back what earlier crowds freed, so the growth is this
// crowd's) and the server's (INFO memory used_memory: keys, queues,
// client buffers, pub/sub channels), each the growth from before the crowd
// to the moment every acquisition waits (or is held), divided by the
// acquisitions; how long it took for every acquisition to be waiting and to
// be served, and the handoffs per second. The machine may be loaded:
// compare ratios of one run.
//
//   crowd_benchmark [--waiters N] [--names N] [--fair-waiters N] [--held N]
// Output: one line per crowd, and a JSON line each ("crowd": ...).

// <utility> first: Boost 1.74's awaitable.hpp uses std::exchange without
// including it.
#include <utility>
// clang-format off
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
// clang-format on

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <malloc.h>
#include <unistd.h>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "redis_server.h"
#include "turnstile/asio.h"
#include "turnstile/client.h"
#include "turnstile/redis_backend.h"

namespace {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

// A hang guard for each phase, not a measurement.
constexpr auto kPatience = std::chrono::minutes(10);

// A field of /proc/self/status ("Threads", "VmRSS" in kB).
std::int64_t status_field(const std::string& field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(field + ":", 0) == 0) return std::stoll(line.substr(field.size() + 1));
  }
  std::fprintf(stderr, "no %s in /proc/self/status\n", field.c_str());
  std::exit(2);
}
std::int64_t os_threads() { return status_field("Threads"); }
// Heap bytes in use now (small blocks and mmapped ones).
std::int64_t heap_bytes() {
  const struct mallinfo2 info = mallinfo2();
  return static_cast<std::int64_t>(info.uordblks + info.hblkhd);
}

// Resident bytes now (/proc/self/statm's second field, in pages).
std::int64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  std::int64_t size_pages = 0;
  std::int64_t resident_pages = 0;
  statm >> size_pages >> resident_pages;
  return resident_pages * sysconf(_SC_PAGESIZE);
}

// The server's used_memory (INFO memory), in bytes.
std::int64_t server_bytes(turnstile::Backend& backend) {
  const turnstile::Reply info = backend.command({"INFO", "memory"});
  constexpr std::string_view kField = "used_memory:";
  const std::size_t at = info.is_bulk() ? info.as_string().find(kField) : std::string::npos;
  if (at == std::string::npos) {
    std::fprintf(stderr, "crowd_benchmark: no used_memory in INFO memory\n");
    std::exit(2);
  }
  return std::atoll(info.as_string().c_str() + at + kField.size());
}

// Memory on both sides, at one moment (see the file comment).
struct MemoryReading {
  std::int64_t heap = 0;
  std::int64_t resident = 0;
  std::int64_t server = 0;
};

// Before a crowd: what earlier ones freed given back to the system first.
MemoryReading memory_before(turnstile::Backend& backend) {
  malloc_trim(0);
  return {.heap = heap_bytes(), .resident = resident_bytes(), .server = server_bytes(backend)};
}
MemoryReading memory_now(turnstile::Backend& backend) {
  return {.heap = heap_bytes(), .resident = resident_bytes(), .server = server_bytes(backend)};
}

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// Polls `condition` every 20 ms while sampling the thread count into `peak`;
// exits the program if it does not hold within kPatience.
void await(const char* what, const std::function<bool()>& condition, std::int64_t& peak) {
  const auto give_up = Clock::now() + kPatience;
  while (!condition()) {
    peak = std::max(peak, os_threads());
    if (Clock::now() > give_up) {
      std::fprintf(stderr, "crowd_benchmark: %s did not happen in %lld s\n", what,
                   static_cast<long long>(std::chrono::duration_cast<std::chrono::seconds>(kPatience).count()));
      std::exit(1);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  peak = std::max(peak, os_threads());
}

struct CrowdResult {
  std::string crowd;
  int acquisitions = 0;
  int names = 0;
  int served = 0;
  int failures = 0;
  std::int64_t threads_before = 0;
  std::int64_t threads_peak = 0;
  double bytes_per_acquisition = 0;  // the client's heap
  double resident_bytes_per_acquisition = 0;
  double redis_bytes_per_acquisition = 0;
  double seconds_to_wait = 0;
  double seconds_to_serve = 0;
};

// The growth from `before` to now, per acquisition, into `result`.
void record_memory(CrowdResult& result, const MemoryReading& before, turnstile::Backend& backend) {
  const MemoryReading now = memory_now(backend);
  const auto per = [&](std::int64_t grown) { return static_cast<double>(grown) / result.acquisitions; };
  result.bytes_per_acquisition = per(now.heap - before.heap);
  result.resident_bytes_per_acquisition = per(now.resident - before.resident);
  result.redis_bytes_per_acquisition = per(now.server - before.server);
}

void report(const CrowdResult& result) {
  std::printf(
      "%-5s %7d acquisitions on %5d names: %d served, %d failed; OS threads %lld before, %lld at peak; "
      "per acquisition %.0f B heap, %.0f B resident, %.0f B in Redis; ",
      result.crowd.c_str(), result.acquisitions, result.names, result.served, result.failures,
      static_cast<long long>(result.threads_before), static_cast<long long>(result.threads_peak),
      result.bytes_per_acquisition, result.resident_bytes_per_acquisition, result.redis_bytes_per_acquisition);
  if (result.seconds_to_serve > 0) {
    std::printf("all waiting after %.1f s, all served %.1f s later (%.0f handoffs/s)\n", result.seconds_to_wait,
                result.seconds_to_serve, result.served / result.seconds_to_serve);
  } else {
    std::printf("all held after %.1f s\n", result.seconds_to_wait);
  }
  std::printf(
      "{\"crowd\": \"%s\", \"acquisitions\": %d, \"names\": %d, \"served\": %d, \"failures\": %d, "
      "\"threads_before\": %lld, \"threads_peak\": %lld, \"bytes_per_acquisition\": %.0f, "
      "\"resident_bytes_per_acquisition\": %.0f, \"redis_bytes_per_acquisition\": %.0f, \"seconds_to_wait\": %.3f, "
      "\"seconds_to_serve\": %.3f}\n",
      result.crowd.c_str(), result.acquisitions, result.names, result.served, result.failures,
      static_cast<long long>(result.threads_before), static_cast<long long>(result.threads_peak),
      result.bytes_per_acquisition, result.resident_bytes_per_acquisition, result.redis_bytes_per_acquisition,
      result.seconds_to_wait, result.seconds_to_serve);
  std::fflush(stdout);
}

// `waiters` coroutines on one io_context thread acquire the `names` holdables
// (round robin) while `holds` are held elsewhere; once every one waits, the
// holds go and each coroutine takes its lock and gives it back.
CrowdResult serve_crowd(const std::string& crowd, turnstile::Backend& backend, turnstile::Client& client,
                        std::vector<turnstile::Holdable*> names, std::vector<turnstile::LockHold> holds, int waiters,
                        turnstile::Flavor flavor) {
  CrowdResult result{.crowd = crowd, .acquisitions = waiters, .names = static_cast<int>(names.size())};
  result.threads_before = os_threads();
  result.threads_peak = result.threads_before;
  const MemoryReading before = memory_before(backend);
  asio::io_context io;
  std::atomic<int> served{0};
  std::atomic<int> failures{0};
  const auto started = Clock::now();
  for (int i = 0; i < waiters; ++i) {
    asio::co_spawn(
        io,
        [&, i]() -> asio::awaitable<void> {
          boost::system::error_code code;
          turnstile::LockHold hold = co_await turnstile::asio::async_acquire(
              *names[static_cast<std::size_t>(i) % names.size()], {}, asio::redirect_error(asio::use_awaitable, code));
          if (code || !hold.owns_hold()) {
            failures.fetch_add(1);
            co_return;
          }
          served.fetch_add(1);
          co_await turnstile::asio::async_release(std::move(hold), asio::use_awaitable);
        },
        asio::detached);
  }
  std::thread io_thread([&] { io.run(); });
  await(
      "every acquisition waiting", [&] { return client.metrics().waiters_of(flavor) + failures.load() >= waiters; },
      result.threads_peak);
  result.seconds_to_wait = seconds_since(started);
  record_memory(result, before, backend);
  const auto serving = Clock::now();
  holds.clear();
  await(
      "every acquisition served", [&] { return served.load() + failures.load() >= waiters; }, result.threads_peak);
  result.seconds_to_serve = seconds_since(serving);
  io_thread.join();
  result.served = served.load();
  result.failures = failures.load();
  return result;
}

int flag(int argc, char** argv, const std::string& name, int fallback) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (argv[i] == name) return std::atoi(argv[i + 1]);
  }
  return fallback;
}

}  // namespace

int main(int argc, char** argv) {
  const int waiters = flag(argc, argv, "--waiters", 100'000);
  const int name_count = flag(argc, argv, "--names", 100);
  const int fair_waiters = flag(argc, argv, "--fair-waiters", 10'000);
  const int held_count = flag(argc, argv, "--held", 20'000);

  turnstile::testing::RedisServer server;
  std::shared_ptr<turnstile::Backend> backend =
      turnstile::make_redis_backend(turnstile::RedisOptions::from_url(server.url()));
  // One Runtime and one backend for both clients, as one service would.
  const std::shared_ptr<turnstile::Runtime> runtime = turnstile::make_real_runtime();
  turnstile::Client holder(backend, runtime);
  turnstile::Client client(backend, runtime);
  bool all_served = true;

  {
    std::vector<turnstile::ReentrantLock> locks;
    std::vector<turnstile::LockHold> holds;
    std::vector<turnstile::Holdable*> names;
    locks.reserve(static_cast<std::size_t>(name_count));
    for (int i = 0; i < name_count; ++i) {
      const std::string name = "bench:crowd:" + std::to_string(i);
      holds.push_back(holder.lock(name).acquire_hold());
      locks.push_back(client.lock(name));
      names.push_back(&locks.back());
    }
    const CrowdResult wide =
        serve_crowd("wide", *backend, client, names, std::move(holds), waiters, turnstile::Flavor::reentrant);
    report(wide);
    all_served = all_served && wide.served == waiters;
  }
  {
    turnstile::FairLock fair = client.fair_lock("bench:crowd:fair");
    std::vector<turnstile::LockHold> holds;
    holds.push_back(holder.fair_lock("bench:crowd:fair").acquire_hold());
    const CrowdResult queue =
        serve_crowd("fair", *backend, client, {&fair}, std::move(holds), fair_waiters, turnstile::Flavor::fair);
    report(queue);
    all_served = all_served && queue.served == fair_waiters;
  }
  {
    // Held: the locks taken one after another, then kept (the watchdog
    // renews them) while memory is read.
    CrowdResult held{.crowd = "held", .acquisitions = held_count, .names = held_count};
    held.threads_before = os_threads();
    held.threads_peak = held.threads_before;
    const MemoryReading before = memory_before(*backend);
    std::vector<turnstile::LockHold> holds;
    holds.reserve(static_cast<std::size_t>(held_count));
    const auto started = Clock::now();
    for (int i = 0; i < held_count; ++i) {
      holds.push_back(client.lock("bench:crowd:held:" + std::to_string(i)).try_acquire_hold({}));
      if (holds.back().owns_hold())
        ++held.served;
      else
        ++held.failures;
    }
    held.seconds_to_wait = seconds_since(started);
    held.threads_peak = std::max(held.threads_peak, os_threads());
    record_memory(held, before, *backend);
    report(held);
    all_served = all_served && held.served == held_count;
  }
  return all_served ? 0 : 1;
}
