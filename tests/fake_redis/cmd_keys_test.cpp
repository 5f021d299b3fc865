// Expiry at exact virtual instants; the differential suite covers the rest.

#include <gtest/gtest.h>

#include "fake_server_fixture.h"

namespace turnstile::testing {
namespace {

using KeyCommandsTest = FakeServerTest;

TEST_F(KeyCommandsTest, PexpireExpiresAfterItsLastMillisecond) {
  run({"set", "k", "v"});
  EXPECT_EQ(run({"pexpire", "k", "100"}), integer(1));
  advance_ms(100);
  EXPECT_EQ(run({"pttl", "k"}), integer(0));
  EXPECT_EQ(run({"get", "k"}), bulk("v"));
  advance_ms(1);
  EXPECT_EQ(run({"get", "k"}), Reply::nil());
  EXPECT_EQ(run({"pttl", "k"}), integer(-2));
  EXPECT_EQ(run({"exists", "k"}), integer(0));
}

TEST_F(KeyCommandsTest, TtlRoundsToTheNearestSecond) {
  run({"set", "k", "v", "px", "10000"});
  advance_ms(500);
  EXPECT_EQ(run({"ttl", "k"}), integer(10));  // 9500 ms
  advance_ms(1);
  EXPECT_EQ(run({"ttl", "k"}), integer(9));
  EXPECT_EQ(run({"pttl", "k"}), integer(9499));
}

TEST_F(KeyCommandsTest, ExpireAtNowDeletesAtOnce) {
  run({"set", "k", "v"});
  const std::int64_t now_ms = clock_.unix_time_ms();
  EXPECT_EQ(run({"pexpireat", "k", std::to_string(now_ms)}), integer(1));
  EXPECT_EQ(run({"exists", "k"}), integer(0));
  run({"set", "k", "v"});
  EXPECT_EQ(run({"pexpireat", "k", std::to_string(now_ms + 1)}), integer(1));
  EXPECT_EQ(run({"pttl", "k"}), integer(1));
  EXPECT_EQ(run({"pexpireat", "k", "-9223372036854775808"}), integer(1));
  EXPECT_EQ(run({"exists", "k"}), integer(0));
}

TEST_F(KeyCommandsTest, ExpiredKeyIsGoneForEveryTypeAndCommand) {
  run({"hset", "h", "f", "1"});
  run({"rpush", "l", "a"});
  run({"zadd", "z", "1", "m"});
  for (const char* key : {"h", "l", "z"}) run({"pexpire", key, "5"});
  advance_ms(6);
  EXPECT_EQ(run({"hincrby", "h", "f", "1"}), integer(1));  // a fresh hash
  EXPECT_EQ(run({"llen", "l"}), integer(0));
  EXPECT_EQ(run({"zscore", "z", "m"}), Reply::nil());
  EXPECT_EQ(run({"set", "z", "v", "xx"}), Reply::nil());
  EXPECT_EQ(run({"dbsize"}), integer(1));
}

TEST_F(KeyCommandsTest, PersistAndConditions) {
  run({"set", "k", "v"});
  EXPECT_EQ(run({"persist", "k"}), integer(0));
  EXPECT_EQ(run({"expire", "k", "10", "gt"}), integer(0));  // no TTL counts as infinite
  EXPECT_EQ(run({"expire", "k", "10", "lt"}), integer(1));
  EXPECT_EQ(run({"expire", "k", "20", "lt"}), integer(0));
  EXPECT_EQ(run({"expire", "k", "20", "gt"}), integer(1));
  EXPECT_EQ(run({"expire", "k", "5", "nx"}), integer(0));
  EXPECT_EQ(run({"pttl", "k"}), integer(20000));
  EXPECT_EQ(run({"persist", "k"}), integer(1));
  EXPECT_EQ(run({"ttl", "k"}), integer(-1));
  EXPECT_EQ(run({"expire", "k", "5", "zz"}), error("ERR Unsupported option zz"));
  EXPECT_EQ(run({"expire", "k", "9223372036854775807"}), error("ERR invalid expire time in 'expire' command"));
}

}  // namespace
}  // namespace turnstile::testing
