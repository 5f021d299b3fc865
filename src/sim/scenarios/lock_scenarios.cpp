// Scenarios about lock semantics without faults: seckill,
// one-order-per-user, contention, fair-fifo, semaphore-pool.

#include <string>

#include "sim/fake_backend.h"
#include "sim/scenarios/scenario_kit.h"
#include "sim/scenarios/scenario_list.h"
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
void drain_and_check(ScenarioWorld& sw, Instant end) {
  const Instant drained = end + kDrainSlack + kDrainPerClient * static_cast<int>(sw.size());
  sw.run_until(drained, drained);
  if (!sw.world.stopped()) sw.checkers.check_liveness();
}

ScenarioResult seckill(const ScenarioOptions& options, std::size_t clients, Duration duration) {
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
      auto lock = make_lock(sw.options().lock, *buyer.client, lock_name, false);
      sw.waiting(buyer, lock_name);
      lock->lock();
      sw.acquired(buyer, lock_name);
      Backend& backend = buyer.sim->backend();
      const std::int64_t left = integer_value(backend, "stock");
      if (left > 0) {
        runtime.sleep_for(kSeckillProcessing);  // payment, writing the order
        backend.command({"SET", "stock", std::to_string(left - 1)});
        ++sold;
      }
      lock->unlock();
      sw.released(buyer, lock_name);
    });
  }
  const Instant end = at_offset(duration);
  sw.run_until(end, end);
  if (!sw.world.stopped()) sw.checkers.check_liveness();
  ScenarioResult result;
  sw.finish(result);
  result.clients = clients;
  result.facts = {{"stock", kSeckillStock}, {"sold", sold}, {"oversold", std::max<std::int64_t>(0, sold - kSeckillStock)}};
  result.summary = std::to_string(sold) + " of " + std::to_string(kSeckillStock) + " sold to " +
                   std::to_string(clients) + " buyers under the " + result.lock + " lock";
  return result;
}

ScenarioResult one_order_per_user(const ScenarioOptions& options, std::size_t clients, Duration duration) {
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
      auto lock = make_lock(sw.options().lock, *request.client, lock_name, false);
      if (!lock->try_lock(Duration::zero())) {  // fail fast: "your order is being placed"
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
      lock->unlock();
      sw.released(request, lock_name);
    });
  }
  const Instant end = at_offset(duration);
  sw.run_until(end, end);
  ScenarioResult result;
  sw.finish(result);
  result.facts = {{"users", static_cast<std::int64_t>(users)}, {"orders", orders},
                  {"rejected_requests", rejected}, {"duplicate_orders", duplicates}};
  result.summary = std::to_string(orders) + " orders for " + std::to_string(users) + " users, " +
                   std::to_string(rejected) + " concurrent requests rejected fast, " + std::to_string(duplicates) +
                   " duplicates";
  return result;
}

ScenarioResult contention(const ScenarioOptions& options, std::size_t clients, Duration duration) {
  ScenarioWorld sw(options, clients);
  const std::string lock_name = "lock:contended";
  sw.watch(lock_name);
  const Instant end = at_offset(duration);
  std::int64_t failures = 0;
  for (std::size_t i = 0; i < clients; ++i) {
    Member& member = sw.member(i);
    sw.world.spawn(*member.sim, [&, end] {
      Runtime& runtime = member.sim->runtime();
      auto lock = make_lock(sw.options().lock, *member.client, lock_name, false);
      RoundOptions round;
      round.while_held = [&runtime] { runtime.sleep_for(kContentionHold); };
      while (runtime.now() < end) {
        const Round done = hold_round(sw, member, *lock, lock_name, round);
        failures += static_cast<std::int64_t>(done.failed_calls + (done.lost_before_unlock ? 1 : 0));
        runtime.sleep_for(milliseconds(runtime.random_u64() % kContentionMaxThink.count()));
      }
    });
  }
  sw.run_until(end, end);
  drain_and_check(sw, end);
  ScenarioResult result;
  sw.finish(result);
  result.facts = {{"hold_ms", std::chrono::duration_cast<milliseconds>(kContentionHold).count()}, {"failed_calls", failures}};
  result.summary = std::to_string(result.acquisitions) + " acquisitions by " + std::to_string(clients) +
                   " clients in " + std::to_string(duration / milliseconds(1)) + " virtual ms";
  return result;
}

ScenarioResult fair_fifo(const ScenarioOptions& options, std::size_t, Duration) {
  require_flavor(LockFlavor::fair);
  throw InvalidArgumentError("fair-fifo: " + std::string(flavor_name(options.lock)) + " is not a fair lock");
}

ScenarioResult semaphore_pool(const ScenarioOptions&, std::size_t, Duration) {
  require_flavor(LockFlavor::semaphore);
  throw InvalidArgumentError("semaphore-pool: not available");
}

}  // namespace turnstile::sim::scenarios
