#include "sim/sim_runtime.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

namespace turnstile::sim {
namespace {

using namespace std::chrono_literals;

class SimRuntimeTest : public ::testing::Test {
 protected:
  VirtualClock clock_;
  Scheduler scheduler_{clock_};
  ClientId client_ = scheduler_.add_client();
  SimRuntime runtime_{scheduler_, client_, /*seed=*/42, /*stream=*/client_};
};

TEST_F(SimRuntimeTest, ClocksFollowTheVirtualClock) {
  EXPECT_EQ(runtime_.now(), Instant{});
  EXPECT_EQ(runtime_.wall_clock_ms(), VirtualClock::kDefaultEpochMs);
  clock_.advance_by(1500ms);
  EXPECT_EQ(runtime_.now(), Instant{} + 1500ms);
  EXPECT_EQ(runtime_.wall_clock_ms(), VirtualClock::kDefaultEpochMs + 1500);
}

TEST_F(SimRuntimeTest, WallClockOffsetAndDrift) {
  runtime_.set_wall_clock_offset(-250ms);
  runtime_.set_clock_drift_ppm(1000);  // 1 ms per second
  clock_.advance_by(10s);
  EXPECT_EQ(runtime_.wall_clock_ms(), VirtualClock::kDefaultEpochMs + 10'000 - 250 + 10);
}

TEST_F(SimRuntimeTest, SleepTimersAndSpawnRunOnTheScheduler) {
  std::vector<std::string> log;
  const auto stamp = [&](const std::string& what) {
    log.push_back(std::to_string((runtime_.now() - Instant{}) / 1ms) + " " + what);
  };
  runtime_.spawn([&] {
    const std::uint64_t me = runtime_.current_task_id();
    EXPECT_NE(me, 0u);
    runtime_.schedule_after(30ms, [&] { stamp("timer"); });
    const auto cancelled = runtime_.schedule_after(20ms, [&] { stamp("cancelled"); });
    EXPECT_TRUE(runtime_.cancel(cancelled));
    runtime_.spawn([&, me] {
      EXPECT_NE(runtime_.current_task_id(), me);
      stamp("child");
    });
    runtime_.sleep_for(-5s);  // negative = zero: yields, no time passes
    stamp("after zero sleep");
    runtime_.sleep_for(1h);
    EXPECT_EQ(runtime_.current_task_id(), me);
    stamp("after an hour");
  });
  scheduler_.run_until_idle();
  EXPECT_EQ(log, (std::vector<std::string>{"0 child", "0 after zero sleep", "30 timer", "3600000 after an hour"}));
}

TEST_F(SimRuntimeTest, EventsWaitInVirtualTime) {
  auto event = runtime_.make_event();
  bool first = true;
  bool second = false;
  runtime_.spawn([&] {
    first = event->wait_until(runtime_.deadline_after(5s));
    second = event->wait_until(runtime_.deadline_after(5s));
  });
  runtime_.schedule_after(7s, [&] { event->notify(); });
  scheduler_.run_until_idle();
  EXPECT_FALSE(first);  // timed out at 5 s
  EXPECT_TRUE(second);  // notified at 7 s
  EXPECT_EQ(clock_.now(), Instant{} + 7s);
}

TEST(SimRuntimeRandomTest, StreamsAreDeterministicAndDistinct) {
  VirtualClock clock;
  Scheduler scheduler(clock);
  SimRuntime a1(scheduler, 1, 7, 1);
  SimRuntime a2(scheduler, 1, 7, 1);
  SimRuntime b(scheduler, 2, 7, 2);
  SimRuntime other_seed(scheduler, 1, 8, 1);
  std::set<std::uint64_t> seen;
  for (int i = 0; i < 100; ++i) {
    const std::uint64_t value = a1.random_u64();
    EXPECT_EQ(value, a2.random_u64());
    seen.insert(value);
    seen.insert(b.random_u64());
    seen.insert(other_seed.random_u64());
  }
  EXPECT_EQ(seen.size(), 300u);
}

}  // namespace
}  // namespace turnstile::sim
