// SSUBSCRIBE / SUNSUBSCRIBE / SPUBLISH and PUBSUB SHARDCHANNELS /
// SHARDNUMSUB, as redis-server 7.0.15 answers them (checked against it).

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "fake_server_fixture.h"

namespace turnstile::testing {
namespace {

using ShardedPubSubTest = FakeServerTest;

Reply confirmation(const std::string& kind, Reply channel, std::int64_t count) {
  return Reply::array({Reply::bulk(kind), std::move(channel), Reply::integer(count)});
}

TEST_F(ShardedPubSubTest, ConfirmationsCountShardChannelsOnly) {
  EXPECT_EQ(run({"SUBSCRIBE", "c"}), confirmation("subscribe", bulk("c"), 1));
  EXPECT_EQ(run({"SSUBSCRIBE", "a", "b"}),
            Reply::array({confirmation("ssubscribe", bulk("a"), 1), confirmation("ssubscribe", bulk("b"), 2)}));
  EXPECT_EQ(run({"SUNSUBSCRIBE", "a"}), confirmation("sunsubscribe", bulk("a"), 1));
  EXPECT_EQ(run({"SUNSUBSCRIBE"}), confirmation("sunsubscribe", bulk("b"), 0));
  EXPECT_EQ(run({"SUNSUBSCRIBE"}), confirmation("sunsubscribe", Reply::nil(), 0));
  EXPECT_TRUE(session_->subscribed()) << "still on the classic channel";
  run({"UNSUBSCRIBE"});
  EXPECT_FALSE(session_->subscribed());
}

TEST_F(ShardedPubSubTest, ShardAndClassicChannelsAreSeparate) {
  std::vector<std::string> got;
  auto sink = [&got](std::string_view channel, std::string_view message) {
    got.push_back(std::string(channel) + ":" + std::string(message));
  };
  auto shard = server_.connect(sink);
  auto classic = server_.connect(sink);
  server_.execute(*shard, {"SSUBSCRIBE", "ch"});
  server_.execute(*classic, {"SUBSCRIBE", "ch"});
  EXPECT_EQ(run({"SPUBLISH", "ch", "s"}), integer(1));
  EXPECT_EQ(run({"PUBLISH", "ch", "p"}), integer(1));
  EXPECT_EQ(got, (std::vector<std::string>{"ch:s", "ch:p"}));
  EXPECT_EQ(run({"PUBSUB", "SHARDCHANNELS"}), bulks({"ch"}));
  EXPECT_EQ(run({"PUBSUB", "SHARDCHANNELS", "x*"}), bulks({}));
  EXPECT_EQ(run({"PUBSUB", "SHARDNUMSUB", "ch", "none"}),
            Reply::array({bulk("ch"), integer(1), bulk("none"), integer(0)}));
  EXPECT_EQ(run({"PUBSUB", "CHANNELS"}), bulks({"ch"}));
  shard.reset();  // a closed connection leaves its shard channels
  EXPECT_EQ(run({"SPUBLISH", "ch", "gone"}), integer(0));
  EXPECT_EQ(run({"PUBSUB", "SHARDCHANNELS"}), bulks({}));
}

TEST_F(ShardedPubSubTest, ShardSubscribersAreInSubscribedModeAndScriptsMaySpublish) {
  run({"SSUBSCRIBE", "a"});
  EXPECT_EQ(run({"GET", "k"}), error("ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / "
                                     "RESET are allowed in this context"));
  EXPECT_EQ(run({"PING"}), bulks({"pong", ""}));
  auto other = server_.connect();
  EXPECT_EQ(server_.execute(*other, {"SPUBLISH", "a"}), error("ERR wrong number of arguments for 'spublish' command"));
  EXPECT_EQ(server_.execute(*other, {"EVAL", "return redis.call('spublish', 'a', 'z')", "0"}), integer(1));
  EXPECT_EQ(server_.execute_from_script(*other, {"ssubscribe", "a"}),
            error("ERR This Redis command is not allowed from script"));
}

TEST_F(ShardedPubSubTest, ARestartDropsShardSubscriptions) {
  run({"SSUBSCRIBE", "a"});
  server_.restart();
  EXPECT_FALSE(session_->subscribed());
  EXPECT_EQ(run({"SPUBLISH", "a", "m"}), integer(0));
}

}  // namespace
}  // namespace turnstile::testing
