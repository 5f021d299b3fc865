#include <gtest/gtest.h>

#include "fake_server_fixture.h"

namespace turnstile::testing {
namespace {

using ListCommandsTest = FakeServerTest;

TEST_F(ListCommandsTest, PopWithCountAndEmptyListDisappears) {
  run({"rpush", "l", "a", "b", "c"});
  EXPECT_EQ(run({"lpop", "l", "2"}), bulks({"a", "b"}));
  EXPECT_EQ(run({"rpop", "l", "5"}), bulks({"c"}));
  EXPECT_EQ(run({"exists", "l"}), integer(0));
  EXPECT_EQ(run({"lpop", "l", "1"}), Reply::nil());
  EXPECT_EQ(run({"lpop", "l", "-1"}), error("ERR value is out of range, must be positive"));
}

TEST_F(ListCommandsTest, LposFindsFromEitherEnd) {
  run({"rpush", "l", "a", "b", "a", "c", "a"});
  EXPECT_EQ(run({"lpos", "l", "a", "rank", "-1"}), integer(4));
  EXPECT_EQ(run({"lpos", "l", "a", "count", "0"}), Reply::array({integer(0), integer(2), integer(4)}));
  EXPECT_EQ(run({"lpos", "l", "a", "rank", "2", "count", "1", "maxlen", "2"}), Reply::array({}));
  EXPECT_EQ(run({"lrem", "l", "-2", "a"}), integer(2));
  EXPECT_EQ(run({"lrange", "l", "0", "-1"}), bulks({"a", "b", "c"}));
}

TEST_F(ListCommandsTest, WrongTypeLeavesTheKeyAlone) {
  run({"zadd", "z", "1", "m"});
  EXPECT_EQ(run({"lpush", "z", "x"}), error(kWrongType));
  EXPECT_EQ(run({"lpos", "z", "x"}), error(kWrongType));
  EXPECT_EQ(run({"zscore", "z", "m"}), bulk("1"));
}

}  // namespace
}  // namespace turnstile::testing
