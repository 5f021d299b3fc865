// ForwardingBackend (turnstile/backend.h): a decorator overrides one call
// and every other call, subscriptions included, reaches the inner backend.

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lua_scripts.h"
#include "turnstile/backend.h"
#include "turnstile/sim/standalone.h"

namespace turnstile {
namespace {

constexpr auto kDeliveryDeadline = std::chrono::seconds(30);
// Owner ids as the lock scripts expect them: "<uuid>:<task id>".
const std::string kOwner1 = "2f0b8a4e-6c1d-4e8b-9a57-0c3d5e7f9a11:1";
const std::string kOwner2 = "2f0b8a4e-6c1d-4e8b-9a57-0c3d5e7f9a11:2";

// Counts script calls, nothing else.
class CountingBackend final : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;

  Reply eval(const Script& script, const std::vector<std::string>& keys,
             const std::vector<std::string>& args) override {
    ++evals;
    return ForwardingBackend::eval(script, keys, args);
  }

  int evals = 0;
};

TEST(ForwardingBackendTest, PassesOnWhatItDoesNotOverride) {
  const std::shared_ptr<Backend> inner = sim::make_standalone_fake_backend("inner");
  CountingBackend outer(inner);
  EXPECT_EQ(&outer.inner(), inner.get());
  EXPECT_EQ(outer.describe(), inner->describe());
  EXPECT_EQ(outer.publish_command(), inner->publish_command());

  const Reply reply = outer.eval(scripts::reentrant_lock_acquire, {"fw:lock"}, {"30000", kOwner1});
  EXPECT_TRUE(reply.is_nil()) << "acquired";
  EXPECT_EQ(outer.evals, 1);
  // eval_synced and command are passed on, not counted.
  EXPECT_EQ(inner->command({"HGET", "fw:lock", kOwner1}).as_string(), "1");
  (void)outer.eval_synced(scripts::reentrant_lock_acquire, {"fw:lock"}, {"30000", kOwner1});
  EXPECT_EQ(outer.command({"HGET", "fw:lock", kOwner1}).as_string(), "2");
  EXPECT_EQ(outer.evals, 1);
  const std::unique_ptr<PendingReply> pending =
      outer.send_eval(scripts::reentrant_lock_acquire, {"fw:lock"}, {"30000", kOwner2}, EvalSync::none);
  EXPECT_TRUE(pending->get().reply.is_integer()) << "held by the first owner: the reply is its remaining lease";
}

// Answers a cluster slot of its own for every key.
class SlottedBackend final : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  std::optional<int> cluster_slot(std::string_view key) const override { return static_cast<int>(key.size()); }
};

TEST(ForwardingBackendTest, PassesOnTheInnerBackendsClusterSlot) {
  const std::shared_ptr<Backend> fake = sim::make_standalone_fake_backend("inner");
  EXPECT_EQ(fake->cluster_slot("any"), std::nullopt);  // one server: any keys share a call
  CountingBackend outer(std::make_shared<SlottedBackend>(fake));
  EXPECT_EQ(outer.cluster_slot("four"), 4);
}

TEST(ForwardingBackendTest, SubscriptionsAreTheInnerBackendsAndEndCleanly) {
  const std::shared_ptr<Backend> inner = sim::make_standalone_fake_backend("inner");
  auto outer = std::make_unique<CountingBackend>(inner);
  std::mutex mutex;
  std::condition_variable delivered;
  std::vector<std::string> payloads;
  Subscription subscription = outer->subscribe("fw:channel", [&](const PubSubEvent& event) {
    if (event.kind != PubSubEvent::Kind::message) return;
    std::lock_guard guard(mutex);
    payloads.emplace_back(event.payload);
    delivered.notify_all();
  });
  ASSERT_TRUE(subscription.active());
  (void)inner->command({"PUBLISH", "fw:channel", "hello"});
  {
    std::unique_lock lock(mutex);
    ASSERT_TRUE(delivered.wait_for(lock, kDeliveryDeadline, [&] { return !payloads.empty(); }));
    EXPECT_EQ(payloads, std::vector<std::string>{"hello"});
  }
  // The subscription points at the inner backend: ending it after the
  // decorator is gone is fine (it would assert if it reached the decorator).
  outer.reset();
  subscription.reset();
  EXPECT_FALSE(subscription.active());
}

}  // namespace
}  // namespace turnstile
