// NodeFanout (src/locks/engine/node_fanout.h) with scripted node calls, in a
// simulated world so every wait is exact virtual time: answers are taken in
// node order, the deadline bounds the wait as a whole and answers already
// in are taken past it, a decision stops the wait early, and failures (at
// send or at finish) are answers of their own.

#include "locks/engine/node_fanout.h"

#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <vector>

#include "turnstile/sim/world.h"

namespace turnstile::testing {
namespace {

using detail::NodeAnswer;
using detail::NodeCall;
using detail::NodeFanout;
using std::chrono::milliseconds;

// A node that answers `yes` at `ready_at`, or throws from finish() if `fails`.
struct ScriptedNode {
  Instant ready_at;
  bool yes = true;
  bool fails = false;
};

class ScriptedCall final : public NodeCall {
 public:
  ScriptedCall(Runtime& runtime, ScriptedNode node, int& finishes)
      : runtime_(runtime), node_(node), finishes_(finishes) {}
  bool wait_for(Duration timeout) override {
    const Instant now = runtime_.now();
    if (now >= node_.ready_at) return true;
    if (timeout <= Duration::zero()) return false;
    runtime_.sleep_until(std::min(node_.ready_at, now + timeout));
    return runtime_.now() >= node_.ready_at;
  }
  bool finish() override {
    ++finishes_;
    if (runtime_.now() < node_.ready_at) runtime_.sleep_until(node_.ready_at);
    if (node_.fails) throw std::runtime_error("node failed");
    return node_.yes;
  }

 private:
  Runtime& runtime_;
  ScriptedNode node_;
  int& finishes_;
};

class NodeFanoutTest : public ::testing::Test {
 protected:
  NodeFanoutTest() : world_(7), client_(world_.add_client("driver")) {}

  // Runs `body` on a task of the driver client, with the fanout's start
  // time, until the world is idle.
  void run(const std::function<void(Runtime&, Instant start)>& body) {
    bool ran = false;
    world_.spawn(client_, [&] {
      body(client_.runtime(), client_.runtime().now());
      ran = true;
    });
    world_.run_for(std::chrono::minutes(1));
    ASSERT_TRUE(ran);
  }

  NodeFanout::Send scripted(Runtime& runtime, Instant start, std::vector<ScriptedNode> nodes) {
    return [&runtime, start, nodes, this](std::size_t index) -> std::unique_ptr<NodeCall> {
      ScriptedNode node = nodes.at(index);
      node.ready_at = start + (node.ready_at - Instant{});
      return std::make_unique<ScriptedCall>(runtime, node, finishes_);
    };
  }

  static Instant after(milliseconds delay) { return Instant{} + delay; }

  sim::World world_;
  sim::SimClient& client_;
  int finishes_ = 0;
};

TEST_F(NodeFanoutTest, AnswersAlreadyInAreTakenPastTheDeadlineAfterASlowFirstNode) {
  run([&](Runtime& runtime, Instant start) {
    NodeFanout fanout(
        runtime, 3,
        scripted(runtime, start,
                 {{after(milliseconds(500))}, {after(milliseconds(10))}, {after(milliseconds(20)), false}}));
    const NodeFanout::Tally tally =
        fanout.wait(start + milliseconds(50), [](const NodeFanout::Tally&) { return false; });
    // Waited on node 0 until the deadline, not until it answered.
    EXPECT_EQ(runtime.now() - start, milliseconds(50));
    EXPECT_EQ(tally.pending, 1u);
    EXPECT_EQ(tally.yes, 1u);
    EXPECT_EQ(tally.no, 1u);
    EXPECT_EQ(fanout.answer(0), NodeAnswer::pending);
    EXPECT_EQ(fanout.answer(2), NodeAnswer::no);

    const NodeFanout::Tally all = fanout.wait_for_all();
    EXPECT_EQ(runtime.now() - start, milliseconds(500));
    EXPECT_EQ(all.pending, 0u);
    EXPECT_EQ(all.yes, 2u);
    EXPECT_EQ(fanout.answer(0), NodeAnswer::yes);
  });
  EXPECT_EQ(finishes_, 3);
}

TEST_F(NodeFanoutTest, ADecisionStopsTheWaitBeforeLaterNodes) {
  run([&](Runtime& runtime, Instant start) {
    NodeFanout fanout(
        runtime, 3,
        scripted(runtime, start,
                 {{after(milliseconds(5)), false}, {after(milliseconds(8)), false}, {after(milliseconds(400))}}));
    const NodeFanout::Tally tally =
        fanout.wait(start + milliseconds(1000), [](const NodeFanout::Tally& t) { return t.no >= 2; });
    EXPECT_EQ(runtime.now() - start, milliseconds(8));
    EXPECT_EQ(tally.no, 2u);
    EXPECT_EQ(tally.pending, 1u);
  });
  EXPECT_EQ(finishes_, 2);  // node 2 was never finished: nobody took it
}

TEST_F(NodeFanoutTest, APastDeadlineTakesOnlyWhatIsIn) {
  run([&](Runtime& runtime, Instant start) {
    NodeFanout fanout(runtime, 2, scripted(runtime, start, {{after(milliseconds(0))}, {after(milliseconds(30))}}));
    const NodeFanout::Tally tally = fanout.wait(start, [](const NodeFanout::Tally&) { return false; });
    EXPECT_EQ(runtime.now(), start);
    EXPECT_EQ(tally.yes, 1u);
    EXPECT_EQ(tally.pending, 1u);
    (void)fanout.wait_for_all();
  });
}

TEST_F(NodeFanoutTest, FailuresAtSendAndAtFinishAreAnswersWithTheirErrors) {
  run([&](Runtime& runtime, Instant start) {
    const NodeFanout::Send inner =
        scripted(runtime, start, {{after(milliseconds(1))}, {}, {after(milliseconds(2)), true, true}});
    NodeFanout fanout(runtime, 3, [&](std::size_t index) -> std::unique_ptr<NodeCall> {
      if (index == 1) throw std::invalid_argument("cannot send to node 1");
      return inner(index);
    });
    EXPECT_EQ(fanout.answer(1), NodeAnswer::failed);  // at once, before any wait
    const NodeFanout::Tally tally = fanout.wait_for_all();
    EXPECT_EQ(tally.yes, 1u);
    EXPECT_EQ(tally.failed, 2u);
    EXPECT_EQ(fanout.error(0), nullptr);
    ASSERT_NE(fanout.error(1), nullptr);
    ASSERT_NE(fanout.error(2), nullptr);
    EXPECT_THROW(std::rethrow_exception(fanout.error(1)), std::invalid_argument);
    EXPECT_THROW(std::rethrow_exception(fanout.error(2)), std::runtime_error);
  });
}

}  // namespace
}  // namespace turnstile::testing
