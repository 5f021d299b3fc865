#include "fake_redis/server.h"

#include <gtest/gtest.h>

#include "fake_server_fixture.h"
#include "fake_redis/command_table.h"

namespace turnstile::testing {
namespace {

using ServerTest = FakeServerTest;

TEST_F(ServerTest, UnknownCommandQuotesNameAndArguments) {
  EXPECT_EQ(run({"Foo", "a", "b"}), error("ERR unknown command 'Foo', with args beginning with: 'a' 'b' "));
  EXPECT_EQ(run({"foo"}), error("ERR unknown command 'foo', with args beginning with: "));
  EXPECT_EQ(run({}), error("ERR unknown command '', with args beginning with: "));
}

TEST_F(ServerTest, ArityUsesTheTableName) {
  EXPECT_EQ(run({"GET"}), error("ERR wrong number of arguments for 'get' command"));
  EXPECT_EQ(run({"set", "k"}), error("ERR wrong number of arguments for 'set' command"));
}

TEST_F(ServerTest, CommandNamesAreCaseInsensitive) {
  EXPECT_EQ(run({"SeT", "k", "v"}), ok());
  EXPECT_EQ(run({"gEt", "k"}), bulk("v"));
}

TEST_F(ServerTest, SubscribedSessionMayOnlyRunPubSubCommandsAndPing) {
  run({"subscribe", "c"});
  EXPECT_EQ(run({"get", "k"}), error("ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / "
                                     "RESET are allowed in this context"));
  EXPECT_EQ(run({"ping"}), bulks({"pong", ""}));
  EXPECT_EQ(run({"ping", "hi"}), bulks({"pong", "hi"}));
  run({"unsubscribe"});
  EXPECT_EQ(run({"get", "k"}), Reply::nil());
}

TEST_F(ServerTest, ScriptsAreRefusedNoScriptCommandsAfterLookupAndArity) {
  EXPECT_EQ(server_.execute_from_script(*session_, {"nosuch"}), error("ERR Unknown Redis command called from script"));
  EXPECT_EQ(server_.execute_from_script(*session_, {"subscribe"}),
            error("ERR Wrong number of args calling Redis command from script"));
  EXPECT_EQ(server_.execute_from_script(*session_, {"subscribe", "c"}),
            error("ERR This Redis command is not allowed from script"));
  EXPECT_TRUE(session_->channels().empty());
  EXPECT_EQ(server_.execute_from_script(*session_, {"publish", "c", "m"}), integer(0));
  EXPECT_EQ(server_.execute_from_script(*session_, {"set", "k", "v"}), ok());
}

TEST_F(ServerTest, PublishDeliversInSessionIdOrder) {
  std::vector<std::string> deliveries;
  auto sink_for = [&](std::string name) {
    return [&deliveries, name](std::string_view channel, std::string_view message) {
      deliveries.push_back(name + ":" + std::string(channel) + ":" + std::string(message));
    };
  };
  auto first = server_.connect(sink_for("first"));
  auto second = server_.connect(sink_for("second"));
  server_.execute(*second, {"subscribe", "c"});
  server_.execute(*first, {"subscribe", "c", "d"});
  EXPECT_EQ(run({"publish", "c", "hello"}), integer(2));
  EXPECT_EQ(run({"publish", "d", "x"}), integer(1));
  EXPECT_EQ(run({"publish", "none", "x"}), integer(0));
  EXPECT_EQ(deliveries, (std::vector<std::string>{"first:c:hello", "second:c:hello", "first:d:x"}));
  second.reset();  // a closed connection's subscriptions end with it
  EXPECT_EQ(run({"publish", "c", "again"}), integer(1));
}

TEST_F(ServerTest, SubscribeConfirmsEachChannel) {
  EXPECT_EQ(run({"subscribe", "a"}), Reply::array({bulk("subscribe"), bulk("a"), integer(1)}));
  EXPECT_EQ(run({"subscribe", "b", "a"}), Reply::array({Reply::array({bulk("subscribe"), bulk("b"), integer(2)}),
                                                        Reply::array({bulk("subscribe"), bulk("a"), integer(2)})}));
  EXPECT_EQ(run({"unsubscribe", "zz"}), Reply::array({bulk("unsubscribe"), bulk("zz"), integer(2)}));
  EXPECT_EQ(run({"unsubscribe"}), Reply::array({Reply::array({bulk("unsubscribe"), bulk("a"), integer(1)}),
                                                Reply::array({bulk("unsubscribe"), bulk("b"), integer(0)})}));
  EXPECT_EQ(run({"unsubscribe"}), Reply::array({bulk("unsubscribe"), Reply::nil(), integer(0)}));
}

TEST_F(ServerTest, SinkMayUnsubscribeOthersDuringDelivery) {
  std::unique_ptr<sim::Session> victim;
  int victim_deliveries = 0;
  auto killer = server_.connect([&](std::string_view, std::string_view) { victim.reset(); });
  victim = server_.connect([&](std::string_view, std::string_view) { ++victim_deliveries; });
  server_.execute(*killer, {"subscribe", "c"});
  server_.execute(*victim, {"subscribe", "c"});
  EXPECT_EQ(run({"publish", "c", "m"}), integer(1));
  EXPECT_EQ(victim_deliveries, 0);
}

TEST_F(ServerTest, RestartLosesKeysAndSubscriptionsButKeepsSessions) {
  run({"set", "k", "v"});
  run({"subscribe", "c"});
  server_.restart();
  EXPECT_TRUE(session_->channels().empty());
  EXPECT_EQ(run({"get", "k"}), Reply::nil());
  EXPECT_EQ(run({"publish", "c", "m"}), integer(0));
}

TEST_F(ServerTest, TimeAndPingAndSelect) {
  advance_ms(1500);
  const std::int64_t us = clock_.unix_time_us();
  EXPECT_EQ(run({"time"}), bulks({std::to_string(us / 1'000'000), std::to_string(us % 1'000'000)}));
  EXPECT_EQ(run({"ping"}), Reply::status("PONG"));
  EXPECT_EQ(run({"select", "0"}), ok());
  EXPECT_EQ(run({"select", "1"}), error("ERR DB index is out of range"));
  EXPECT_EQ(run({"select", "x"}), error("ERR value is not an integer or out of range"));
}

TEST(CommandTableTest, RegistersEveryFamily) {
  const sim::CommandTable& table = sim::command_table();
  for (const char* name : {"del", "get", "hset", "lpos", "zadd", "publish", "time"}) {
    EXPECT_NE(table.find(name), nullptr) << name;
  }
  EXPECT_EQ(table.find("nosuch"), nullptr);
  EXPECT_NE(table.find("SUBSCRIBE")->flags & sim::kCommandNoScript, 0u);
}

}  // namespace
}  // namespace turnstile::testing
