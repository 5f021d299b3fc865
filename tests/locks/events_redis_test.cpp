// The logging hook (turnstile/events.h) and the operators' gauges against a
// real redis-server, with real threads: a fair lock's waiters are told
// their place in the queue, counted as waiters and then as holders, and
// their holds timed; a connection killed under a holder (CLIENT KILL) is
// told as `reconnected` with server_restarted false, and the hold stays.
// (tests/locks/events_test.cpp tells the same events in virtual time.)

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "redis_server.h"
#include "turnstile/client.h"
#include "turnstile/events.h"
#include "turnstile/fair_lock.h"
#include "turnstile/lock.h"
#include "turnstile/metrics.h"
#include "turnstile/redis_backend.h"

namespace turnstile {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::RedisServer;

// Bounds every wait of these tests on a loaded machine; reaching it fails.
constexpr auto kPatience = seconds(30);

bool eventually(const std::function<bool()>& condition) {
  const auto deadline = std::chrono::steady_clock::now() + kPatience;
  while (!condition()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(milliseconds(5));
  }
  return true;
}

// The events a client is told, copied (their views end with the call).
class EventRecorder {
 public:
  struct Told {
    EventKind kind;
    std::string name;
    std::optional<std::int64_t> queue_position;
    std::optional<Duration> holder_lease_left;
    std::string address;
    bool server_restarted = false;
    std::string text;
  };

  EventSink sink() {
    return [this](const LockEvent& event) {
      std::lock_guard guard(mutex_);
      told_.push_back(Told{.kind = event.kind,
                           .name = std::string(event.name),
                           .queue_position = event.queue_position,
                           .holder_lease_left = event.holder_lease_left,
                           .address = std::string(event.address),
                           .server_restarted = event.server_restarted,
                           .text = describe(event)});
    };
  }
  std::vector<Told> of(EventKind kind) {
    std::lock_guard guard(mutex_);
    std::vector<Told> found;
    for (const Told& told : told_) {
      if (told.kind == kind) found.push_back(told);
    }
    return found;
  }

 private:
  std::mutex mutex_;
  std::vector<Told> told_;
};

class EventsRedisTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = std::make_unique<RedisServer>(); }
  static void TearDownTestSuite() { server_.reset(); }

  // Watchdog leases of 3 s: renewed every second.
  static std::unique_ptr<Client> client(EventRecorder* recorder) {
    ClientOptions options;
    options.lease = seconds(3);
    if (recorder != nullptr) options.event_sink = recorder->sink();
    return std::make_unique<Client>(make_redis_backend(RedisOptions::from_url(server_->url())), options);
  }

  static inline std::unique_ptr<RedisServer> server_;
};

TEST_F(EventsRedisTest, FairWaitersAreToldTheirPlaceCountedAndTimed) {
  const std::unique_ptr<Client> holder = client(nullptr);
  FairLock held = holder->fair_lock("events:fair");
  held.lock(seconds(30));

  struct Waiter {
    EventRecorder recorder;
    std::unique_ptr<Client> client;
    std::future<bool> acquired;
  };
  std::vector<std::unique_ptr<Waiter>> waiters;
  for (int i = 0; i < 2; ++i) {
    auto waiter = std::make_unique<Waiter>();
    waiter->client = client(&waiter->recorder);
    waiter->acquired = std::async(std::launch::async, [client = waiter->client.get()] {
      FairLock lock = client->fair_lock("events:fair");
      if (!lock.try_lock(AcquireOptions{.wait = kPatience, .lease = seconds(30)})) return false;
      std::this_thread::sleep_for(milliseconds(20));  // a hold the histogram sees
      lock.unlock();
      return true;
    });
    // Queued one after the other: the first is next, the second has one ahead.
    ASSERT_TRUE(eventually([&] { return !waiter->recorder.of(EventKind::waiting).empty(); }));
    const EventRecorder::Told first_told = waiter->recorder.of(EventKind::waiting).front();
    EXPECT_EQ(first_told.queue_position, std::optional<std::int64_t>(i)) << first_told.text;
    EXPECT_THAT(first_told.text, HasSubstr(i == 0 ? "next in the queue" : "1 ahead in the queue"));
    // The holder's own lease (about 30 s), not the waiter's retry hint.
    ASSERT_TRUE(first_told.holder_lease_left.has_value()) << first_told.text;
    EXPECT_GT(*first_told.holder_lease_left, seconds(20)) << first_told.text;
    EXPECT_EQ(waiter->client->metrics().waiters_of(Flavor::fair), 1);
    waiters.push_back(std::move(waiter));
  }

  held.unlock();
  for (const auto& waiter : waiters) {
    ASSERT_EQ(waiter->acquired.wait_for(kPatience), std::future_status::ready);
    EXPECT_TRUE(waiter->acquired.get());
    EXPECT_EQ(waiter->recorder.of(EventKind::acquired).size(), 1u);
    const MetricsSnapshot after = waiter->client->metrics();
    EXPECT_EQ(after.waiters_of(Flavor::fair), 0);
    EXPECT_EQ(after.holds_of(Flavor::fair), 0);
    EXPECT_EQ(after.hold_time.count, 1u);
    EXPECT_GE(after.hold_time.sum_us, 20'000);
  }
}

TEST_F(EventsRedisTest, AKilledConnectionIsAReconnectionNotARestart) {
  EventRecorder recorder;
  const std::unique_ptr<Client> holder = client(&recorder);
  ReentrantLock lock = holder->lock("events:reconnect");
  lock.lock();  // renewed every second
  EXPECT_EQ(holder->metrics().holds_of(Flavor::reentrant), 1);

  EXPECT_THAT(server_->command({"CLIENT", "KILL", "TYPE", "normal"}), Not(HasSubstr("(integer) 0")));
  ASSERT_TRUE(eventually([&] { return !recorder.of(EventKind::reconnected).empty(); }));
  const EventRecorder::Told reconnected = recorder.of(EventKind::reconnected).front();
  EXPECT_FALSE(reconnected.server_restarted);
  EXPECT_EQ(reconnected.address, "127.0.0.1:" + std::to_string(server_->port()));
  EXPECT_EQ(reconnected.text, "reconnected to " + reconnected.address);

  // Still held: a renewal after the reconnection went through.
  const std::uint64_t renewals_before = holder->metrics().renewals;
  ASSERT_TRUE(eventually([&] { return holder->metrics().renewals > renewals_before; }));
  EXPECT_TRUE(lock.is_held_by_current_thread());
  EXPECT_TRUE(recorder.of(EventKind::lost).empty());
  lock.unlock();
  EXPECT_EQ(holder->metrics().holds_of(Flavor::reentrant), 0);
}

}  // namespace
}  // namespace turnstile
