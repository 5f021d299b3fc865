#include <gtest/gtest.h>

#include "fake_server_fixture.h"

namespace turnstile::testing {
namespace {

using StringCommandsTest = FakeServerTest;

TEST_F(StringCommandsTest, SetPxExpiresOnTheVirtualClock) {
  EXPECT_EQ(run({"set", "k", "v", "px", "30"}), ok());
  advance_ms(30);
  EXPECT_EQ(run({"get", "k"}), bulk("v"));
  advance_ms(1);
  EXPECT_EQ(run({"get", "k"}), Reply::nil());
  EXPECT_EQ(run({"set", "k", "w", "nx"}), ok());  // the expired key does not block NX
}

TEST_F(StringCommandsTest, KeepTtlAndIncrKeepTheDeadline) {
  run({"set", "k", "1", "ex", "10"});
  run({"set", "k", "2", "keepttl"});
  run({"incr", "k"});
  EXPECT_EQ(run({"pttl", "k"}), integer(10000));
  run({"set", "k", "4"});
  EXPECT_EQ(run({"pttl", "k"}), integer(-1));
}

TEST_F(StringCommandsTest, WrongTypeNeverOverwrites) {
  run({"rpush", "l", "a"});
  EXPECT_EQ(run({"get", "l"}), error(kWrongType));
  EXPECT_EQ(run({"incr", "l"}), error(kWrongType));
  EXPECT_EQ(run({"set", "l", "v", "get"}), error(kWrongType));
  EXPECT_EQ(run({"lrange", "l", "0", "-1"}), bulks({"a"}));
  EXPECT_EQ(run({"set", "l", "v"}), ok());  // plain SET replaces any type, as Redis
}

TEST_F(StringCommandsTest, BadInputAnswersRedisTextsAndChangesNothing) {
  run({"set", "n", "9223372036854775807"});
  run({"set", "other", "x"});
  EXPECT_EQ(run({"incr", "n"}), error("ERR increment or decrement would overflow"));
  EXPECT_EQ(run({"decrby", "n", "-9223372036854775808"}), error("ERR decrement would overflow"));
  EXPECT_EQ(run({"incrby", "n", "1e3"}), error("ERR value is not an integer or out of range"));
  EXPECT_EQ(run({"set", "n", "v", "px", "0"}), error("ERR invalid expire time in 'set' command"));
  EXPECT_EQ(run({"set", "n", "v", "nx", "xx"}), error("ERR syntax error"));
  EXPECT_EQ(run({"get", "n"}), bulk("9223372036854775807"));
  EXPECT_EQ(run({"get", "other"}), bulk("x"));
}

TEST_F(StringCommandsTest, BinarySafe) {
  const std::string key("k\0\r\n", 4);
  const std::string value("\0\xff\0", 3);
  EXPECT_EQ(run({"set", key, value}), ok());
  EXPECT_EQ(run({"get", key}), bulk(value));
  EXPECT_EQ(run({"get", "k"}), Reply::nil());
}

}  // namespace
}  // namespace turnstile::testing
