// A waiting acquisition's SUBSCRIBE before its second try ends at the
// wait's deadline (Backend::subscribe_within), against a real redis-server
// SIGSTOPped just as the SUBSCRIBE goes out (the first try has its answer):
// try_lock_for(100ms) returns false long before command_timeout_ms (a
// generous wall-clock bound, half of it: no tight timing), holds nothing,
// and once the server is resumed the next acquisition is woken by the
// release as usual. In the fleet wake scope the give-up after the deadline
// finds the server still stopped, and ends within its grace.
// tests/locks/subscribe_bound_test.cpp and giveup_bound_test.cpp: the same
// on the fake, in virtual time.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <exception>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "redis_server.h"
#include "turnstile/backend.h"
#include "turnstile/client.h"
#include "turnstile/key_layout.h"
#include "turnstile/lock.h"
#include "turnstile/redis_backend.h"

namespace turnstile {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::RedisServer;

constexpr int kLongTimeoutMs = 4000;

// Pauses the server (SIGSTOP) when the next subscription is asked for;
// counts the subscriptions confirmed.
class PausingBackend final : public ForwardingBackend {
 public:
  PausingBackend(std::shared_ptr<Backend> inner, RedisServer& server)
      : ForwardingBackend(std::move(inner)), server_(server) {}

  Subscription subscribe_within(std::string_view channel, PubSubHandler handler,
                                const SubscribeOptions& options) override {
    if (pause_next.exchange(false)) server_.pause();
    Subscription subscription = inner().subscribe_within(channel, std::move(handler), options);
    confirmed.fetch_add(1);
    return subscription;
  }

  std::atomic<bool> pause_next{false};
  std::atomic<int> confirmed{0};

 private:
  RedisServer& server_;
};

class SubscribeBoundRedisTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = new RedisServer(); }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override { server_->command({"FLUSHALL"}); }

  static RedisOptions long_timeouts() {
    RedisOptions options = RedisOptions::from_url(server_->url());
    options.connect_timeout_ms = kLongTimeoutMs;
    options.command_timeout_ms = kLongTimeoutMs;
    return options;
  }

  // try_lock_for(100ms) on `lock` with the server stopped from the wait's
  // SUBSCRIBE until the wait has returned (its give-up included): false,
  // long before command_timeout_ms (a generous bound, not a tight one).
  static void expect_a_paused_wait_ends(ReentrantLock& lock, PausingBackend& pausing) {
    pausing.pause_next = true;
    // Resumed however the test ends: the server is shared.
    const std::unique_ptr<RedisServer, void (*)(RedisServer*)> paused(server_,
                                                                      [](RedisServer* server) { server->resume(); });
    bool acquired = true;
    const auto started = std::chrono::steady_clock::now();
    EXPECT_NO_THROW(acquired = lock.try_lock_for(milliseconds(100)));
    const auto waited = std::chrono::steady_clock::now() - started;
    EXPECT_FALSE(acquired);
    EXPECT_LT(waited, milliseconds(kLongTimeoutMs / 2)) << "the wait (or its give-up) waited for command_timeout_ms";
    EXPECT_FALSE(pausing.pause_next) << "the wait subscribed";
  }

  static RedisServer* server_;
};

RedisServer* SubscribeBoundRedisTest::server_ = nullptr;

// The process wake scope: the wait's give-up sends nothing after its
// deadline. First with the subscriber still opening its connection (its
// handshake unanswered), then with it connected.
TEST_F(SubscribeBoundRedisTest, AnUnansweredSubscribeEndsTheWaitAtItsDeadline) {
  Client holder(make_redis_backend(long_timeouts()));
  ReentrantLock held = holder.lock("unanswered");
  held.lock();

  const auto pausing = std::make_shared<PausingBackend>(make_redis_backend(long_timeouts()), *server_);
  ClientOptions options;
  options.wake_scope = WakeScope::process;
  Client waiter(pausing, options);
  ReentrantLock lock = waiter.lock("unanswered");
  ASSERT_FALSE(lock.try_lock());  // the client's server check, done
  Subscription keeps_connected;
  for (const bool connected : {false, true}) {
    SCOPED_TRACE(connected ? "subscriber connected" : "subscriber connecting");
    // A channel of its own keeps the subscriber's connection open.
    if (connected) keeps_connected = pausing->subscribe("keeps-connected", [](const PubSubEvent&) {});
    expect_a_paused_wait_ends(lock, *pausing);
    EXPECT_FALSE(lock.is_held_by_current_thread());
    EXPECT_TRUE(held.is_held_by_current_thread());
  }

  // The next acquisition subscribes on the connection the late SUBSCRIBE
  // went out on, and is woken by the release (the holder's watchdog lease
  // is far longer than the wait: only the message can end it early).
  std::atomic<bool> acquired{false};
  std::atomic<bool> finished{false};
  std::exception_ptr error;
  const int confirmed_before = pausing->confirmed.load();
  std::thread next([&] {
    try {
      acquired = lock.try_lock_for(seconds(20));
      if (acquired) lock.unlock();
    } catch (...) {
      error = std::current_exception();
    }
    finished = true;
  });
  while (pausing->confirmed.load() == confirmed_before && !finished) std::this_thread::yield();
  held.unlock();
  next.join();
  if (error) std::rethrow_exception(error);
  EXPECT_TRUE(acquired);
}

// The fleet wake scope (the default): its give-up (the reentrant lock's
// abandon: its offer withdrawn, its process forgotten) is a call sent after
// the deadline, to a server still stopped: it is given kGiveUpGraceMs
// (locks/engine/give_up.h) and then dropped with its connection, so the wait
// still ends long before command_timeout_ms. Resumed, the server runs or
// drops the late call; the next acquisition works, and its success leaves
// no registration of the waiter's process behind.
TEST_F(SubscribeBoundRedisTest, AnUnansweredSubscribeEndsAFleetWaitAtItsDeadline) {
  Client holder(make_redis_backend(long_timeouts()));
  ReentrantLock held = holder.lock("unanswered-fleet");
  held.lock();
  const auto pausing = std::make_shared<PausingBackend>(make_redis_backend(long_timeouts()), *server_);
  Client waiter(pausing);
  ReentrantLock lock = waiter.lock("unanswered-fleet");
  ASSERT_FALSE(lock.try_lock());
  expect_a_paused_wait_ends(lock, *pausing);
  held.unlock();
  ASSERT_TRUE(lock.try_lock_for(seconds(20)));
  lock.unlock();
  const std::string registry = key_layout(Flavor::reentrant, "unanswered-fleet").wake_registry;
  EXPECT_EQ(server_->command({"ZCOUNT", registry, "1", "+inf"}), Reply::integer(0).to_string())
      << "a process left registered";
}

}  // namespace
}  // namespace turnstile
