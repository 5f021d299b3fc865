#include <gtest/gtest.h>

#include "fake_server_fixture.h"

namespace turnstile::testing {
namespace {

using HashCommandsTest = FakeServerTest;

TEST_F(HashCommandsTest, FailedHincrbyLeavesNoEmptyHashAndNoChange) {
  EXPECT_EQ(run({"hincrby", "h", "f", "x"}), error("ERR value is not an integer or out of range"));
  EXPECT_EQ(run({"exists", "h"}), integer(0));
  run({"hset", "h", "f", "text", "n", "9223372036854775807"});
  EXPECT_EQ(run({"hincrby", "h", "f", "1"}), error("ERR hash value is not an integer"));
  EXPECT_EQ(run({"hincrby", "h", "n", "1"}), error("ERR increment or decrement would overflow"));
  EXPECT_EQ(run({"hgetall", "h"}), bulks({"f", "text", "n", "9223372036854775807"}));
}

TEST_F(HashCommandsTest, WrongTypeAndDeletingTheLastField) {
  run({"set", "s", "v"});
  EXPECT_EQ(run({"hset", "s", "f", "v"}), error(kWrongType));
  EXPECT_EQ(run({"get", "s"}), bulk("v"));
  run({"hset", "h", "f", "v"});
  EXPECT_EQ(run({"hdel", "h", "f"}), integer(1));
  EXPECT_EQ(run({"type", "h"}), Reply::status("none"));
}

TEST_F(HashCommandsTest, HmgetAnswersEachFieldInOrder) {
  run({"hset", "h", "a", "1", "b", "2"});
  EXPECT_EQ(run({"hmget", "h", "b", "zz", "a"}), Reply::array({Reply::bulk("2"), Reply::nil(), Reply::bulk("1")}));
  EXPECT_EQ(run({"hmget", "nope", "a"}), Reply::array({Reply::nil()}));
  EXPECT_EQ(run({"hmget", "h"}), error("ERR wrong number of arguments for 'hmget' command"));
  run({"set", "s", "v"});
  EXPECT_EQ(run({"hmget", "s", "a"}), error(kWrongType));
}

}  // namespace
}  // namespace turnstile::testing
