// redis/redis_test_support.h
//
// Helpers for the hiredis backend tests: options with short timeouts for a
// test server, a pub/sub handler that records what it is told, a stopwatch
// for "fails fast" checks, and the message of an expected error.

#ifndef TURNSTILE_TESTS_REDIS_REDIS_TEST_SUPPORT_H_
#define TURNSTILE_TESTS_REDIS_REDIS_TEST_SUPPORT_H_

#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "redis_server.h"
#include "turnstile/backend.h"
#include "turnstile/redis_backend.h"

namespace turnstile::testing {

// Short enough that failure tests stay quick, long enough for a loaded
// machine (and ThreadSanitizer) to answer a healthy server in time.
inline constexpr int kTestConnectTimeoutMs = 500;
inline constexpr int kTestCommandTimeoutMs = 500;
inline constexpr int kTestPingIntervalMs = 200;
// How long a test waits for something that should happen "soon" (a message,
// a reconnect).
inline constexpr std::chrono::seconds kEventually{5};

inline RedisOptions test_options(const RedisServer& server) {
  RedisOptions options = RedisOptions::from_url(server.url());
  options.connect_timeout_ms = kTestConnectTimeoutMs;
  options.command_timeout_ms = kTestCommandTimeoutMs;
  options.pubsub_ping_interval_ms = kTestPingIntervalMs;
  options.pool_size = 4;
  return options;
}

// Records every event a subscription receives; thread-safe.
class EventRecorder {
 public:
  struct Event {
    PubSubEvent::Kind kind;
    std::string channel;
    std::string payload;
  };

  PubSubHandler handler() {
    return [this](const PubSubEvent& event) {
      {
        const std::lock_guard lock(mutex_);
        events_.push_back({event.kind, std::string(event.channel), std::string(event.payload)});
      }
      changed_.notify_all();
    };
  }

  // Waits up to kEventually until at least `n` events of `kind` arrived.
  bool wait_for(PubSubEvent::Kind kind, std::size_t n = 1) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, kEventually, [&] { return count_locked(kind) >= n; });
  }

  std::size_t count(PubSubEvent::Kind kind) {
    const std::lock_guard lock(mutex_);
    return count_locked(kind);
  }

  std::vector<Event> events() {
    const std::lock_guard lock(mutex_);
    return events_;
  }

 private:
  std::size_t count_locked(PubSubEvent::Kind kind) const {
    std::size_t n = 0;
    for (const Event& event : events_) n += event.kind == kind ? 1 : 0;
    return n;
  }

  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<Event> events_;
};

// Milliseconds taken by `action`.
inline long long elapsed_ms(const std::function<void()>& action) {
  const auto start = std::chrono::steady_clock::now();
  action();
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
}

// Runs `call`, expects it to throw E, and returns the message.
template <typename E>
std::string message_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const E& error) {
    return error.what();
  } catch (const std::exception& other) {
    ADD_FAILURE() << "wrong error type: " << other.what();
    return other.what();
  }
  ADD_FAILURE() << "nothing thrown";
  return {};
}

// Retries `condition` every 20 ms until it holds or kEventually passes.
inline bool eventually(const std::function<bool()>& condition) {
  const auto deadline = std::chrono::steady_clock::now() + kEventually;
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return condition();
}

// A fixture whose tests share one redis-server, started for the suite and
// stopped after it. Tests clean up what they change on it.
class SharedRedisServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = new RedisServer(); }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }

  static inline RedisServer* server_ = nullptr;
};

}  // namespace turnstile::testing

#endif  // TURNSTILE_TESTS_REDIS_REDIS_TEST_SUPPORT_H_
