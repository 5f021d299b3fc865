// 300 concurrent waiters on one lock of a real redis-server (issue #32's
// row; issue #33 saw `TimeoutError: all 16 pooled connections stayed busy`
// escape a fair waiter near 1,000 of them). Library waiters, one thread
// each, spread over a few Clients in this one process (kClients: several
// processes' worth of connection pools and wake-up hubs on one key; a
// `turnstile run` process per waiter would be 300 processes plus their
// guardians on 2 cores, a test of the machine's scheduler rather than of
// the lock). A gate holder keeps the lock until every waiter is waiting
// (each had a failed try; the fair ones are all queued), so the 300 drain
// as a herd. Every waiter acquires exactly once within its bounded wait,
// none sees an error (a busy pool is transient: it must be waited out
// within the caller's deadline, never thrown at a waiter), and no two
// critical sections overlap (judged on steady-clock instants taken inside
// them, and by a counter of holders inside). Prints what it measured.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <latch>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "faults/fault_harness.h"
#include "redis_server.h"
#include "turnstile/client.h"
#include "turnstile/fair_lock.h"
#include "turnstile/lock.h"
#include "turnstile/redis_backend.h"

namespace turnstile::testing {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

constexpr int kWaiters = 300;
constexpr int kClients = 4;
// Each waiter's own bound (far beyond the whole drain on a loaded 2-core
// machine): reaching it is a failure, never a hang.
constexpr milliseconds kWaitBound{60'000};

struct Section {
  Clock::time_point start;
  Clock::time_point stop;
};

// EVALSHA and EVAL calls the server ran (INFO commandstats).
long long script_calls(RedisServer& server) {
  const std::string stats = server.command({"INFO", "commandstats"});
  long long calls = 0;
  for (const std::string command : {"cmdstat_evalsha:calls=", "cmdstat_eval:calls="}) {
    const std::size_t at = stats.find(command);
    if (at != std::string::npos) calls += std::stoll(stats.substr(at + command.size()));
  }
  return calls;
}

std::unique_ptr<Lock> make_lock(Client& client, Flavor flavor) {
  if (flavor == Flavor::fair) return std::make_unique<FairLock>(client.fair_lock("crowd"));
  return std::make_unique<ReentrantLock>(client.lock("crowd"));
}

class ManyWaitersTest : public ::testing::TestWithParam<Flavor> {};

TEST_P(ManyWaitersTest, ThreeHundredWaitersEachAcquireOnceWithoutOverlapOrError) {
  const Flavor flavor = GetParam();
  RedisServer server;
  std::vector<std::unique_ptr<Client>> clients;
  for (int i = 0; i < kClients; ++i) {
    clients.push_back(std::make_unique<Client>(make_redis_backend(RedisOptions::from_url(server.url()))));
  }

  std::mutex mutex;  // guards sections, errors
  std::vector<Section> sections;
  std::vector<std::string> errors;
  int timed_out = 0;
  std::atomic<int> inside{0};
  std::atomic<int> most_inside{0};
  std::latch start_together(kWaiters);

  // The gate: held until all of them wait.
  Client gate_client(make_redis_backend(RedisOptions::from_url(server.url())));
  std::unique_ptr<Lock> gate = make_lock(gate_client, flavor);
  ASSERT_TRUE(gate->try_lock());

  auto waiter = [&](int index) {
    Client& client = *clients[static_cast<std::size_t>(index % kClients)];
    std::unique_ptr<Lock> lock = make_lock(client, flavor);
    start_together.arrive_and_wait();
    try {
      if (!lock->try_lock({.wait = kWaitBound})) {
        const std::lock_guard guard(mutex);
        ++timed_out;
        return;
      }
      Section section{.start = Clock::now(), .stop = {}};
      const int now_inside = inside.fetch_add(1) + 1;
      int most = most_inside.load();
      while (now_inside > most && !most_inside.compare_exchange_weak(most, now_inside)) {
      }
      inside.fetch_sub(1);
      section.stop = Clock::now();
      lock->unlock();
      const std::lock_guard guard(mutex);
      sections.push_back(section);
    } catch (const std::exception& error) {
      const std::lock_guard guard(mutex);
      errors.push_back(error.what());
    }
  };

  const Clock::time_point began = Clock::now();
  std::vector<std::thread> threads;
  threads.reserve(kWaiters);
  for (int i = 0; i < kWaiters; ++i) threads.emplace_back(waiter, i);
  const bool all_waiting = eventually(
      [&] {
        if (flavor == Flavor::fair)
          return server.command({"LLEN", "redisson_lock_queue:{crowd}"}) == "(integer) " + std::to_string(kWaiters);
        // Each waiter's first try is a script call (the gate's came before).
        return script_calls(server) > kWaiters;
      },
      kConditionTimeout);
  const auto gathered = std::chrono::duration_cast<milliseconds>(Clock::now() - began);
  const Clock::time_point opened = Clock::now();
  gate->unlock();
  for (std::thread& thread : threads) thread.join();
  const auto elapsed = std::chrono::duration_cast<milliseconds>(Clock::now() - opened);

  std::sort(sections.begin(), sections.end(), [](const Section& a, const Section& b) { return a.start < b.start; });
  int overlaps = 0;
  for (std::size_t i = 1; i < sections.size(); ++i) {
    if (sections[i].start < sections[i - 1].stop) ++overlaps;
  }
  const std::string line = "fault-harness: " + std::to_string(kWaiters) + " " + std::string(flavor_name(flavor)) +
                           " waiters on " + std::to_string(kClients) + " clients: " + std::to_string(sections.size()) +
                           " acquired, " + std::to_string(timed_out) + " timed out, " + std::to_string(errors.size()) +
                           " errors" + (errors.empty() ? std::string() : " (first: " + errors.front() + ")") +
                           "; most inside at once " + std::to_string(most_inside.load()) + ", overlaps " +
                           std::to_string(overlaps) + "; all waiting after " + std::to_string(gathered.count()) +
                           " ms, drained " + std::to_string(elapsed.count()) + " ms after the gate opened";
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
  RecordProperty("measured", line);

  EXPECT_TRUE(all_waiting) << "not every waiter waited before the gate opened";
  EXPECT_TRUE(errors.empty()) << errors.front();
  EXPECT_EQ(timed_out, 0);
  EXPECT_EQ(sections.size(), static_cast<std::size_t>(kWaiters));
  EXPECT_EQ(most_inside.load(), 1);
  EXPECT_EQ(overlaps, 0);
}

INSTANTIATE_TEST_SUITE_P(Flavors, ManyWaitersTest, ::testing::Values(Flavor::reentrant, Flavor::fair),
                         [](const auto& info) { return std::string(flavor_name(info.param)); });

}  // namespace
}  // namespace turnstile::testing
