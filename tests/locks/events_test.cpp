// The logging hook (turnstile/events.h) in virtual time: one story of
// acquire, wait, wake, renew and lose told event by event at exact virtual
// instants, the same on every run; the level filter; a sink that calls the
// client back (never under an internal lock); the hold and waiter gauges
// and the hold-time histogram of the same story.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "lock_environment.h"
#include "turnstile/client.h"
#include "turnstile/events.h"
#include "turnstile/metrics.h"

namespace turnstile::testing {
namespace {

using std::chrono::milliseconds;

// Every event a client is told, as "<ms since the story began> <level>
// <describe()>" lines.
class EventRecorder {
 public:
  explicit EventRecorder(const Instant& origin) : origin_(origin) {}

  EventSink sink() {
    return [this](const LockEvent& event) {
      const auto ms = std::chrono::duration_cast<milliseconds>(event.at - origin_).count();
      std::lock_guard guard(mutex_);
      lines_.push_back(std::to_string(ms) + " " + std::string(event_level_name(event.level)) + " " + describe(event));
    };
  }
  std::vector<std::string> lines() {
    std::lock_guard guard(mutex_);
    return lines_;
  }

 private:
  const Instant& origin_;
  std::mutex mutex_;
  std::vector<std::string> lines_;
};

class EventsTest : public LockTest {};

// Alice holds "story" for 1 s (virtual); Bob waits, is woken by her
// release, holds it, renews it, and loses it when an operator deletes the
// key. Leases of 900 ms: renewals every (900 - 9 - 2) / 3 = 296.33 ms.
TEST_P(EventsTest, AStoryOfAcquireWaitWakeRenewAndLoseIsToldInOrderAtVirtualInstants) {
  TURNSTILE_SIM_ONLY();
  Instant origin{};
  EventRecorder alice_events(origin);
  EventRecorder bob_events(origin);
  Client& alice = env().add_client(
      {.lease = milliseconds(900), .event_sink = alice_events.sink(), .event_level = EventLevel::info});
  Client& bob =
      env().add_client({.lease = milliseconds(900), .event_sink = bob_events.sink(), .event_level = EventLevel::debug});
  origin = alice.runtime().now();
  std::atomic<bool> held{false};
  std::atomic<bool> lost{false};
  MetricsSnapshot while_waiting;
  env().spawn(alice, [&] {
    ReentrantLock lock = alice.lock("story");
    lock.lock();
    held = true;
    alice.runtime().sleep_for(milliseconds(1'000));
    while_waiting = bob.metrics();
    lock.unlock();
  });
  env().spawn(bob, [&] {
    EXPECT_TRUE(eventually(bob, [&] { return held.load(); }));
    ReentrantLock lock = bob.lock("story");
    lock.set_lost_handler([&](const LockLost&) { lost = true; });
    lock.lock();
    EXPECT_EQ(bob.metrics().holds_of(Flavor::reentrant), 1);
    bob.runtime().sleep_for(milliseconds(700));  // two renewals
    inspect({"DEL", "story"});                   // the next renewal finds it gone
    EXPECT_TRUE(eventually(bob, [&] { return lost.load(); }));
  });
  env().run();

  EXPECT_EQ(alice_events.lines(), (std::vector<std::string>{
                                      "0 info acquired 'story' (reentrant) after 0.000 s",
                                  }))
      << "info: no renewals";
  // Bob's first try fails at 0 (so does the one after subscribing), and
  // he sleeps for the 900 ms the holder's lease has left; at 900 the lease
  // was renewed at 888 (three periods), so 888 ms are left; Alice's
  // release at 1000 wakes him. His renewals come a period apart, and the
  // first after the DEL at 1700 finds the key gone.
  EXPECT_EQ(bob_events.lines(), (std::vector<std::string>{
                                    "0 info waiting for 'story' (reentrant, attempt 1): held elsewhere, "
                                    "holder's lease 0.900 s left",
                                    "900 info waiting for 'story' (reentrant, attempt 2): held elsewhere, "
                                    "holder's lease 0.888 s left",
                                    "1000 debug woken by a release of 'story' (reentrant)",
                                    "1000 info acquired 'story' (reentrant) after 1.000 s",
                                    "1296 debug renewed 'story' for 0.900 s",
                                    "1592 debug renewed 'story' for 0.900 s",
                                    "1888 error lost 'story': gone",
                                }));

  EXPECT_EQ(while_waiting.waiters_of(Flavor::reentrant), 1);
  const MetricsSnapshot after = bob.metrics();
  EXPECT_EQ(after.waiters_of(Flavor::reentrant), 0);
  EXPECT_EQ(after.holds_of(Flavor::reentrant), 0) << "lost: held no more";
  EXPECT_EQ(after.hold_time.count, 1u);
  EXPECT_EQ(alice.metrics().hold_time.count, 1u);
  EXPECT_EQ(alice.metrics().holds_of(Flavor::reentrant), 0);
}

// The sink may call the client back (it is never called under a lock of
// the client's): here it reads the metrics and the lock's state at every
// event, a loss included.
TEST_P(EventsTest, TheSinkMayCallTheClientBack) {
  TURNSTILE_SIM_ONLY();
  Client* client = nullptr;
  std::atomic<int> calls{0};
  Client& alice = env().add_client({.lease = milliseconds(900),
                                    .event_sink =
                                        [&](const LockEvent&) {
                                          (void)client->metrics();
                                          (void)client->lock("back").is_locked();
                                          ++calls;
                                        },
                                    .event_level = EventLevel::debug});
  client = &alice;
  std::atomic<bool> lost{false};
  env().spawn(alice, [&] {
    ReentrantLock lock = alice.lock("back");
    lock.set_lost_handler([&](const LockLost&) { lost = true; });
    lock.lock();
    alice.runtime().sleep_for(milliseconds(400));
    inspect({"DEL", "back"});
    EXPECT_TRUE(eventually(alice, [&] { return lost.load(); }));
  });
  env().run();
  EXPECT_GE(calls.load(), 3) << "acquired, renewed, lost";
}

INSTANTIATE_TEST_SUITE_P(Environments, EventsTest, ::testing::ValuesIn(lock_environments()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace turnstile::testing
