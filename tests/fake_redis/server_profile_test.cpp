// Redis 6.2's profile (server_profile.h): the commands and script errors
// that set it apart from 7.0, word for word as redis-server 6.2.16 answers
// (the differential test checks them against the real server).

#include <gtest/gtest.h>

#include <string>

#include "fake_redis/server_profile.h"
#include "fake_server_fixture.h"

namespace turnstile::testing {
namespace {

class Redis62Test : public FakeServerTest {
 protected:
  Redis62Test() : FakeServerTest(sim::ServerProfile::of(sim::ServerRelease::redis_6_2)) {}

  Reply eval(const std::string& script) { return run({"EVAL", script, "0"}); }
};

TEST_F(Redis62Test, CommandsOf70AreUnknownOrRefused) {
  EXPECT_EQ(run({"spublish", "c", "m"}), error("ERR unknown command `spublish`, with args beginning with: `c`, `m`, "));
  EXPECT_EQ(run({"set", "k", "v"}), ok());
  EXPECT_EQ(run({"expire", "k", "100", "nx"}), error("ERR wrong number of arguments for 'expire' command"));
  EXPECT_EQ(run({"expire", "k", "100"}), integer(1));
  EXPECT_EQ(run({"set", "k", "v", "nx", "get"}), error("ERR syntax error"));
  EXPECT_EQ(run({"set", "k", "v", "get", "nx"}), error("ERR syntax error"));
  EXPECT_EQ(run({"set", "k", "v", "px", "0"}), error("ERR invalid expire time in set"));
  EXPECT_EQ(run({"pubsub", "shardchannels"}),
            error("ERR Unknown subcommand or wrong number of arguments for 'shardchannels'. Try PUBSUB HELP."));
  EXPECT_EQ(run({"script", "exists"}), Reply::array({}));
  EXPECT_EQ(run({"script", "load"}),
            error("ERR Unknown subcommand or wrong number of arguments for 'load'. Try SCRIPT HELP."));
}

TEST_F(Redis62Test, DecrbyOfTheLowestIntegerAddsIt) {
  EXPECT_EQ(run({"decrby", "n", "-9223372036854775808"}), integer(INT64_MIN));
  EXPECT_EQ(run({"decrby", "n", "9223372036854775807"}), error("ERR increment or decrement would overflow"));
}

TEST_F(Redis62Test, ASmallSortedSetKeepsNegativeZero) {
  EXPECT_EQ(run({"zadd", "z", "-0", "m"}), integer(1));
  EXPECT_EQ(run({"zscore", "z", "m"}), bulk("-0"));
}

TEST_F(Redis62Test, ScriptErrorsAreWrappedStrings) {
  const std::string sha = "82903a0434f1503e152f89c03c9acd881a0e8150";  // error('boom')
  EXPECT_EQ(eval("error('boom')"),
            error("ERR Error running script (call to f_" + sha + "): @user_script:1: user_script:1: boom"));
  EXPECT_EQ(eval("return redis.pcall('nosuch')"),
            error("@user_script: 1: Unknown Redis command called from Lua script"));
  EXPECT_EQ(eval("return {pcall(redis.call, 'nosuch')}"),
            Reply::array({Reply::nil(), bulk("=[C]: -1: Unknown Redis command called from Lua script")}));
  EXPECT_EQ(eval("return redis.error_reply('oops')"), error("oops"));
  const Reply table_error = eval("error({err='x'})");
  ASSERT_TRUE(table_error.is_error());
  EXPECT_TRUE(table_error.as_string().ends_with(
      "@err_handler_def:9: err_handler_def:9: attempt to concatenate local 'err' (a table value)"));
  run({"set", "s", "1"});
  const Reply wrong_type = eval("return redis.call('hget', 's', 'f')");
  ASSERT_TRUE(wrong_type.is_error());
  EXPECT_TRUE(wrong_type.as_string().ends_with("): @user_script:1: " + kWrongType));
}

TEST_F(Redis62Test, AShebangIsALuaSyntaxError) {
  EXPECT_EQ(eval("#!lua\nreturn 1"),
            error("ERR Error compiling script (new function): user_script:1: unexpected symbol near '#'"));
  EXPECT_EQ(eval("return {big_number='1'}"), Reply::array({}));
  EXPECT_EQ(eval("return type(print)"), bulk("function"));
}

}  // namespace
}  // namespace turnstile::testing
