// The fake Redis against a real redis-server 7: hand-written cases for every
// command family, then a seeded random walk over a few keys of mixed types.

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <deque>
#include <random>
#include <string>
#include <vector>

#include "differential.h"

namespace turnstile::testing {
namespace {

using Argv = std::vector<std::string>;

class DifferentialCommandsTest : public DifferentialTest {
 protected:
  void expect_all(const std::vector<Argv>& commands) {
    for (const Argv& argv : commands) expect_same(argv);
  }
};

const std::string kBinary("bin\0ary\xff\r\n", 11);

TEST_F(DifferentialCommandsTest, UnknownCommandsAndArity) {
  expect_all({
      {"foo"},
      {"foo", "a", "b"},
      {"FOO", "a"},
      {"nosuch", std::string(200, 'x'), "b"},
      {"get"},
      {"GET", "a", "b"},
      {"set", "a"},
      {"del"},
      {"hset", "h", "f"},
      {"hset", "h", "f", "v", "g"},
      {"zadd", "z", "1"},
      {"lpop", "l", "1", "2"},
      {"ping", "a", "b"},
      {"echo"},
      {"ttl"},
      {"expire", "k"},
      {"zrangebyscore", "z", "1"},
  });
}

TEST_F(DifferentialCommandsTest, Strings) {
  expect_all({
      {"get", "s"},
      {"set", "s", "v"},
      {"get", "s"},
      {"set", "s", "w", "nx"},
      {"set", "s", "w", "xx"},
      {"set", "new", "w", "xx"},
      {"get", "new"},
      {"set", "s", "x", "get"},
      {"set", "missing", "x", "get"},
      {"set", "s", "y", "nx", "get"},
      {"set", "s", "v", "NX", "XX"},
      {"set", "s", "v", "xx", "nx"},
      {"set", "s", "v", "px", "10", "ex", "10"},
      {"set", "s", "v", "keepttl", "px", "5"},
      {"set", "s", "v", "px", "5", "keepttl"},
      {"set", "s", "v", "ex", "100", "ex", "200"},
      {"ttl", "s"},
      {"set", "s", "v", "keepttl"},
      {"ttl", "s"},
      {"set", "s", "v"},
      {"ttl", "s"},
      {"set", "s", "v", "px", "0"},
      {"set", "s", "v", "ex", "-1"},
      {"set", "s", "v", "px", "abc"},
      {"set", "s", "v", "px"},
      {"set", "s", "v", "ex", "9223372036854775807"},
      {"set", "s", "v", "px", "9223372036854775807"},
      {"set", "s", "v", "pxat", "1"},
      {"get", "s"},
      {"set", "s", "v", "exat", "99999999999"},
      {"pttl", "s"},
      {"set", "s", "v", "bogus"},
      {"set", kBinary, kBinary},
      {"get", kBinary},
      {"set", "big", std::string(100000, 'b')},
      {"get", "big"},
      {"strlen", "big"},
      {"strlen", kBinary},
      {"strlen", "missing"},
      {"hset", "h", "f", "v"},
      {"strlen", "h"},
      {"strlen"},
      {"strlen", "s", "extra"},
  });
}

TEST_F(DifferentialCommandsTest, Counters) {
  expect_all({
      {"incr", "n"},
      {"incrby", "n", "41"},
      {"decr", "n"},
      {"decrby", "n", "-10"},
      {"get", "n"},
      {"incrby", "n", "abc"},
      {"incrby", "n", "1.5"},
      {"incrby", "n", "+1"},
      {"incrby", "n", " 1"},
      {"incrby", "n", "01"},
      {"incrby", "n", "-0"},
      {"incrby", "n", "99999999999999999999"},
      {"set", "n", "9223372036854775807"},
      {"incr", "n"},
      {"incrby", "n", "-1"},
      {"set", "n", "-9223372036854775808"},
      {"decr", "n"},
      {"decrby", "n", "-9223372036854775808"},
      {"decrby", "m", "-9223372036854775808"},
      {"decrby", "m", "9223372036854775807"},
      {"set", "t", "abc"},
      {"incr", "t"},
      {"set", "t", "10 "},
      {"incr", "t"},
      {"set", "t", "007"},
      {"incr", "t"},
      {"set", "t", "5", "ex", "1000"},
      {"incr", "t"},
      {"ttl", "t"},
      {"lpush", "l", "a"},
      {"incr", "l"},
      {"incrby", "l", "x"},
      {"get", "l"},
  });
}

TEST_F(DifferentialCommandsTest, KeysAndExpiry) {
  expect_all({
      {"set", "k", "v"},
      {"exists", "k", "k", "nope"},
      {"type", "k"},
      {"type", "nope"},
      {"ttl", "k"},
      {"pttl", "nope"},
      {"expire", "k", "100"},
      {"ttl", "k"},
      {"pttl", "k"},
      {"persist", "k"},
      {"persist", "k"},
      {"ttl", "k"},
      {"expire", "k", "abc"},
      {"expire", "k", "100", "zz"},
      {"expire", "k", "100", "nx", "xx"},
      {"expire", "k", "100", "gt", "lt"},
      {"expire", "k", "100", "nx", "gt"},
      {"expire", "k", "100", "xx"},
      {"expire", "k", "100", "gt"},
      {"expire", "k", "100", "lt"},
      {"expire", "k", "100", "nx"},
      {"expire", "k", "200", "nx"},
      {"expire", "k", "50", "gt"},
      {"expire", "k", "500", "gt"},
      {"expire", "k", "600", "lt"},
      {"expire", "k", "60", "lt", "xx"},
      {"ttl", "k"},
      {"expire", "k", "9223372036854775807"},
      {"expire", "k", "-9223372036854775808"},
      {"pexpire", "k", "9223372036854775807"},
      {"pexpire", "k", "99999999999999999"},
      {"pexpireat", "k", "9223372036854775807"},
      {"expireat", "k", "99999999999"},
      {"ttl", "k"},
      {"expire", "nope", "100"},
      {"expire", "k", "-5"},
      {"exists", "k"},
      {"set", "k", "v"},
      {"pexpireat", "k", "1"},
      {"get", "k"},
      {"set", "k", "v"},
      {"expire", "k", "0"},
      {"get", "k"},
      {"set", "a", "1"},
      {"set", "b", "2"},
      {"dbsize"},
      {"del", "a", "b", "c", "a"},
      {"dbsize"},
  });
}

TEST_F(DifferentialCommandsTest, Hashes) {
  expect_all({
      {"hset", "h", "f1", "v1", "f2", "v2"},
      {"hset", "h", "f1", "x", "f3", "v3"},
      {"hgetall", "h"},
      {"hkeys", "h"},
      {"hget", "h", "f1"},
      {"hget", "h", "nope"},
      {"hget", "nope", "f"},
      {"hmget", "h", "f1", "nope", "f2"},
      {"hmget", "nope", "f1", "f2"},
      {"hmget", "h"},
      {"hlen", "h"},
      {"hexists", "h", "f2"},
      {"hexists", "h", "zz"},
      {"hdel", "h", "f2", "f2", "zz"},
      {"hgetall", "h"},
      {"hset", "h", "f2", "again"},
      {"hkeys", "h"},
      {"hincrby", "h", "n", "5"},
      {"hincrby", "h", "n", "-7"},
      {"hincrby", "h", "f1", "1"},
      {"hincrby", "h", "n", "abc"},
      {"hset", "h", "big", "9223372036854775807"},
      {"hincrby", "h", "big", "1"},
      {"hset", "h", "pad", " 1"},
      {"hincrby", "h", "pad", "1"},
      {"hincrby", "fresh", "f", "x"},
      {"exists", "fresh"},
      {"hdel", "h", "f1", "f2", "f3", "n", "big", "pad"},
      {"exists", "h"},
      {"hgetall", "nope"},
      {"set", "s", "v"},
      {"hset", "s", "f", "v"},
      {"hget", "s", "f"},
      {"hmget", "s", "f"},
      {"hgetall", "s"},
      {"hincrby", "s", "f", "1"},
      {"hlen", "s"},
      {"get", "s"},
      {"hset", kBinary, kBinary, kBinary},
      {"hgetall", kBinary},
  });
}

TEST_F(DifferentialCommandsTest, Lists) {
  expect_all({
      {"rpush", "l", "a", "b", "c", "a", "b", "a"},
      {"lpush", "l", "z"},
      {"lrange", "l", "0", "-1"},
      {"lrange", "l", "-3", "100"},
      {"lrange", "l", "5", "2"},
      {"lrange", "l", "a", "b"},
      {"lrange", "nope", "0", "-1"},
      {"lindex", "l", "0"},
      {"lindex", "l", "-1"},
      {"lindex", "l", "99"},
      {"lindex", "l", "x"},
      {"lindex", "nope", "x"},
      {"llen", "l"},
      {"lpos", "l", "a"},
      {"lpos", "l", "a", "rank", "2"},
      {"lpos", "l", "a", "rank", "-1"},
      {"lpos", "l", "a", "rank", "-2", "count", "0"},
      {"lpos", "l", "a", "count", "0"},
      {"lpos", "l", "a", "count", "2"},
      {"lpos", "l", "a", "count", "0", "maxlen", "3"},
      {"lpos", "l", "zz"},
      {"lpos", "l", "zz", "count", "1"},
      {"lpos", "nope", "a"},
      {"lpos", "nope", "a", "count", "1"},
      {"lpos", "l", "a", "rank", "0"},
      {"lpos", "l", "a", "rank", "x"},
      {"lpos", "l", "a", "rank", "-9223372036854775808"},
      {"lpos", "l", "a", "count", "-1"},
      {"lpos", "l", "a", "count", "x"},
      {"lpos", "l", "a", "maxlen", "-1"},
      {"lpos", "l", "a", "rank"},
      {"lpos", "l", "a", "bogus", "1"},
      {"lrem", "l", "1", "a"},
      {"lrem", "l", "-1", "a"},
      {"lrange", "l", "0", "-1"},
      {"lrem", "l", "0", "b"},
      {"lrem", "l", "x", "b"},
      {"lrem", "nope", "1", "b"},
      {"lpop", "l"},
      {"rpop", "l"},
      {"lpop", "l", "0"},
      {"lpop", "l", "-1"},
      {"lpop", "l", "x"},
      {"rpop", "l", "10"},
      {"exists", "l"},
      {"lpop", "l"},
      {"lpop", "l", "2"},
      {"lpop", "l", "0"},
      {"set", "s", "v"},
      {"lpush", "s", "x"},
      {"lpop", "s"},
      {"lpop", "s", "0"},
      {"lrange", "s", "0", "1"},
      {"lpos", "s", "a"},
      {"llen", "s"},
      {"rpush", kBinary, kBinary, ""},
      {"lrange", kBinary, "0", "-1"},
  });
}

TEST_F(DifferentialCommandsTest, SortedSetsAdd) {
  expect_all({
      {"zadd", "z", "1", "a", "2", "b", "1.5", "c"},
      {"zadd", "z", "abc", "m"},
      {"zadd", "z", "nan", "m"},
      {"zadd", "z", "1e400", "m"},
      {"zadd", "z", " 1", "m"},
      {"zadd", "z", "0x10", "hex"},
      {"zadd", "z", "nx", "xx", "1", "m"},
      {"zadd", "z", "gt", "lt", "1", "m"},
      {"zadd", "z", "gt", "nx", "1", "m"},
      {"zadd", "z", "incr", "1", "a", "2", "b"},
      {"zadd", "z", "nx", "1"},
      {"zadd", "z", "1", "a", "2"},
      {"zadd", "z", "nx", "5", "a", "6", "new"},
      {"zadd", "z", "xx", "ch", "5", "a", "6", "new2"},
      {"zadd", "z", "gt", "ch", "1", "a", "9", "b"},
      {"zadd", "z", "lt", "ch", "7", "a", "9", "b"},
      {"zadd", "z", "incr", "2.5", "a"},
      {"zadd", "z", "incr", "nx", "2.5", "a"},
      {"zadd", "z", "incr", "xx", "1", "nobody"},
      {"zadd", "z", "incr", "gt", "-1", "a"},
      {"zadd", "z", "ch", "1", "a", "1", "a"},
      {"zadd", "z", "inf", "pinf", "-inf", "ninf"},
      {"zincrby", "z", "-inf", "pinf"},
      {"zincrby", "z", "1", "pinf"},
      {"zincrby", "z", "abc", "pinf"},
      {"zincrby", "z", "nx", "pinf"},
      {"zincrby", "fresh", "-0", "m"},
      {"zscore", "fresh", "m"},
      {"zadd", "z", "-0", "negzero"},
      {"zscore", "z", "negzero"},
      {"zadd", "z", "0.1", "tenth", "123456789012345678", "big", "2.5e-5", "small", "1e-320", "tiny"},
      {"zrange", "z", "0", "-1", "withscores"},
      {"zadd", "xx", "xx", "1", "a"},
      {"exists", "xx"},
      {"zscore", "z", "nope"},
      {"zscore", "nope", "a"},
      {"zcard", "z"},
      {"zcard", "nope"},
      {"zrank", "z", "a"},
      {"zrank", "z", "nope"},
      {"zrank", "nope", "a"},
      {"zrem", "z", "a", "a", "nope"},
      {"zrem", "nope", "a"},
      {"set", "s", "v"},
      {"zadd", "s", "1", "a"},
      {"zadd", "s", "x", "a"},
      {"zscore", "s", "a"},
      {"zrange", "s", "0", "1"},
      {"zincrby", "s", "1", "a"},
      {"zrank", "s", "a"},
      {"zcard", "s"},
      {"zrem", "s", "a"},
      {"zadd", kBinary, "1", kBinary},
      {"zrange", kBinary, "0", "-1", "withscores"},
  });
}

TEST_F(DifferentialCommandsTest, SortedSetsRanges) {
  expect_all({
      {"zadd", "z", "1", "a", "2", "b", "3", "c", "3", "d", "4", "e", "-inf", "lo", "inf", "hi"},
      {"zrange", "z", "0", "-1"},
      {"zrange", "z", "1", "2", "withscores"},
      {"zrange", "z", "-2", "-1", "rev"},
      {"zrange", "z", "5", "1"},
      {"zrange", "z", "0", "-1", "limit", "0", "1"},
      {"zrange", "z", "0", "-1", "limit", "0", "-1"},
      {"zrange", "z", "a", "b"},
      {"zrange", "z", "(1", "3", "byscore"},
      {"zrange", "z", "3", "(1", "byscore", "rev", "withscores"},
      {"zrange", "z", "-inf", "+inf", "byscore", "limit", "1", "2"},
      {"zrange", "z", "+inf", "-inf", "byscore", "rev", "limit", "1", "2"},
      {"zrange", "z", "-inf", "+inf", "byscore", "limit", "-1", "2"},
      {"zrange", "z", "-inf", "+inf", "byscore", "limit", "2", "-1"},
      {"zrange", "z", "-inf", "+inf", "byscore", "limit", "100", "1"},
      {"zrange", "z", "-inf", "+inf", "byscore", "limit", "0"},
      {"zrange", "z", "-inf", "+inf", "byscore", "limit", "x", "1"},
      {"zrange", "z", "a", "b", "byscore"},
      {"zrange", "z", "0", "1", "byscore", "rev", "bylex"},
      {"zrange", "z", "0", "1", "rev", "rev"},
      {"zrange", "z", "-", "+", "bylex"},
      {"zrange", "z", "[b", "(d", "bylex"},
      {"zrange", "z", "+", "-", "bylex", "rev", "limit", "0", "2"},
      {"zrange", "z", "b", "d", "bylex"},
      {"zrange", "z", "-", "+", "bylex", "withscores"},
      {"zrange", "z", "0", "1", "bogus"},
      {"zrangebyscore", "z", "-inf", "+inf"},
      {"zrangebyscore", "z", "(1", "(3", "withscores"},
      {"zrangebyscore", "z", "(", "+inf"},
      {"zrangebyscore", "z", "", "+inf"},
      {"zrangebyscore", "z", " 2", "+inf"},
      {"zrangebyscore", "z", "1e400", "+inf"},
      {"zrangebyscore", "z", "3", "1"},
      {"zrangebyscore", "z", "(2", "2"},
      {"zrangebyscore", "z", "a", "b"},
      {"zrangebyscore", "z", "nan", "1"},
      {"zrangebyscore", "z", "1", "3", "limit", "1", "1", "withscores"},
      {"zrangebyscore", "z", "1", "3", "limit", "0"},
      {"zrangebyscore", "z", "1", "3", "rev"},
      {"zrangebyscore", "z", "1", "3", "byscore"},
      {"zrangebyscore", "nope", "1", "3"},
      {"zrangebyscore", "nope", "a", "3"},
      {"zcount", "z", "-inf", "+inf"},
      {"zcount", "z", "(1", "(3"},
      {"zcount", "z", "(", "+inf"},
      {"zcount", "z", "3", "1"},
      {"zcount", "z", "(2", "2"},
      {"zcount", "z", "a", "b"},
      {"zcount", "z", "nan", "1"},
      {"zcount", "z", "1"},
      {"zcount", "nope", "1", "3"},
      {"zcount", "nope", "a", "3"},
      {"zremrangebyscore", "z", "a", "3"},
      {"zremrangebyscore", "z", "(1", "3"},
      {"zrange", "z", "0", "-1", "withscores"},
      {"zremrangebyscore", "z", "-inf", "+inf"},
      {"exists", "z"},
      {"zremrangebyscore", "nope", "1", "2"},
      {"set", "s", "v"},
      {"zrangebyscore", "s", "1", "2"},
      {"zrangebyscore", "s", "a", "2"},
      {"zremrangebyscore", "s", "1", "2"},
      {"zcount", "s", "1", "2"},
      {"zcount", "s", "a", "2"},
  });
}

TEST_F(DifferentialCommandsTest, ServerCommands) {
  expect_all({
      {"ping"},
      {"ping", "hello"},
      {"echo", kBinary},
      {"select", "0"},
      {"select", "x"},
      {"time"},
      {"set", "a", "b"},
      {"flushall", "x"},
      {"flushall", "sync", "async"},
      {"flushall"},
      {"dbsize"},
      {"publish", "channel", "message"},
  });
}

TEST_F(DifferentialCommandsTest, PubSubIntrospection) {
  expect_all({
      {"pubsub"},
      {"pubsub", "foo"},
      {"pubsub", "channels"},
      {"pubsub", "channels", "redisson_*"},
      {"pubsub", "channels", "a", "b"},
      {"pubsub", "numsub"},
      {"pubsub", "numsub", "a", "b"},
      {"pubsub", "numpat"},
      {"pubsub", "numpat", "x"},
  });
}

// ---- random walk -----------------------------------------------------------------

constexpr std::uint64_t kDefaultSeed = 20260101;
constexpr int kRandomCommands = 8000;  // TURNSTILE_DIFFERENTIAL_COMMANDS for a longer run
const char* const kSeedVariable = "TURNSTILE_DIFFERENTIAL_SEED";

// Commands over a handful of keys, each command family aimed at every key so
// WRONGTYPE comes up often, with arguments drawn from pools rich in edge
// cases. Expiries are long (or already past) so real time cannot matter. No
// DBSIZE: a real server counts expired keys until its active expiry cycle
// (on real time) reclaims them, so that count is not deterministic.
class CommandGenerator {
 public:
  explicit CommandGenerator(std::uint64_t seed) : random_(seed) {}

  Argv next() {
    switch (pick(kTemplates)) {
      case 0:
        return {"set", key(), value()};
      case 1:
        return set_with_options();
      case 2:
        return {"get", key()};
      case 3:
        return {one_of({"incr", "decr"}), key()};
      case 4:
        return {one_of({"incrby", "decrby"}), key(), integer()};
      case 5:
        return {"del", key(), key()};
      case 6:
        return {"exists", key(), key()};
      case 7:
        return {"type", key()};
      case 8:
        return expire();
      case 9:
        return {one_of({"ttl", "pttl"}), key()};
      case 10:
        return {"persist", key()};
      case 11:
        return {"hset", key(), field(), value(), field(), value()};
      case 12:
        return {"hset", key(), field(), value()};
      case 13:
        return {one_of({"hget", "hexists", "hdel"}), key(), field()};
      case 14:
        return {"hincrby", key(), field(), integer()};
      case 15:
        return {one_of({"hlen", "hgetall", "hkeys", "llen", "zcard", "nosuchcommand"}), key()};
      case 16:
        return {one_of({"lpush", "rpush"}), key(), member(), member()};
      case 17:
        return pop();
      case 18:
        return {"lindex", key(), integer()};
      case 19:
        return {"lrange", key(), small_integer(), small_integer()};
      case 20:
        return {"lrem", key(), small_integer(), member()};
      case 21:
        return lpos();
      case 22:
        return zadd();
      case 23:
        return {"zincrby", key(), score(), member()};
      case 24:
        return {one_of({"zscore", "zrank", "zrem"}), key(), member()};
      case 25:
        return zrange();
      case 26:
        return zrangebyscore();
      case 27:
        return {one_of({"zremrangebyscore", "zcount"}), key(), score_bound(), score_bound()};
      case 28:
        return {one_of({"ping", "echo", "publish"}), value(), value()};
      default:
        return {"exists", key()};
    }
  }

 private:
  static constexpr int kTemplates = 30;

  int pick(int count) { return std::uniform_int_distribution<int>(0, count - 1)(random_); }
  bool coin() { return pick(2) == 0; }
  std::string one_of(std::initializer_list<const char*> choices) {
    return *(choices.begin() + pick(static_cast<int>(choices.size())));
  }

  std::string key() { return one_of({"k1", "k2", "k3", "k4", "k5", "k6"}); }
  std::string field() { return one_of({"f1", "f2", "f3", "n", ""}); }
  std::string member() { return one_of({"a", "b", "c", "d", "e", "a\0b", ""}); }
  std::string value() {
    switch (pick(4)) {
      case 0:
        return integer();
      case 1:
        return score();
      case 2:
        return member();
      default:
        return one_of({"v", "hello", "\xff\xfe", " 7", "007", "-0", "1e3"});
    }
  }
  std::string small_integer() { return std::to_string(pick(13) - 6); }
  std::string integer() {
    switch (pick(5)) {
      case 0:
        return one_of({"9223372036854775807", "-9223372036854775808", "9223372036854775806", "-9223372036854775807",
                       "99999999999999999999"});
      case 1:
        return one_of({"x", "1.5", "+1", "", "-0", " 3"});
      default:
        return std::to_string(pick(41) - 20);
    }
  }
  std::string score() {
    switch (pick(5)) {
      case 0:
        return one_of({"inf", "-inf", "+inf", "nan", "abc", "1e400", "0x10", "-0", "0.1", "1e-320"});
      default:
        return std::to_string(pick(21) - 10) + (coin() ? "" : ".5");
    }
  }
  std::string score_bound() {
    switch (pick(6)) {
      case 0:
        return one_of({"-inf", "+inf", "(", "x", "(inf", "nan"});
      case 1:
        return "(" + std::to_string(pick(11) - 5);
      default:
        return std::to_string(pick(11) - 5);
    }
  }
  std::string expiry_seconds() { return std::to_string(1000 + pick(100000)); }
  // integer()'s edge cases as an expiry, except a small positive one: the
  // real key would expire in real time while the fake's clock stands
  // still (`PEXPIRE k 5`), a difference of the test, not of the fake.
  std::string expiry_integer() {
    std::string drawn = integer();
    const bool small_positive = !drawn.empty() && drawn.find_first_not_of("0123456789") == std::string::npos &&
                                drawn.size() < 4 && std::stoi(drawn) > 0;
    return small_positive ? expiry_seconds() : drawn;
  }

  Argv set_with_options() {
    Argv argv{"set", key(), value()};
    const int options = 1 + pick(3);
    for (int i = 0; i < options; ++i) {
      switch (pick(8)) {
        case 0:
          argv.push_back("nx");
          break;
        case 1:
          argv.push_back("xx");
          break;
        case 2:
          argv.push_back("get");
          break;
        case 3:
          argv.push_back("keepttl");
          break;
        case 4:
          argv.insert(argv.end(), {"ex", coin() ? expiry_seconds() : expiry_integer()});
          break;
        case 5:
          argv.insert(argv.end(), {"px", expiry_seconds() + "000"});
          break;
        case 6:
          argv.insert(argv.end(), {"pxat", "1"});
          break;
        default:
          argv.push_back("bogus");
          break;
      }
    }
    return argv;
  }

  Argv expire() {
    Argv argv{one_of({"expire", "pexpire"}), key()};
    switch (pick(4)) {
      case 0:
        argv.push_back(std::to_string(-pick(5)));
        break;  // already past: deletes
      case 1:
        argv.push_back(expiry_integer());
        break;
      default:
        argv.push_back(expiry_seconds() + (argv[0] == "pexpire" ? "000" : ""));
        break;
    }
    if (pick(3) == 0) argv.push_back(one_of({"nx", "xx", "gt", "lt", "zz"}));
    if (pick(8) == 0) argv.push_back(one_of({"nx", "xx", "gt", "lt"}));
    return argv;
  }

  Argv pop() {
    Argv argv{one_of({"lpop", "rpop"}), key()};
    if (coin()) argv.push_back(coin() ? small_integer() : integer());
    return argv;
  }

  Argv lpos() {
    Argv argv{"lpos", key(), member()};
    const int options = pick(3);
    for (int i = 0; i < options; ++i) {
      argv.push_back(one_of({"rank", "count", "maxlen", "bogus"}));
      argv.push_back(small_integer());
    }
    return argv;
  }

  Argv zadd() {
    Argv argv{"zadd", key()};
    const int options = pick(3);
    for (int i = 0; i < options; ++i) argv.push_back(one_of({"nx", "xx", "gt", "lt", "ch", "incr"}));
    const int pairs = 1 + pick(2);
    for (int i = 0; i < pairs; ++i) argv.insert(argv.end(), {score(), member()});
    return argv;
  }

  Argv zrange() {
    Argv argv{"zrange", key()};
    const bool by_score = pick(3) == 0;
    if (by_score) {
      argv.insert(argv.end(), {score_bound(), score_bound(), "byscore"});
    } else {
      argv.insert(argv.end(), {small_integer(), small_integer()});
    }
    if (coin()) argv.push_back("rev");
    if (coin()) argv.push_back("withscores");
    if (pick(3) == 0) argv.insert(argv.end(), {"limit", small_integer(), small_integer()});
    return argv;
  }

  Argv zrangebyscore() {
    Argv argv{"zrangebyscore", key(), score_bound(), score_bound()};
    if (coin()) argv.push_back("withscores");
    if (coin()) argv.insert(argv.end(), {"limit", small_integer(), small_integer()});
    return argv;
  }

  std::mt19937_64 random_;
};

constexpr std::size_t kRecentCommandsShown = 30;

std::string join_lines(const std::deque<std::string>& lines) {
  std::string joined;
  for (const std::string& line : lines) joined += "  " + line + "\n";
  return joined;
}

std::uint64_t random_seed() { return seed_from_environment(kSeedVariable, kDefaultSeed); }

TEST_F(DifferentialCommandsTest, RandomCommandsMatchRealRedis) {
  const std::uint64_t seed = random_seed();
  CommandGenerator generator(seed);
  std::deque<std::string> recent;  // context for a mismatch
  const int commands = count_from_environment("TURNSTILE_DIFFERENTIAL_COMMANDS", kRandomCommands);
  for (int step = 0; step < commands; ++step) {
    Argv argv = generator.next();
    recent.push_back(std::to_string(step) + ": " + describe(argv));
    if (recent.size() > kRecentCommandsShown) recent.pop_front();
    Reply real_reply = real(argv);
    Reply fake_reply = fake(argv);
    std::string why;
    ASSERT_TRUE(replies_match(argv, real_reply, fake_reply, &why))
        << "seed " << seed << " (rerun with " << kSeedVariable << "=" << seed << "), step " << step << ": "
        << describe(argv) << ": " << why << "\nrecent commands:\n"
        << join_lines(recent);
  }
}

}  // namespace
}  // namespace turnstile::testing
