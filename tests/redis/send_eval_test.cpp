// Backend::send_eval on the hiredis backend against real redis-servers:
// calls in flight on three servers at once from one thread, wait_for()
// bounded by its timeout while one server is stopped, NOSCRIPT reload and typed
// error replies through a pending, an abandoned pending's connection never
// reused, a killed or hung server, EvalSync::replicas without replicas
// and send_eval_within's bound on a busy pool
// (with a replica: tests/redis/replica_sync_test.cpp).

#include <memory>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "redis_server.h"
#include "redis_test_support.h"
#include "echo_script.h"
#include "turnstile/errors.h"
#include "turnstile/redis_backend.h"

namespace turnstile {
namespace {

using testing::echo;
using ::testing::HasSubstr;
using testing::RedisServer;
using namespace std::chrono_literals;

// Long enough that no call below times out while its server is stopped.
constexpr int kCommandTimeoutMs = 2000;

std::size_t client_count(const RedisServer& server) {
  const std::string list = server.command({"CLIENT", "LIST"});
  std::size_t count = 0;
  for (std::size_t at = list.find("id="); at != std::string::npos; at = list.find("id=", at + 1)) ++count;
  return count;
}

// get()'s error, expected to be an E, and its message.
template <typename E>
std::string get_error(PendingReply& pending) {
  return testing::message_of<E>([&] { (void)pending.get(); });
}

class SendEvalTest : public ::testing::Test {
 protected:
  static constexpr int kServers = 3;

  static void SetUpTestSuite() {
    for (RedisServer*& server : servers_) server = new RedisServer();
  }
  static void TearDownTestSuite() {
    for (RedisServer*& server : servers_) {
      delete server;
      server = nullptr;
    }
  }

  void SetUp() override {
    for (RedisServer* server : servers_) {
      server->command({"FLUSHALL"});
      server->command({"SCRIPT", "FLUSH"});
      RedisOptions options = testing::test_options(*server);
      options.command_timeout_ms = kCommandTimeoutMs;
      backends_.push_back(make_redis_backend(options));
    }
  }

  // Loads the script on every server and leaves a pooled connection to
  // each, so that no call below needs a reload or a new connection (the
  // handshake of one would wait on a stopped server).
  void preload() {
    for (const auto& backend : backends_) backend->eval(echo(), {"warm-up"}, {""});
  }

  static std::unique_ptr<PendingReply> send(Backend& backend, const std::string& answer) {
    return backend.send_eval(echo(), {"n"}, {answer}, EvalSync::none);
  }

  static inline RedisServer* servers_[kServers] = {};
  std::vector<std::unique_ptr<Backend>> backends_;
};

TEST_F(SendEvalTest, CallsOnThreeServersAreInFlightAtOnce) {
  preload();
  // With every server stopped, no reply can come: each send_eval returns
  // having only sent, and all three calls are in flight together.
  for (RedisServer* server : servers_) server->pause();
  std::vector<std::unique_ptr<PendingReply>> pending;
  for (int i = 0; i < kServers; ++i) pending.push_back(send(*backends_[i], "server " + std::to_string(i)));
  for (const auto& call : pending) EXPECT_FALSE(call->wait_for(0ms)) << "a reply came from a stopped server";
  for (RedisServer* server : servers_) server->resume();
  for (int i = 0; i < kServers; ++i) {
    const SyncedReply synced = pending[i]->get();
    EXPECT_EQ(synced.reply, Reply::bulk("server " + std::to_string(i)));
    EXPECT_EQ(synced.ack.replicas, 0);
  }
  for (RedisServer* server : servers_) EXPECT_EQ(server->command({"GET", "n"}), "\"1\"");
}

TEST_F(SendEvalTest, WaitForIsBoundedByItsTimeoutWhileOneServerIsStopped) {
  preload();
  servers_[1]->pause();
  const std::unique_ptr<PendingReply> quick0 = send(*backends_[0], "quick 0");
  const std::unique_ptr<PendingReply> stalled = send(*backends_[1], "stalled");
  const std::unique_ptr<PendingReply> quick2 = send(*backends_[2], "quick 2");
  EXPECT_FALSE(stalled->wait_for(0ms));  // only looks
  EXPECT_TRUE(quick0->wait_for(testing::kEventually));
  EXPECT_TRUE(quick2->wait_for(testing::kEventually));
  constexpr auto kShort = 50ms;
  bool in = true;
  const long long waited_ms = testing::elapsed_ms([&] { in = stalled->wait_for(kShort); });
  EXPECT_FALSE(in);
  EXPECT_GE(waited_ms, kShort.count() - 1);
  servers_[1]->resume();
  EXPECT_TRUE(stalled->wait_for(testing::kEventually));
  EXPECT_TRUE(stalled->wait_for(0ms));  // stays in
  EXPECT_EQ(stalled->get().reply, Reply::bulk("stalled"));
  EXPECT_EQ(quick0->get().reply, Reply::bulk("quick 0"));
  EXPECT_EQ(quick2->get().reply, Reply::bulk("quick 2"));
}

TEST_F(SendEvalTest, NoscriptIsReloadedThroughThePending) {
  // SetUp flushed the scripts: EVALSHA answers NOSCRIPT, wait_for() loads
  // the script and sends EVALSHA again by itself.
  const std::unique_ptr<PendingReply> pending = send(*backends_[0], "reloaded");
  ASSERT_TRUE(pending->wait_for(testing::kEventually));
  EXPECT_EQ(servers_[0]->command({"SCRIPT", "EXISTS", std::string(echo().sha1)}), "[(integer) 1]");
  EXPECT_EQ(servers_[0]->command({"GET", "n"}), "\"1\"");  // ran before get()
  EXPECT_EQ(pending->get().reply, Reply::bulk("reloaded"));

  // get() alone does the same.
  servers_[0]->command({"SCRIPT", "FLUSH"});
  EXPECT_EQ(send(*backends_[0], "again")->get().reply, Reply::bulk("again"));
  EXPECT_EQ(servers_[0]->command({"GET", "n"}), "\"2\"");
}

TEST_F(SendEvalTest, AnErrorReplyIsRaisedByGetAsItsServerError) {
  servers_[0]->command({"HSET", "h", "f", "1"});
  const std::unique_ptr<PendingReply> pending = backends_[0]->send_eval(echo(), {"h"}, {"unreachable"}, EvalSync::none);
  EXPECT_TRUE(pending->wait_for(testing::kEventually));  // an error reply is an outcome too
  EXPECT_THAT(get_error<WrongTypeError>(*pending), HasSubstr("WRONGTYPE"));
  // The connection was clean and went back: the backend goes on.
  EXPECT_EQ(send(*backends_[0], "next")->get().reply, Reply::bulk("next"));
}

TEST_F(SendEvalTest, AnAbandonedPendingsConnectionIsClosedNotReused) {
  preload();
  RedisOptions options = testing::test_options(*servers_[0]);
  options.command_timeout_ms = kCommandTimeoutMs;
  options.pool_size = 1;  // a reused connection would hand out the stale reply
  const std::unique_ptr<Backend> backend = make_redis_backend(options);
  backend->eval(echo(), {"warm-up"}, {""});  // the one connection, pooled
  // The call is sent, its server stopped: it is abandoned in flight.
  servers_[0]->pause();
  send(*backend, "stale").reset();
  servers_[0]->resume();
  // Neither the abandoned reply nor a pool slot still taken (TimeoutError).
  EXPECT_EQ(backend->eval(echo(), {"m"}, {"fresh"}), Reply::bulk("fresh"));
  EXPECT_EQ(servers_[0]->command({"GET", "n"}), "\"1\"");  // the abandoned call still ran
  EXPECT_EQ(send(*backend, "fresh too")->get().reply, Reply::bulk("fresh too"));
  // Only the pooled connection is left, beside the one asking CLIENT LIST
  // and the fixture's backends' pooled connections (one per warm-up).
  EXPECT_TRUE(testing::eventually([&] { return client_count(*servers_[0]) == 3; }))
      << servers_[0]->command({"CLIENT", "LIST"});
}

TEST_F(SendEvalTest, ACallNotSentWithinItsBoundKeepsPoolExhaustedForGet) {
  preload();
  RedisOptions options = testing::test_options(*servers_[0]);
  options.command_timeout_ms = kCommandTimeoutMs;
  options.pool_size = 1;
  const std::unique_ptr<Backend> backend = make_redis_backend(options);
  backend->eval(echo(), {"warm-up"}, {""});  // the one connection, pooled
  // The one connection is taken by a call in flight to a stopped server.
  servers_[0]->pause();
  const std::unique_ptr<PendingReply> busy = send(*backend, "busy");
  constexpr auto kBound = 20ms;
  std::unique_ptr<PendingReply> unsent;
  const long long waited_ms = testing::elapsed_ms([&] {
    unsent = backend->send_eval_within(echo(), {"n"}, {"unsent"}, EvalSync::none, EvalOptions{.send_within = kBound});
  });
  // The busy call cannot end before the server resumes: the send gave up
  // by its own bound, and long before the busy call's command timeout.
  EXPECT_LT(waited_ms, kCommandTimeoutMs / 2) << "the send waited for a connection past its bound";
  EXPECT_TRUE(unsent->wait_for(0ms));  // its outcome is in: nothing was sent
  EXPECT_THAT(get_error<PoolExhaustedError>(*unsent), HasSubstr("caller's deadline"));
  EXPECT_FALSE(busy->wait_for(0ms));
  servers_[0]->resume();
  EXPECT_EQ(busy->get().reply, Reply::bulk("busy"));
  EXPECT_EQ(servers_[0]->command({"GET", "n"}), "\"1\"");  // only the busy call ran
  // With a connection free, the bound is no obstacle.
  EXPECT_EQ(backend->send_eval_within(echo(), {"n"}, {"sent"}, EvalSync::none, EvalOptions{.send_within = kBound})
                ->get()
                .reply,
            Reply::bulk("sent"));
}

TEST_F(SendEvalTest, SyncWithoutReplicasWaitsForNothing) {
  const SyncedReply synced = backends_[0]->send_eval(echo(), {"n"}, {"alone"}, EvalSync::replicas)->get();
  EXPECT_EQ(synced.reply, Reply::bulk("alone"));
  EXPECT_EQ(synced.ack.replicas, 0);
  EXPECT_FALSE(synced.ack.unconfirmed());
}

TEST(SendEvalFailureTest, KilledServerFailsGetWithAConnectionErrorNamingIt) {
  RedisServer server;
  const std::string endpoint = "127.0.0.1:" + std::to_string(server.port());
  const std::unique_ptr<Backend> backend = testing::warm_backend(server, kCommandTimeoutMs);

  server.pause();  // no reply can come before the kill
  const std::unique_ptr<PendingReply> in_flight = backend->send_eval(echo(), {"n"}, {""}, EvalSync::none);
  server.kill();
  EXPECT_TRUE(in_flight->wait_for(testing::kEventually));  // the failure is the outcome
  EXPECT_THAT(get_error<ConnectionError>(*in_flight), HasSubstr(endpoint));
  // Sent to a server that is gone: the failure is kept for get() too.
  const std::unique_ptr<PendingReply> after = backend->send_eval(echo(), {"n"}, {""}, EvalSync::none);
  EXPECT_THAT(get_error<ConnectionError>(*after), HasSubstr(endpoint));

  server.start();
  EXPECT_TRUE(testing::eventually([&] {
    try {
      return backend->send_eval(echo(), {"n"}, {"back"}, EvalSync::none)->get().reply == Reply::bulk("back");
    } catch (const ConnectionError&) {
      return false;  // still in the reconnect backoff
    }
  }));
}

TEST(SendEvalFailureTest, HungServerFailsGetWithATimeoutErrorAfterTheCommandTimeout) {
  RedisServer server;
  const auto backend = make_redis_backend(testing::test_options(server));
  backend->eval(echo(), {"warm-up"}, {""});
  server.pause();
  const std::unique_ptr<PendingReply> pending = backend->send_eval(echo(), {"n"}, {""}, EvalSync::none);
  EXPECT_FALSE(pending->wait_for(50ms));
  std::string message;
  const long long ms = testing::elapsed_ms([&] { message = get_error<TimeoutError>(*pending); });
  EXPECT_GE(ms, testing::kTestCommandTimeoutMs - 50);
  EXPECT_THAT(message, HasSubstr("127.0.0.1:" + std::to_string(server.port())));
  EXPECT_THAT(message, HasSubstr("command_timeout_ms"));
  server.resume();
  EXPECT_EQ(backend->send_eval(echo(), {"n"}, {"resumed"}, EvalSync::none)->get().reply, Reply::bulk("resumed"));
}

}  // namespace
}  // namespace turnstile
