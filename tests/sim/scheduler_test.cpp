#include "sim/scheduler.h"

#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace turnstile::sim {
namespace {

using namespace std::chrono_literals;

Instant at(Duration offset) { return Instant{} + offset; }

class SchedulerTest : public ::testing::Test {
 protected:
  VirtualClock clock_;
  Scheduler scheduler_{clock_};
  std::vector<std::string> log_;

  void record(const std::string& what) {
    log_.push_back(
        std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(clock_.now().time_since_epoch()).count()) +
        " " + what);
  }
};

TEST_F(SchedulerTest, AnHourOfSleepsTakesNoRealWaitingAndEndsAtTheRightInstant) {
  const ClientId client = scheduler_.add_client();
  scheduler_.spawn(client, [&] {
    for (int i = 0; i < 3600; ++i) scheduler_.sleep_until(scheduler_.now() + 1s);
    record("done");
  });
  const auto result = scheduler_.run_until_idle();
  EXPECT_TRUE(result.idle);
  EXPECT_EQ(result.stuck_tasks, 0u);
  EXPECT_EQ(clock_.now(), at(1h));
  EXPECT_EQ(log_, (std::vector<std::string>{"3600000 done"}));
}

TEST_F(SchedulerTest, TasksInterleaveByVirtualTimeThenSpawnOrder) {
  const ClientId a = scheduler_.add_client();
  const ClientId b = scheduler_.add_client();
  scheduler_.spawn(a, [&] {
    record("a0");
    scheduler_.sleep_until(at(20ms));
    record("a20");
  });
  scheduler_.spawn(b, [&] {
    record("b0");
    scheduler_.sleep_until(at(10ms));
    record("b10");
    scheduler_.sleep_until(at(20ms));
    record("b20");
  });
  scheduler_.run_until_idle();
  EXPECT_EQ(log_, (std::vector<std::string>{"0 a0", "0 b0", "10 b10", "20 a20", "20 b20"}));
}

TEST_F(SchedulerTest, RunUntilStopsAtTheLimitAndAdvancesTheClockToIt) {
  const ClientId client = scheduler_.add_client();
  scheduler_.spawn(client, [&] {
    scheduler_.sleep_until(at(50ms));
    record("woke");
  });
  auto result = scheduler_.run_until(at(30ms));
  EXPECT_FALSE(result.idle);
  EXPECT_EQ(clock_.now(), at(30ms));
  EXPECT_TRUE(log_.empty());
  result = scheduler_.run_until(at(100ms));
  EXPECT_TRUE(result.idle);
  EXPECT_EQ(clock_.now(), at(100ms));
  EXPECT_EQ(log_, (std::vector<std::string>{"50 woke"}));
}

TEST_F(SchedulerTest, SpawnFromInsideATaskRunsAfterTheSpawnerYields) {
  const ClientId client = scheduler_.add_client();
  scheduler_.spawn(client, [&] {
    scheduler_.spawn(client, [&] { record("child"); });
    record("parent before yield");
    scheduler_.sleep_until(scheduler_.now());  // a zero wait yields
    record("parent after yield");
  });
  scheduler_.run_until_idle();
  EXPECT_EQ(log_, (std::vector<std::string>{"0 parent before yield", "0 child", "0 parent after yield"}));
}

TEST_F(SchedulerTest, EventNotifyBeforeWaitIsNotLost) {
  const ClientId client = scheduler_.add_client();
  auto event = scheduler_.make_event();
  event->notify();
  bool got = false;
  scheduler_.spawn(client, [&] { got = event->wait_until(at(1s)); });
  scheduler_.run_until_idle();
  EXPECT_TRUE(got);
  EXPECT_EQ(clock_.now(), at(0ms));
}

TEST_F(SchedulerTest, EventWaitTimesOutAtItsDeadlineOrWakesOnNotify) {
  const ClientId client = scheduler_.add_client();
  auto event = scheduler_.make_event();
  scheduler_.spawn(client, [&] {
    record(event->wait_until(at(100ms)) ? "signaled" : "timed out");
    record(event->wait_until(at(1s)) ? "signaled" : "timed out");
    record(event->wait_until(at(0ms)) ? "signaled" : "timed out");  // past: checks once
  });
  scheduler_.schedule_at(
      client, at(300ms), [&] { event->notify(); }, Scheduler::RunAs::inline_action);
  scheduler_.run_until_idle();
  EXPECT_EQ(log_, (std::vector<std::string>{"100 timed out", "300 signaled", "300 timed out"}));
}

TEST_F(SchedulerTest, TimersRunInDeadlineOrderAsTasksAndCanBeCancelled) {
  const ClientId client = scheduler_.add_client();
  scheduler_.schedule_at(
      client, at(30ms), [&] { record("t30"); }, Scheduler::RunAs::task);
  const auto cancelled = scheduler_.schedule_at(
      client, at(20ms), [&] { record("t20"); }, Scheduler::RunAs::task);
  scheduler_.schedule_at(
      client, at(10ms),
      [&] {
        record("t10");
        scheduler_.sleep_until(at(40ms));  // timer callbacks may block
        record("t10 after sleep");
      },
      Scheduler::RunAs::task);
  scheduler_.schedule_at(
      client, at(-5ms), [&] { record("past"); }, Scheduler::RunAs::task);
  EXPECT_TRUE(scheduler_.cancel(cancelled));
  EXPECT_FALSE(scheduler_.cancel(cancelled));
  scheduler_.run_until_idle();
  EXPECT_EQ(log_, (std::vector<std::string>{"0 past", "10 t10", "30 t30", "40 t10 after sleep"}));
}

TEST_F(SchedulerTest, KilledClientNeverRunsAgainAndItsStacksUnwind) {
  const ClientId victim = scheduler_.add_client();
  const ClientId survivor = scheduler_.add_client();
  int destructors = 0;
  struct CountOnDestroy {
    int& count;
    ~CountOnDestroy() { ++count; }
  };
  for (int i = 0; i < 3; ++i) {
    scheduler_.spawn(victim, [&] {
      CountOnDestroy guard{destructors};
      scheduler_.sleep_until(at(10ms));
      record("victim woke");
    });
  }
  scheduler_.schedule_at(
      victim, at(20ms), [&] { record("victim timer"); }, Scheduler::RunAs::task);
  scheduler_.spawn(survivor, [&] {
    scheduler_.sleep_until(at(15ms));
    record("survivor");
  });
  scheduler_.run_until(at(5ms));
  EXPECT_EQ(scheduler_.live_tasks(), 4u);
  scheduler_.kill_client(victim);
  EXPECT_EQ(destructors, 3);
  EXPECT_EQ(scheduler_.live_tasks(), 1u);
  EXPECT_TRUE(scheduler_.client_killed(victim));
  EXPECT_EQ(scheduler_.spawn(victim, [&] { record("never"); }), 0u);
  scheduler_.run_until_idle();
  EXPECT_EQ(log_, (std::vector<std::string>{"15 survivor"}));
}

TEST_F(SchedulerTest, KillFromInsideATaskUnwindsTheVictimAtOnceAndItselfIfSelf) {
  const ClientId victim = scheduler_.add_client();
  const ClientId killer = scheduler_.add_client();
  scheduler_.spawn(victim, [&] {
    try {
      scheduler_.sleep_until(at(1h));
    } catch (...) {
      record("victim unwinding");
      throw;
    }
    record("victim woke");
  });
  scheduler_.spawn(killer, [&] {
    scheduler_.sleep_until(at(10ms));
    scheduler_.kill_client(victim);
    record("killer continues");
    scheduler_.kill_client(killer);  // throws TaskKilled here
    record("never");
  });
  scheduler_.run_until_idle();
  EXPECT_EQ(log_, (std::vector<std::string>{"10 killer continues", "10 victim unwinding"}));
  EXPECT_EQ(scheduler_.live_tasks(), 0u);
}

TEST_F(SchedulerTest, BlockingCallsOfAnUnwindingTaskReturnAtOnce) {
  const ClientId client = scheduler_.add_client();
  struct SleepsInDestructor {
    Scheduler& scheduler;
    bool& returned;
    ~SleepsInDestructor() {
      scheduler.sleep_until(scheduler.now() + 1h);  // returns at once while unwinding
      returned = true;
    }
  };
  bool returned = false;
  scheduler_.spawn(client, [&] {
    SleepsInDestructor guard{scheduler_, returned};
    scheduler_.sleep_until(at(1s));
  });
  scheduler_.run_until(at(1ms));
  scheduler_.kill_client(client);
  EXPECT_TRUE(returned);
  EXPECT_EQ(clock_.now(), at(1ms));
}

TEST_F(SchedulerTest, SwallowedTaskKilledIsThrownAgainAtTheNextBlockingCall) {
  const ClientId client = scheduler_.add_client();
  scheduler_.spawn(client, [&] {
    try {
      scheduler_.sleep_until(at(1s));
    } catch (...) {  // a careless catch-all
    }
    record("ran on after swallowing");
    scheduler_.sleep_until(at(2s));
    record("never");
  });
  scheduler_.run_until(at(1ms));
  scheduler_.kill_client(client);
  EXPECT_EQ(log_, (std::vector<std::string>{"1 ran on after swallowing"}));
  EXPECT_EQ(scheduler_.live_tasks(), 0u);
}

TEST_F(SchedulerTest, PauseFreezesTasksAndTimersThenResumeRunsWhatCameDueInOrder) {
  const ClientId client = scheduler_.add_client();
  const ClientId other = scheduler_.add_client();
  scheduler_.spawn(client, [&] {
    scheduler_.sleep_until(at(10ms));
    record("sleeper");
  });
  scheduler_.schedule_at(
      client, at(20ms), [&] { record("timer"); }, Scheduler::RunAs::task);
  scheduler_.spawn(other, [&] {
    scheduler_.sleep_until(at(15ms));
    record("other");
  });
  scheduler_.run_until(at(5ms));
  scheduler_.pause_client(client);
  EXPECT_TRUE(scheduler_.client_paused(client));
  scheduler_.run_until(at(100ms));
  EXPECT_EQ(log_, (std::vector<std::string>{"15 other"}));
  scheduler_.resume_client(client);
  scheduler_.run_until_idle();
  EXPECT_EQ(log_, (std::vector<std::string>{"15 other", "100 sleeper", "100 timer"}));
}

TEST_F(SchedulerTest, TimerDeferredByPauseCanStillBeCancelled) {
  const ClientId client = scheduler_.add_client();
  const auto timer = scheduler_.schedule_at(
      client, at(10ms), [&] { record("timer"); }, Scheduler::RunAs::task);
  scheduler_.pause_client(client);
  scheduler_.run_until(at(50ms));
  EXPECT_TRUE(scheduler_.cancel(timer));
  scheduler_.resume_client(client);
  scheduler_.run_until_idle();
  EXPECT_TRUE(log_.empty());
}

TEST_F(SchedulerTest, ExceptionEscapingATaskIsRethrownFromRun) {
  const ClientId client = scheduler_.add_client();
  scheduler_.spawn(client, [] { throw std::runtime_error("boom"); });
  EXPECT_THROW(scheduler_.run_until_idle(), std::runtime_error);
  EXPECT_EQ(scheduler_.live_tasks(), 0u);
}

TEST_F(SchedulerTest, BlockingOutsideATaskIsAnError) {
  EXPECT_THROW(scheduler_.sleep_until(at(1s)), SimulationError);
  auto event = scheduler_.make_event();
  EXPECT_THROW((void)event->wait_until(at(1s)), SimulationError);
}

TEST(SchedulerBoundsTest, EndlessZeroWaitLoopIsStoppedByTheEventBudget) {
  VirtualClock clock;
  Scheduler::Options options;
  options.event_budget = 1000;
  options.seed = 77;
  Scheduler scheduler(clock, options);
  const ClientId client = scheduler.add_client();
  scheduler.spawn(client, [&] {
    while (true) scheduler.sleep_until(scheduler.now());
  });
  try {
    (void)scheduler.run_until_idle();
    ADD_FAILURE() << "no budget error";
  } catch (const SimulationBudgetError& error) {
    EXPECT_EQ(error.details().budget, SimulationBudgetError::Budget::events);
    EXPECT_EQ(error.details().events, 1000u);
    EXPECT_EQ(error.details().seed, 77u);
    EXPECT_NE(std::string(error.what()).find("replay with seed 77"), std::string::npos) << error.what();
  }
}  // the destructor unwinds the looping task

// A run that never idles stops at the virtual-time budget, before the
// first event past it, whatever limit it was given.
TEST(SchedulerBoundsTest, EndlessTimerLoopIsStoppedByTheVirtualTimeBudget) {
  VirtualClock clock;
  Scheduler::Options options;
  options.virtual_time_budget = std::chrono::hours(1);
  Scheduler scheduler(clock, options);
  const ClientId client = scheduler.add_client();
  scheduler.spawn(client, [&] {
    while (true) scheduler.sleep_until(scheduler.now() + std::chrono::seconds(10));
  });
  for (const bool until_idle : {true, false}) {
    try {
      (void)(until_idle ? scheduler.run_until_idle() : scheduler.run_until(Instant{} + std::chrono::hours(2)));
      ADD_FAILURE() << "no budget error";
    } catch (const SimulationBudgetError& error) {
      EXPECT_EQ(error.details().budget, SimulationBudgetError::Budget::virtual_time);
      EXPECT_EQ(error.details().virtual_ms, 3'600'000);  // the last event within it ran
      EXPECT_EQ(scheduler.now(), Instant{} + std::chrono::hours(1));
    }
  }
  // Up to the budget, a run is what it always was.
  EXPECT_NO_THROW((void)scheduler.run_until(Instant{} + std::chrono::hours(1)));
}

TEST_F(SchedulerTest, UnnotifiedWaitWithoutDeadlineIsReportedStuck) {
  const ClientId client = scheduler_.add_client();
  auto event = scheduler_.make_event();
  scheduler_.spawn(client, [&] { (void)event->wait_until(kNoDeadline); });
  const auto result = scheduler_.run_until_idle();
  EXPECT_TRUE(result.idle);
  EXPECT_EQ(result.stuck_tasks, 1u);
  scheduler_.kill_client(client);  // unwind the waiter while its Event lives
}

TEST_F(SchedulerTest, ExceptionStateIsPerTask) {
  // Two tasks yield inside catch blocks and leave them in the other order.
  const ClientId client = scheduler_.add_client();
  scheduler_.spawn(client, [&] {
    try {
      throw std::runtime_error("first");
    } catch (const std::runtime_error& error) {
      scheduler_.sleep_until(at(20ms));
      record(error.what());
    }
  });
  scheduler_.spawn(client, [&] {
    try {
      throw std::logic_error("second");
    } catch (const std::logic_error& error) {
      scheduler_.sleep_until(at(10ms));
      record(error.what());
      EXPECT_EQ(std::uncaught_exceptions(), 0);
    }
  });
  scheduler_.run_until_idle();
  EXPECT_EQ(log_, (std::vector<std::string>{"10 second", "20 first"}));
  EXPECT_EQ(std::uncaught_exceptions(), 0);
}

TEST_F(SchedulerTest, ThousandsOfTasksAreCheap) {
  constexpr int kTasks = 5000;
  const ClientId client = scheduler_.add_client();
  int finished = 0;
  for (int i = 0; i < kTasks; ++i) {
    scheduler_.spawn(client, [&, i] {
      scheduler_.sleep_until(at(std::chrono::milliseconds(kTasks - i)));
      ++finished;
    });
  }
  EXPECT_EQ(scheduler_.live_tasks(), static_cast<std::size_t>(kTasks));
  const auto result = scheduler_.run_until_idle();
  EXPECT_EQ(finished, kTasks);
  EXPECT_EQ(result.events, 2u * kTasks);
  EXPECT_EQ(clock_.now(), at(std::chrono::milliseconds(kTasks)));
}

std::uint64_t run_workload() {
  VirtualClock clock;
  Scheduler scheduler(clock);
  std::vector<ClientId> clients;
  for (int i = 0; i < 4; ++i) clients.push_back(scheduler.add_client());
  auto event = scheduler.make_event();
  for (int i = 0; i < 4; ++i) {
    scheduler.spawn(clients[i], [&, i] {
      for (int round = 0; round < 50; ++round) {
        scheduler.sleep_until(scheduler.now() + std::chrono::milliseconds(1 + (round * 7 + i * 3) % 5));
        if (round % 3 == i % 3) event->notify();
      }
    });
  }
  scheduler.spawn(clients[0], [&] {
    while (event->wait_until(scheduler.now() + 10ms)) {
    }
  });
  scheduler.run_until_idle();
  return scheduler.schedule_hash();
}

TEST(SchedulerDeterminismTest, SameInputsGiveTheSameSchedule) { EXPECT_EQ(run_workload(), run_workload()); }

}  // namespace
}  // namespace turnstile::sim
