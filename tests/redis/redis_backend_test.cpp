// The hiredis backend's command and script path against a real redis-server:
// replies of every type, EVALSHA with reload, typed error replies, refused
// commands, database selection, Unix sockets, and many threads on one pool.

#include <unistd.h>

#include <atomic>
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

using ::testing::HasSubstr;
using testing::RedisServer;

class RedisBackendTest : public testing::SharedRedisServerTest {
 protected:
  void SetUp() override {
    server_->command({"FLUSHALL"});
    backend_ = make_redis_backend(testing::test_options(*server_));
  }

  Reply eval_inline(const std::string& body, std::vector<std::string> args = {}) {
    std::vector<std::string> argv = {"EVAL", body, "0"};
    argv.insert(argv.end(), args.begin(), args.end());
    return backend_->command(argv);
  }

  std::unique_ptr<Backend> backend_;
};

TEST_F(RedisBackendTest, ConvertsRepliesOfEveryType) {
  EXPECT_EQ(eval_inline("return nil"), Reply::nil());
  EXPECT_EQ(eval_inline("return 42"), Reply::integer(42));
  EXPECT_EQ(eval_inline("return -7"), Reply::integer(-7));
  EXPECT_EQ(eval_inline("return 'text'"), Reply::bulk("text"));
  EXPECT_EQ(eval_inline("return ''"), Reply::bulk(""));
  EXPECT_EQ(eval_inline("return redis.status_reply('FINE')"), Reply::status("FINE"));
  EXPECT_EQ(eval_inline("return {}"), Reply::array({}));
  EXPECT_EQ(eval_inline("return {1, 'two', {3, {'four'}}}"),
            Reply::array({Reply::integer(1), Reply::bulk("two"),
                          Reply::array({Reply::integer(3), Reply::array({Reply::bulk("four")})})}));
  // Lua false is nil; a table stops at its first nil.
  EXPECT_EQ(eval_inline("return {1, false, 2}"), Reply::array({Reply::integer(1), Reply::nil(), Reply::integer(2)}));
  // A nested error reply is a value; only a top-level one is raised.
  EXPECT_EQ(eval_inline("return {1, redis.error_reply('ERR inner')}"),
            Reply::array({Reply::integer(1), Reply::error("ERR inner")}));
  EXPECT_EQ(backend_->command({"PING"}), Reply::status("PONG"));
}

TEST_F(RedisBackendTest, ArgumentsAndRepliesAreBinarySafe) {
  const std::string binary("a\0b\r\n\xff", 6);
  EXPECT_EQ(eval_inline("return ARGV[1]", {binary}), Reply::bulk(binary));
  backend_->command({"SET", binary, binary});
  EXPECT_EQ(backend_->command({"GET", binary}), Reply::bulk(binary));
}

TEST_F(RedisBackendTest, EvalRunsTheEmbeddedScript) {
  // Owner ids of the real shape ("<uuid>:<task>"): a hash whose fields are
  // not owner ids is refused as not a lock (lua/lib/lock_shape.lua).
  const std::string first = "9f1c2d3e-4a5b-4c6d-8e7f-0a1b2c3d4e5f:1";
  const std::string second = "9f1c2d3e-4a5b-4c6d-8e7f-0a1b2c3d4e5f:2";
  const Script& acquire = scripts::reentrant_lock_acquire;
  EXPECT_EQ(backend_->eval(acquire, {"lock"}, {"30000", first}), Reply::nil());
  EXPECT_EQ(backend_->eval(acquire, {"lock"}, {"30000", first}), Reply::nil());  // reentrant
  const Reply ttl = backend_->eval(acquire, {"lock"}, {"30000", second});
  ASSERT_TRUE(ttl.is_integer()) << ttl.to_string();
  EXPECT_GT(ttl.as_integer(), 29000);
  EXPECT_EQ(server_->command({"HGET", "lock", first}), "\"2\"");
}

TEST_F(RedisBackendTest, ScriptFlushMidUseIsInvisible) {
  const Script& acquire = scripts::reentrant_lock_acquire;
  const std::string sha(acquire.sha1);
  for (int round = 0; round < 3; ++round) {
    server_->command({"SCRIPT", "FLUSH"});
    EXPECT_EQ(server_->command({"SCRIPT", "EXISTS", sha}), "[(integer) 0]");
    EXPECT_EQ(backend_->eval(acquire, {"lock"}, {"30000", "owner:1"}), Reply::nil());
    EXPECT_EQ(server_->command({"SCRIPT", "EXISTS", sha}), "[(integer) 1]");
  }
  EXPECT_EQ(server_->command({"HGET", "lock", "owner:1"}), "\"3\"");
}

TEST_F(RedisBackendTest, ErrorRepliesAreTyped) {
  backend_->command({"SET", "plain", "value"});
  // WRONGTYPE raised by redis.call inside the script keeps its code.
  EXPECT_THROW(backend_->eval(scripts::reentrant_lock_acquire, {"plain"}, {"30000", "o"}), WrongTypeError);
  EXPECT_THROW(backend_->command({"HGET", "plain", "f"}), WrongTypeError);
  EXPECT_THROW(eval_inline("return undefined_global.field"), ScriptError);
  EXPECT_THROW(eval_inline("this is not lua"), ScriptError);
  try {
    backend_->command({"NOSUCHCOMMAND"});
    FAIL() << "no error";
  } catch (const ScriptError&) {
    FAIL() << "not a script error";
  } catch (const ServerError& error) {
    EXPECT_EQ(error.code(), "ERR");
    EXPECT_THAT(error.server_message(), HasSubstr("unknown command"));
  }
  // The connection stays usable after error replies.
  EXPECT_EQ(backend_->command({"GET", "plain"}), Reply::bulk("value"));
}

TEST_F(RedisBackendTest, OutOfMemoryIsTyped) {
  server_->command({"CONFIG", "SET", "maxmemory", "1"});
  try {
    EXPECT_THROW(backend_->eval(scripts::reentrant_lock_acquire, {"lock"}, {"30000", "o"}), OutOfMemoryError);
  } catch (...) {
    server_->command({"CONFIG", "SET", "maxmemory", "0"});
    throw;
  }
  server_->command({"CONFIG", "SET", "maxmemory", "0"});
}

// A master with min-replicas-to-write and no replica refuses a lock's
// script (a write) in its words, typed; the refused grant did not run.
TEST_F(RedisBackendTest, AMasterWithTooFewReplicasIsTyped) {
  RedisServer master({"--min-replicas-to-write", "1"});
  const auto backend = make_redis_backend(testing::test_options(master));
  EXPECT_THROW(backend->eval(scripts::reentrant_lock_acquire, {"lock"}, {"30000", "o"}), NoReplicasError);
  EXPECT_EQ(master.command({"EXISTS", "lock"}), "(integer) 0");
}

TEST_F(RedisBackendTest, ReadOnlyReplicaIsTyped) {
  // A replica of a master that does not exist still refuses writes.
  RedisServer replica({"--replicaof", "127.0.0.1", std::to_string(testing::free_loopback_port())});
  const auto backend = make_redis_backend(testing::test_options(replica));
  EXPECT_THROW(backend->eval(scripts::reentrant_lock_acquire, {"lock"}, {"30000", "o"}), ReadOnlyError);
  EXPECT_THROW(backend->command({"SET", "k", "v"}), ReadOnlyError);
}

TEST_F(RedisBackendTest, RefusesCommandsThatChangeConnectionState) {
  for (const char* name : {"SELECT", "subscribe", "Multi", "WATCH", "HELLO", "AUTH", "MONITOR", "QUIT", "RESET"}) {
    try {
      backend_->command({name, "x"});
      ADD_FAILURE() << name << " was sent";
    } catch (const InvalidArgumentError& error) {
      EXPECT_THAT(error.what(), HasSubstr("pooled connection")) << name;
    }
  }
  EXPECT_THROW(backend_->command({}), InvalidArgumentError);
}

TEST_F(RedisBackendTest, SelectsTheDatabaseOfTheUrl) {
  RedisOptions options = testing::test_options(*server_);
  options.db = 2;
  const auto backend = make_redis_backend(options);
  EXPECT_EQ(backend->describe(), server_->url() + "/2");
  backend->command({"SET", "in-db-2", "x"});
  EXPECT_EQ(server_->command({"EXISTS", "in-db-2"}), "(integer) 0");  // db 0
  EXPECT_EQ(backend->command({"EXISTS", "in-db-2"}), Reply::integer(1));
  EXPECT_THAT(backend->command({"CLIENT", "INFO"}).as_string(), HasSubstr(" db=2 "));
}

TEST_F(RedisBackendTest, ConnectsOverAUnixSocket) {
  const std::string path = "/tmp/turnstile-test-" + std::to_string(getpid()) + ".sock";
  RedisServer server({"--unixsocket", path, "--unixsocketperm", "700"});
  RedisOptions options = RedisOptions::from_url("unix://" + path + "?db=1");
  options.command_timeout_ms = testing::kTestCommandTimeoutMs;
  const auto backend = make_redis_backend(options);
  EXPECT_EQ(backend->eval(scripts::reentrant_lock_acquire, {"lock"}, {"30000", "o"}), Reply::nil());
  const std::string info = backend->command({"CLIENT", "INFO"}).as_string();
  EXPECT_THAT(info, HasSubstr(" db=1 "));
  EXPECT_THAT(info, HasSubstr("flags=U"));  // a Unix socket client
  server.stop();
  unlink(path.c_str());
}

TEST_F(RedisBackendTest, ManyThreadsShareOneBackend) {
  // More threads than pooled connections, so callers also wait for each other.
  constexpr int kThreads = 8;
  constexpr int kCallsPerThread = 200;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const std::string owner = "owner:" + std::to_string(t);
      for (int i = 0; i < kCallsPerThread; ++i) {
        try {
          const Reply acquired = backend_->eval(scripts::reentrant_lock_acquire, {"lock:" + owner}, {"30000", owner});
          const Reply counted = backend_->command({"INCR", "calls"});
          if (!acquired.is_nil() || !counted.is_integer()) ++failures;
        } catch (const std::exception&) {
          ++failures;
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(server_->command({"GET", "calls"}), "\"" + std::to_string(kThreads * kCallsPerThread) + "\"");
  EXPECT_EQ(server_->command({"HGET", "lock:owner:3", "owner:3"}), "\"" + std::to_string(kCallsPerThread) + "\"");
}

TEST_F(RedisBackendTest, PoolStaysWithinItsBound) {
  RedisOptions options = testing::test_options(*server_);
  options.pool_size = 2;
  const auto backend = make_redis_backend(options);
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 50; ++i) backend->command({"INCR", "n"});
    });
  }
  for (std::thread& thread : threads) thread.join();
  // Count this backend's connections: every one ran INCR; the fixture's
  // probe connection runs CLIENT LIST itself.
  const std::string list = server_->command({"CLIENT", "LIST"});
  std::size_t incr_clients = 0;
  for (std::size_t at = list.find("cmd=incr"); at != std::string::npos; at = list.find("cmd=incr", at + 1)) {
    ++incr_clients;
  }
  EXPECT_LE(incr_clients, 2u);
  EXPECT_GE(incr_clients, 1u);
  EXPECT_EQ(server_->command({"GET", "n"}), "\"300\"");
}

}  // namespace
}  // namespace turnstile
