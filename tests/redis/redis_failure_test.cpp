// The hiredis backend when things go wrong, each test with its own
// redis-server: killed and restarted, hung (SIGSTOP), CLIENT PAUSE beyond the
// command timeout, nothing listening, passwords and a restricted ACL user.

#include <atomic>
#include <string>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "lua_scripts.h"
#include "redis_server.h"
#include "redis_test_support.h"
#include "turnstile/errors.h"
#include "turnstile/redis_backend.h"

namespace turnstile {
namespace {

using Kind = PubSubEvent::Kind;
using testing::EventRecorder;
using ::testing::HasSubstr;
using testing::message_of;
using ::testing::Not;
using testing::RedisServer;

// "Fails fast": well within a second even on a loaded machine, while a
// hanging call would take at least the command timeout.
constexpr long long kFastMs = 300;
// A timeout fires after the command timeout, and not much later.
constexpr long long kTimeoutSlackMs = 700;

Reply acquire(Backend& backend, const std::string& key = "lock") {
  return backend.eval(scripts::reentrant_lock_acquire, {key}, {"30000", "owner:1"});
}

// Whether `backend` answers again within testing::kEventually.
bool recovers(Backend& backend) {
  return testing::eventually([&] {
    try {
      return acquire(backend).is_nil();
    } catch (const ConnectionError&) {  // TimeoutError included
      return false;
    }
  });
}

TEST(RedisFailureTest, ServerKilledAndRestartedMidUse) {
  RedisServer server;
  const std::string endpoint = "127.0.0.1:" + std::to_string(server.port());
  const auto backend = make_redis_backend(testing::test_options(server));
  std::atomic<int> restarts_told = 0;
  std::string told_endpoint;  // written by the first report only
  const RestartWatch watch = backend->watch_restarts([&](const ServerRestart& restart) {
    if (restarts_told.fetch_add(1) == 0) told_endpoint = restart.endpoint;
  });
  EXPECT_TRUE(watch.active());
  EventRecorder recorder;
  Subscription subscription = backend->subscribe("wake", recorder.handler());
  EXPECT_EQ(acquire(*backend), Reply::nil());

  server.kill();
  // The pooled connection is stale: its call fails, naming the server.
  EXPECT_THAT(message_of<ConnectionError>([&] { acquire(*backend); }), HasSubstr(endpoint));
  // While the server is down, every call fails fast.
  for (int i = 0; i < 5; ++i) {
    std::string message;
    const long long ms =
        testing::elapsed_ms([&] { message = message_of<ConnectionError>([&] { acquire(*backend); }); });
    EXPECT_LT(ms, kFastMs);
    EXPECT_THAT(message, HasSubstr(endpoint));
  }
  // The subscriber notices too; a new subscribe() fails rather than hangs.
  const long long subscribe_ms = testing::elapsed_ms([&] {
    EXPECT_THAT(
        message_of<ConnectionError>([&] { Subscription s = backend->subscribe("new", [](const PubSubEvent&) {}); }),
        HasSubstr(endpoint));
  });
  EXPECT_LT(subscribe_ms, testing::kTestCommandTimeoutMs + kTimeoutSlackMs);

  EXPECT_EQ(backend->counters().script_reloads, 0u) << "the first load of a script is not a reload";

  server.start();  // same port, empty keyspace, empty script cache
  EXPECT_TRUE(recovers(*backend));
  ASSERT_TRUE(recorder.wait_for(Kind::resubscribed));
  backend->command({"PUBLISH", "wake", "0"});
  ASSERT_TRUE(recorder.wait_for(Kind::message));
  // Counted (BackendCounters): the acquire script loaded again once, and
  // the pool's and the subscriber's connections opened again.
  EXPECT_EQ(backend->counters().script_reloads, 1u);
  EXPECT_GE(backend->counters().reconnects, 2u);
  // Another run_id behind the same endpoint: one restart, told once,
  // whichever connection (the pool's, the subscriber's) found it first.
  EXPECT_EQ(restarts_told.load(), 1);
  EXPECT_EQ(told_endpoint, endpoint);
  EXPECT_EQ(backend->counters().server_restarts, 1u);
}

// INFO renamed away: connecting works as ever, the server is never found
// restarted (documented: Backend::watch_restarts).
TEST(RedisFailureTest, AServerRefusingInfoIsUsedButNeverFoundRestarted) {
  RedisServer server({"--rename-command", "INFO", ""});
  const auto backend = make_redis_backend(testing::test_options(server));
  std::atomic<int> restarts_told = 0;
  const RestartWatch watch = backend->watch_restarts([&](const ServerRestart&) { ++restarts_told; });
  EXPECT_EQ(acquire(*backend), Reply::nil());
  server.kill();
  server.start();
  EXPECT_TRUE(recovers(*backend));
  EXPECT_EQ(restarts_told.load(), 0);
  EXPECT_EQ(backend->counters().server_restarts, 0u);
}

TEST(RedisFailureTest, HungServerTimesOutAndIsNoticedByThePing) {
  RedisServer server;
  const auto backend = make_redis_backend(testing::test_options(server));
  EventRecorder recorder;
  Subscription subscription = backend->subscribe("wake", recorder.handler());
  EXPECT_EQ(acquire(*backend), Reply::nil());

  server.pause();  // SIGSTOP: connections stay open, nothing answers
  std::string message;
  const long long ms = testing::elapsed_ms([&] { message = message_of<TimeoutError>([&] { acquire(*backend); }); });
  EXPECT_GE(ms, testing::kTestCommandTimeoutMs - 50);
  EXPECT_LT(ms, testing::kTestCommandTimeoutMs + kTimeoutSlackMs);
  EXPECT_THAT(message, HasSubstr("127.0.0.1:" + std::to_string(server.port())));
  EXPECT_THAT(message, HasSubstr("command_timeout_ms"));
  // Long enough for the subscriber's PING to go unanswered.
  std::this_thread::sleep_for(
      std::chrono::milliseconds(testing::kTestPingIntervalMs + 2 * testing::kTestCommandTimeoutMs));
  server.resume();

  ASSERT_TRUE(recorder.wait_for(Kind::resubscribed));
  EXPECT_TRUE(recovers(*backend));
  backend->command({"PUBLISH", "wake", "0"});
  ASSERT_TRUE(recorder.wait_for(Kind::message));
}

TEST(RedisFailureTest, ClientPauseLongerThanTheCommandTimeoutIsATimeout) {
  RedisServer server;
  const auto backend = make_redis_backend(testing::test_options(server));
  EXPECT_EQ(acquire(*backend), Reply::nil());
  const int pause_ms = 3 * testing::kTestCommandTimeoutMs;
  server.command({"CLIENT", "PAUSE", std::to_string(pause_ms), "ALL"});
  const long long ms = testing::elapsed_ms(
      [&] { EXPECT_THAT(message_of<TimeoutError>([&] { acquire(*backend); }), HasSubstr("timed out after")); });
  EXPECT_LT(ms, testing::kTestCommandTimeoutMs + kTimeoutSlackMs);
  // Once the pause is over, calls go through again.
  EXPECT_TRUE(recovers(*backend));
}

TEST(RedisFailureTest, NothingListeningFailsFastNamingTheEndpoint) {
  const int port = testing::free_loopback_port();
  RedisOptions options = RedisOptions::from_url("redis://127.0.0.1:" + std::to_string(port));
  options.connect_timeout_ms = testing::kTestConnectTimeoutMs;
  const auto backend = make_redis_backend(options);
  const std::string endpoint = "127.0.0.1:" + std::to_string(port);
  for (int i = 0; i < 3; ++i) {
    const long long ms = testing::elapsed_ms(
        [&] { EXPECT_THAT(message_of<ConnectionError>([&] { backend->command({"PING"}); }), HasSubstr(endpoint)); });
    EXPECT_LT(ms, kFastMs);
  }
  EXPECT_THAT(message_of<ConnectionError>([&] { Subscription s = backend->subscribe("c", [](const PubSubEvent&) {}); }),
              HasSubstr(endpoint));
}

TEST(RedisFailureTest, SubscribeWorksAtOnceWhenTheServerIsBack) {
  RedisServer server;
  const auto backend = make_redis_backend(testing::test_options(server));
  server.kill();
  // Each attempt fails with a fresh connection error, not a stale one.
  for (int i = 0; i < 5; ++i) {
    EXPECT_THROW(Subscription s = backend->subscribe("c", [](const PubSubEvent&) {}), ConnectionError);
  }
  server.start();
  // No live channel, so no reconnect loop with a backoff to wait out: the
  // next subscribe() connects right away.
  EventRecorder recorder;
  Subscription subscription = backend->subscribe("c", recorder.handler());
  server.command({"PUBLISH", "c", "0"});
  ASSERT_TRUE(recorder.wait_for(Kind::message));
}

TEST(RedisFailureTest, RequirePass) {
  const std::string password = "s3cret-Pa55";
  RedisServer server({"--requirepass", password});
  RedisOptions options = testing::test_options(server);

  const auto anonymous = make_redis_backend(options);
  EXPECT_THROW(acquire(*anonymous), AuthenticationError);  // NOAUTH

  options.password = "wrong-" + password;
  const auto wrong = make_redis_backend(options);
  const std::string message = message_of<AuthenticationError>([&] { acquire(*wrong); });
  EXPECT_THAT(message, HasSubstr("WRONGPASS"));
  EXPECT_THAT(message, Not(HasSubstr(password)));
  EXPECT_THAT(
      message_of<AuthenticationError>([&] { Subscription s = wrong->subscribe("c", [](const PubSubEvent&) {}); }),
      Not(HasSubstr(password)));

  const auto right = make_redis_backend(
      RedisOptions::from_url("redis://:" + password + "@127.0.0.1:" + std::to_string(server.port()) + "/0"));
  EXPECT_THAT(right->describe(), Not(HasSubstr(password)));
  EXPECT_EQ(acquire(*right), Reply::nil());
  EventRecorder recorder;
  Subscription subscription = right->subscribe("wake", recorder.handler());
  right->command({"PUBLISH", "wake", "0"});
  ASSERT_TRUE(recorder.wait_for(Kind::message));
}

// The ACL rule documented in docs/deployment.md for an application whose lock names all
// start with "app:" (ClientOptions::key_prefix): lock keys, Redisson's side
// keys and channels of those locks, and only the commands turnstile sends or
// its scripts call.
const std::vector<std::string> kReadmeAclRule = {"on",
                                                 ">lock-pass",
                                                 "resetkeys",
                                                 "resetchannels",
                                                 "~app:*",
                                                 "~redisson_*:{app:*}",
                                                 "~turnstile_*:{app:*}",
                                                 "&redisson_lock__channel:{app:*}",
                                                 "&turnstile_lock__channel:{app:*}",
                                                 "-@all",
                                                 "+evalsha",
                                                 "+script|load",
                                                 "+ping",
                                                 "+subscribe",
                                                 "+unsubscribe",
                                                 "+select",
                                                 "+exists",
                                                 "+type",
                                                 "+get",
                                                 "+set",
                                                 "+del",
                                                 "+incr",
                                                 "+hget",
                                                 "+hexists",
                                                 "+hincrby",
                                                 "+pexpire",
                                                 "+pttl",
                                                 "+publish"};

TEST(RedisFailureTest, AclUserLimitedToAKeyPatternAndTurnstilesCommands) {
  RedisServer server;
  std::vector<std::string> setuser = {"ACL", "SETUSER", "turnstile"};
  setuser.insert(setuser.end(), kReadmeAclRule.begin(), kReadmeAclRule.end());
  ASSERT_EQ(server.command(setuser), "OK");

  const auto backend = make_redis_backend(
      RedisOptions::from_url("redis://turnstile:lock-pass@127.0.0.1:" + std::to_string(server.port()) + "/1"));
  EXPECT_EQ(acquire(*backend, "app:orders"), Reply::nil());
  server.command({"SCRIPT", "FLUSH"});
  EXPECT_EQ(acquire(*backend, "app:orders"), Reply::nil());  // reloaded under the ACL
  EXPECT_THROW(acquire(*backend, "other:orders"), PermissionError);
  EXPECT_THROW(backend->command({"FLUSHALL"}), PermissionError);
  EXPECT_THROW(backend->command({"EVAL", "return 1", "0"}), PermissionError);

  EventRecorder recorder;
  Subscription subscription = backend->subscribe("redisson_lock__channel:{app:orders}", recorder.handler());
  EXPECT_THROW(Subscription s = backend->subscribe("elsewhere", [](const PubSubEvent&) {}), PermissionError);
  server.command({"PUBLISH", "redisson_lock__channel:{app:orders}", "0"});
  ASSERT_TRUE(recorder.wait_for(Kind::message));

  const auto wrong_user =
      make_redis_backend(RedisOptions::from_url("redis://turnstile:nope@127.0.0.1:" + std::to_string(server.port())));
  EXPECT_THROW(wrong_user->command({"PING"}), AuthenticationError);
}

}  // namespace
}  // namespace turnstile
