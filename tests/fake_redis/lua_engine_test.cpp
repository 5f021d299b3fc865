// Unit tests of the Lua engine alone: a scripted command callback stands in
// for the server. Expected texts were taken from redis-server 7.0.15.

#include "fake_redis/lua_engine.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

namespace turnstile::testing {
namespace {

using sim::LuaEngine;

class LuaEngineTest : public ::testing::Test {
 protected:
  // Runs `source` with the recording callback below.
  Reply eval(const std::string& source, const std::vector<std::string>& keys = {},
             const std::vector<std::string>& args = {}) {
    return engine_.eval(source, keys, args, callback_);
  }

  // "<message> script: <sha>, on @user_script:<line>."
  // EXPECTs that `source` fails with Redis's runtime error text.
  void expect_script_error(const std::string& source, const std::string& message, int line = 1) {
    EXPECT_EQ(eval(source), script_error(source, message, line)) << source;
  }

  static Reply script_error(const std::string& source, const std::string& message, int line = 1) {
    return Reply::error(message + " script: " + sim::sha1_hex(source) + ", on @user_script:" + std::to_string(line) +
                        ".");
  }

  LuaEngine engine_;
  std::vector<std::vector<std::string>> calls_;
  // Replies by command name; unknown commands answer "+OK".
  std::map<std::string, Reply> replies_;
  LuaEngine::CommandCallback callback_ = [this](const std::vector<std::string>& argv) {
    calls_.push_back(argv);
    auto found = replies_.find(argv[0]);
    return found == replies_.end() ? Reply::status("OK") : found->second;
  };
};

TEST_F(LuaEngineTest, Sha1HexMatchesKnownDigests) {
  EXPECT_EQ(sim::sha1_hex(""), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
  EXPECT_EQ(sim::sha1_hex("return 1"), "e0e1f9fabfc9d4800c877a703b823ac0578ff8db");
}

TEST_F(LuaEngineTest, LuaValuesBecomeRepliesAsInRedis) {
  EXPECT_EQ(eval("return 1"), Reply::integer(1));
  EXPECT_EQ(eval("return 3.99"), Reply::integer(3));
  EXPECT_EQ(eval("return -3.99"), Reply::integer(-3));
  EXPECT_EQ(eval("return -0.5"), Reply::integer(0));
  EXPECT_EQ(eval("return 'a\\0b'"), Reply::bulk(std::string("a\0b", 3)));
  EXPECT_EQ(eval("return true"), Reply::integer(1));
  EXPECT_EQ(eval("return false"), Reply::nil());
  EXPECT_EQ(eval("return nil"), Reply::nil());
  EXPECT_EQ(eval("return tostring"), Reply::nil());  // functions have no reply type
  EXPECT_EQ(eval("return {ok='fine'}"), Reply::status("fine"));
  EXPECT_EQ(eval("return {err='My Error'}"), Reply::error("My Error"));
  EXPECT_EQ(eval("return {ok='a', err='b'}"), Reply::error("b"));
  EXPECT_EQ(eval("return {ok='a\\r\\nb'}"), Reply::status("a  b"));
  EXPECT_EQ(eval("return {err='a\\r\\nb'}"), Reply::error("a  b"));
  EXPECT_EQ(eval("return {err=1}"), Reply::array({}));
  EXPECT_EQ(eval("return {double=3.5}"), Reply::bulk("3.5"));
  EXPECT_EQ(eval("return {big_number='123'}"), Reply::bulk("123"));
  EXPECT_EQ(eval("return {map={a=1}}"), Reply::array({Reply::bulk("a"), Reply::integer(1)}));
  EXPECT_EQ(eval("return {set={a=true}}"), Reply::array({Reply::bulk("a")}));
}

TEST_F(LuaEngineTest, NumbersOutOfRangeTruncateLikeRedisOnX86) {
  const Reply minimum = Reply::integer(std::numeric_limits<std::int64_t>::min());
  EXPECT_EQ(eval("return 1e30"), minimum);
  EXPECT_EQ(eval("return -1e30"), minimum);
  EXPECT_EQ(eval("return 0/0"), minimum);
  EXPECT_EQ(eval("return 2^63"), minimum);
  EXPECT_EQ(eval("return 9007199254740993"), Reply::integer(9007199254740992));
}

TEST_F(LuaEngineTest, ArraysAreCutAtTheFirstNilAndNest) {
  EXPECT_EQ(eval("return {1, 2, nil, 4}"), Reply::array({Reply::integer(1), Reply::integer(2)}));
  EXPECT_EQ(eval("return {[2]=1}"), Reply::array({}));
  EXPECT_EQ(eval("return {1, 2, x=3}"), Reply::array({Reply::integer(1), Reply::integer(2)}));
  EXPECT_EQ(eval("return {true, false, 'a', {1, {2}}, 2.5}"),
            Reply::array({Reply::integer(1), Reply::nil(), Reply::bulk("a"),
                          Reply::array({Reply::integer(1), Reply::array({Reply::integer(2)})}), Reply::integer(2)}));
  EXPECT_EQ(eval("return {1, {err='x'}, {ok='y'}}"),
            Reply::array({Reply::integer(1), Reply::error("x"), Reply::status("y")}));
}

TEST_F(LuaEngineTest, SelfReferencingTableEndsInAStackLimitErrorInsteadOfCrashing) {
  Reply reply = eval("local t = {} t[1] = t return t");
  int depth = 0;
  const Reply* level = &reply;
  while (level->is_array() && level->as_array().size() == 1) {
    level = &level->as_array()[0];
    ++depth;
  }
  EXPECT_GT(depth, 100);
  EXPECT_EQ(*level, Reply::error("ERR reached lua stack limit"));
}

TEST_F(LuaEngineTest, KeysAndArgvAreFreshTablesPerCall) {
  EXPECT_EQ(eval("return {KEYS[1], ARGV[1], ARGV[2], #ARGV}", {"k"}, {"a", "b"}),
            Reply::array({Reply::bulk("k"), Reply::bulk("a"), Reply::bulk("b"), Reply::integer(2)}));
  EXPECT_EQ(eval("KEYS[1] = 'x' return KEYS", {"k"}), Reply::array({Reply::bulk("x")}));
  EXPECT_EQ(eval("return #KEYS"), Reply::integer(0));
}

TEST_F(LuaEngineTest, RedisCallPassesStringsAndFormatsNumbersWithFullPrecision) {
  replies_["echo"] = Reply::bulk("x");
  eval("redis.call('echo', 'a', 12.5, 1/3, 1e15, 1e17, -2.5e-7, 3, -0.0)");
  ASSERT_EQ(calls_.size(), 1u);
  EXPECT_EQ(calls_[0], (std::vector<std::string>{"echo", "a", "12.5", "0.33333333333333331", "1000000000000000",
                                                 "1e+17", "-2.4999999999999999e-07", "3", "-0"}));
}

TEST_F(LuaEngineTest, RepliesBecomeLuaValuesAsInRedis) {
  replies_["int"] = Reply::integer(42);
  replies_["bulk"] = Reply::bulk("b");
  replies_["nil"] = Reply::nil();
  replies_["status"] = Reply::status("PONG");
  replies_["array"] = Reply::array({Reply::integer(1), Reply::nil(), Reply::bulk("c")});
  EXPECT_EQ(eval("return {type(redis.call('int')), redis.call('int') + 1}"),
            Reply::array({Reply::bulk("number"), Reply::integer(43)}));
  EXPECT_EQ(eval("return redis.call('bulk')"), Reply::bulk("b"));
  EXPECT_EQ(eval("return type(redis.call('nil'))"), Reply::bulk("boolean"));
  EXPECT_EQ(eval("return redis.call('status').ok"), Reply::bulk("PONG"));
  EXPECT_EQ(eval("return redis.call('status')"), Reply::status("PONG"));
  EXPECT_EQ(eval("local a = redis.call('array') return {#a, a[1], type(a[2]), a[3]}"),
            Reply::array({Reply::integer(3), Reply::integer(1), Reply::bulk("boolean"), Reply::bulk("c")}));
}

TEST_F(LuaEngineTest, RedisCallRaisesErrorRepliesAndPcallReturnsThem) {
  replies_["hget"] = Reply::error("WRONGTYPE Operation against a key holding the wrong kind of value");
  expect_script_error("return redis.call('hget', 's', 'f')",
                      "WRONGTYPE Operation against a key holding the wrong kind of value");
  EXPECT_EQ(eval("return redis.pcall('hget', 's', 'f')"),
            Reply::error("WRONGTYPE Operation against a key holding the wrong kind of value"));
  EXPECT_EQ(eval("return redis.pcall('hget', 's', 'f').err"),
            Reply::bulk("WRONGTYPE Operation against a key holding the wrong kind of value"));
  // A command error without a space gets the ERR code, as luaPushErrorBuff does.
  replies_["odd"] = Reply::error("ODD");
  EXPECT_EQ(eval("return redis.pcall('odd')"), Reply::error("ERR ODD"));
}

TEST_F(LuaEngineTest, WritesBeforeAnErrorAreKept) {
  replies_["fail"] = Reply::error("ERR nope");
  eval("redis.call('set', 'a', '1') redis.call('fail') redis.call('set', 'b', '2')");
  ASSERT_EQ(calls_.size(), 2u);
  EXPECT_EQ(calls_[0][0], "set");
  EXPECT_EQ(calls_[1][0], "fail");
}

TEST_F(LuaEngineTest, BadRedisCallArgumentsAnswerRedisTexts) {
  for (const std::string source : {"return redis.call('get', {})", "return redis.call('echo', true)",
                                   "return redis.call('echo', nil)", "return redis.call('echo', 'a', nil)"}) {
    expect_script_error(source, "ERR Lua redis lib command arguments must be strings or integers");
  }
  expect_script_error("return redis.call()", "ERR Please specify at least one argument for this redis lib call");
  EXPECT_EQ(eval("return redis.pcall('get', {})"),
            Reply::error("ERR Lua redis lib command arguments must be strings or integers"));
  EXPECT_TRUE(calls_.empty());
}

TEST_F(LuaEngineTest, PcallHandsCaughtErrorTablesToTheScriptAsStrings) {
  replies_["nosuch"] = Reply::error("ERR Unknown Redis command called from script");
  EXPECT_EQ(eval("return {pcall(redis.call, 'nosuch')}"),
            Reply::array({Reply::nil(), Reply::bulk("ERR Unknown Redis command called from script")}));
  EXPECT_EQ(eval("return {pcall(error, {err='x'})}"), Reply::array({Reply::nil(), Reply::bulk("x")}));
  EXPECT_EQ(eval("local ok, e = pcall(function() local x = nil + 1 end) return e"),
            Reply::bulk("user_script:1: attempt to perform arithmetic on a nil value"));
  EXPECT_EQ(eval("return {pcall(function() return 1, 2 end)}"),
            Reply::array({Reply::integer(1), Reply::integer(1), Reply::integer(2)}));
}

TEST_F(LuaEngineTest, ErrorAndStatusReplyHelpers) {
  EXPECT_EQ(eval("return redis.error_reply('oops')"), Reply::error("ERR oops"));
  EXPECT_EQ(eval("return redis.error_reply('My Error')"), Reply::error("My Error"));
  EXPECT_EQ(eval("return redis.error_reply('-My Error')"), Reply::error("My Error"));
  EXPECT_EQ(eval("return redis.error_reply(1)"), Reply::error("ERR wrong number or type of arguments"));
  EXPECT_EQ(eval("return redis.status_reply('fine')"), Reply::status("fine"));
  EXPECT_EQ(eval("return redis.status_reply(1)"), Reply::error("ERR wrong number or type of arguments"));
}

TEST_F(LuaEngineTest, RuntimeErrorsCarryScriptShaAndLine) {
  expect_script_error("return nil + 1", "ERR user_script:1: attempt to perform arithmetic on a nil value");
  expect_script_error("local a = 1\nerror('boom')", "ERR user_script:2: boom", 2);
  expect_script_error("error('x', 0)", "ERR x");
  expect_script_error("error()", "ERR nil");
  expect_script_error("error({err='MY thing'})", "MY thing");
  expect_script_error("error({err=5})", "5");
  expect_script_error("error('a\\nb')", "ERR user_script:1: a b");
  // Redis 7.0.15 crashes here; the fake answers.
  expect_script_error("error({foo=1})", "ERR unknown error");
}

TEST_F(LuaEngineTest, CompileErrorsAnswerRedisText) {
  EXPECT_EQ(eval("return ("),
            Reply::error("ERR Error compiling script (new function): user_script:1: unexpected symbol near '<eof>'"));
  EXPECT_EQ(engine_.load("return ("),
            Reply::error("ERR Error compiling script (new function): user_script:1: unexpected symbol near '<eof>'"));
  EXPECT_FALSE(engine_.exists(sim::sha1_hex("return (")));
}

TEST_F(LuaEngineTest, GlobalsAreReadOnlyAndUnknownOnesRefused) {
  expect_script_error("x = 1", "ERR user_script:1: Attempt to modify a readonly table");
  expect_script_error("return x", "ERR user_script:1: Script attempted to access nonexistent global variable 'x'");
  expect_script_error("string.x = 1", "ERR user_script:1: Attempt to modify a readonly table");
  expect_script_error("redis.call = nil", "ERR user_script:1: Attempt to modify a readonly table");
  expect_script_error("rawset(_G, 'x', 1)", "ERR Attempt to modify a readonly table");
  expect_script_error("setmetatable(_G, nil)", "ERR Attempt to modify a readonly table");
  expect_script_error("getmetatable('').__index.x = 1", "ERR user_script:1: Attempt to modify a readonly table");
  // Still intact afterwards.
  EXPECT_EQ(eval("return ('abc'):upper() .. type(redis.call) .. tostring(rawget(_G, 'x'))"),
            Reply::bulk("ABCfunctionnil"));
  EXPECT_EQ(eval("return type(rawget(_G, 'redis'))"), Reply::bulk("table"));
  EXPECT_EQ(eval("local t = {} t.x = 1 return t.x"), Reply::integer(1));
}

TEST_F(LuaEngineTest, SandboxHasRedisLibrariesOnly) {
  EXPECT_EQ(eval("local out = {} for _, n in ipairs({'os', 'io', 'dofile', 'loadfile', 'require', 'print', "
                 "'setfenv', 'getfenv', 'newproxy', 'debug', 'package'}) do out[#out + 1] = type(rawget(_G, n)) "
                 "end return table.concat(out, ' ')"),
            Reply::bulk("nil nil nil nil nil nil nil nil nil nil nil"));
  EXPECT_EQ(eval("return {type(string.format), type(table.concat), type(math.floor), type(loadstring), "
                 "type(coroutine.wrap), _VERSION}"),
            Reply::array({Reply::bulk("function"), Reply::bulk("function"), Reply::bulk("function"),
                          Reply::bulk("function"), Reply::bulk("function"), Reply::bulk("Lua 5.1")}));
  EXPECT_EQ(eval("return loadstring('return 7')()"), Reply::integer(7));
}

TEST_F(LuaEngineTest, RedisTableHelpers) {
  EXPECT_EQ(eval("return redis.sha1hex('')"), Reply::bulk("da39a3ee5e6b4b0d3255bfef95601890afd80709"));
  EXPECT_EQ(eval("return redis.sha1hex(1)"), Reply::bulk("356a192b7913b04c54574d18c28d46e6395428ab"));
  expect_script_error("return redis.sha1hex()", "ERR wrong number of arguments");
  EXPECT_EQ(eval("return redis.log(redis.LOG_WARNING, 'x')"), Reply::nil());
  EXPECT_EQ(eval("return {redis.LOG_DEBUG, redis.LOG_VERBOSE, redis.LOG_NOTICE, redis.LOG_WARNING}"),
            Reply::array({Reply::integer(0), Reply::integer(1), Reply::integer(2), Reply::integer(3)}));
  expect_script_error("return redis.log(99, 'x')", "ERR Invalid debug level.");
  expect_script_error("return redis.log(1)", "ERR redis.log() requires two arguments or more.");
  EXPECT_EQ(eval("return redis.REDIS_VERSION"), Reply::bulk("7.0.15"));
}

TEST_F(LuaEngineTest, MathRandomFollowsRedisRand48AcrossCallsUntilRestart) {
  // The first values of a fresh redis-server 7.0.15.
  EXPECT_EQ(eval("return tostring(math.random())"), Reply::bulk("0.39646477363839"));
  EXPECT_EQ(eval("return tostring(math.random())"), Reply::bulk("0.84048536971234"));
  engine_.flush();  // SCRIPT FLUSH keeps the generator
  EXPECT_EQ(eval("return tostring(math.random())"), Reply::bulk("0.35333609737146"));
  EXPECT_EQ(eval("math.randomseed(0) return tostring(math.random())"), Reply::bulk("0.17082803611217"));
  engine_.restart();
  EXPECT_EQ(eval("return tostring(math.random())"), Reply::bulk("0.39646477363839"));
  expect_script_error("return math.random(0)", "ERR user_script:1: bad argument #1 to 'random' (interval is empty)");
}

TEST_F(LuaEngineTest, ScriptCacheLoadExistsEvalshaFlush) {
  EXPECT_EQ(engine_.load("return 1"), Reply::bulk("e0e1f9fabfc9d4800c877a703b823ac0578ff8db"));
  EXPECT_TRUE(engine_.exists("e0e1f9fabfc9d4800c877a703b823ac0578ff8db"));
  EXPECT_TRUE(engine_.exists("E0E1F9FABFC9D4800C877A703B823AC0578FF8DB"));
  EXPECT_FALSE(engine_.exists("abc"));
  EXPECT_EQ(engine_.evalsha("E0E1F9FABFC9D4800C877A703B823AC0578FF8DB", {}, {}, callback_), Reply::integer(1));
  engine_.flush();
  EXPECT_EQ(engine_.evalsha("e0e1f9fabfc9d4800c877a703b823ac0578ff8db", {}, {}, callback_),
            Reply::error("NOSCRIPT No matching script. Please use EVAL."));
  eval("return 2");  // EVAL caches too
  EXPECT_TRUE(engine_.exists(sim::sha1_hex("return 2")));
}

TEST_F(LuaEngineTest, ShebangFlagsAreParsedAndLineNumbersKept) {
  EXPECT_EQ(eval("#!lua\nreturn 1"), Reply::integer(1));
  expect_script_error("#!lua\nreturn nil+1", "ERR user_script:2: attempt to perform arithmetic on a nil value", 2);
  EXPECT_EQ(eval("#!foo\nreturn 1"), Reply::error("ERR Unexpected engine in script shebang: #!foo"));
  EXPECT_EQ(eval("#!lua flags=bogus\nreturn 1"), Reply::error("ERR Unexpected flag in script shebang: bogus"));
  EXPECT_EQ(eval("#!lua name=x\nreturn 1"), Reply::error("ERR Unknown lua shebang option: name=x"));
  EXPECT_EQ(eval("#!lua"), Reply::error("ERR Invalid script shebang"));
  bool read_only_seen = false;
  engine_.eval("#!lua flags=no-writes,allow-oom\nreturn redis.call('get', 'k')", {}, {},
               [&](const std::vector<std::string>&) {
                 read_only_seen = engine_.running_read_only_script();
                 return Reply::nil();
               });
  EXPECT_TRUE(read_only_seen);
  EXPECT_FALSE(engine_.running_read_only_script());
}

TEST_F(LuaEngineTest, RunawayScriptIsStoppedWithTheScriptKillText) {
  expect_script_error("while true do end", "ERR Script killed by user with SCRIPT KILL...");
  EXPECT_EQ(eval("return 1"), Reply::integer(1));
}

TEST_F(LuaEngineTest, RunawayAllocationFailsInsteadOfExhaustingMemory) {
  const Reply reply = eval("local s = 'x' while true do s = s .. s end");
  ASSERT_TRUE(reply.is_error());
  EXPECT_NE(reply.as_string().find("not enough memory"), std::string::npos) << reply.to_string();
  EXPECT_EQ(eval("return 1"), Reply::integer(1));
}

TEST_F(LuaEngineTest, CallbackExceptionsBecomeErrorsNotCrashes) {
  const Reply reply = engine_.eval("return redis.pcall('x')", {}, {}, [](const std::vector<std::string>&) -> Reply {
    throw std::runtime_error("broken");
  });
  EXPECT_EQ(reply, Reply::error("ERR broken"));
}

}  // namespace
}  // namespace turnstile::testing
