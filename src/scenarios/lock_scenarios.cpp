// Scenarios about lock semantics without faults: seckill,
// one-order-per-user, contention, fair-fifo, semaphore-pool.

#include <string>

#include "sim/fake_backend.h"
#include "scenarios/scenario_kit.h"
#include "scenarios/scenario_list.h"
#include "turnstile/errors.h"

namespace turnstile::sim::scenarios {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr std::int64_t kSeckillStock = 10;
constexpr auto kSeckillArrivalWindow = milliseconds(100);
constexpr auto kSeckillProcessing = milliseconds(5);
constexpr std::size_t kRequestsPerUser = 4;
constexpr auto kOrderProcessing = milliseconds(50);
constexpr auto kContentionHold = seconds(1);
constexpr auto kContentionMaxThink = milliseconds(100);
constexpr auto kDrainPerClient = seconds(2);
constexpr auto kDrainSlack = seconds(90);

std::int64_t integer_value(Backend& backend, const std::string& key) {
  const Reply reply = backend.command({"GET", key});
  return reply.is_nil() ? 0 : std::stoll(reply.as_string());
}

}  // namespace

// After the scenario's end: let every client finish, then check liveness.
void drain_and_check(ScenarioWorld& sw, Instant end, Duration hold) {
  // The slack is about three fallback sleeps of a waiter whose wake-up was
  // lost (to the holder's ttl: a lease); the lock-delay lengthens each.
  const Instant drained =
      end + kDrainSlack + 3 * sw.options().lock_delay + (kDrainPerClient + hold) * static_cast<int>(sw.size());
  sw.run_until(drained, drained);
  if (!sw.world.stopped()) sw.checkers.check_liveness();
}

constexpr char kNotALock[] = "admits --permits holders at once; this scenario needs a lock";

ScenarioResult seckill(const ScenarioOptions& options, std::size_t clients, Duration duration) {
  refuse_flavors(options, {Flavor::semaphore, Flavor::counting_semaphore}, kNotALock);
  ScenarioWorld sw(options, clients + 1);
  const std::string lock_name = "lock:seckill";
  sw.watch(lock_name);
  Member& shop = sw.member(clients);
  std::int64_t sold = 0;
  sw.world.spawn(*shop.sim, [&] { shop.sim->backend().command({"SET", "stock", std::to_string(kSeckillStock)}); });
  sw.world.run_until_idle();
  for (std::size_t i = 0; i < clients; ++i) {
    Member& buyer = sw.member(i);
    sw.world.spawn(*buyer.sim, [&sw, &buyer, &sold, lock_name] {
      Runtime& runtime = buyer.sim->runtime();
      runtime.sleep_for(milliseconds(runtime.random_u64() % kSeckillArrivalWindow.count()));
      auto lock = make_lock(sw, buyer, lock_name, false);
      sw.waiting(buyer, lock_name);
      LockHold hold = lock->try_acquire_hold({.wait = kWaitForever, .lease = {}, .stop = {}});
      sw.acquired(buyer, lock_name);
      Backend& backend = buyer.sim->backend();
      const std::int64_t left = integer_value(backend, "stock");
      if (left > 0) {
        runtime.sleep_for(kSeckillProcessing);  // payment, writing the order
        backend.command({"SET", "stock", std::to_string(left - 1)});
        ++sold;
      }
      sw.releasing(buyer, lock_name);
      hold.release_or_throw();
      sw.released(buyer, lock_name);
    });
  }
  const Instant end = at_offset(duration);
  sw.run_until(end, end);
  if (!sw.world.stopped()) sw.checkers.check_liveness();
  ScenarioResult result;
  sw.finish(result);
  result.clients = clients;
  result.facts = {
      {"stock", kSeckillStock}, {"sold", sold}, {"oversold", std::max<std::int64_t>(0, sold - kSeckillStock)}};
  result.summary = std::to_string(sold) + " of " + std::to_string(kSeckillStock) + " sold to " +
                   std::to_string(clients) + " buyers under the " + result.flavor + " lock";
  return result;
}

ScenarioResult one_order_per_user(const ScenarioOptions& options, std::size_t clients, Duration duration) {
  refuse_flavors(options, {Flavor::semaphore, Flavor::counting_semaphore}, kNotALock);
  ScenarioWorld sw(options, clients);
  const std::size_t users = std::max<std::size_t>(1, clients / kRequestsPerUser);
  for (std::size_t user = 0; user < users; ++user) sw.watch("lock:order:user:" + std::to_string(user));
  std::int64_t orders = 0, rejected = 0, duplicates = 0;
  for (std::size_t i = 0; i < clients; ++i) {
    Member& request = sw.member(i);
    const std::size_t user = i % users;
    sw.world.spawn(*request.sim, [&, user] {
      Runtime& runtime = request.sim->runtime();
      runtime.sleep_for(milliseconds(runtime.random_u64() % kSeckillArrivalWindow.count()));
      const std::string lock_name = "lock:order:user:" + std::to_string(user);
      auto lock = make_lock(sw, request, lock_name, false);
      LockHold hold = lock->try_acquire_hold(
          {.wait = Duration::zero(), .lease = {}, .stop = {}});  // fail fast: "your order is being placed"
      if (!hold) {
        ++rejected;
        return;
      }
      sw.acquired(request, lock_name);
      Backend& backend = request.sim->backend();
      const std::string order_key = "orders:user:" + std::to_string(user);
      if (integer_value(backend, order_key) == 0) {
        runtime.sleep_for(kOrderProcessing);
        if (backend.command({"INCR", order_key}).as_integer() > 1) ++duplicates;
        ++orders;
      }
      sw.releasing(request, lock_name);
      hold.release_or_throw();
      sw.released(request, lock_name);
    });
  }
  const Instant end = at_offset(duration);
  sw.run_until(end, end);
  ScenarioResult result;
  sw.finish(result);
  result.facts = {{"users", static_cast<std::int64_t>(users)},
                  {"orders", orders},
                  {"rejected_requests", rejected},
                  {"duplicate_orders", duplicates}};
  result.summary = std::to_string(orders) + " orders for " + std::to_string(users) + " users, " +
                   std::to_string(rejected) + " concurrent requests rejected fast, " + std::to_string(duplicates) +
                   " duplicates";
  return result;
}

namespace {

struct LoopCounts {
  std::int64_t failures = 0;
  std::int64_t max_holders = 0;  // clients believing they hold at once
};

// Every client loops lock / kContentionHold / unlock / think until `end`,
// then the run drains and liveness is checked.
LoopCounts run_loop(ScenarioWorld& sw, const std::string& lock_name, Instant end) {
  LoopCounts counts;
  std::int64_t holders = 0;
  for (std::size_t i = 0; i < sw.size(); ++i) {
    Member& member = sw.member(i);
    sw.world.spawn(*member.sim, [&sw, &member, &counts, &holders, lock_name, end] {
      Runtime& runtime = member.sim->runtime();
      // Arrivals a millisecond apart, in client order, so queues form in a known order.
      runtime.sleep_for(milliseconds(static_cast<std::int64_t>(member.sim->id())));
      auto lock = make_lock(sw, member, lock_name, false);
      RoundOptions round;
      round.while_held = [&runtime, &counts, &holders](const LockHold&) {
        counts.max_holders = std::max(counts.max_holders, ++holders);
        runtime.sleep_for(kContentionHold);
        --holders;
      };
      while (runtime.now() < end) {
        const Round done = hold_round(sw, member, *lock, lock_name, round);
        counts.failures += static_cast<std::int64_t>(done.failed_calls + (done.lost_before_unlock ? 1 : 0));
        runtime.sleep_for(milliseconds(runtime.random_u64() % kContentionMaxThink.count()));
      }
    });
  }
  sw.run_until(end, end);
  drain_and_check(sw, end);
  return counts;
}

ScenarioResult loop_result(ScenarioWorld& sw, const LoopCounts& counts, std::size_t clients, Duration duration) {
  ScenarioResult result;
  sw.finish(result);
  result.facts = {{"hold_ms", std::chrono::duration_cast<milliseconds>(kContentionHold).count()},
                  {"failed_calls", counts.failures},
                  {"max_concurrent_holders", counts.max_holders}};
  if (is_semaphore(sw.options().flavor)) result.facts.emplace_back("permits", sw.options().permits);
  if (is_composite(sw.options().flavor)) {
    result.facts.emplace_back("nodes", static_cast<std::int64_t>(sw.options().nodes));
  }
  result.summary = std::to_string(result.acquisitions) + " acquisitions by " + std::to_string(clients) +
                   " clients in " + std::to_string(duration / milliseconds(1)) + " virtual ms, at most " +
                   std::to_string(counts.max_holders) + " holding at once";
  return result;
}

}  // namespace

ScenarioResult contention(const ScenarioOptions& options, std::size_t clients, Duration duration) {
  ScenarioWorld sw(options, clients);
  const std::string lock_name = "lock:contended";
  sw.watch(lock_name);
  const LoopCounts counts = run_loop(sw, lock_name, at_offset(duration));
  return loop_result(sw, counts, clients, duration);
}

ScenarioResult fair_fifo(const ScenarioOptions& options, std::size_t clients, Duration duration) {
  if (!queues_waiters(options.flavor)) {
    throw InvalidArgumentError("fair-fifo: --flavor " + std::string(flavor_name(options.flavor)) +
                               " is not a fair lock; use --flavor fair");
  }
  ScenarioWorld sw(options, clients);
  const std::string lock_name = "lock:fair";
  sw.watch(lock_name, /*fifo=*/true);
  const LoopCounts counts = run_loop(sw, lock_name, at_offset(duration));
  ScenarioResult result = loop_result(sw, counts, clients, duration);
  result.summary += "; " + std::to_string(result.fifo_violations) + " waiters served out of arrival order";
  return result;
}

ScenarioResult semaphore_pool(const ScenarioOptions& options, std::size_t clients, Duration duration) {
  if (!is_semaphore(options.flavor)) {
    throw InvalidArgumentError("semaphore-pool: --flavor " + std::string(flavor_name(options.flavor)) +
                               " is not a semaphore; use --flavor semaphore or counting-semaphore");
  }
  ScenarioWorld sw(options, clients);
  const std::string pool_name = "pool:connections";
  sw.watch(pool_name);
  const LoopCounts counts = run_loop(sw, pool_name, at_offset(duration));
  ScenarioResult result = loop_result(sw, counts, clients, duration);
  result.summary += " (" + std::to_string(options.permits) + " permits)";
  return result;
}

}  // namespace turnstile::sim::scenarios
