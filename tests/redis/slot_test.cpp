// Cluster key hashing against the vectors of the Redis Cluster specification
// (no server needed).

#include <gtest/gtest.h>

#include "redis/cluster_router.h"
#include "redis/slot.h"
#include "turnstile/errors.h"

namespace turnstile::redis {
namespace {

TEST(SlotTest, Crc16IsTheXmodemVariantOfTheSpec) {
  // The spec's reference: "123456789" -> 0x31C3.
  EXPECT_EQ(crc16("123456789"), 0x31C3);
  EXPECT_EQ(crc16(""), 0);
}

TEST(SlotTest, SlotsOfKnownKeys) {
  // As `CLUSTER KEYSLOT` answers on Redis 7.0.
  EXPECT_EQ(key_slot("foo"), 12182);
  EXPECT_EQ(key_slot("bar"), 5061);
  EXPECT_EQ(key_slot("hello"), 866);
  EXPECT_EQ(key_slot("123456789"), 0x31C3);
}

TEST(SlotTest, HashTagsFollowTheSpec) {
  EXPECT_EQ(hash_tag("{user1000}.following"), "user1000");
  EXPECT_EQ(key_slot("{user1000}.following"), key_slot("{user1000}.followers"));
  EXPECT_EQ(hash_tag("foo{}{bar}"), "foo{}{bar}");  // empty first tag: the whole key
  EXPECT_EQ(hash_tag("foo{{bar}}zap"), "{bar");
  EXPECT_EQ(hash_tag("foo{bar}{zap}"), "bar");
  EXPECT_EQ(hash_tag("foo{bar"), "foo{bar");  // unterminated: the whole key
  EXPECT_EQ(key_slot("redisson_lock__channel:{order:42}"), key_slot("order:42"));
}

TEST(SlotTest, EverySlotIsInRange) {
  for (int i = 0; i < 1000; ++i) {
    const int slot = key_slot("key:" + std::to_string(i));
    EXPECT_GE(slot, 0);
    EXPECT_LT(slot, kClusterSlotCount);
  }
}

TEST(SlotTest, KeysOfOneCallMustShareASlot) {
  EXPECT_EQ(common_slot("call", {}), std::nullopt);
  EXPECT_EQ(common_slot("call", {"lock", "redisson_lock__channel:{lock}"}), key_slot("lock"));
  try {
    (void)common_slot("script 'x'", {"foo", "bar"});
    ADD_FAILURE() << "cross-slot keys were accepted";
  } catch (const InvalidArgumentError& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("'foo' (slot 12182)"), std::string::npos) << message;
    EXPECT_NE(message.find("'bar' (slot 5061)"), std::string::npos) << message;
  }
}

TEST(SlotTest, ParsesRedirections) {
  const Redirect moved = parse_redirect("MOVED 3999 127.0.0.1:6381");
  EXPECT_EQ(moved.slot, 3999);
  EXPECT_EQ(moved.target, (RedisEndpoint{"127.0.0.1", 6381}));
  const Redirect ipv6 = parse_redirect("ASK 1 [::1]:7000");
  EXPECT_EQ(ipv6.target, (RedisEndpoint{"::1", 7000}));
  EXPECT_THROW(parse_redirect("MOVED 99999 h:1"), ProtocolError);
  EXPECT_THROW(parse_redirect("MOVED"), ProtocolError);
}

TEST(SlotTest, ParsesClusterSlots) {
  const Reply reply =
      Reply::array({Reply::array({Reply::integer(0), Reply::integer(5460),
                                  Reply::array({Reply::bulk(""), Reply::integer(7000), Reply::bulk("id")})})});
  const std::vector<SlotRange> ranges = parse_cluster_slots(reply, RedisEndpoint{"10.0.0.1", 7000});
  ASSERT_EQ(ranges.size(), 1u);
  EXPECT_EQ(ranges[0].first, 0);
  EXPECT_EQ(ranges[0].last, 5460);
  EXPECT_EQ(ranges[0].master, (RedisEndpoint{"10.0.0.1", 7000}));  // empty host: the node asked
  EXPECT_THROW(parse_cluster_slots(Reply::integer(1), {}), ProtocolError);
}

}  // namespace
}  // namespace turnstile::redis
