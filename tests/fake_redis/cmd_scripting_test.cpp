// EVAL, EVALSHA and SCRIPT through the fake server, and every embedded
// lua/*.lua script run on it at least once.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "fake_server_fixture.h"
#include "lua_scripts.h"
#include "fake_redis/lua_engine.h"
#include "turnstile/script.h"

namespace turnstile::testing {
namespace {

class ScriptingTest : public FakeServerTest {
 protected:
  static Reply script_error(const std::string& source, const std::string& message, int line = 1) {
    return error(message + " script: " + sim::sha1_hex(source) + ", on @user_script:" + std::to_string(line) + ".");
  }
};

TEST_F(ScriptingTest, EvalRunsCommandsOnTheKeyspace) {
  EXPECT_EQ(run({"EVAL", "redis.call('set', KEYS[1], ARGV[1]) return redis.call('get', KEYS[1])", "1", "k", "v"}),
            bulk("v"));
  EXPECT_EQ(run({"get", "k"}), bulk("v"));
}

TEST_F(ScriptingTest, NumkeysIsValidatedAsRedisDoes) {
  EXPECT_EQ(run({"EVAL", "return 1", "2", "a"}), error("ERR Number of keys can't be greater than number of args"));
  EXPECT_EQ(run({"EVAL", "return 1", "-1"}), error("ERR Number of keys can't be negative"));
  for (const char* bad : {"x", "", "00001", " 1", "1.0", "+1", "99999999999999999999"}) {
    EXPECT_EQ(run({"EVAL", "return 1", bad, "k"}), error("ERR value is not an integer or out of range")) << bad;
  }
  EXPECT_EQ(run({"EVAL", "return 1"}), error("ERR wrong number of arguments for 'eval' command"));
  // With no keys every extra word is an argument, so KEYS[1] is nil.
  EXPECT_EQ(run({"EVAL", "return {KEYS[1], ARGV[1]}", "0", "k"}), Reply::array({}));
}

TEST_F(ScriptingTest, EvalshaAndTheScriptCache) {
  const std::string sha = "e0e1f9fabfc9d4800c877a703b823ac0578ff8db";
  EXPECT_EQ(run({"EVALSHA", sha, "0"}), error("NOSCRIPT No matching script. Please use EVAL."));
  EXPECT_EQ(run({"SCRIPT", "LOAD", "return 1"}), bulk(sha));
  EXPECT_EQ(run({"SCRIPT", "EXISTS", sha, "E0E1F9FABFC9D4800C877A703B823AC0578FF8DB", "abc"}),
            Reply::array({integer(1), integer(1), integer(0)}));
  EXPECT_EQ(run({"EVALSHA", "E0E1F9FABFC9D4800C877A703B823AC0578FF8DB", "0"}), integer(1));
  EXPECT_EQ(run({"EVALSHA", sha, "1"}), error("ERR Number of keys can't be greater than number of args"));
  // A sha of the wrong length is refused before numkeys is looked at.
  EXPECT_EQ(run({"EVALSHA", "abc", "x"}), error("NOSCRIPT No matching script. Please use EVAL."));
  EXPECT_EQ(run({"SCRIPT", "FLUSH"}), ok());
  EXPECT_EQ(run({"SCRIPT", "EXISTS", sha}), Reply::array({integer(0)}));
  EXPECT_EQ(run({"SCRIPT", "flush", "async"}), ok());
  EXPECT_EQ(run({"SCRIPT", "FLUSH", "SYNC"}), ok());
  EXPECT_EQ(run({"SCRIPT", "FLUSH", "bad"}), error("ERR SCRIPT FLUSH only support SYNC|ASYNC option"));
  EXPECT_EQ(run({"SCRIPT", "FLUSH", "SYNC", "x"}), error("ERR SCRIPT FLUSH only support SYNC|ASYNC option"));
}

TEST_F(ScriptingTest, ScriptSubcommandErrors) {
  EXPECT_EQ(run({"SCRIPT"}), error("ERR wrong number of arguments for 'script' command"));
  EXPECT_EQ(run({"SCRIPT", "foo"}), error("ERR unknown subcommand 'foo'. Try SCRIPT HELP."));
  EXPECT_EQ(run({"script", "FOO\nbar"}), error("ERR unknown subcommand 'FOO bar'. Try SCRIPT HELP."));
  // A subcommand is the whole argument (Redis 7's command table): a NUL
  // byte makes it unknown, printed up to the NUL (as redis-server 7 does;
  // found by fuzz/corpus/commands/script-load-nul-subcommand-arity).
  EXPECT_EQ(run({"SCRIPT", std::string("LOAD\0ab\rc", 9)}), error("ERR unknown subcommand 'LOAD'. Try SCRIPT HELP."));
  EXPECT_EQ(run({"SCRIPT", "Load"}), error("ERR wrong number of arguments for 'script|load' command"));
  EXPECT_EQ(run({"SCRIPT", "LOAD"}), error("ERR wrong number of arguments for 'script|load' command"));
  EXPECT_EQ(run({"SCRIPT", "LOAD", "a", "b"}), error("ERR wrong number of arguments for 'script|load' command"));
  EXPECT_EQ(run({"SCRIPT", "EXISTS"}), error("ERR wrong number of arguments for 'script|exists' command"));
  EXPECT_EQ(run({"SCRIPT", "KILL"}), error("NOTBUSY No scripts in execution right now."));
  EXPECT_EQ(run({"SCRIPT", "LOAD", "return ("}),
            error("ERR Error compiling script (new function): user_script:1: unexpected symbol near '<eof>'"));
  const Reply help = run({"SCRIPT", "HELP"});
  ASSERT_TRUE(help.is_array());
  EXPECT_EQ(help.as_array().size(), 17u);
}

TEST_F(ScriptingTest, CommandsFromScriptsGetScriptTexts) {
  const std::string unknown = "return redis.call('nosuch')";
  EXPECT_EQ(run({"EVAL", unknown, "0"}), script_error(unknown, "ERR Unknown Redis command called from script"));
  const std::string arity = "return redis.call('get')";
  EXPECT_EQ(run({"EVAL", arity, "0"}),
            script_error(arity, "ERR Wrong number of args calling Redis command from script"));
  const std::string nested = "return redis.call('eval', 'return 1', '0')";
  EXPECT_EQ(run({"EVAL", nested, "0"}), script_error(nested, "ERR This Redis command is not allowed from script"));
  const std::string subscribe = "return redis.call('subscribe', 'x')";
  EXPECT_EQ(run({"EVAL", subscribe, "0"}),
            script_error(subscribe, "ERR This Redis command is not allowed from script"));
  const std::string wrong_type = "redis.call('set', 's', '1') return redis.call('hget', 's', 'f')";
  EXPECT_EQ(run({"EVAL", wrong_type, "0"}), script_error(wrong_type, kWrongType));
  EXPECT_EQ(run({"EVAL", "return redis.pcall('hget', 's', 'f')", "0"}), error(kWrongType));
}

TEST_F(ScriptingTest, WritesBeforeAnErrorStay) {
  const std::string source = "redis.call('set', 'a', '1') redis.call('nosuch') redis.call('set', 'b', '2')";
  EXPECT_TRUE(run({"EVAL", source, "0"}).is_error());
  EXPECT_EQ(run({"get", "a"}), bulk("1"));
  EXPECT_EQ(run({"get", "b"}), Reply::nil());
}

TEST_F(ScriptingTest, NoWritesScriptsMayReadButNotWrite) {
  const std::string write = "#!lua flags=no-writes\nreturn redis.call('set', 'a', 'b')";
  EXPECT_EQ(run({"EVAL", write, "0"}),
            script_error(write, "ERR Write commands are not allowed from read-only scripts.", 2));
  EXPECT_EQ(run({"EVAL", "#!lua flags=no-writes\nreturn redis.call('get', 'a')", "0"}), Reply::nil());
  const std::string unknown = "#!lua flags=no-writes\nreturn redis.call('nosuch')";
  EXPECT_EQ(run({"EVAL", unknown, "0"}), script_error(unknown, "ERR Unknown Redis command called from script", 2));
}

TEST_F(ScriptingTest, ScriptsSeeVirtualTime) {
  run({"set", "k", "v", "PX", "1000"});
  advance_ms(400);
  EXPECT_EQ(run({"EVAL", "return redis.call('pttl', KEYS[1])", "1", "k"}), integer(600));
  advance_ms(600);  // Redis expires a key only once its instant has passed
  EXPECT_EQ(run({"EVAL", "return redis.call('exists', KEYS[1])", "1", "k"}), integer(1));
  advance_ms(1);
  EXPECT_EQ(run({"EVAL", "return redis.call('exists', KEYS[1])", "1", "k"}), integer(0));
}

TEST_F(ScriptingTest, RestartForgetsScriptsAndResetsRandom) {
  const std::string random = "return tostring(math.random())";
  const Reply first = run({"EVAL", random, "0"});
  run({"SCRIPT", "LOAD", "return 1"});
  server_.lua().restart();
  EXPECT_EQ(run({"SCRIPT", "EXISTS", sim::sha1_hex("return 1")}), Reply::array({integer(0)}));
  EXPECT_EQ(run({"EVAL", random, "0"}), first);
}

// ---- the product's scripts -----------------------------------------------------

constexpr int kMaxScriptKeys = 6;
constexpr int kMaxScriptArgs = 10;

TEST_F(ScriptingTest, EveryEmbeddedScriptLoadsUnderItsShaAndRuns) {
  ASSERT_FALSE(embedded_scripts().empty());
  for (const Script* script : embedded_scripts()) {
    SCOPED_TRACE(std::string(script->name));
    EXPECT_EQ(sim::sha1_hex(script->source), script->sha1);
    EXPECT_EQ(run({"SCRIPT", "LOAD", std::string(script->source)}), bulk(std::string(script->sha1)));
    // Every script takes at most kMaxScriptKeys keys and kMaxScriptArgs
    // arguments, and a number is a valid value for each argument (lease,
    // owner id, token, message, count), so on fresh keys every one runs to a
    // reply that is not a Lua error.
    const std::string prefix = "{" + std::string(script->name) + "}";
    std::vector<std::string> call = {"EVALSHA", std::string(script->sha1), std::to_string(kMaxScriptKeys)};
    for (int key = 0; key < kMaxScriptKeys; ++key) call.push_back(prefix + std::to_string(key));
    call.insert(call.end(), kMaxScriptArgs, "30000");
    const Reply reply = run(call);
    if (reply.is_error()) {
      EXPECT_EQ(reply.as_string().find("user_script"), std::string::npos) << reply.to_string();
    }
  }
}

TEST_F(ScriptingTest, ReentrantAcquireScriptAcquiresReentersAndReportsTtl) {
  const Script& acquire = scripts::reentrant_lock_acquire;
  // Owner ids of Redisson's shape: a lock hash of other fields is refused.
  const std::string a = "aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa:1";
  const std::string b = "bbbbbbbb-bbbb-4bbb-8bbb-bbbbbbbbbbbb:1";
  auto evalsha = [&](const std::string& owner) {
    return run({"EVALSHA", std::string(acquire.sha1), "1", "lock", "30000", owner});
  };
  EXPECT_EQ(evalsha(a), error("NOSCRIPT No matching script. Please use EVAL."));
  run({"SCRIPT", "LOAD", std::string(acquire.source)});
  EXPECT_EQ(evalsha(a), Reply::nil());
  EXPECT_EQ(evalsha(a), Reply::nil());
  EXPECT_EQ(run({"hget", "lock", a}), bulk("2"));
  advance_ms(1000);
  EXPECT_EQ(evalsha(b), integer(29000));
}

}  // namespace
}  // namespace turnstile::testing
