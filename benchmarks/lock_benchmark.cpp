// Uncontended lock+unlock pairs against a real redis-server on loopback,
// compared in the same run with the ceiling of two EVALSHA round trips
// (redis-benchmark -c 1 sending EVALSHA of the acquire script, rate / 2).
// An uncontended acquire is one round trip and no subscribe, so the goal is
// at least 0.85 of that ceiling. The RedLock over 3 and 5 servers (four
// more started here) is compared with the single-node lock of the same run,
// and with its own ceiling: the same two scripts sent with raw hiredis to
// all N servers at once (pipelined across connections), each round waiting
// for every reply. On a 2-core machine the N servers share the cores, so
// that ceiling, not the single node, is what parallel requests can reach.
//
// The same uncontended reentrant lock+unlock over TLS (rediss://, to a TLS
// port of the same server, certificates made here with the openssl CLI) is
// reported beside the plaintext rate of the same run.
//
// Then the fair lock under contention: 8 threads lock/unlock one fair key
// back to back. Reported: handoffs per second, the share of acquisitions
// that went to another owner than the previous holder (goal >= 95%), and the
// gap from a holder's unlock() call to the next holder's lock() return
// (median and p99; goal: median <= 3 ping round trips, measured in the same
// run).

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <hiredis/hiredis.h>

#include "ceiling.h"
#include "hiredis_reply.h"
#include "latency.h"
#include "redis_server.h"
#include "tls_certs.h"
#include "turnstile/client.h"
#include "turnstile/multi_lock.h"
#include "turnstile/redis_backend.h"

namespace {

using turnstile::benchmarks::BestRateReporter;

constexpr int kRounds = 3;
constexpr double kMinTimeS = 1.0;
constexpr double kGoal = 0.85;

turnstile::Client* g_client = nullptr;
turnstile::Client* g_tls_client = nullptr;  // the same server over rediss://
// One Client per server (the first on g_client's server), for the RedLock.
std::vector<std::unique_ptr<turnstile::Client>>* g_redlock_clients = nullptr;
std::vector<int>* g_redlock_ports = nullptr;  // of the same servers
constexpr std::size_t kRedLockServers = 5;

// lock() with the watchdog lease (what most callers use), then unlock(),
// on `lock` for as long as `state` runs.
// (Lock and CompositeLock share no base with lock() and unlock().)
template <typename AnyLock>
void lock_unlock_pairs(benchmark::State& state, AnyLock& lock) {
  for (auto _ : state) {
    lock.lock();
    lock.unlock();
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_ReentrantLockUnlock(benchmark::State& state) {
  turnstile::ReentrantLock lock = g_client->lock("bench:reentrant");
  lock_unlock_pairs(state, lock);
}

// BM_ReentrantLockUnlock over TLS.
void BM_TlsReentrantLockUnlock(benchmark::State& state) {
  turnstile::ReentrantLock lock = g_tls_client->lock("bench:reentrant-tls");
  lock_unlock_pairs(state, lock);
}

// The same with a fixed lease: no watchdog registration.
void BM_ReentrantLockUnlockWithLease(benchmark::State& state) {
  turnstile::ReentrantLock lock = g_client->lock("bench:reentrant-lease");
  for (auto _ : state) {
    lock.lock(std::chrono::seconds(30));
    lock.unlock();
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_FencedLockUnlock(benchmark::State& state) {
  turnstile::ReentrantLock lock = g_client->fenced_lock("bench:fenced");
  lock_unlock_pairs(state, lock);
}

void BM_TokenLockUnlock(benchmark::State& state) {
  turnstile::TokenLock lock = g_client->token_lock("bench:token");
  lock_unlock_pairs(state, lock);
}

// RedLock over the first `state.range(0)` servers: one Client per server,
// node requests in parallel, so the pair rate should stay near the
// single-node lock's (BM_ReentrantLockUnlock), not 1/N of it.
void BM_RedLockUnlock(benchmark::State& state) {
  const auto nodes = static_cast<std::size_t>(state.range(0));
  std::vector<std::reference_wrapper<turnstile::Lock>> node_locks;
  std::vector<turnstile::ReentrantLock> locks;
  locks.reserve(nodes);
  for (std::size_t i = 0; i < nodes; ++i) {
    locks.push_back(g_redlock_clients->at(i)->lock("bench:redlock"));
    node_locks.emplace_back(locks.back());
  }
  turnstile::RedLock lock(node_locks);
  lock_unlock_pairs(state, lock);
}

// Sends `argv` on every context, then reads every reply: one round to all
// servers at once. Aborts the benchmark on any failure or error reply.
void round_to_all(benchmark::State& state, const std::vector<redisContext*>& contexts,
                  const std::vector<std::string>& argv) {
  std::vector<const char*> words;
  std::vector<std::size_t> lengths;
  for (const std::string& word : argv) {
    words.push_back(word.data());
    lengths.push_back(word.size());
  }
  for (redisContext* context : contexts) {
    redisAppendCommandArgv(context, static_cast<int>(words.size()), words.data(), lengths.data());
    int done = 0;
    while (done == 0) {
      if (redisBufferWrite(context, &done) != REDIS_OK) return state.SkipWithError("write failed");
    }
  }
  for (redisContext* context : contexts) {
    void* reply = nullptr;
    if (redisGetReply(context, &reply) != REDIS_OK) return state.SkipWithError("read failed");
    const bool error = static_cast<redisReply*>(reply)->type == REDIS_REPLY_ERROR;
    freeReplyObject(reply);
    if (error) return state.SkipWithError("error reply");
  }
}

// RedLock's ceiling over the first `state.range(0)` servers: the node
// lock's acquire and unlock scripts (same keys and arguments as a
// ReentrantLock sends), each sent to all servers before any reply is read.
void BM_PipelinedScriptPairs(benchmark::State& state) {
  const auto nodes = static_cast<std::size_t>(state.range(0));
  const turnstile::Script& acquire = turnstile::benchmarks::embedded_script("reentrant_lock_acquire");
  const turnstile::Script& unlock = turnstile::benchmarks::embedded_script("reentrant_lock_unlock");
  std::vector<redisContext*> contexts;
  for (std::size_t i = 0; i < nodes; ++i) {
    contexts.push_back(redisConnect("127.0.0.1", g_redlock_ports->at(i)));
    if (contexts.back() == nullptr || contexts.back()->err != 0) {
      state.SkipWithError("cannot connect");
      break;
    }
    for (const turnstile::Script* script : {&acquire, &unlock}) {
      (void)turnstile::testing::hiredis_command(contexts.back(), {"SCRIPT", "LOAD", std::string(script->source)});
    }
  }
  const std::string name = "bench:ceiling";
  const std::string owner = "ceiling-client:1";
  const turnstile::KeyLayout keys = turnstile::key_layout(turnstile::Flavor::reentrant, name);
  std::uint64_t pair = 0;
  for (auto _ : state) {
    if (contexts.size() != nodes) break;
    round_to_all(state, contexts, {"EVALSHA", std::string(acquire.sha1), "1", name, "30000", owner});
    round_to_all(
        state, contexts,
        {"EVALSHA", std::string(unlock.sha1), "3", name, keys.channel, keys.unlock_latch(std::to_string(++pair)),
         std::string(turnstile::kUnlockMessage), "30000", owner, "10000", "PUBLISH"});
  }
  for (redisContext* context : contexts) redisFree(context);
  state.SetItemsProcessed(state.iterations());
}

constexpr int kFairThreads = 8;
constexpr auto kFairRunTime = std::chrono::seconds(3);
constexpr double kHandoffGoal = 0.95;
constexpr double kGapGoalRoundTrips = 3;

using turnstile::benchmarks::micros_between;
using turnstile::benchmarks::percentile_us;
using turnstile::benchmarks::SteadyClock;

struct FairContention {
  std::int64_t acquisitions = 0;
  std::int64_t handoffs = 0;  // acquisitions by another thread than the previous holder
  double seconds = 0;
  std::vector<double> gaps_us;  // unlock() call -> next holder's lock() return, handoffs only
};

FairContention measure_fair_contention(turnstile::Client& client) {
  FairContention result;
  std::mutex mutex;  // guards result and the previous holder's record
  std::optional<std::thread::id> previous_holder;
  SteadyClock::time_point previous_unlock_call;
  const auto start = SteadyClock::now();
  const auto end = start + kFairRunTime;
  std::vector<std::thread> threads;
  for (int i = 0; i < kFairThreads; ++i) {
    threads.emplace_back([&] {
      turnstile::FairLock lock = client.fair_lock("bench:fair");
      while (SteadyClock::now() < end) {
        lock.lock();
        const auto acquired = SteadyClock::now();
        {
          std::lock_guard guard(mutex);
          ++result.acquisitions;
          if (previous_holder && *previous_holder != std::this_thread::get_id()) {
            ++result.handoffs;
            result.gaps_us.push_back(micros_between(previous_unlock_call, acquired));
          }
          previous_holder = std::this_thread::get_id();
          previous_unlock_call = SteadyClock::now();
        }
        lock.unlock();
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  result.seconds = std::chrono::duration<double>(SteadyClock::now() - start).count();
  return result;
}

BENCHMARK(BM_ReentrantLockUnlock)->UseRealTime()->MinTime(kMinTimeS);
BENCHMARK(BM_TlsReentrantLockUnlock)->UseRealTime()->MinTime(kMinTimeS);
BENCHMARK(BM_RedLockUnlock)->Arg(3)->Arg(5)->UseRealTime()->MinTime(kMinTimeS);
BENCHMARK(BM_PipelinedScriptPairs)->Arg(3)->Arg(5)->UseRealTime()->MinTime(kMinTimeS);
BENCHMARK(BM_ReentrantLockUnlockWithLease)->UseRealTime()->MinTime(kMinTimeS);
BENCHMARK(BM_FencedLockUnlock)->UseRealTime()->MinTime(kMinTimeS);
BENCHMARK(BM_TokenLockUnlock)->UseRealTime()->MinTime(kMinTimeS);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;

  const turnstile::testing::TlsCertificates certificates;
  const int tls_port = turnstile::testing::free_loopback_port();
  turnstile::testing::RedisServer server(certificates.server_args(tls_port, false));
  std::shared_ptr<turnstile::Backend> backend =
      turnstile::make_redis_backend(turnstile::RedisOptions::from_url(server.url()));
  turnstile::Client client(backend);
  g_client = &client;
  turnstile::Client tls_client(turnstile::make_redis_backend(turnstile::RedisOptions::from_url(
      "rediss://127.0.0.1:" + std::to_string(tls_port) + "?tls_ca_file=" + certificates.ca_file())));
  g_tls_client = &tls_client;
  std::vector<std::unique_ptr<turnstile::testing::RedisServer>> redlock_servers;
  std::vector<std::unique_ptr<turnstile::Client>> redlock_clients;
  std::vector<int> redlock_ports = {server.port()};
  const std::shared_ptr<turnstile::Runtime> runtime = turnstile::make_real_runtime();
  redlock_clients.push_back(std::make_unique<turnstile::Client>(backend, runtime));
  while (redlock_clients.size() < kRedLockServers) {
    redlock_servers.push_back(std::make_unique<turnstile::testing::RedisServer>());
    redlock_ports.push_back(redlock_servers.back()->port());
    redlock_clients.push_back(std::make_unique<turnstile::Client>(
        turnstile::make_redis_backend(turnstile::RedisOptions::from_url(redlock_servers.back()->url())), runtime));
  }
  g_redlock_clients = &redlock_clients;
  g_redlock_ports = &redlock_ports;
  BestRateReporter reporter;
  const double evalsha_rate =
      turnstile::benchmarks::run_rounds_beside_evalsha_ceiling(*backend, server.port(), reporter, kRounds);
  benchmark::Shutdown();
  g_client = nullptr;
  g_tls_client = nullptr;
  g_redlock_clients = nullptr;
  g_redlock_ports = nullptr;

  const double ping_us = turnstile::benchmarks::ping_round_trip_us(*backend);
  const FairContention fair = measure_fair_contention(client);

  const double ceiling = evalsha_rate / 2;
  std::printf("\nceiling: redis-benchmark -c 1 EVALSHA %.0f requests/s -> %.0f lock+unlock pairs/s\n", evalsha_rate,
              ceiling);
  for (const char* name :
       {"BM_ReentrantLockUnlock", "BM_ReentrantLockUnlockWithLease", "BM_FencedLockUnlock", "BM_TokenLockUnlock"}) {
    const double ours = reporter.best(name);
    std::printf("%-34s %8.0f pairs/s  ratio %.2f (goal >= %.2f)\n", name, ours, ours / ceiling, kGoal);
  }
  const double single = reporter.best("BM_ReentrantLockUnlock");
  const double tls = reporter.best("BM_TlsReentrantLockUnlock");
  std::printf("%-34s %8.0f pairs/s  ratio to plaintext (%.0f pairs/s) %.2f\n", "BM_TlsReentrantLockUnlock", tls, single,
              single > 0 ? tls / single : 0);
  for (const int nodes : {3, 5}) {
    const std::string name = "BM_RedLockUnlock/" + std::to_string(nodes);
    const double ours = reporter.best(name);
    const double pipelined = reporter.best("BM_PipelinedScriptPairs/" + std::to_string(nodes));
    std::printf("%-34s %8.0f pairs/s  ratio to one node %.2f, to the %d-server pipelined ceiling (%.0f pairs/s) %.2f\n",
                name.c_str(), ours, ours / single, nodes, pipelined, ours / pipelined);
  }
  const double handoff_share = fair.acquisitions > 0 ? static_cast<double>(fair.handoffs) / fair.acquisitions : 0;
  const double gap_median_us = percentile_us(fair.gaps_us, 0.5);
  std::printf("\nfair lock, %d threads on one key, %.1f s: %lld acquisitions, %.0f handoffs/s\n", kFairThreads,
              fair.seconds, static_cast<long long>(fair.acquisitions), fair.handoffs / fair.seconds);
  std::printf("  real handoffs %.1f%% (goal >= %.0f%%)\n", 100 * handoff_share, 100 * kHandoffGoal);
  std::printf(
      "  unlock -> next acquire gap: median %.0f us, p99 %.0f us; ping round trip %.0f us -> median = %.2f "
      "round trips (goal <= %.0f)\n",
      gap_median_us, percentile_us(fair.gaps_us, 0.99), ping_us, gap_median_us / ping_us, kGapGoalRoundTrips);
  return 0;
}
