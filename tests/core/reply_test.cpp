#include "turnstile/reply.h"

#include <gtest/gtest.h>

namespace turnstile {
namespace {

TEST(ReplyTest, DefaultIsNil) {
  EXPECT_TRUE(Reply().is_nil());
  EXPECT_EQ(Reply(), Reply::nil());
}

TEST(ReplyTest, EqualityDependsOnTypeAndPayload) {
  EXPECT_EQ(Reply::integer(3), Reply::integer(3));
  EXPECT_NE(Reply::integer(3), Reply::integer(4));
  EXPECT_NE(Reply::bulk("OK"), Reply::status("OK"));
  EXPECT_NE(Reply::status("ERR x"), Reply::error("ERR x"));
  EXPECT_EQ(Reply::array({Reply::integer(1), Reply::array({Reply::nil()})}),
            Reply::array({Reply::integer(1), Reply::array({Reply::nil()})}));
  EXPECT_NE(Reply::array({Reply::integer(1)}), Reply::array({Reply::integer(1), Reply::nil()}));
}

TEST(ReplyTest, RendersLikeRedisCli) {
  EXPECT_EQ(Reply::nil().to_string(), "(nil)");
  EXPECT_EQ(Reply::integer(-2).to_string(), "(integer) -2");
  EXPECT_EQ(Reply::status("OK").to_string(), "OK");
  EXPECT_EQ(Reply::error("ERR bad").to_string(), "(error) ERR bad");
  EXPECT_EQ(Reply::bulk(std::string("a\"\x01", 3)).to_string(), "\"a\\\"\\x01\"");
  EXPECT_EQ(Reply::array({Reply::bulk("k"), Reply::integer(1)}).to_string(), "[\"k\", (integer) 1]");
}

TEST(ReplyTest, BinaryBulkKeepsEveryByte) {
  const std::string bytes("\0\xff\n", 3);
  EXPECT_EQ(Reply::bulk(bytes).as_string(), bytes);
}

}  // namespace
}  // namespace turnstile
