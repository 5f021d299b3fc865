#include <gtest/gtest.h>

#include "fake_server_fixture.h"

namespace turnstile::testing {
namespace {

using SortedSetCommandsTest = FakeServerTest;

TEST_F(SortedSetCommandsTest, ScoresPrintLikeRedis) {
  run({"zadd", "z", "1.5", "a", "100", "b", "0.1", "c", "inf", "d", "1e17", "e"});
  EXPECT_EQ(run({"zrange", "z", "0", "-1", "withscores"}),
            bulks({"c", "0.10000000000000001", "a", "1.5", "b", "100", "e", "1e+17", "d", "inf"}));
}

TEST_F(SortedSetCommandsTest, BadScoreChangesNothing) {
  run({"zadd", "z", "1", "a"});
  EXPECT_EQ(run({"zadd", "z", "2", "a", "x", "b"}), error("ERR value is not a valid float"));
  EXPECT_EQ(run({"zscore", "z", "a"}), bulk("1"));
  EXPECT_EQ(run({"zcard", "z"}), integer(1));
  run({"zadd", "z", "inf", "a"});
  EXPECT_EQ(run({"zincrby", "z", "-inf", "a"}), error("ERR resulting score is not a number (NaN)"));
  EXPECT_EQ(run({"zscore", "z", "a"}), bulk("inf"));
}

TEST_F(SortedSetCommandsTest, ScoreRangesWithExclusiveBoundsAndLimit) {
  run({"zadd", "z", "1", "a", "2", "b", "3", "c", "4", "d"});
  EXPECT_EQ(run({"zrangebyscore", "z", "(1", "+inf", "limit", "1", "2"}), bulks({"c", "d"}));
  EXPECT_EQ(run({"zrange", "z", "(4", "-inf", "byscore", "rev"}), bulks({"c", "b", "a"}));
  EXPECT_EQ(run({"zremrangebyscore", "z", "-inf", "(3"}), integer(2));
  EXPECT_EQ(run({"zrank", "z", "d"}), integer(1));
  EXPECT_EQ(run({"zrangebyscore", "z", "x", "1"}), error("ERR min or max is not a float"));
}

TEST_F(SortedSetCommandsTest, CountWithinScoreBounds) {
  run({"zadd", "z", "1", "a", "2", "b", "2", "c", "4", "d"});
  EXPECT_EQ(run({"zcount", "z", "-inf", "+inf"}), integer(4));
  EXPECT_EQ(run({"zcount", "z", "(1", "2"}), integer(2));
  EXPECT_EQ(run({"zcount", "z", "2", "(4"}), integer(2));
  EXPECT_EQ(run({"zcount", "z", "(2", "+inf"}), integer(1));
  EXPECT_EQ(run({"zcount", "z", "3", "1"}), integer(0));
  EXPECT_EQ(run({"zcount", "nope", "1", "2"}), integer(0));
  EXPECT_EQ(run({"zcount", "z", "x", "1"}), error("ERR min or max is not a float"));
}

}  // namespace
}  // namespace turnstile::testing
