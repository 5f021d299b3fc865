// Pub/sub of the hiredis backend against a real redis-server: delivery,
// reference counting, the "never called after unsubscribe" guarantee,
// handlers that unsubscribe, and a killed subscriber connection; a
// SUBSCRIBE the caller's deadline ends (SubscribeOptions::confirm_within)
// against a SIGSTOPped server.

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "redis_server.h"
#include "redis_test_support.h"
#include "turnstile/errors.h"
#include "turnstile/redis_backend.h"

namespace turnstile {
namespace {

using Kind = PubSubEvent::Kind;
using testing::EventRecorder;
using ::testing::HasSubstr;
using testing::RedisServer;

// A command timeout far above the callers' bounds: an overshoot to it
// cannot pass the tests' generous wall-clock bound (half of it).
constexpr int kLongTimeoutMs = 4000;
constexpr SubscribeOptions kWithin100ms{.confirm_within = std::chrono::milliseconds(100)};

class RedisPubSubTest : public testing::SharedRedisServerTest {
 protected:
  void SetUp() override { backend_ = make_redis_backend(testing::test_options(*server_)); }

  void publish(const std::string& channel, const std::string& payload) {
    backend_->command({"PUBLISH", channel, payload});
  }
  std::string numsub(const std::string& channel) { return server_->command({"PUBSUB", "NUMSUB", channel}); }

  std::unique_ptr<Backend> backend_;
};

TEST_F(RedisPubSubTest, SubscribeIfConfirmedOnlyTakesAChannelThatIsAlreadySubscribed) {
  EventRecorder never;
  EXPECT_FALSE(backend_->subscribe_if_confirmed("linger", never.handler()).active());
  EXPECT_EQ(numsub("linger"), "[\"linger\", (integer) 0]");

  EventRecorder first;
  Subscription a = backend_->subscribe("linger", first.handler());
  a.reset();
  // The channel lingers on the server after its last handler went.
  EXPECT_EQ(numsub("linger"), "[\"linger\", (integer) 1]");
  publish("linger", "unheard");
  EventRecorder second;
  Subscription b = backend_->subscribe_if_confirmed("linger", second.handler());
  ASSERT_TRUE(b.active());
  publish("linger", "heard");
  ASSERT_TRUE(second.wait_for(Kind::message));
  EXPECT_EQ(first.count(Kind::message), 0u);
  b.reset();
  // ... and goes once its linger time has passed.
  EXPECT_TRUE(testing::eventually([&] { return numsub("linger") == "[\"linger\", (integer) 0]"; }));
  EXPECT_FALSE(backend_->subscribe_if_confirmed("linger", never.handler()).active());
  EXPECT_EQ(never.count(Kind::message), 0u);
}

TEST_F(RedisPubSubTest, DeliversWhatIsPublishedAfterSubscribeReturns) {
  EventRecorder recorder;
  Subscription subscription = backend_->subscribe("wake", recorder.handler());
  publish("wake", "0");
  publish("other", "x");
  publish("wake", std::string("bin\0ary", 7));
  ASSERT_TRUE(recorder.wait_for(Kind::message, 2));
  const auto events = recorder.events();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].channel, "wake");
  EXPECT_EQ(events[0].payload, "0");
  EXPECT_EQ(events[1].payload, std::string("bin\0ary", 7));
}

TEST_F(RedisPubSubTest, ChannelsAreReferenceCounted) {
  EventRecorder first;
  EventRecorder second;
  Subscription a = backend_->subscribe("shared", first.handler());
  Subscription b = backend_->subscribe("shared", second.handler());
  EXPECT_EQ(numsub("shared"), "[\"shared\", (integer) 1]");
  publish("shared", "1");
  ASSERT_TRUE(first.wait_for(Kind::message));
  ASSERT_TRUE(second.wait_for(Kind::message));

  a.reset();
  EXPECT_FALSE(a.active());
  EXPECT_EQ(numsub("shared"), "[\"shared\", (integer) 1]");
  publish("shared", "2");
  ASSERT_TRUE(second.wait_for(Kind::message, 2));
  EXPECT_EQ(first.count(Kind::message), 1u);

  b.reset();
  EXPECT_TRUE(testing::eventually([&] { return numsub("shared") == "[\"shared\", (integer) 0]"; }));
  // Subscribing again after the server-side unsubscribe works.
  EventRecorder third;
  Subscription c = backend_->subscribe("shared", third.handler());
  publish("shared", "3");
  ASSERT_TRUE(third.wait_for(Kind::message));
}

TEST_F(RedisPubSubTest, QuickUnsubscribeAndResubscribeIsConfirmedCorrectly) {
  for (int i = 0; i < 20; ++i) {
    EventRecorder recorder;
    {
      Subscription gone = backend_->subscribe("flap", [](const PubSubEvent&) {});
    }
    Subscription subscription = backend_->subscribe("flap", recorder.handler());
    publish("flap", std::to_string(i));
    ASSERT_TRUE(recorder.wait_for(Kind::message)) << "round " << i;
  }
}

TEST_F(RedisPubSubTest, HandlerIsNeverCalledAfterUnsubscribeReturns) {
  std::atomic<bool> stop{false};
  std::thread publisher([&] {
    const auto publisher_backend = make_redis_backend(testing::test_options(*server_));
    while (!stop) publisher_backend->command({"PUBLISH", "flood", "x"});
  });
  for (int round = 0; round < 20; ++round) {
    // The handler touches state that is destroyed right after reset().
    auto state = std::make_unique<std::atomic<int>>(0);
    Subscription subscription =
        backend_->subscribe("flood", [counter = state.get()](const PubSubEvent&) { counter->fetch_add(1); });
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    subscription.reset();
    const int seen = state->load();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    EXPECT_EQ(state->load(), seen);
    state.reset();  // ASan/TSan would catch a later call
  }
  stop = true;
  publisher.join();
}

TEST_F(RedisPubSubTest, HandlerMayUnsubscribeItself) {
  Subscription subscription;
  std::atomic<int> calls{0};
  subscription = backend_->subscribe("once", [&](const PubSubEvent&) {
    ++calls;
    subscription.reset();
  });
  EventRecorder witness;
  Subscription witness_subscription = backend_->subscribe("once", witness.handler());
  publish("once", "1");
  publish("once", "2");
  ASSERT_TRUE(witness.wait_for(Kind::message, 2));
  EXPECT_EQ(calls.load(), 1);
  EXPECT_FALSE(subscription.active());
}

TEST_F(RedisPubSubTest, SubscribingFromAHandlerIsRefused) {
  std::atomic<bool> refused{false};
  EventRecorder witness;
  Subscription subscription = backend_->subscribe("nested", [&](const PubSubEvent&) {
    try {
      Subscription inner = backend_->subscribe("inner", [](const PubSubEvent&) {});
    } catch (const InvalidArgumentError&) {
      refused = true;
    }
  });
  Subscription witness_subscription = backend_->subscribe("nested", witness.handler());
  publish("nested", "1");
  ASSERT_TRUE(witness.wait_for(Kind::message));
  EXPECT_TRUE(refused.load());
}

TEST_F(RedisPubSubTest, KilledSubscriberConnectionResubscribesAndAnnouncesIt) {
  EventRecorder first;
  EventRecorder second;
  Subscription a = backend_->subscribe("ch-a", first.handler());
  Subscription b = backend_->subscribe("ch-b", second.handler());
  server_->command({"CLIENT", "KILL", "TYPE", "pubsub"});
  ASSERT_TRUE(first.wait_for(Kind::resubscribed));
  ASSERT_TRUE(second.wait_for(Kind::resubscribed));
  EXPECT_EQ(first.events().back().channel, "ch-a");
  EXPECT_TRUE(first.events().back().payload.empty());
  publish("ch-a", "after");
  ASSERT_TRUE(first.wait_for(Kind::message));
  EXPECT_EQ(first.events().back().payload, "after");
  EXPECT_EQ(numsub("ch-b"), "[\"ch-b\", (integer) 1]");
}

TEST_F(RedisPubSubTest, PingKeepsAnIdleSubscriberAlive) {
  EventRecorder recorder;
  Subscription subscription = backend_->subscribe("idle", recorder.handler());
  // Several ping intervals of silence: answered PINGs, no reconnect.
  std::this_thread::sleep_for(std::chrono::milliseconds(4 * testing::kTestPingIntervalMs));
  EXPECT_EQ(recorder.count(Kind::resubscribed), 0u);
  publish("idle", "x");
  ASSERT_TRUE(recorder.wait_for(Kind::message));
}

// A SUBSCRIBE the server does not answer (SIGSTOP: the connection stays
// open, nothing is read) ends at the caller's deadline, not after
// command_timeout_ms, on a subscriber that is connected already and on one
// still opening its connection. Its handler is gone: once the server
// answers, the late confirmation confirms the channel for nobody (it is
// unsubscribed), and the connection serves the next caller.
TEST_F(RedisPubSubTest, ASubscribeEndsAtTheCallersDeadlineAndItsLateConfirmationConfirmsNothing) {
  for (const bool connected : {true, false}) {
    SCOPED_TRACE(connected ? "subscriber connected" : "subscriber connecting");
    RedisOptions options = testing::test_options(*server_);
    options.connect_timeout_ms = kLongTimeoutMs;
    options.command_timeout_ms = kLongTimeoutMs;
    const std::unique_ptr<Backend> backend = make_redis_backend(options);
    EventRecorder kept;
    Subscription keeps_connected;
    if (connected) keeps_connected = backend->subscribe("kept", kept.handler());
    server_->pause();
    // Resumed however the test ends: the server is shared.
    const std::unique_ptr<RedisServer, void (*)(RedisServer*)> paused(server_,
                                                                      [](RedisServer* server) { server->resume(); });
    EventRecorder late;
    std::string message;
    const long long ms = testing::elapsed_ms([&] {
      message = testing::message_of<TimeoutError>(
          [&] { (void)backend->subscribe_within("late", late.handler(), kWithin100ms); });
    });
    EXPECT_LT(ms, kLongTimeoutMs / 2) << "the SUBSCRIBE waited for command_timeout_ms";
    EXPECT_THAT(message, HasSubstr("SUBSCRIBE late was not confirmed by the caller's deadline"));
    server_->resume();

    // Another channel confirmed on the same connection: the server has
    // answered everything sent before it (the late SUBSCRIBE, then its
    // UNSUBSCRIBE), in order.
    EventRecorder after;
    Subscription sync = backend->subscribe("after", after.handler());
    EXPECT_EQ(numsub("late"), "[\"late\", (integer) 0]");
    EXPECT_FALSE(backend->subscribe_if_confirmed("late", late.handler()).active());
    EventRecorder next;
    Subscription again =
        backend->subscribe_within("late", next.handler(), SubscribeOptions{.confirm_within = testing::kEventually});
    publish("late", "heard");
    ASSERT_TRUE(next.wait_for(Kind::message));
    EXPECT_EQ(late.count(Kind::message), 0u);
  }
}

}  // namespace
}  // namespace turnstile
