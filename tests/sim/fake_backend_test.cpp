#include "sim/fake_backend.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "fake_redis/lua_engine.h"
#include "turnstile/errors.h"

namespace turnstile::sim {
namespace {

using namespace std::chrono_literals;

// A script of the test's own, with its SHA-1 computed like the build does.
struct TestScript {
  std::string source = "return redis.call('INCRBY', KEYS[1], ARGV[1])";
  std::string sha1 = sha1_hex(source);
  Script script() const { return Script{"incr_by", source, sha1}; }
};

std::int64_t numsub(Backend& backend, const std::string& channel) {
  const Reply reply = backend.command({"PUBSUB", "NUMSUB", channel});
  return reply.as_array().at(1).as_integer();
}

// ---- outside a world ----

TEST(FakeBackendStandaloneTest, CommandsAndTypedErrors) {
  StandaloneServer server;
  FakeBackend backend(server, "server-0");
  EXPECT_EQ(backend.describe(), "sim:server-0");
  EXPECT_EQ(backend.command({"SET", "k", "v"}), Reply::status("OK"));
  EXPECT_EQ(backend.command({"GET", "k"}), Reply::bulk("v"));
  backend.command({"HSET", "h", "f", "1"});
  EXPECT_THROW(backend.command({"GET", "h"}), WrongTypeError);
}

TEST(FakeBackendStandaloneTest, EvalLoadsTheScriptOnceThenUsesEvalsha) {
  StandaloneServer server;
  FakeBackend backend(server, "server-0");
  const TestScript script;
  EXPECT_EQ(backend.eval(script.script(), {"n"}, {"5"}), Reply::integer(5));
  EXPECT_EQ(backend.eval(script.script(), {"n"}, {"2"}), Reply::integer(7));
  EXPECT_EQ(backend.command({"SCRIPT", "EXISTS", script.sha1}), Reply::array({Reply::integer(1)}));
  backend.command({"SCRIPT", "FLUSH"});
  EXPECT_EQ(backend.eval(script.script(), {"n"}, {"1"}), Reply::integer(8));  // reloaded
}

TEST(FakeBackendStandaloneTest, SubscriptionsAreReferenceCountedPerChannel) {
  StandaloneServer server;
  FakeBackend subscriber(server, "server-0");
  FakeBackend publisher(server, "server-0");
  std::vector<std::string> got;
  Subscription first = subscriber.subscribe(
      "ch", [&](const PubSubEvent& event) { got.push_back("first:" + std::string(event.payload)); });
  Subscription second = subscriber.subscribe(
      "ch", [&](const PubSubEvent& event) { got.push_back("second:" + std::string(event.payload)); });
  EXPECT_EQ(numsub(publisher, "ch"), 1);
  EXPECT_EQ(subscriber.channel_count(), 1u);
  EXPECT_EQ(publisher.command({"PUBLISH", "ch", "hello"}), Reply::integer(1));
  EXPECT_EQ(got, (std::vector<std::string>{"first:hello", "second:hello"}));  // synchronous
  first.reset();
  publisher.command({"PUBLISH", "ch", "again"});
  EXPECT_EQ(got.back(), "second:again");
  EXPECT_EQ(got.size(), 3u);
  second.reset();
  EXPECT_EQ(numsub(publisher, "ch"), 0);
  EXPECT_EQ(subscriber.channel_count(), 0u);
}

TEST(FakeBackendStandaloneTest, DownLinkThrowsLosesMessagesAndResubscribesWhenBack) {
  StandaloneServer server;
  FakeBackend link(server, "server-3");
  FakeBackend publisher(server, "server-3");
  std::vector<std::string> got;
  Subscription subscription = link.subscribe("ch", [&](const PubSubEvent& event) {
    got.push_back(event.kind == PubSubEvent::Kind::message ? std::string(event.payload)
                                                           : "resubscribed:" + std::string(event.channel));
  });
  link.set_down(true);
  EXPECT_TRUE(link.down());
  try {
    link.command({"PING"});
    ADD_FAILURE() << "expected ConnectionError";
  } catch (const ConnectionError& error) {
    EXPECT_NE(std::string(error.what()).find("sim:server-3"), std::string::npos);
  }
  EXPECT_EQ(publisher.command({"PUBLISH", "ch", "lost"}), Reply::integer(0));
  link.set_down(false);
  EXPECT_EQ(got, (std::vector<std::string>{"resubscribed:ch"}));
  publisher.command({"PUBLISH", "ch", "after"});
  EXPECT_EQ(got.back(), "after");
}

// ---- in a world ----

class FakeBackendWorldTest : public ::testing::Test {
 protected:
  VirtualClock clock_;
  Server server_{clock_, ServerOptions::idealised()};  // instants pinned below
  Scheduler scheduler_{clock_};
  ClientId alice_ = scheduler_.add_client();
  ClientId bob_ = scheduler_.add_client();
  std::vector<std::string> log_;

  void record(const std::string& what) {
    log_.push_back(std::to_string((clock_.now() - Instant{}) / 1ms) + " " + what);
  }
  PubSubHandler recorder(const std::string& who) {
    return [this, who](const PubSubEvent& event) {
      record(who + (event.kind == PubSubEvent::Kind::message ? " got " + std::string(event.payload) : " resubscribed"));
    };
  }
};

TEST_F(FakeBackendWorldTest, MessagesArriveThroughTheSchedulerInPublishOrderAfterTheDelay) {
  FakeBackend::Options slow;
  slow.pubsub_delay = 5ms;
  FakeBackend fast_link(server_, "server-0", scheduler_, alice_);
  FakeBackend slow_link(server_, "server-0", scheduler_, bob_, slow);
  Subscription a = fast_link.subscribe("ch", recorder("alice"));
  Subscription b = slow_link.subscribe("ch", recorder("bob"));
  scheduler_.spawn(alice_, [&] {
    fast_link.command({"PUBLISH", "ch", "1"});
    fast_link.command({"PUBLISH", "ch", "2"});
    record("published");  // delivery waits until the publisher yields
  });
  scheduler_.run_until_idle();
  EXPECT_EQ(log_,
            (std::vector<std::string>{"0 published", "0 alice got 1", "0 alice got 2", "5 bob got 1", "5 bob got 2"}));
  EXPECT_EQ(slow_link.messages_delivered(), 2u);
}

TEST_F(FakeBackendWorldTest, MessageFilterDropsDelaysAndDuplicates) {
  FakeBackend link(server_, "server-0", scheduler_, alice_);
  link.set_message_filter([](std::string_view, std::string_view payload) {
    FakeBackend::MessageFate fate;
    if (payload == "drop") fate.drop = true;
    if (payload == "late") fate.extra_delay = 7ms;
    if (payload == "twice") fate.copies = 2;
    return fate;
  });
  Subscription subscription = link.subscribe("ch", recorder("alice"));
  for (const char* payload : {"late", "drop", "twice"}) server_.publish("ch", payload);
  scheduler_.run_until_idle();
  EXPECT_EQ(log_, (std::vector<std::string>{"0 alice got twice", "0 alice got twice", "7 alice got late"}));
  EXPECT_EQ(link.messages_dropped(), 1u);
}

TEST_F(FakeBackendWorldTest, UnsubscribedHandlerIsNotCalledForQueuedMessages) {
  FakeBackend link(server_, "server-0", scheduler_, alice_, {.pubsub_delay = 5ms});
  Subscription subscription = link.subscribe("ch", recorder("alice"));
  server_.publish("ch", "queued");
  subscription.reset();
  scheduler_.run_until_idle();
  EXPECT_TRUE(log_.empty());
}

TEST_F(FakeBackendWorldTest, RequestAndReplyDelaysTakeVirtualTime) {
  FakeBackend link(server_, "server-0", scheduler_, alice_, {.request_delay = 2ms, .reply_delay = 3ms});
  scheduler_.spawn(alice_, [&] {
    link.command({"SET", "k", "v"});
    record("set done");
  });
  scheduler_.run_until_idle();
  EXPECT_EQ(log_, (std::vector<std::string>{"5 set done"}));
}

TEST_F(FakeBackendWorldTest, DroppedReplyTimesOutButTheCommandRan) {
  FakeBackend link(server_, "server-0", scheduler_, alice_, {.command_timeout = 500ms});
  link.set_request_filter([](const std::vector<std::string>& argv) {
    FakeBackend::RequestFate fate;
    fate.drop_reply = argv[0] == "SET";
    fate.drop_request = argv[0] == "DEL";
    return fate;
  });
  scheduler_.spawn(alice_, [&] {
    EXPECT_THROW(link.command({"SET", "k", "v"}), TimeoutError);
    record("set timed out");
    EXPECT_THROW(link.command({"DEL", "k"}), TimeoutError);
    record("del timed out");
    EXPECT_EQ(link.command({"GET", "k"}), Reply::bulk("v"));
  });
  scheduler_.run_until_idle();
  EXPECT_EQ(log_, (std::vector<std::string>{"500 set timed out", "1000 del timed out"}));
}

TEST_F(FakeBackendWorldTest, KilledLinkSendsNothingAndDropsQueuedMessages) {
  FakeBackend link(server_, "server-0", scheduler_, alice_, {.pubsub_delay = 5ms});
  FakeBackend observer(server_, "server-0", scheduler_, bob_);
  Subscription subscription = link.subscribe("ch", recorder("alice"));
  server_.publish("ch", "in flight");
  link.kill();
  EXPECT_THROW(link.command({"PING"}), ConnectionError);
  EXPECT_EQ(numsub(observer, "ch"), 0);  // the crashed connection is gone
  subscription.reset();                  // no UNSUBSCRIBE sent, no throw
  scheduler_.run_until_idle();
  EXPECT_TRUE(log_.empty());
  EXPECT_EQ(link.messages_dropped(), 1u);
}

TEST_F(FakeBackendWorldTest, ServerRestartResubscribesAndTellsHandlers) {
  FakeBackend link(server_, "server-0", scheduler_, alice_);
  Subscription subscription = link.subscribe("ch", recorder("alice"));
  server_.restart();
  EXPECT_EQ(server_.publish("ch", "lost"), 0);
  link.on_server_restart();
  EXPECT_EQ(server_.publish("ch", "after"), 1);
  scheduler_.run_until_idle();
  EXPECT_EQ(log_, (std::vector<std::string>{"0 alice resubscribed", "0 alice got after"}));
}

}  // namespace
}  // namespace turnstile::sim
