// redis::ConnectionPool's queue against a real redis-server (issue #33):
// callers that find every connection busy are served first come, first
// served (a connection given back, or a slot freed, goes to the longest
// waiter); a wait that outlasts the command timeout ends in
// PoolExhaustedError, typed and naming the pool, never a bare timeout.
//
// Waiting for a caller to be queued polls ConnectionPool::waiting() (a
// condition, not a fixed sleep), so a loaded machine only makes it slower.

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "redis/connection_pool.h"
#include "redis_server.h"
#include "redis_test_support.h"
#include "turnstile/errors.h"

namespace turnstile {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::RedisServer;

class ConnectionPoolTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = new RedisServer(); }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }

  // A pool of one connection; waits for it end after `command_timeout_ms`.
  static std::shared_ptr<redis::ConnectionPool> pool_of_one(int command_timeout_ms) {
    RedisOptions options = testing::test_options(*server_);
    options.pool_size = 1;
    options.command_timeout_ms = command_timeout_ms;
    return std::make_shared<redis::ConnectionPool>(options);
  }

  static bool queued(const redis::ConnectionPool& pool, std::size_t waiters) {
    return testing::eventually([&] { return pool.waiting() == waiters; });
  }

  static RedisServer* server_;
};

RedisServer* ConnectionPoolTest::server_ = nullptr;

TEST_F(ConnectionPoolTest, WaitersAreServedInTheOrderTheyCame) {
  constexpr int kWaiters = 4;
  // Long enough that no waiter's turn runs out on a loaded machine.
  const std::shared_ptr<redis::ConnectionPool> pool = pool_of_one(30'000);
  redis::ConnectionPool::Lease held = pool->lease();
  std::mutex mutex;
  std::vector<int> served;
  std::vector<std::thread> waiters;
  for (int index = 0; index < kWaiters; ++index) {
    waiters.emplace_back([&, index] {
      redis::ConnectionPool::Lease lease = pool->lease();
      {
        const std::lock_guard guard(mutex);
        served.push_back(index);
      }
      EXPECT_EQ(lease->command({"PING"}), Reply::status("PONG"));
      lease.give_back();  // to the next one queued
    });
    // The next one comes only once this one is queued (no ASSERT while a
    // thread is joinable: its destructor would end the process).
    if (!queued(*pool, static_cast<std::size_t>(index) + 1)) {
      ADD_FAILURE() << "waiter " << index << " never queued";
      break;
    }
  }
  held.give_back();
  for (std::thread& waiter : waiters) waiter.join();
  EXPECT_THAT(served, ElementsAre(0, 1, 2, 3));
  EXPECT_EQ(pool->waiting(), 0u);
}

TEST_F(ConnectionPoolTest, AFreedSlotGoesToTheWaiter) {
  const std::shared_ptr<redis::ConnectionPool> pool = pool_of_one(30'000);
  redis::ConnectionPool::Lease held = pool->lease();
  std::atomic<bool> answered{false};
  std::thread waiter([&] {
    redis::ConnectionPool::Lease lease = pool->lease();  // a new connection, in the freed slot
    answered = lease->command({"PING"}) == Reply::status("PONG");
  });
  EXPECT_TRUE(queued(*pool, 1));  // not ASSERT: `waiter` is joinable
  held.drop();                    // closed: its slot, not a connection, is handed over
  waiter.join();
  EXPECT_TRUE(answered.load());
}

TEST_F(ConnectionPoolTest, AWaitPastTheCommandTimeoutIsPoolExhaustedAndLeavesTheQueue) {
  constexpr int kCommandTimeoutMs = 200;
  const std::shared_ptr<redis::ConnectionPool> pool = pool_of_one(kCommandTimeoutMs);
  redis::ConnectionPool::Lease held = pool->lease();
  const std::string message = testing::message_of<PoolExhaustedError>([&] { (void)pool->lease(); });
  EXPECT_THAT(message, HasSubstr(server_->host()));
  EXPECT_THAT(message, HasSubstr("all 1 pooled connections stayed busy for 200 ms"));
  EXPECT_THAT(message, HasSubstr("nothing was sent"));
  EXPECT_EQ(pool->waiting(), 0u);
  // A transport error by type (callers that catch TimeoutError still do).
  EXPECT_THROW((void)pool->lease(), TimeoutError);
  held.give_back();
  EXPECT_EQ(pool->lease()->command({"PING"}), Reply::status("PONG"));
}

// A connection opened for a caller with a deadline (a waiting acquisition's
// EvalOptions::send_within) is bounded by it as well: against a hung server
// (SIGSTOP: the kernel still accepts the TCP connection, nothing answers
// INFO) the handshake ends at the caller's deadline, PoolExhaustedError
// (nothing was sent), not after connect_timeout_ms (a generous wall-clock
// bound: no tight timing). It starts no connect backoff: the server is back
// and the next caller connects at once (a backoff would refuse it for the
// next 10 ms, with "not retrying").
TEST_F(ConnectionPoolTest, AHandshakeEndsAtTheCallersDeadlineAndStartsNoBackoff) {
  RedisOptions options = testing::test_options(*server_);
  options.connect_timeout_ms = 4000;
  options.command_timeout_ms = 4000;
  const auto pool = std::make_shared<redis::ConnectionPool>(options);
  const auto ping = [](redis::Connection& connection) { return connection.command({"PING"}); };
  server_->pause();
  // Resumed however the test ends: the server is shared.
  const std::unique_ptr<RedisServer, void (*)(RedisServer*)> paused(server_,
                                                                    [](RedisServer* server) { server->resume(); });
  std::string message;
  const long long ms = testing::elapsed_ms([&] {
    message = testing::message_of<PoolExhaustedError>(
        [&] { (void)pool->with_connection(ping, std::chrono::milliseconds(100)); });
  });
  EXPECT_LT(ms, options.connect_timeout_ms / 2) << "the handshake waited for connect_timeout_ms";
  EXPECT_THAT(message, HasSubstr(server_->host()));
  EXPECT_THAT(message, HasSubstr("opening a connection did not finish by the caller's deadline"));
  EXPECT_THAT(message, HasSubstr("nothing was sent"));
  EXPECT_THROW((void)pool->with_connection(ping, std::chrono::nanoseconds::zero()), PoolExhaustedError)
      << "a deadline already past: nothing tried";
  server_->resume();
  EXPECT_EQ(pool->with_connection(ping), Reply::status("PONG"));
}

}  // namespace
}  // namespace turnstile
