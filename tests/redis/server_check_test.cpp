// check_server() (turnstile/server_check.h) on a real redis-server: each
// maxmemory-policy classified, INFO refused by ACL is unknown, and a
// Client's own check at its first script call (ClientOptions::server_check)
// reports an evicting server through on_background_error, once.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <thread>
#include <string>
#include <vector>

#include "redis_server.h"
#include "redis_test_support.h"
#include "turnstile/client.h"
#include "turnstile/errors.h"
#include "turnstile/redis_backend.h"
#include "turnstile/server_check.h"

namespace turnstile {
namespace {

using ::testing::HasSubstr;

// Polls `condition` every 10 ms until it holds or `timeout` passes.
bool within(std::chrono::milliseconds timeout, const std::function<bool()>& condition) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return condition();
}

// The UnsafeServerError texts a client reported (on_background_error).
struct UnsafeReports {
  std::mutex mutex;
  std::vector<std::string> texts;

  // `options` with its background handler recording here.
  ClientOptions into(ClientOptions options) {
    options.on_background_error = [this](std::exception_ptr error) {
      try {
        std::rethrow_exception(error);
      } catch (const UnsafeServerError& unsafe) {
        const std::lock_guard guard(mutex);
        texts.emplace_back(unsafe.what());
      } catch (...) {
      }
    };
    return options;
  }
  std::size_t count() {
    const std::lock_guard guard(mutex);
    return texts.size();
  }
};

class ServerCheckTest : public testing::SharedRedisServerTest {
 protected:
  void SetUp() override { set_policy("noeviction", "0"); }
  void TearDown() override { set_policy("noeviction", "0"); }

  void set_policy(const std::string& policy, const std::string& maxmemory) {
    server_->command({"CONFIG", "SET", "maxmemory-policy", policy});
    server_->command({"CONFIG", "SET", "maxmemory", maxmemory});
  }

  ServerSafety check() {
    const std::unique_ptr<Backend> backend = make_redis_backend(testing::test_options(*server_));
    return check_server(*backend);
  }
};

TEST(EvictionRiskTest, ClassifiesEveryPolicy) {
  EXPECT_EQ(eviction_risk("noeviction", 1 << 20), EvictionRisk::safe);
  for (const char* policy : {"allkeys-lru", "allkeys-lfu", "allkeys-random", "volatile-lru", "volatile-lfu",
                             "volatile-random", "volatile-ttl"}) {
    EXPECT_EQ(eviction_risk(policy, 1 << 20), EvictionRisk::evicts_locks) << policy;
    EXPECT_EQ(eviction_risk(policy, 0), EvictionRisk::safe) << policy << ": no memory limit, nothing is evicted";
  }
  EXPECT_EQ(eviction_risk("some-future-policy", 1 << 20), EvictionRisk::unknown);
  EXPECT_EQ(eviction_risk_name(EvictionRisk::evicts_locks), "evicts-locks");
}

TEST_F(ServerCheckTest, EachEvictingPolicyIsReportedWithItsLimit) {
  for (const std::string policy : {"allkeys-lru", "volatile-lru", "volatile-ttl"}) {
    set_policy(policy, "104857600");
    const ServerSafety safety = check();
    ASSERT_EQ(safety.masters.size(), 1u) << policy;
    EXPECT_EQ(safety.risk, EvictionRisk::evicts_locks) << policy;
    EXPECT_EQ(safety.masters[0].maxmemory_policy, policy);
    EXPECT_EQ(safety.masters[0].maxmemory, 104857600);
    EXPECT_EQ(safety.masters[0].node, "127.0.0.1:" + std::to_string(server_->port()));
    const std::string message = unsafe_server_message(safety);
    EXPECT_THAT(message, HasSubstr(policy));
    EXPECT_THAT(message, HasSubstr("maxmemory-policy noeviction"));
    EXPECT_THAT(describe_policy(safety), HasSubstr(policy + " (maxmemory 104857600) on 127.0.0.1:"));
  }
}

TEST_F(ServerCheckTest, NoevictionAndNoLimitAreSafe) {
  set_policy("noeviction", "104857600");
  EXPECT_EQ(check().risk, EvictionRisk::safe);
  set_policy("allkeys-lru", "0");
  const ServerSafety unlimited = check();
  EXPECT_EQ(unlimited.risk, EvictionRisk::safe);
  EXPECT_EQ(unlimited.masters.at(0).maxmemory_policy, "allkeys-lru");
}

TEST_F(ServerCheckTest, InfoRefusedByAclIsUnknownNotAnError) {
  server_->command({"ACL", "SETUSER", "noinfo", "on", ">pw", "~*", "+@all", "-info"});
  RedisOptions options = testing::test_options(*server_);
  options.user = "noinfo";
  options.password = "pw";
  const std::unique_ptr<Backend> backend = make_redis_backend(options);
  const ServerSafety safety = check_server(*backend);
  EXPECT_EQ(safety.risk, EvictionRisk::unknown);
  ASSERT_EQ(safety.masters.size(), 1u);
  EXPECT_THAT(safety.masters[0].reason, HasSubstr("NOPERM"));
  EXPECT_THAT(safety.masters[0].reason, ::testing::Not(HasSubstr("pw")));
  server_->command({"ACL", "DELUSER", "noinfo"});
}

// The client's own check: reported once, before the first lock is had; the
// lock works as usual. Off: nothing.
TEST_F(ServerCheckTest, ClientReportsAnEvictingServerOnceThroughTheBackgroundHandler) {
  set_policy("volatile-ttl", "104857600");
  for (const ServerCheck mode : {ServerCheck::warn, ServerCheck::off}) {
    UnsafeReports reports;
    ClientOptions options;
    options.server_check = mode;
    Client client(std::shared_ptr<Backend>(make_redis_backend(testing::test_options(*server_))), reports.into(options));
    for (int round = 0; round < 2; ++round) {
      ReentrantLock lock = client.lock("server-check:lock");
      ASSERT_TRUE(lock.try_lock());
      lock.unlock();
    }
    EXPECT_EQ(client.check_server().risk, EvictionRisk::evicts_locks);
    const std::lock_guard guard(reports.mutex);
    if (mode == ServerCheck::warn) {
      ASSERT_EQ(reports.texts.size(), 1u);
      EXPECT_THAT(reports.texts[0], HasSubstr("volatile-ttl"));
    } else {
      EXPECT_TRUE(reports.texts.empty());
    }
  }
}

// The check before the first call waits no longer than the caller's
// deadline: with the server hung (SIGSTOP, connections open, nothing
// answers), try_lock_for(50ms) returns false long before the command
// timeout (a generous wall-clock bound: no tight timing). The check, left
// running, fails at the command timeout; once the server is back the next
// call checks again and reports the evicting server, once. (Virtual-time
// exactness, the repeated check and concurrent first callers:
// tests/locks/server_check_deadline_test.cpp.)
TEST_F(ServerCheckTest, AHungServerEndsATimedFirstTryAtItsDeadlineNotTheCommandTimeout) {
  set_policy("allkeys-lru", "104857600");
  RedisOptions redis = testing::test_options(*server_);
  redis.command_timeout_ms = 2000;
  UnsafeReports reports;
  Client client(std::shared_ptr<Backend>(make_redis_backend(redis)), reports.into(ClientOptions{}));
  ReentrantLock lock = client.lock("server-check:hung");
  server_->pause();
  // Resumed however the test ends: the server is shared.
  const std::unique_ptr<testing::RedisServer, void (*)(testing::RedisServer*)> paused(
      server_, [](testing::RedisServer* server) { server->resume(); });
  bool acquired = true;
  const long long ms = testing::elapsed_ms([&] { acquired = lock.try_lock_for(std::chrono::milliseconds(50)); });
  EXPECT_FALSE(acquired);
  EXPECT_LT(ms, redis.command_timeout_ms / 2) << "held up by the server check";
  RecordProperty("timed_first_try_ms", std::to_string(ms));
  // Past the command timeout: the check in the background failed.
  std::this_thread::sleep_for(std::chrono::milliseconds(redis.command_timeout_ms + 1000));
  server_->resume();  // SIGCONT again at the end does nothing
  EXPECT_EQ(reports.count(), 0u);
  ASSERT_TRUE(lock.try_lock_for(std::chrono::seconds(10)));
  lock.unlock();
  EXPECT_EQ(reports.count(), 1u);
}

// A held lock's key evicted (simulated here by the server's own event: a
// real eviction is the fault harness's case) is found gone at once, not at
// the next renewal a third of the lease later.
TEST_F(ServerCheckTest, AnEvictedEventRenewsAtOnceAndTheHolderLearnsItIsGone) {
  set_policy("allkeys-lru", "104857600");
  server_->command({"CONFIG", "SET", "notify-keyspace-events", "Ee"});
  std::mutex mutex;
  std::optional<LockLostReason> lost;
  ClientOptions options;
  options.lease = std::chrono::seconds(30);  // next renewal in ~10 s
  options.on_background_error = [](std::exception_ptr) {};
  Client client(std::shared_ptr<Backend>(make_redis_backend(testing::test_options(*server_))), options);
  ReentrantLock lock = client.lock("server-check:evicted");
  lock.set_lost_handler([&](const LockLost& what) {
    const std::lock_guard guard(mutex);
    lost = what.reason;
  });
  ASSERT_TRUE(lock.try_lock());
  const std::stop_token loss = lock.loss_token();
  // DEL and the evicted event as Redis sends them when it evicts the key.
  server_->command({"DEL", "server-check:evicted"});
  server_->command({"PUBLISH", "__keyevent@0__:evicted", "server-check:evicted"});
  EXPECT_TRUE(within(std::chrono::seconds(5), [&] { return loss.stop_requested(); }))
      << "not told within 5 s (the next renewal is ~10 s away)";
  const std::lock_guard guard(mutex);
  EXPECT_EQ(lost, LockLostReason::gone);
  server_->command({"CONFIG", "SET", "notify-keyspace-events", ""});
}

}  // namespace
}  // namespace turnstile
