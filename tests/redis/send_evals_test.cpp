// Backend::send_evals on the hiredis backend against a real redis-server:
// a batch is written on one pooled connection (a pool of one holds a
// whole batch in flight), replies are taken in any order, NOSCRIPT is
// reloaded once per script and batch, an error reply is its own call's
// outcome, a batch longer than one pipeline is cut, an abandoned batch's
// connection is closed, and a killed server fails every call not answered.
// (On a Cluster, grouped per master: tests/redis/cluster_test.cpp.)

#include <memory>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "echo_script.h"
#include "fake_redis/lua_engine.h"  // sha1_hex, as the build hashes scripts
#include "redis/pipelined_evals.h"
#include "redis_server.h"
#include "redis_test_support.h"
#include "turnstile/errors.h"
#include "turnstile/redis_backend.h"

namespace turnstile {
namespace {

using testing::echo;
using ::testing::HasSubstr;
using testing::RedisServer;
using namespace std::chrono_literals;

// Besides the echo (echo_script.h), a script that answers the new count of
// KEYS[1]. Calls are kept in flight by stopping the server (SIGSTOP).
constexpr std::string_view kCountSource = R"lua(
return redis.call('INCR', KEYS[1])
)lua";

const Script& count() {
  static const std::string sha1 = sim::sha1_hex(kCountSource);
  static const Script script{"count", kCountSource, sha1};
  return script;
}

constexpr int kCommandTimeoutMs = 2000;

std::vector<EvalRequest> echoes(int calls, const std::string& key = "n") {
  std::vector<EvalRequest> requests;
  for (int i = 0; i < calls; ++i) requests.push_back(EvalRequest{&echo(), {key}, {"call " + std::to_string(i)}});
  return requests;
}

class SendEvalsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = new RedisServer(); }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }

  void SetUp() override {
    server_->command({"FLUSHALL"});
    server_->command({"SCRIPT", "FLUSH"});
    RedisOptions options = testing::test_options(*server_);
    options.command_timeout_ms = kCommandTimeoutMs;
    options.pool_size = 1;  // a batch needing a second connection would wait for it
    backend_ = make_redis_backend(options);
  }

  // Both scripts loaded, the one connection open and pooled.
  void preload() {
    backend_->eval(echo(), {"warm-up"}, {""});
    backend_->eval(count(), {"warm-up"}, {});
  }

  static inline RedisServer* server_ = nullptr;
  std::unique_ptr<Backend> backend_;
};

TEST_F(SendEvalsTest, ABatchIsInFlightOnOneConnection) {
  preload();
  server_->pause();
  // Sent one by one, the second call would wait for the only connection
  // (up to the command timeout) and fail with PoolExhaustedError.
  std::vector<std::unique_ptr<PendingReply>> pending = backend_->send_evals(echoes(10));
  ASSERT_EQ(pending.size(), 10u);
  for (const auto& call : pending) EXPECT_FALSE(call->wait_for(0ms)) << "a reply came from a stopped server";
  server_->resume();
  for (int i = 0; i < 10; ++i) EXPECT_EQ(pending[i]->get().reply, Reply::bulk("call " + std::to_string(i)));
  EXPECT_EQ(server_->command({"GET", "n"}), "\"10\"");
  // The connection went back once every reply was read.
  EXPECT_EQ(backend_->eval(echo(), {"n"}, {"after"}), Reply::bulk("after"));
}

TEST_F(SendEvalsTest, RepliesAreTakenInAnyOrder) {
  preload();
  std::vector<std::unique_ptr<PendingReply>> pending = backend_->send_evals(echoes(5));
  // The last one first: the replies before it are read and kept.
  EXPECT_EQ(pending[4]->get().reply, Reply::bulk("call 4"));
  for (int i = 0; i < 4; ++i) {
    EXPECT_TRUE(pending[i]->wait_for(0ms)) << i;
    EXPECT_EQ(pending[i]->get().reply, Reply::bulk("call " + std::to_string(i)));
  }
}

TEST_F(SendEvalsTest, NoscriptIsReloadedOncePerScriptBehindTheBatch) {
  // Loaded once, then flushed: every call answers NOSCRIPT first, and a
  // load is counted as a reload (the counter's own rule).
  preload();
  server_->command({"SCRIPT", "FLUSH"});
  std::vector<EvalRequest> requests = echoes(3);
  requests.push_back(EvalRequest{&count(), {"c"}, {}});
  requests.push_back(EvalRequest{&count(), {"c"}, {}});
  const std::uint64_t reloads_before = backend_->counters().script_reloads;
  std::vector<std::unique_ptr<PendingReply>> pending = backend_->send_evals(std::move(requests));
  ASSERT_TRUE(pending[0]->wait_for(testing::kEventually));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(pending[i]->get().reply, Reply::bulk("call " + std::to_string(i)));
  // Each call ran once, in the order sent again.
  EXPECT_EQ(pending[3]->get().reply, Reply::integer(1));
  EXPECT_EQ(pending[4]->get().reply, Reply::integer(2));
  EXPECT_EQ(server_->command({"GET", "n"}), "\"3\"");
  EXPECT_EQ(backend_->counters().script_reloads - reloads_before, 2u) << "one SCRIPT LOAD per script";
}

TEST_F(SendEvalsTest, AnErrorReplyIsItsOwnCallsOutcome) {
  preload();
  server_->command({"HSET", "h", "f", "1"});
  std::vector<EvalRequest> requests = echoes(3);
  requests[1].keys = {"h"};
  std::vector<std::unique_ptr<PendingReply>> pending = backend_->send_evals(std::move(requests));
  EXPECT_THAT(testing::message_of<WrongTypeError>([&] { (void)pending[1]->get(); }), HasSubstr("WRONGTYPE"));
  EXPECT_EQ(pending[0]->get().reply, Reply::bulk("call 0"));
  EXPECT_EQ(pending[2]->get().reply, Reply::bulk("call 2"));
  EXPECT_EQ(server_->command({"GET", "n"}), "\"2\"");
}

TEST_F(SendEvalsTest, ALongBatchIsCutIntoPipelines) {
  preload();
  const int calls = static_cast<int>(redis::kMaxPipelinedEvals) * 2 + 7;
  RedisOptions options = testing::test_options(*server_);
  options.pool_size = 4;  // a pipeline's connection each
  const std::unique_ptr<Backend> backend = make_redis_backend(options);
  std::vector<std::unique_ptr<PendingReply>> pending = backend->send_evals(echoes(calls));
  ASSERT_EQ(pending.size(), static_cast<std::size_t>(calls));
  for (int i = 0; i < calls; ++i) ASSERT_EQ(pending[i]->get().reply, Reply::bulk("call " + std::to_string(i))) << i;
  EXPECT_EQ(server_->command({"GET", "n"}), "\"" + std::to_string(calls) + "\"");
}

TEST_F(SendEvalsTest, AnAbandonedBatchsConnectionIsClosedNotReused) {
  preload();
  server_->pause();
  std::vector<std::unique_ptr<PendingReply>> pending = backend_->send_evals(echoes(3));
  (void)pending[0]->wait_for(0ms);
  pending.clear();  // every reply abandoned in flight
  server_->resume();
  // Neither a stale reply nor the pool's one slot still taken.
  EXPECT_EQ(backend_->eval(echo(), {"m"}, {"fresh"}), Reply::bulk("fresh"));
  EXPECT_EQ(server_->command({"GET", "n"}), "\"3\"");  // the abandoned calls still ran
}

TEST_F(SendEvalsTest, AnEmptyBatchSendsNothing) { EXPECT_TRUE(backend_->send_evals({}).empty()); }

TEST(SendEvalsFailureTest, AKilledServerFailsEveryCallNotAnswered) {
  RedisServer server;
  const std::string endpoint = "127.0.0.1:" + std::to_string(server.port());
  const std::unique_ptr<Backend> backend = testing::warm_backend(server, kCommandTimeoutMs);
  server.pause();  // no reply can come before the kill
  std::vector<std::unique_ptr<PendingReply>> pending = backend->send_evals(echoes(4));
  server.kill();
  for (const auto& call : pending) {
    EXPECT_TRUE(call->wait_for(testing::kEventually));  // the failure is the outcome
    EXPECT_THAT(testing::message_of<ConnectionError>([&] { (void)call->get(); }), HasSubstr(endpoint));
  }
  // Sent to a server that is gone: every call's outcome is the failure.
  for (const auto& call : backend->send_evals(echoes(2))) {
    EXPECT_THAT(testing::message_of<ConnectionError>([&] { (void)call->get(); }), HasSubstr(endpoint));
  }
}

}  // namespace
}  // namespace turnstile
