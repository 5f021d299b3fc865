// The fair lock in simulation, as a property: 16 clients with random
// arrivals, holds, give-ups and crashes over an hour of virtual time, on a
// fixed list of seeds. Checked throughout: mutual exclusion among live
// holders, FIFO among live waiters (nobody acquires while a live waiter that
// arrived earlier still waits), and at the end that every live waiter
// acquired (nobody left waiting).

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "turnstile/client.h"
#include "turnstile/fair_lock.h"
#include "turnstile/sim/world.h"

namespace turnstile::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::seconds;

constexpr int kClients = 16;
constexpr auto kRunTime = minutes(60);
constexpr auto kArrivalsEnd = minutes(55);  // then the queue drains
constexpr auto kMaxArrivalGap = milliseconds(4'000);
constexpr auto kMaxHold = milliseconds(400);
constexpr auto kMaxGiveUpWait = milliseconds(3'000);
constexpr auto kMeanCrashGap = seconds(90);
constexpr int kMaxViolationsReported = 5;

class FairLockScenario {
 public:
  explicit FairLockScenario(std::uint64_t seed) : world_(seed, sim::WorldOptions{.pubsub_delay = milliseconds(1)}) {}

  ~FairLockScenario() {
    // Unwind every task while the clients they use still exist.
    for (Slot& slot : slots_) world_.crash(*slot.sim);
  }

  void run() {
    arrivals_end_ = world_.now() + kArrivalsEnd;
    for (int i = 0; i < kClients; ++i) start_client(i);
    schedule_crash();
    world_.run_for(kRunTime);
  }

  std::vector<std::string> violations;
  std::int64_t acquisitions = 0;
  std::int64_t give_ups = 0;
  std::int64_t crashes = 0;
  std::map<std::int64_t, std::optional<Instant>> waiting;  // ticket -> give-up deadline
  int loops_running = 0;

 private:
  struct Slot {
    sim::SimClient* sim = nullptr;
    std::unique_ptr<Client> client;
    std::optional<std::int64_t> ticket;  // while waiting
  };

  std::uint64_t random_below(std::uint64_t bound) { return world_.random_u64() % bound; }
  Duration random_duration(Duration max) {
    return milliseconds(random_below(std::chrono::duration_cast<milliseconds>(max).count() + 1));
  }

  void violation(std::string text) {
    if (violations.size() < kMaxViolationsReported) {
      violations.push_back(std::to_string(world_.now_ms()) + " ms: " + std::move(text));
    }
  }

  void start_client(int index) {
    if (static_cast<std::size_t>(index) >= slots_.size()) slots_.resize(index + 1);
    Slot& slot = slots_[index];
    if (slot.client) graveyard_.push_back(std::move(slot.client));
    slot.sim = &world_.add_client("client-" + std::to_string(index) + "-" + std::to_string(next_name_++));
    slot.client = std::make_unique<Client>(
        slot.sim->backend_ptr(), slot.sim->runtime_ptr(),
        ClientOptions{.lease = milliseconds(3'000), .key_prefix = "", .on_background_error = nullptr});
    slot.ticket.reset();
    ++loops_running;
    world_.spawn(*slot.sim, [this, index] { client_loop(index); });
  }

  void client_loop(int index) {
    Slot& slot = slots_[index];
    Client& client = *slot.client;
    Runtime& runtime = client.runtime();
    FairLock lock = client.fair_lock("property", {.waiter_timeout = seconds(2)});
    while (true) {
      runtime.sleep_for(random_duration(kMaxArrivalGap));
      if (runtime.now() >= arrivals_end_) break;
      const std::uint64_t kind = random_below(10);
      const std::int64_t ticket = next_ticket_++;
      bool acquired = false;
      if (kind < 7) {
        slot.ticket = ticket;
        waiting[ticket] = std::nullopt;
        lock.lock();
        acquired = true;
      } else if (kind < 9) {
        const Duration wait = random_duration(kMaxGiveUpWait);
        slot.ticket = ticket;
        waiting[ticket] = runtime.now() + wait;
        acquired = lock.try_lock({.wait = wait, .lease = std::nullopt});
        if (!acquired) ++give_ups;
      } else {
        acquired = lock.try_lock();
      }
      waiting.erase(ticket);
      slot.ticket.reset();
      if (!acquired) continue;
      on_acquired(index, ticket);
      runtime.sleep_for(random_duration(kMaxHold));
      inside_.reset();
      lock.unlock();
    }
    --loops_running;
  }

  void on_acquired(int index, std::int64_t ticket) {
    ++acquisitions;
    if (inside_)
      violation("client " + std::to_string(index) + " acquired while " + std::to_string(*inside_) + " holds");
    inside_ = index;
    for (const auto& [earlier, deadline] : waiting) {
      if (earlier >= ticket) break;
      if (!deadline || *deadline > world_.now()) {
        violation("ticket " + std::to_string(ticket) + " acquired before live waiter ticket " +
                  std::to_string(earlier));
      }
    }
  }

  void schedule_crash() {
    const auto gap = milliseconds(random_below(2 * std::chrono::duration_cast<milliseconds>(kMeanCrashGap).count()));
    world_.after(gap, [this] {
      if (world_.now() >= arrivals_end_) return;
      const int index = static_cast<int>(random_below(kClients));
      Slot& slot = slots_[index];
      if (slot.ticket) waiting.erase(*slot.ticket);
      if (inside_ == index) inside_.reset();
      world_.crash(*slot.sim);  // unwinds its tasks now
      --loops_running;
      ++crashes;
      start_client(index);
      schedule_crash();
    });
  }

  sim::World world_;
  std::vector<Slot> slots_;
  std::vector<std::unique_ptr<Client>> graveyard_;  // clients of crashed slots
  std::optional<int> inside_;
  Instant arrivals_end_{};
  std::int64_t next_ticket_ = 0;
  int next_name_ = 0;
};

class FairLockPropertyTest : public ::testing::TestWithParam<std::uint64_t> {};

TEST_P(FairLockPropertyTest, ExclusionFifoAndLivenessOverAnHour) {
  const std::uint64_t seed = GetParam();
  FairLockScenario scenario(seed);
  scenario.run();
  SCOPED_TRACE("seed " + std::to_string(seed));
  EXPECT_TRUE(scenario.violations.empty()) << ::testing::PrintToString(scenario.violations);
  EXPECT_TRUE(scenario.waiting.empty()) << scenario.waiting.size() << " live waiters never acquired";
  EXPECT_EQ(scenario.loops_running, 0);
  // The run exercised what it claims to.
  EXPECT_GT(scenario.acquisitions, 5'000);
  EXPECT_GT(scenario.give_ups, 50);
  EXPECT_GT(scenario.crashes, 10);
}

INSTANTIATE_TEST_SUITE_P(Seeds, FairLockPropertyTest, ::testing::Values(1, 42, 20261121),
                         [](const auto& info) { return "seed_" + std::to_string(info.param); });

}  // namespace
}  // namespace turnstile::testing
