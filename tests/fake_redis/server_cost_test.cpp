// The fake server's virtual cost, BUSY, persistence across restart and
// clock skew (fake_redis/server.h, turnstile/sim/server_options.h).

#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "fake_redis/keyspace.h"
#include "fake_redis/redis_errors.h"
#include "fake_redis/server.h"
#include "fake_redis/virtual_clock.h"

namespace turnstile::testing {
namespace {

using namespace std::chrono_literals;
using sim::Persistence;
using sim::ServerOptions;

// A script making ARGV[1] calls (GET of KEYS[1]).
const std::string kCalls = "for i = 1, tonumber(ARGV[1]) do redis.call('get', KEYS[1]) end return 0";

class ServerCostTest : public ::testing::Test {
 protected:
  explicit ServerCostTest(ServerOptions options = ServerOptions()) : server_(clock_, options) {}
  Reply run(const std::vector<std::string>& argv) { return server_.execute(*session_, argv); }
  Reply run_calls(int calls) { return run({"EVAL", kCalls, "1", "k", std::to_string(calls)}); }
  Instant start() const { return clock_.now(); }

  sim::VirtualClock clock_;
  sim::Server server_;
  std::unique_ptr<sim::Session> session_ = server_.connect();
};

TEST_F(ServerCostTest, DefaultsAreTheMeasuredCosts) {
  // docs/simulation.md, "Virtual cost"; tools/measure_fake_cost.py.
  const ServerOptions options;
  EXPECT_EQ(options.command_cost, 150ns);
  EXPECT_EQ(options.script_base_cost, 1'100ns);
  EXPECT_EQ(options.script_cost_per_call, 1'200ns);
  EXPECT_EQ(options.busy_script_threshold, 5s);
  EXPECT_EQ(options.persistence, Persistence::none);
  const ServerOptions idealised = ServerOptions::idealised();
  EXPECT_EQ(idealised.command_cost + idealised.script_base_cost + idealised.script_cost_per_call, 0ns);
}

TEST_F(ServerCostTest, ACommandCostsItsServiceTimeAndCommandsQueue) {
  const Instant t0 = start();
  EXPECT_EQ(server_.answers_at(), t0);
  run({"SET", "k", "v"});
  EXPECT_EQ(server_.completed_at(), t0 + 150ns);
  EXPECT_EQ(server_.answers_at(), t0 + 150ns) << "the next command waits for the first";
  run({"GET", "k"});  // let in at once by a direct caller: it still runs after the first
  EXPECT_EQ(server_.completed_at(), t0 + 300ns);
  clock_.advance_by(1ms);
  EXPECT_EQ(server_.answers_at(), clock_.now());
  run({"GET", "k"});
  EXPECT_EQ(server_.completed_at(), clock_.now() + 150ns) << "an idle server starts at once";
}

TEST_F(ServerCostTest, AScriptCostsItsBasePlusEachCall) {
  const Instant t0 = start();
  run_calls(0);
  EXPECT_EQ(server_.completed_at() - t0, 1'100ns);
  clock_.advance_by(1s);
  run_calls(10);
  EXPECT_EQ(server_.completed_at() - clock_.now(), 1'100ns + 10 * 1'200ns);
  clock_.advance_by(1s);
  run_calls(1'000);
  EXPECT_EQ(server_.completed_at() - clock_.now(), 1'100ns + 1'000 * 1'200ns) << "O(N) calls, O(N) time";
}

class SlowCallsTest : public ServerCostTest {
 protected:
  static ServerOptions slow() {
    ServerOptions options;
    options.script_cost_per_call = 1ms;
    options.busy_script_threshold = 5s;
    return options;
  }
  SlowCallsTest() : ServerCostTest(slow()) {}
};

TEST_F(SlowCallsTest, AScriptPastTheThresholdMakesOthersBusyUntilItEnds) {
  const Instant t0 = start();
  auto other = server_.connect();
  // 6000 calls: 6 s and a little, past the 5 s threshold.
  EXPECT_EQ(run({"EVAL", kCalls + " ", "1", "k", "6000"}), Reply::integer(0));
  EXPECT_EQ(run({"EVAL", "redis.call('set', KEYS[1], 'w') " + kCalls, "1", "k", "0"}), Reply::integer(0));
  const Instant end = server_.completed_at();
  EXPECT_GT(end - t0, 6s);
  // Before the threshold a command waits for it; then it is answered BUSY.
  EXPECT_EQ(server_.answers_at(), t0 + 5s);
  clock_.advance_to(t0 + 5s);
  const Reply busy = server_.execute(*other, {"GET", "k"});
  EXPECT_EQ(busy, Reply::error(std::string(sim::redis_errors::kBusyScript)));
  EXPECT_EQ(busy.as_string(), "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.");
  EXPECT_EQ(server_.completed_at(), t0 + 5s) << "BUSY is answered at once";
  clock_.advance_to(t0 + 6s);
  EXPECT_EQ(server_.execute(*other, {"SET", "x", "1"}), Reply::error(std::string(sim::redis_errors::kBusyScript)));
  EXPECT_EQ(server_.execute(*other, {"GET", "x"}), Reply::error(std::string(sim::redis_errors::kBusyScript)));
  clock_.advance_to(end);
  EXPECT_EQ(server_.answers_at(), end);
  EXPECT_EQ(server_.execute(*other, {"GET", "k"}), Reply::bulk("w")) << "the script's writes are there";
  EXPECT_EQ(server_.execute(*other, {"GET", "x"}), Reply::nil()) << "the refused SET never ran";
}

TEST_F(SlowCallsTest, AScriptUnderTheThresholdOnlyQueuesOthers) {
  const Instant t0 = start();
  run_calls(4'000);
  EXPECT_EQ(server_.answers_at(), server_.completed_at());
  clock_.advance_to(t0 + 4s);
  EXPECT_EQ(run({"GET", "k"}), Reply::nil());
}

TEST_F(SlowCallsTest, ARestartEndsTheBusyScript) {
  run_calls(6'000);
  clock_.advance_by(5500ms);
  server_.restart();
  EXPECT_EQ(server_.answers_at(), clock_.now());
  EXPECT_EQ(run({"GET", "k"}), Reply::nil());
}

class PersistenceTest : public ServerCostTest {
 protected:
  // Writes "early" at 10.2 s, "late" at 10.7 s, "last" at 11.3 s, then
  // restarts at 11.6 s: the fsync at 11 s covers the first two.
  void write_and_restart() {
    clock_.advance_to(Instant(10'200ms));
    run({"SET", "early", "1", "PX", "60000"});
    run({"EVAL", "redis.call('hset', KEYS[1], 'f', 'v') return 1", "1", "hash"});
    clock_.advance_to(Instant(10'700ms));
    run({"SET", "late", "1"});
    clock_.advance_to(Instant(11'300ms));
    run({"SET", "last", "1"});
    run({"DEL", "early"});
    clock_.advance_to(Instant(11'600ms));
    script_sha_ = run({"SCRIPT", "LOAD", "return 1"}).as_string();
    server_.restart();
  }
  bool exists(const std::string& key) { return run({"EXISTS", key}) == Reply::integer(1); }
  std::string script_sha_;
};

TEST_F(PersistenceTest, WithoutPersistenceARestartLosesEverything) {
  write_and_restart();
  EXPECT_FALSE(exists("late"));
  EXPECT_FALSE(exists("last"));
  EXPECT_FALSE(exists("hash"));
}

TEST_F(PersistenceTest, EverysecKeepsTheWritesUpToTheLastFsync) {
  server_.set_persistence(Persistence::everysec);
  write_and_restart();
  EXPECT_TRUE(exists("early")) << "its DEL came after the fsync";
  EXPECT_EQ(run({"PTTL", "early"}), Reply::integer(60'000 - 1'400)) << "with its absolute deadline";
  EXPECT_TRUE(exists("late"));
  EXPECT_TRUE(exists("hash")) << "a script's writes, by their effects";
  EXPECT_FALSE(exists("last")) << "written after the last fsync";
  EXPECT_EQ(run({"SCRIPT", "EXISTS", script_sha_}), Reply::array({Reply::integer(0)})) << "scripts are not persisted";
}

TEST_F(PersistenceTest, AlwaysKeepsEveryWrite) {
  server_.set_persistence(Persistence::always);
  write_and_restart();
  EXPECT_FALSE(exists("early"));
  EXPECT_TRUE(exists("late"));
  EXPECT_TRUE(exists("last"));
  EXPECT_TRUE(exists("hash"));
}

// The read-write lock's hash, recovered from the AOF's copy, then released
// field by field: the recovered hash must index its own fields, not the ones
// of the hash the restart dropped.
TEST_F(PersistenceTest, AHashRecoveredByEverysecCanBeEditedAfterTheRestart) {
  server_.set_persistence(Persistence::everysec);
  clock_.advance_to(Instant(10'200ms));
  run({"EVAL", "redis.call('hset', KEYS[1], 'mode', 'read') redis.call('hset', KEYS[1], 'r', 2) return 1", "1", "rw"});
  run({"HINCRBY", "rw", "r", "-1"});
  clock_.advance_to(Instant(11'600ms));
  server_.restart();
  EXPECT_EQ(run({"EVAL", "redis.call('hdel', KEYS[1], 'r') return redis.call('hgetall', KEYS[1])", "1", "rw"}),
            Reply::array({Reply::bulk("mode"), Reply::bulk("read")}));
  EXPECT_EQ(run({"HSET", "rw", "w", "1"}), Reply::integer(1));
  EXPECT_EQ(run({"HLEN", "rw"}), Reply::integer(2));
}

TEST_F(PersistenceTest, EverysecCountsWhatWasThereWhenItStartedAsFsynced) {
  run({"SET", "before", "1"});
  server_.set_persistence(Persistence::everysec);
  server_.restart();
  EXPECT_TRUE(exists("before"));
  EXPECT_EQ(sim::persistence_name(Persistence::everysec), "everysec");
}

TEST_F(ServerCostTest, AClockOffsetMovesTimeAndAbsoluteExpiriesOnly) {
  clock_.advance_to(Instant(5s));
  const std::int64_t world_unix_ms = clock_.unix_time_ms();
  server_.set_clock_skew(-2s, 0);
  const Reply time = run({"TIME"});
  EXPECT_EQ(std::stoll(time.as_array()[0].as_string()), (world_unix_ms - 2'000) / 1'000);
  run({"SET", "relative", "v", "PX", "1000"});
  run({"SET", "absolute", "v", "PXAT", std::to_string(world_unix_ms + 1'000)});
  // By the server's clock the absolute deadline is 3 s away.
  EXPECT_EQ(run({"PTTL", "relative"}), Reply::integer(1'000));
  EXPECT_EQ(run({"PTTL", "absolute"}), Reply::integer(3'000));
}

TEST_F(ServerCostTest, AFastServerClockExpiresKeysEarlyInWorldTime) {
  server_.set_clock_skew(0s, 100'000);  // 10 % fast
  run({"SET", "k", "v", "PX", "10000"});
  clock_.advance_to(Instant(9'000ms));
  EXPECT_EQ(run({"PTTL", "k"}), Reply::integer(100)) << "9.9 s passed on the server";
  const std::optional<std::int64_t> deadline = server_.keyspace().deadline_ms("k");
  ASSERT_TRUE(deadline.has_value());
  EXPECT_EQ(*deadline, 10'000);
  // World ms 9090 ends at server ms 9999.9; 9091 starts at 10000.1 and
  // ends at 10001.2: the key dies during it.
  EXPECT_EQ(server_.server_clock().world_ms(*deadline), 9'090) << "the last world ms the key lives throughout";
  clock_.advance_to(Instant(9'091ms));
  EXPECT_EQ(run({"EXISTS", "k"}), Reply::integer(1));
  clock_.advance_to(Instant(9'092ms));
  EXPECT_EQ(run({"EXISTS", "k"}), Reply::integer(0));
}

TEST_F(ServerCostTest, ADriftChangeIsAnchoredWhereItIsMade) {
  clock_.advance_to(Instant(10s));
  server_.set_clock_skew(0s, 100'000);
  EXPECT_EQ(server_.server_clock().now_ms(), 10'000) << "no jump";
  clock_.advance_to(Instant(20s));
  EXPECT_EQ(server_.server_clock().now_ms(), 21'000);
  server_.set_clock_skew(0s, -100'000);
  clock_.advance_to(Instant(30s));
  EXPECT_EQ(server_.server_clock().now_ms(), 30'000);
  // World ms 20000 ends at server ms 21000.9; 20001 ends at 21001.8.
  EXPECT_EQ(server_.server_clock().world_ms(21'000), 20'000);
}

}  // namespace
}  // namespace turnstile::testing
