// Scripts on the fake Redis against a real redis-server 7.0.15: hand-written
// cases for conversions and error texts, then thousands of scripts from a
// seeded random grammar (redis.call / redis.pcall over a few keys, returns of
// every Lua type, nested tables, error paths).
//
// TURNSTILE_SCRIPT_SEED=<n> replays another seed; a mismatch prints the
// seed, the step and the script.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "differential.h"
#include "lua_scripts.h"
#include "redisson_scripts.h"
#include "turnstile/script.h"

namespace turnstile::testing {
namespace {

using Argv = std::vector<std::string>;

constexpr std::uint64_t kDefaultSeed = 20260101;
constexpr int kRandomScripts = 2500;  // TURNSTILE_DIFFERENTIAL_SCRIPTS for a longer run
constexpr int kMaxReportedMismatches = 5;
constexpr int kStateCheckPeriod = 50;  // scripts between keyspace comparisons

class DifferentialScriptsTest : public DifferentialTest {
 protected:
  void eval_same(const std::string& source, const Argv& keys = {}, const Argv& args = {}) {
    const Argv argv = eval_argv(source, keys, args);
    expect_same(argv);
  }
  void eval_all(const std::vector<std::string>& sources) {
    for (const std::string& source : sources) eval_same(source);
  }
};

TEST_F(DifferentialScriptsTest, LuaValuesToReplies) {
  eval_all({
      "return 1",
      "return 3.99",
      "return -3.99",
      "return -0.5",
      "return 1e30",
      "return -1e30",
      "return 0/0",
      "return 2^63",
      "return 9223372036854775807",
      "return -9223372036854775808",
      "return 9007199254740993",
      "return 'a\\0b'",
      "return ''",
      "return true",
      "return false",
      "return nil",
      "return tostring",
      "return {ok='fine'}",
      "return {ok=''}",
      "return {err='My Error'}",
      "return {err=''}",
      "return {err='x'}",
      "return {ok='a', err='b'}",
      "return {ok='a\\r\\nb'}",
      "return {err='a\\r\\nb'}",
      "return {err='\\r\\na'}",
      "return {err='a\\n'}",
      "return {err=1}",
      "return {ok=1}",
      "return {double=3.5}",
      "return {double=1/0}",
      "return {double=-1/0}",
      "return {double='x'}",
      "return {big_number='123'}",
      "return {map={a=1}}",
      "return {set={a=true}}",
      "return {1, 2, nil, 4}",
      "return {[2]=1}",
      "return {1, 2, x=3}",
      "return {true, false, 'a', {1, {2}}, 2.5}",
      "return {1, {err='x'}, {ok='y'}}",
      "return {{{{{{'deep'}}}}}}",
      "return {{}, {{}}, ''}",
  });
}

TEST_F(DifferentialScriptsTest, RepliesToLuaValues) {
  eval_all({
      "return redis.call('set', 'k', 'v')",
      "return {redis.call('set', 'k', 'v')}",
      "return redis.call('set', 'k', 'v').ok",
      "return redis.call('get', 'nokey')",
      "return type(redis.call('get', 'nokey'))",
      "return {redis.call('get', 'nokey'), 1}",
      "return redis.call('incr', 'n') + 0.5",
      "return type(redis.call('incr', 'n'))",
      "redis.call('rpush', 'l', 'a', 'b') return redis.call('lrange', 'l', 0, -1)",
      "return #redis.call('lrange', 'l', 0, -1)",
      "return redis.call('ping')",
      "return redis.call('PING', 'a')",
      "return redis.call('type', 'l')",
      "return redis.call('type', 'l').ok",
      "return redis.call('echo', '')",
      "return {redis.call('echo', '')}",
  });
}

TEST_F(DifferentialScriptsTest, NumbersAsCommandArguments) {
  for (const char* number : {"12.5", "1/3", "100000000000000000000000", "123456789012", "1e15", "1e16", "1e17",
                             "-2.5e-7", "-0.0", "1/0", "-1/0", "0/0", "3", "-7"}) {
    eval_same(std::string("return redis.call('echo', ") + number + ")");
    eval_same(std::string("redis.call('set', 'n', ") + number + ") return redis.call('get', 'n')");
  }
}

TEST_F(DifferentialScriptsTest, RedisCallErrors) {
  eval_all({
      "return redis.call('nosuch')",
      "return redis.call(1)",
      "return redis.call('get')",
      "return redis.call('get', {})",
      "return redis.call('echo', true)",
      "return redis.call('echo', nil)",
      "return redis.call('echo', 'a', nil)",
      "return redis.call()",
      "return redis.pcall('nosuch')",
      "return redis.pcall('get', {})",
      "return redis.pcall()",
      "return {redis.pcall('nosuch')}",
      "redis.call('set', 's', '1') return redis.call('hget', 's', 'f')",
      "return redis.pcall('hget', 's', 'f')",
      "return redis.pcall('hget', 's', 'f').err",
      "return redis.call('incr', 'h')",
      "return redis.call('subscribe', 'x')",
      "return redis.call('eval', 'return 1', '0')",
      "return redis.call('script', 'load', 'return 1')",
      "return {pcall(redis.call, 'nosuch')}",
      "return {pcall(error)}",
      "return {pcall(error, {err='x'})}",
      "return xpcall(function() error({err='q'}) end, function(e) return e end)",
      "local ok, e = pcall(function() local x = nil + 1 end) return e",
  });
}

TEST_F(DifferentialScriptsTest, ReplyHelpers) {
  eval_all({
      "return redis.error_reply('oops')",
      "return redis.error_reply('My Error')",
      "return redis.error_reply('-My Error')",
      "return redis.error_reply('')",
      "return redis.error_reply('-')",
      "return redis.error_reply(1)",
      "return redis.error_reply()",
      "return redis.status_reply('fine')",
      "return redis.status_reply(1)",
      "return redis.sha1hex('')",
      "return redis.sha1hex(1)",
      "return redis.sha1hex({})",
      "return redis.sha1hex()",
      "return redis.log(redis.LOG_WARNING, 'x')",
      "return {redis.LOG_DEBUG, redis.LOG_VERBOSE, redis.LOG_NOTICE, redis.LOG_WARNING}",
      "return redis.log()",
      "return redis.log(99, 'x')",
      "return redis.log('a', 'x')",
      "return redis.log(1)",
      "return redis.log(1, {})",
      "return redis.REDIS_VERSION",
      "return redis.REDIS_VERSION_NUM",
      "return redis.setresp(2)",
      // Numbers no C int can hold (fuzz/corpus/lua_bridge/regression_setresp_infinity).
      "return redis.setresp(1/0)",
      "return redis.setresp(0/0)",
      "return redis.setresp(2^40)",
      "return redis.setresp(2.5)",
      "return redis.set_repl(1/0)",
      "return redis.set_repl(-2^40)",
      "return redis.set_repl(redis.REPL_ALL)",
      "return redis.setresp()",
      "return redis.set_repl()",
      "return redis.setresp(1)",
      "return redis.replicate_commands()",
  });
}

TEST_F(DifferentialScriptsTest, RuntimeAndCompileErrors) {
  eval_all({
      "return nil + 1",
      "error('boom')",
      "local a = 1\nerror('boom')",
      "error('x', 0)",
      "error()",
      "error('a\\nb')",
      "error('a\\n', 0)",
      "error({err='MY thing'})",
      "error({err=5})",
      "error({err='E x', line=7})",
      "return (",
      "return 1 +",
      "x = 1",
      "return x",
      "string.x = 1",
      "redis.call = nil",
      "rawset(_G, 'x', 1)",
      "setmetatable(_G, nil)",
      "getmetatable('').__index.x = 1",
      "return tostring(rawget(_G, 'zz'))",
      "return _G.zz",
      "return loadstring('return 1')()",
      "return math.random(0)",
      "return math.random(5, 3)",
      "return math.random(1, 2, 3)",
      "return string.rep()",
      "return ('x'):bad()",
      "local t = setmetatable({}, {__index = function() error('in') end}) return t.x",
      "return #KEYS",
      "KEYS[1] = 'x' return KEYS",
  });
}

TEST_F(DifferentialScriptsTest, SandboxContents) {
  eval_same(
      "local names = {'os','io','dofile','loadfile','require','module','collectgarbage','gcinfo','newproxy',"
      "'setfenv','getfenv','debug','print','unpack','select','coroutine','loadstring','load','pcall','xpcall',"
      "'error','tostring','tonumber','rawget','rawset','rawequal','setmetatable','getmetatable','ipairs','pairs',"
      "'next','type','assert','_VERSION','package','string','table','math','redis','KEYS','ARGV','_G'}\n"
      "local out = {}\nfor _, n in ipairs(names) do out[#out+1] = n .. '=' .. type(rawget(_G, n)) end\n"
      "return table.concat(out, ' ')");
}

TEST_F(DifferentialScriptsTest, SeededMathRandom) {
  eval_same("math.randomseed(42) return {math.random(100), math.random(5, 9), tostring(math.random())}");
  eval_same("math.randomseed(-7) return tostring(math.random())");
}

TEST_F(DifferentialScriptsTest, NumkeysAndScriptCommands) {
  const std::string sha = "e0e1f9fabfc9d4800c877a703b823ac0578ff8db";
  for (const Argv& argv : std::vector<Argv>{{"EVAL", "return 1", "2", "a"},
                                            {"EVAL", "return 1", "-1"},
                                            {"EVAL", "return 1", "x"},
                                            {"EVAL", "return 1", "00001", "k"},
                                            {"EVAL", "return 1", "+1", "k"},
                                            {"EVAL", "return 1"},
                                            {"EVAL", "return {KEYS[1], ARGV[1]}", "0", "k"},
                                            {"EVAL", "return {KEYS[1], ARGV[1]}", "1", "k", "a"},
                                            {"EVALSHA", sha, "0"},
                                            {"SCRIPT", "LOAD", "return 1"},
                                            {"SCRIPT", "EXISTS", sha, "abc"},
                                            {"EVALSHA", sha, "0"},
                                            {"EVALSHA", "E0E1F9FABFC9D4800C877A703B823AC0578FF8DB", "0"},
                                            {"EVALSHA", sha, "1"},
                                            {"EVALSHA", "abc", "x"},
                                            {"EVALSHA", "abc"},
                                            {"SCRIPT"},
                                            {"SCRIPT", "foo"},
                                            {"SCRIPT", "FOO\nbar"},
                                            {"SCRIPT", "LOAD"},
                                            {"SCRIPT", "LOAD", "a", "b"},
                                            {"SCRIPT", "EXISTS"},
                                            {"SCRIPT", "KILL"},
                                            {"SCRIPT", "KILL", "x"},
                                            {"SCRIPT", "HELP"},
                                            {"SCRIPT", "LOAD", "return ("},
                                            {"SCRIPT", "FLUSH", "bad"},
                                            {"SCRIPT", "FLUSH", "SYNC", "x"},
                                            {"SCRIPT", "FLUSH", "async"},
                                            {"SCRIPT", "EXISTS", sha},
                                            {"EVALSHA", sha, "0"}}) {
    expect_same(argv);
  }
}

TEST_F(DifferentialScriptsTest, Shebangs) {
  eval_all({"#!lua\nreturn 1", "#!lua\nreturn nil+1", "#!lua flags=no-writes\nreturn redis.call('set','a','b')",
            "#!lua flags=no-writes\nreturn redis.call('get','a')", "#!foo\nreturn 1", "#!lua flags=bogus\nreturn 1",
            "#!lua name=x\nreturn 1", "#!lua", "#!lua flags=no-writes,allow-oom\nreturn 2"});
}

TEST_F(DifferentialScriptsTest, EmbeddedScriptsOnFreshAndHeldLocks) {
  for (const Script* script : embedded_scripts()) {
    const std::string prefix = "{" + std::string(script->name) + "}";
    const Argv argv{
        "EVAL", std::string(script->source), "3", prefix + "a", prefix + "b", prefix + "c", "30000", "30000", "30000",
        "30000"};
    // A fenced acquisition floors its token at each server's own clock
    // (FencingCounterFloor below): here the counter is ahead of both.
    if (script == &scripts::fenced_lock_acquire) expect_same({"SET", prefix + "b", "9000000000000000"});
    expect_same(argv);  // fresh keys
    expect_same(argv);  // again, now that the first run may have created them
  }
}

// lua/lib/fencing_counter.lua: every token is the larger of the counter
// and the server's clock in microseconds (TIME inside the script: the
// fake's virtual clock, started at the real time), plus one; a counter
// ahead of the clock (Redisson's INCR, more than one token a microsecond)
// is only counted on, and one behind it (missing, stale) is floored.
TEST_F(DifferentialScriptsTest, FencingCounterFloor) {
  const std::string lock = "{fenced}lock";
  const std::string counter = "{fenced}counter";
  const Argv acquire{"EVALSHA", std::string(scripts::fenced_lock_acquire.sha1), "2", lock, counter, "30000", "owner"};
  ASSERT_EQ(real({"SCRIPT", "LOAD", std::string(scripts::fenced_lock_acquire.source)}),
            Reply::bulk(std::string(scripts::fenced_lock_acquire.sha1)));
  ASSERT_EQ(fake({"SCRIPT", "LOAD", std::string(scripts::fenced_lock_acquire.source)}),
            Reply::bulk(std::string(scripts::fenced_lock_acquire.sha1)));
  auto token_of = [](const Reply& reply) {
    EXPECT_TRUE(reply.is_array() && reply.as_array().size() == 2 && reply.as_array()[0] == Reply::integer(1))
        << reply.to_string();
    return reply.is_array() && reply.as_array().size() == 2 && reply.as_array()[1].is_integer()
               ? reply.as_array()[1].as_integer()
               : 0;
  };
  const std::int64_t real_first = token_of(real(acquire));
  const std::int64_t fake_first = token_of(fake(acquire));
  // Both near the real time in microseconds (the fake's clock started there).
  EXPECT_LE(std::llabs(real_first - fake_first), kTtlToleranceMs * 1000);
  EXPECT_GT(real_first, std::int64_t{1'600'000'000} * 1'000'000);
  // Rising from there, reentrant acquisitions included (in the same
  // microsecond of the fake's clock too: counted on).
  const std::int64_t real_second = token_of(real(acquire));
  const std::int64_t fake_second = token_of(fake(acquire));
  EXPECT_GT(real_second, real_first);
  EXPECT_EQ(fake_second, fake_first + 1);
  // A stale counter (Redisson's, from 1; an older AOF's) is floored again,
  // at a later clock reading.
  expect_same({"DEL", lock});
  expect_same({"SET", counter, "3"});
  clock().advance_by(std::chrono::milliseconds(1));
  EXPECT_GT(token_of(real(acquire)), real_second);
  EXPECT_GT(token_of(fake(acquire)), fake_second);
  // A counter ahead of the clock is only counted on: the same on both.
  expect_same({"DEL", lock});
  expect_same({"SET", counter, "9000000000000000"});
  expect_same(acquire);
  expect_same({"GET", counter});
}

// Issue #30: lock hashes written by other clients of Redisson's layout
// (node-redisson's "<uuid>:<uuid>", Redisson's transactions'
// "<uuid>:<thread>:<32 hex>", a hash of counts under any field) are locks
// to wait on for every acquire script; force-unlock deletes only those
// whose every owner is "<uuid>:..."; a hash of other values is refused by
// all. The same replies (a held lock's PTTL within the tolerance) and the
// same keys after, on both servers.
// HGETALL's (field, value) pairs, sorted.
std::vector<std::pair<std::string, std::string>> sorted_pairs(const Reply& flat) {
  std::vector<std::pair<std::string, std::string>> pairs;
  for (std::size_t i = 0; i + 1 < flat.as_array().size(); i += 2) {
    pairs.emplace_back(flat.as_array()[i].as_string(), flat.as_array()[i + 1].as_string());
  }
  std::sort(pairs.begin(), pairs.end());
  return pairs;
}

TEST_F(DifferentialScriptsTest, LockShapesOfForeignHashes) {
  const std::string uuid = "0c9a1e0e-7d52-4e44-9a8e-0123456789ab";
  const std::vector<Argv> hashes = {
      {uuid + ":" + uuid, "1"},                              // node-redisson
      {uuid + ":7:" + std::string(32, 'f'), "2"},            // Redisson's transactions
      {"views", "3"},                                        // counts under any field
      {"name", "alice"},                                     // user data
      {uuid + ":1", "0"},                                    // not a hold count
      {"mode", "write", uuid + ":" + uuid + ":write", "1"},  // a foreign writer
      {"mode", "read", "reader", "1"},                       // a foreign reader
      {"mode", "write", "writer:write", "x"},                // not a read-write lock
  };
  const std::vector<std::pair<const Script*, Argv>> calls = {
      {&scripts::reentrant_lock_acquire, {"30000", uuid + ":9"}},
      {&scripts::read_write_lock_read_acquire, {"30000", uuid + ":9", uuid + ":9:write", "0"}},
      {&scripts::read_write_lock_write_acquire, {"30000", uuid + ":9:write", uuid + ":9"}},
      {&scripts::lock_force_unlock, {"0", "hash", "PUBLISH"}},
      {&scripts::read_write_lock_force_unlock, {"any", "PUBLISH"}},
  };
  int n = 0;
  for (const Argv& fields : hashes) {
    for (const auto& [script, args] : calls) {
      const std::string key = "{shape}" + std::to_string(n++);
      Argv hset{"HSET", key};
      hset.insert(hset.end(), fields.begin(), fields.end());
      expect_same(hset);
      expect_same({"PEXPIRE", key, "60000"});
      Argv argv{"EVAL", std::string(script->source), "2", key, key + ":c"};
      if (script == &scripts::read_write_lock_read_acquire)
        argv = {"EVAL", std::string(script->source), "2", key, "{shape}:" + uuid + ":9:rwlock_timeout"};
      if (script == &scripts::reentrant_lock_acquire || script == &scripts::read_write_lock_write_acquire) {
        argv = {"EVAL", std::string(script->source), "1", key};
      }
      argv.insert(argv.end(), args.begin(), args.end());
      const Reply on_real = real(argv);
      const Reply on_fake = fake(argv);
      if (on_real.is_integer() && on_fake.is_integer() && on_real.as_integer() > 1000) {
        EXPECT_LE(std::abs(on_real.as_integer() - on_fake.as_integer()), kTtlToleranceMs) << describe(argv);
      } else {
        EXPECT_EQ(on_real, on_fake) << describe(argv);
      }
      // The same fields and values (a field longer than 64 bytes makes
      // Redis's hash a hashtable, listed in its own order).
      EXPECT_EQ(sorted_pairs(real({"HGETALL", key})), sorted_pairs(fake({"HGETALL", key}))) << key;
    }
  }
}

// ---- a fair queue shared with Redisson ------------------------------------------

// turnstile's fair-lock scripts and the Redisson behaviour of
// support/redisson_scripts.h on one queue: joins, refreshes that lift,
// Redisson's shifts, give-ups of both, an unlock of a lock already gone,
// eviction of a dead turnstile waiter. "now" is an argument, so deadlines
// are exact; replies carrying the lock's PTTL are compared within the TTL
// tolerance, and the queue, deadline and liveness keys after every step.
class DifferentialFairQueueTest : public DifferentialScriptsTest {
 protected:
  static constexpr std::int64_t kStart = 1'700'000'000'000;
  const std::string hash_ = "{fq}";
  const std::string queue_ = "redisson_lock_queue:{fq}";
  const std::string deadlines_ = "redisson_lock_timeout:{fq}";
  const std::string channel_ = "redisson_lock__channel:{fq}";
  const std::string waiters_ = "turnstile_lock_waiters:{fq}";

  void step(const std::string& source, const Argv& keys, const Argv& args) {
    const Argv argv = eval_argv(source, keys, args);
    const Reply on_real = real(argv);
    const Reply on_fake = fake(argv);
    // turnstile's {0, pttl, liveness}, Redisson's {0, pttl}.
    const bool pttl_pair = on_real.is_array() && on_real.as_array().size() >= 2 && on_fake.is_array() &&
                           on_fake.as_array().size() == on_real.as_array().size() &&
                           on_real.as_array()[0] == Reply::integer(0) && on_fake.as_array()[0] == Reply::integer(0) &&
                           on_real.as_array()[1].as_integer() > 0;
    const bool ttl_integer = on_real.is_integer() && on_fake.is_integer() && on_real.as_integer() > 1000 &&
                             std::abs(on_real.as_integer() - on_fake.as_integer()) <= kTtlToleranceMs;
    if (ttl_integer) {
      // Redisson's reply: an estimate from the lock's PTTL.
    } else if (pttl_pair) {
      EXPECT_LE(std::abs(on_real.as_array()[1].as_integer() - on_fake.as_array()[1].as_integer()), kTtlToleranceMs)
          << describe(argv);
      for (std::size_t i = 2; i < on_real.as_array().size(); ++i) {
        EXPECT_EQ(on_real.as_array()[i], on_fake.as_array()[i]) << describe(argv);
      }
    } else {
      EXPECT_EQ(on_real, on_fake) << describe(argv);
    }
    expect_same({"LRANGE", queue_, "0", "-1"});
    expect_close_scores(deadlines_);
    expect_close_scores(waiters_);
    expect_same({"PTTL", waiters_});
  }
  // The same members; scores equal up to the TTL tolerance (a deadline
  // chained after the lock's PTTL moves with the real server's clock).
  void expect_close_scores(const std::string& key) {
    const Argv argv{"ZRANGE", key, "0", "-1", "WITHSCORES"};
    const Reply on_real = real(argv);
    const Reply on_fake = fake(argv);
    ASSERT_EQ(on_real.as_array().size(), on_fake.as_array().size()) << describe(argv);
    for (std::size_t i = 0; i + 1 < on_real.as_array().size(); i += 2) {
      EXPECT_EQ(on_real.as_array()[i], on_fake.as_array()[i]) << describe(argv);
      EXPECT_LE(std::abs(std::stoll(on_real.as_array()[i + 1].as_string()) -
                         std::stoll(on_fake.as_array()[i + 1].as_string())),
                kTtlToleranceMs)
          << describe(argv);
    }
  }
  void turnstile_acquire(const std::string& owner, std::int64_t at, bool wait) {
    step(std::string(scripts::fair_lock_acquire.source), {hash_, queue_, deadlines_, channel_, waiters_},
         {"30000", owner, "3000", std::to_string(kStart + at), wait ? "1" : "0", "PUBLISH", "0", "64", "300000"});
  }
  void turnstile_unlock(const std::string& owner, std::int64_t at) {
    step(std::string(scripts::fair_lock_unlock.source),
         {hash_, queue_, deadlines_, channel_, "redisson_unlock_latch:{fq}:" + owner + std::to_string(at), waiters_},
         {"0", "30000", owner, "10000", std::to_string(kStart + at), "PUBLISH", "64"});
  }
  void turnstile_abandon(const std::string& owner, std::int64_t at) {
    step(std::string(scripts::fair_lock_abandon.source), {hash_, queue_, deadlines_, channel_, waiters_},
         {owner, std::to_string(kStart + at), "PUBLISH", "0", "64", "300000", "3000"});
  }
  void redisson_acquire(const std::string& owner, std::int64_t w, std::int64_t at) {
    step(redisson::kFairAcquire, {hash_, queue_, deadlines_},
         {"30000", owner, std::to_string(w), std::to_string(kStart + at), "wait"});
  }
  void redisson_unlock(const std::string& owner, std::int64_t at) {
    step(redisson::kFairUnlock,
         {hash_, queue_, deadlines_, channel_, "redisson_unlock_latch:{fq}:r" + std::to_string(at)},
         {"0", "30000", owner, "10000", std::to_string(kStart + at)});
  }
};

TEST_F(DifferentialFairQueueTest, MixedQueueScriptsAgree) {
  const std::string r0 = "00000000-0000-0000-0000-000000000000:1";
  const std::string t1 = "11111111-1111-1111-1111-111111111111:1";
  const std::string r2 = "22222222-2222-2222-2222-222222222222:1";
  const std::string t3 = "33333333-3333-3333-3333-333333333333:1";
  const std::string t4 = "44444444-4444-4444-4444-444444444444:1";
  redisson_acquire(r0, 300000, 0);                                    // Redisson holds
  turnstile_acquire(t1, 10, true);                                    // joins, chained after the lock's PTTL
  redisson_acquire(r2, 600000, 20);                                   // joins behind t1 with a long wait
  turnstile_acquire(t3, 30, true);                                    // joins behind r2 (sees its wait)
  turnstile_acquire(t1, 1000, true);                                  // refresh, no lift
  turnstile_acquire(t3, 40000, true);                                 // refresh far later: lifts
  redisson_acquire(r2, 600000, 40010);                                // already queued: its ttl
  redisson_unlock(r0, 40020);                                         // wakes t1
  turnstile_acquire(t1, 40030, true);                                 // takes it: shifts the rest down
  step(redisson::kFairGiveUp, {queue_, deadlines_}, {r2, "600000"});  // r2 gives up: t3 shifted
  turnstile_acquire(t4, 40040, true);                                 // joins
  turnstile_abandon(t4, 40050);                                       // gives up again
  turnstile_unlock(t1, 40060);                                        // wakes t3
  turnstile_unlock(t1, 40070);                                        // gone already: nil (and t3 told again)
  turnstile_acquire(t4, 60000, false);  // t3 silent since 40000: dead, evicted; t4 takes it
  turnstile_unlock(t4, 60010);
  redisson_acquire(r2, 10000, 60020);  // an empty queue again
  turnstile_unlock(t4, 60030);         // not the owner
}

// ---- random scripts -------------------------------------------------------------

// Builds scripts from a small grammar. Everything it produces is
// deterministic on both servers: no time-dependent reads, no table
// addresses, no unseeded randomness.
class ScriptGenerator {
 public:
  explicit ScriptGenerator(std::uint64_t seed) : random_(seed) {}

  std::string script() {
    locals_ = 0;
    std::string source;
    const int statements = pick(5);
    for (int i = 0; i < statements; ++i) source += statement() + "\n";
    if (pick(12) == 0) return source + error_statement();
    return source + "return " + expression(3);
  }

 private:
  int pick(int n) { return static_cast<int>(random_() % static_cast<std::uint64_t>(n)); }
  template <std::size_t N>
  const char* one_of(const char* const (&choices)[N]) {
    return choices[pick(static_cast<int>(N))];
  }

  std::string key() { return one_of({"KEYS[1]", "KEYS[2]", "'k3'", "'n'"}); }
  std::string field() { return one_of({"'f1'", "'f2'", "ARGV[1]"}); }
  std::string string_literal() {
    return one_of({"'abc'", "''", "'a b'", "'x\\r\\ny'", "'123'", "'-5'", "'1.5'", "'My Err'"});
  }
  std::string number_literal() {
    return one_of({"0", "1", "-1", "42", "3.75", "-0.5", "1e20", "2^53", "0/0", "1/0", "-2.5", "7/2", "1e15"});
  }
  std::string value() {
    switch (pick(3)) {
      case 0:
        return string_literal();
      case 1:
        return number_literal();
      default:
        return "ARGV[2]";
    }
  }

  std::string command() {
    switch (pick(16)) {
      case 0:
        return "'set', " + key() + ", " + value();
      case 1:
        return "'get', " + key();
      case 2:
        return "'del', " + key();
      case 3:
        return "'exists', " + key() + ", " + key();
      case 4:
        return "'incr', " + key();
      case 5:
        return "'incrby', " + key() + ", " + value();
      case 6:
        return "'hset', " + key() + ", " + field() + ", " + value();
      case 7:
        return "'hget', " + key() + ", " + field();
      case 8:
        return "'hincrby', " + key() + ", " + field() + ", " + value();
      case 9:
        return "'hexists', " + key() + ", " + field();
      case 10:
        return "'rpush', " + key() + ", " + value() + ", " + value();
      case 11:
        return "'lrange', " + key() + ", 0, -1";
      case 12:
        return "'type', " + key();
      case 13:
        return "'pexpire', " + key() + ", 100000";
      case 14:
        return "'hlen', " + key();
      default:
        return "'echo', " + value();
    }
  }

  std::string call() { return std::string(pick(2) == 0 ? "redis.call(" : "redis.pcall(") + command() + ")"; }

  std::string statement() {
    if (pick(10) == 0) return error_statement();
    const std::string name = "v" + std::to_string(++locals_);
    return "local " + name + " = " + (pick(4) == 0 ? expression(2) : call());
  }

  std::string error_statement() {
    switch (pick(14)) {
      case 0:
        return "redis.call('nosuch', " + key() + ")";
      case 1:
        return "redis.call('get')";
      case 2:
        return "redis.call('get', {})";
      case 3:
        return "redis.call()";
      case 4:
        return "error(" + string_literal() + ")";
      case 5:
        return "error(" + string_literal() + ", 0)";
      case 6:
        return "error({err=" + string_literal() + "})";
      case 7:
        return "local bad = nil + 1";
      case 8:
        return "undeclared = 1";
      case 9:
        return "local bad = undeclared_global";
      case 10:
        return "redis.call('eval', 'return 1', '0')";
      case 11:
        return "local bad = math.random(0)";
      case 12:
        return "return redis.error_reply(" + string_literal() + ")";
      default:
        return "redis.call('subscribe', 'c')";
    }
  }

  std::string local_or_value() {
    if (locals_ > 0 && pick(2) == 0) return "v" + std::to_string(1 + pick(locals_));
    return value();
  }

  std::string table(int depth) {
    switch (pick(9)) {
      case 0:
        return "{ok=" + string_literal() + "}";
      case 1:
        return "{err=" + string_literal() + "}";
      case 2:
        return "{err=" + number_literal() + "}";
      case 3:
        return "redis.error_reply(" + string_literal() + ")";
      case 4:
        return "redis.status_reply(" + string_literal() + ")";
      case 5:
        return "{double=" + number_literal() + "}";
      case 6:
        return "{map={m=" + expression(depth - 1) + "}}";
      default: {
        std::string elements;
        const int count = pick(5);
        for (int i = 0; i < count; ++i) elements += (i ? ", " : "") + expression(depth - 1);
        return "{" + elements + "}";
      }
    }
  }

  std::string expression(int depth) {
    const int choice = pick(depth > 0 ? 12 : 7);
    switch (choice) {
      case 0:
        return string_literal();
      case 1:
        return number_literal();
      case 2:
        return one_of({"true", "false", "nil"});
      case 3:
        return local_or_value();
      case 4:
        return locals_ > 0 ? "type(v" + std::to_string(1 + pick(locals_)) + ")" : "KEYS[1]";
      case 5:
        return "#KEYS + #ARGV";
      case 6:
        return "ARGV[" + std::to_string(1 + pick(3)) + "]";
      case 7:
        return call();
      case 8:
        return "tostring(" + number_literal() + ")";
      default:
        return table(depth);
    }
  }

  std::mt19937_64 random_;
  int locals_ = 0;
};

std::uint64_t script_seed() { return seed_from_environment("TURNSTILE_SCRIPT_SEED", kDefaultSeed); }

TEST_F(DifferentialScriptsTest, SeededRandomScripts) {
  const std::uint64_t seed = script_seed();
  ScriptGenerator generator(seed);
  int mismatches = 0;
  std::map<Reply::Type, int> reply_types;  // of the scripts' replies, to see the grammar covers them all
  auto compare = [&](int step, const std::string& source, const Argv& argv) {
    const Reply real_reply = real(argv);
    const Reply fake_reply = fake(argv);
    if (argv[0] == "EVAL") ++reply_types[real_reply.type()];
    std::string why;
    if (replies_match(argv, real_reply, fake_reply, &why) || ++mismatches > kMaxReportedMismatches) return;
    ADD_FAILURE() << "seed " << seed << ", step " << step << ": " << why << "\nscript:\n"
                  << source << "\nreal: " << real_reply.to_string() << "\nfake: " << fake_reply.to_string();
  };
  const int scripts = count_from_environment("TURNSTILE_DIFFERENTIAL_SCRIPTS", kRandomScripts);
  for (int step = 0; step < scripts; ++step) {
    const std::string source = generator.script();
    compare(step, source, {"EVAL", source, "2", "k1", "k2", "f1", "7"});
    if (step % kStateCheckPeriod == kStateCheckPeriod - 1) {
      for (const char* key : {"k1", "k2", "k3", "n"}) compare(step, "TYPE " + std::string(key), {"TYPE", key});
      // Fresh state and a fresh script cache now and then.
      compare(step, "FLUSHALL", {"FLUSHALL"});
      compare(step, "SCRIPT FLUSH", {"SCRIPT", "FLUSH"});
    }
  }
  EXPECT_EQ(mismatches, 0) << "seed " << seed;
  std::string coverage;
  for (const auto& [type, count] : reply_types)
    coverage += std::string(to_string(type)) + "=" + std::to_string(count) + " ";
  RecordProperty("reply_types", coverage);
  for (Reply::Type type : {Reply::Type::nil, Reply::Type::integer, Reply::Type::bulk, Reply::Type::status,
                           Reply::Type::error, Reply::Type::array}) {
    EXPECT_GE(reply_types[type], scripts / 50) << "too few " << to_string(type) << " replies: " << coverage;
  }
}

}  // namespace
}  // namespace turnstile::testing
