// Waiters on a tiny connection pool, against a real redis-server (issue
// #33: at ~1,000 fair waiters one got "all 16 pooled connections stayed
// busy" and the process aborted). A busy pool is a crowd, not an outage:
// no waiter ever sees PoolExhaustedError, it never counts toward the
// unreachable limit, and a wait whose deadline passes while it is queued
// for a connection ends as its usual timeout (false).
//
// The pool is kept busy deterministically: a pipelined call whose reply is
// never read holds its pooled connection (Backend::send_eval) until the
// pending is dropped.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "lua_scripts.h"
#include "redis_server.h"
#include "turnstile/client.h"
#include "turnstile/errors.h"
#include "turnstile/fair_lock.h"
#include "turnstile/hold.h"
#include "turnstile/lock.h"
#include "turnstile/backend.h"
#include "turnstile/redis_backend.h"

namespace turnstile {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::RedisServer;

constexpr int kCommandTimeoutMs = 300;

std::shared_ptr<Backend> tiny_pool_backend(const RedisServer& server, int pool_size,
                                           int command_timeout_ms = kCommandTimeoutMs) {
  RedisOptions options = RedisOptions::from_url(server.url());
  options.pool_size = pool_size;
  options.command_timeout_ms = command_timeout_ms;
  return make_redis_backend(options);
}

// The pool's only connection, held by a call whose reply nobody reads.
std::unique_ptr<PendingReply> take_the_only_connection(Backend& backend) {
  return backend.send_eval(scripts::reentrant_lock_renew, {"someone-else"}, {"30000", "nobody"}, EvalSync::none);
}

ClientOptions strict_options() {
  ClientOptions options;
  // So short that one busy-pool wait counted as an outage would throw.
  options.unreachable_limit = milliseconds(1);
  options.on_background_error = [](std::exception_ptr) { ADD_FAILURE() << "no background error expected"; };
  return options;
}

class PoolWaitersTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = new RedisServer(); }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override { server_->command({"FLUSHALL"}); }

  static RedisServer* server_;
};

RedisServer* PoolWaitersTest::server_ = nullptr;

TEST_F(PoolWaitersTest, ADeadlineThatPassesWhileQueuedForAConnectionIsATimeout) {
  const std::shared_ptr<Backend> backend = tiny_pool_backend(*server_, 1);
  Client client(backend, strict_options());
  ReentrantLock lock = client.lock("queued");
  FairLock fair = client.fair_lock("queued-fair");
  std::unique_ptr<PendingReply> busy = take_the_only_connection(*backend);
  bool acquired = true;
  EXPECT_NO_THROW(acquired = lock.try_lock_for(milliseconds(50)));
  EXPECT_FALSE(acquired);
  EXPECT_NO_THROW(acquired = lock.try_lock());
  EXPECT_FALSE(acquired);
  EXPECT_NO_THROW(acquired = fair.try_lock_for(milliseconds(50)));
  EXPECT_FALSE(acquired);
  busy.reset();  // its connection is dropped, its slot freed
  EXPECT_TRUE(lock.try_lock_for(seconds(10)));
  lock.unlock();
}

TEST_F(PoolWaitersTest, AWaitForAConnectionEndsAtTheCallersDeadlineNotTheCommandTimeout) {
  // A command timeout far beyond the wait: the wait's deadline, passed down
  // as EvalOptions::send_within, ends the queueing for the pool's only
  // connection. The bound checked is half the command timeout, so a loaded
  // machine cannot fail it while the overshoot it guards against cannot pass.
  constexpr int kLongCommandTimeoutMs = 20'000;
  const std::shared_ptr<Backend> backend = tiny_pool_backend(*server_, 1, kLongCommandTimeoutMs);
  Client client(backend, strict_options());
  ReentrantLock lock = client.lock("bounded-by-deadline");
  FairLock fair = client.fair_lock("bounded-by-deadline-fair");
  // The client's first script call checks the server (maxmemory-policy,
  // ServerCheck::warn) through the pool, bounded by the command timeout:
  // done here, while the pool is free.
  ASSERT_TRUE(lock.try_lock());
  lock.unlock();
  std::unique_ptr<PendingReply> busy = take_the_only_connection(*backend);
  for (Lock* waiting : std::vector<Lock*>{&lock, &fair}) {
    const auto started = std::chrono::steady_clock::now();
    bool acquired = true;
    EXPECT_NO_THROW(acquired = waiting->try_lock_for(milliseconds(50)));
    EXPECT_FALSE(acquired);
    EXPECT_LT(std::chrono::steady_clock::now() - started, milliseconds(kLongCommandTimeoutMs / 2));
  }
  busy.reset();
  EXPECT_TRUE(lock.try_lock_for(seconds(10)));
  lock.unlock();
}

TEST_F(PoolWaitersTest, AWaiterRidesOutABusyPoolPastTheUnreachableLimit) {
  const std::shared_ptr<Backend> backend = tiny_pool_backend(*server_, 1);
  Client client(backend, strict_options());
  std::unique_ptr<PendingReply> busy = take_the_only_connection(*backend);
  std::atomic<bool> acquired{false};
  std::thread waiter([&] {
    ReentrantLock lock = client.lock("crowded");
    try {
      lock.lock();  // no deadline: waits its turn however long
      acquired = true;
      lock.unlock();
    } catch (const std::exception& error) {
      ADD_FAILURE() << "the waiter saw " << error.what();
    }
  });
  // Several busy-pool waits, each far past the unreachable limit (a slower
  // machine only makes it fewer).
  std::this_thread::sleep_for(milliseconds(3 * kCommandTimeoutMs));
  busy.reset();
  waiter.join();
  EXPECT_TRUE(acquired.load());
}

TEST_F(PoolWaitersTest, ManyWaitersOnTwoConnectionsAllAcquireWithoutAnError) {
  constexpr int kThreads = 48;
  constexpr int kRounds = 3;
  const std::shared_ptr<Backend> backend = tiny_pool_backend(*server_, 2);
  ClientOptions options;
  options.on_background_error = [](std::exception_ptr) { ADD_FAILURE() << "no background error expected"; };
  Client client(backend, options);
  std::atomic<int> acquisitions{0};
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      // Half on a reentrant lock, half in a fair queue.
      ReentrantLock lock = client.lock("crowd");
      FairLock fair = client.fair_lock("crowd-fair");
      for (int round = 0; round < kRounds; ++round) {
        try {
          if (t % 2 == 0) {
            if (!lock.try_lock_for(seconds(120))) continue;
            acquisitions.fetch_add(1);
            lock.unlock();
          } else {
            if (!fair.try_lock_for(seconds(120))) continue;
            acquisitions.fetch_add(1);
            fair.unlock();
          }
        } catch (const std::exception& error) {
          errors.fetch_add(1);
          ADD_FAILURE() << "waiter " << t << " saw " << error.what();
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(acquisitions.load(), kThreads * kRounds);
}

// Counts the calls of one script and lets a test wait for the n-th.
class ScriptCallCounter final : public ForwardingBackend {
 public:
  ScriptCallCounter(std::shared_ptr<Backend> inner, std::string_view script_name)
      : ForwardingBackend(std::move(inner)), script_name_(script_name) {}

  Reply eval(const Script& script, const std::vector<std::string>& keys,
             const std::vector<std::string>& args) override {
    if (script.name == script_name_) {
      const std::lock_guard guard(mutex_);
      ++calls_;
      called_.notify_all();
    }
    return ForwardingBackend::eval(script, keys, args);
  }
  // Whether `calls` calls were made within a generous bound.
  bool wait_for_calls(int calls) {
    std::unique_lock guard(mutex_);
    return called_.wait_for(guard, seconds(30), [&] { return calls_ >= calls; });
  }

 private:
  const std::string_view script_name_;
  std::mutex mutex_;
  std::condition_variable called_;
  int calls_ = 0;
};

TEST_F(PoolWaitersTest, AnUnlockThatFoundThePoolBusyIsSentAgainNotLetGo) {
  // A token lock's unlock is never resent after a failure in transit
  // (release_retriable() is false), but one that was never sent is.
  const std::shared_ptr<Backend> backend = tiny_pool_backend(*server_, 1);
  const auto counter = std::make_shared<ScriptCallCounter>(backend, scripts::token_lock_release.name);
  Client client(counter, strict_options());
  TokenLock lock = client.token_lock("unsent-unlock");
  LockHold hold = lock.acquire_hold(seconds(30));  // released from another thread below
  std::unique_ptr<PendingReply> busy = take_the_only_connection(*backend);
  std::thread unlocker([&] { hold.release(); });
  // The first unlock waited its turn in vain (PoolExhaustedError); the
  // second is on its way when the connection frees up.
  const bool sent_again = counter->wait_for_calls(2);
  busy.reset();
  unlocker.join();
  EXPECT_TRUE(sent_again);
  EXPECT_EQ(backend->command({"EXISTS", "unsent-unlock"}), Reply::integer(0));  // released, not left to its lease
}

}  // namespace
}  // namespace turnstile
