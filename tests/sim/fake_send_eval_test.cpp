// FakeBackend::send_eval in a simulated world: calls on three links run in
// parallel in virtual time, wait_for() ends at exactly its timeout, a
// dropped reply, a down link, a hanging link, an error reply, replica
// sync, a link destroyed with a call in flight, and the same seed giving the same trace with random
// faults and a crash. Outside a world: the call completes at once.

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "sim/fake_backend.h"
#include "fake_redis/lua_engine.h"
#include "turnstile/errors.h"
#include "turnstile/sim/faults.h"
#include "turnstile/sim/world.h"

namespace turnstile::sim {
namespace {

using namespace std::chrono_literals;

// INCRBY KEYS[1] ARGV[1], hashed as the build hashes scripts. Static: a
// pending reply needs its script to outlive it.
const Script& incr_by() {
  static const std::string source = "return redis.call('INCRBY', KEYS[1], ARGV[1])";
  static const std::string sha1 = sha1_hex(source);
  static const Script script{"incr_by", source, sha1};
  return script;
}

class FakeSendEvalTest : public ::testing::Test {
 protected:
  VirtualClock clock_;
  // Idealised: the instants below are pinned.
  Server server0_{clock_, ServerOptions::idealised()};
  Server server1_{clock_, ServerOptions::idealised()};
  Server server2_{clock_, ServerOptions::idealised()};
  Scheduler scheduler_{clock_};
  ClientId alice_ = scheduler_.add_client();
  std::vector<std::string> log_;

  std::int64_t now_ms() const { return (clock_.now() - Instant{}) / 1ms; }
  void record(const std::string& what) { log_.push_back(std::to_string(now_ms()) + " " + what); }

  // Runs `body` as a task of alice, to the end.
  void run(std::function<void()> body) {
    scheduler_.spawn(alice_, std::move(body));
    scheduler_.run_until_idle();
  }

  static std::unique_ptr<PendingReply> send(Backend& link, const std::string& key, EvalSync sync = EvalSync::none) {
    return link.send_eval(incr_by(), {key}, {"1"}, sync);
  }
};

TEST_F(FakeSendEvalTest, CallsOnThreeLinksTakeTheLongestDelayNotTheSum) {
  FakeBackend fast(server0_, "server-0", scheduler_, alice_, {.request_delay = 2ms, .reply_delay = 3ms});
  FakeBackend middle(server1_, "server-1", scheduler_, alice_, {.request_delay = 5ms, .reply_delay = 5ms});
  FakeBackend slow(server2_, "server-2", scheduler_, alice_, {.request_delay = 10ms, .reply_delay = 10ms});
  FakeBackend* links[] = {&fast, &middle, &slow};
  run([&] {
    for (FakeBackend* link : links) link->eval(incr_by(), {"warm-up"}, {"1"});  // loads the script
    record("sending");
    std::vector<std::unique_ptr<PendingReply>> pending;
    for (FakeBackend* link : links) pending.push_back(send(*link, "n"));
    record("sent");  // nothing waited
    for (std::size_t i = 0; i < pending.size(); ++i) {
      EXPECT_TRUE(pending[i]->wait_for(1s));
      record("link " + std::to_string(i) + " in");
      EXPECT_EQ(pending[i]->get().reply, Reply::integer(1));
    }
  });
  // Warm-up, one link after another: 3 round trips each (NOSCRIPT, SCRIPT
  // LOAD, EVALSHA) of 5, 10 and 20 ms: 105 ms. Then the three calls at once:
  // 20 ms, the slowest link's round trip, where one after another take 35.
  EXPECT_EQ(log_,
            (std::vector<std::string>{"105 sending", "105 sent", "110 link 0 in", "115 link 1 in", "125 link 2 in"}));
}

TEST_F(FakeSendEvalTest, ADroppedReplyTimesOutWaitForAtItsTimeoutAndGetAtTheCommandTimeout) {
  FakeBackend link(server0_, "server-0", scheduler_, alice_, {.command_timeout = 500ms});
  bool drop = false;
  link.set_request_filter([&drop](const std::vector<std::string>& argv) {
    return FakeBackend::RequestFate{.drop_reply = drop && argv[0] == "EVALSHA"};
  });
  run([&] {
    link.eval(incr_by(), {"n"}, {"1"});
    drop = true;
    const std::unique_ptr<PendingReply> pending = send(link, "n");
    EXPECT_FALSE(pending->wait_for(0ms));
    EXPECT_FALSE(pending->wait_for(100ms));
    record("wait_for false");
    EXPECT_FALSE(pending->wait_for(150ms));
    record("wait_for false again");
    EXPECT_THROW((void)pending->get(), TimeoutError);
    record("get threw");
    drop = false;
    EXPECT_EQ(link.command({"GET", "n"}), Reply::bulk("2"));  // it ran; the reply was lost
  });
  EXPECT_EQ(log_, (std::vector<std::string>{"100 wait_for false", "250 wait_for false again", "500 get threw"}));
}

TEST_F(FakeSendEvalTest, ADownLinkFailsGetWithAConnectionError) {
  FakeBackend link(server0_, "server-0", scheduler_, alice_, {.request_delay = 10ms});
  run([&] {
    link.set_down(true);
    const std::unique_ptr<PendingReply> pending = send(link, "n");
    try {
      (void)pending->get();
      ADD_FAILURE() << "no error";
    } catch (const ConnectionError& error) {
      EXPECT_NE(std::string(error.what()).find("sim:server-0"), std::string::npos) << error.what();
    }
    record("down");
    link.set_down(false);
    // Going down while the request is on its way.
    const std::unique_ptr<PendingReply> in_flight = send(link, "n");
    scheduler_.schedule_at(
        alice_, clock_.now() + 5ms, [&] { link.set_down(true); }, Scheduler::RunAs::inline_action);
    EXPECT_THROW((void)in_flight->get(), ConnectionError);
    record("down in flight");
  });
  EXPECT_EQ(log_, (std::vector<std::string>{"10 down", "20 down in flight"}));
}

TEST_F(FakeSendEvalTest, AnErrorReplyIsRaisedByGetAsItsServerError) {
  FakeBackend link(server0_, "server-0", scheduler_, alice_);
  run([&] {
    link.command({"HSET", "h", "f", "1"});
    const std::unique_ptr<PendingReply> pending = send(link, "h");
    EXPECT_TRUE(pending->wait_for(1ms));
    EXPECT_THROW((void)pending->get(), WrongTypeError);
    EXPECT_EQ(send(link, "n")->get().reply, Reply::integer(1));
  });
}

TEST_F(FakeSendEvalTest, ReplicaSyncWaitsForTheReplicaInItsOwnTask) {
  FakeBackend link(server0_, "server-0", scheduler_, alice_, {.replica_sync_timeout = 100ms});
  link.set_replica_lag(20ms);
  run([&] {
    const std::unique_ptr<PendingReply> synced = send(link, "n", EvalSync::replicas);
    EXPECT_FALSE(synced->wait_for(19ms));
    EXPECT_TRUE(synced->wait_for(1ms));
    const SyncedReply reply = synced->get();
    EXPECT_EQ(reply.reply, Reply::integer(1));
    EXPECT_EQ(reply.ack.replicas, 1);
    EXPECT_EQ(reply.ack.acknowledged, 1);
    record("acknowledged");

    link.set_replica_lag(200ms);  // beyond the timeout
    const SyncedReply late = send(link, "n", EvalSync::replicas)->get();
    EXPECT_TRUE(late.ack.unconfirmed());
    record("unconfirmed");
    EXPECT_EQ(send(link, "n", EvalSync::none)->get().ack.replicas, 0);  // no WAIT
    record("plain");
  });
  EXPECT_EQ(log_, (std::vector<std::string>{"20 acknowledged", "120 unconfirmed", "120 plain"}));
}

TEST_F(FakeSendEvalTest, ALinkDestroyedWithACallInFlightFailsTheCall) {
  auto link = std::make_unique<FakeBackend>(server0_, "server-0", scheduler_, alice_,
                                            FakeBackend::Options{.request_delay = 10ms});
  run([&] {
    const std::unique_ptr<PendingReply> pending = send(*link, "n");
    scheduler_.schedule_at(
        alice_, clock_.now() + 5ms, [&] { link.reset(); }, Scheduler::RunAs::inline_action);
    EXPECT_THROW((void)pending->get(), ConnectionError);
    record("failed");
  });
  EXPECT_EQ(log_, (std::vector<std::string>{"10 failed"}));
}

TEST(FakeSendEvalStandaloneTest, OutsideAWorldTheCallCompletesAtOnce) {
  StandaloneServer server;
  FakeBackend link(server, "server-0");
  const std::unique_ptr<PendingReply> pending = link.send_eval(incr_by(), {"n"}, {"5"}, EvalSync::none);
  EXPECT_TRUE(pending->wait_for(0ms));
  EXPECT_EQ(pending->get().reply, Reply::integer(5));
}

// Four clients ask three servers in parallel, rounds apart by random sleeps,
// under random request/reply faults; one crashes with calls in flight.
std::pair<std::uint64_t, std::string> parallel_run(std::uint64_t seed) {
  WorldOptions options;
  options.servers = 3;
  options.request_delay = 1ms;
  options.reply_delay = 2ms;
  options.command_timeout = 50ms;
  World world(seed, options);
  FaultPlan plan;
  plan.request_drop = 0.05;
  plan.reply_drop = 0.05;
  plan.request_delay = 0.2;
  plan.delay_max = 20ms;
  for (int c = 0; c < 4; ++c) {
    SimClient& client = world.add_client("c" + std::to_string(c));
    world.spawn(client, [&world, &client] {
      for (int round = 0; round < 20; ++round) {
        client.runtime().sleep_for(std::chrono::milliseconds(client.runtime().random_u64() % 30));
        std::vector<std::unique_ptr<PendingReply>> pending;
        for (std::size_t s = 0; s < client.server_count(); ++s) {
          pending.push_back(client.backend(s).send_eval(incr_by(), {"n"}, {"1"}, EvalSync::none));
        }
        std::string line = "round " + std::to_string(round) + ":";
        for (const auto& call : pending) {
          const bool in = call->wait_for(10ms);
          try {
            line += (in ? " in " : " late ") + call->get().reply.to_string();
          } catch (const std::exception& error) {
            line += std::string(" failed ") + error.what();
          }
        }
        world.note(line);
      }
    });
  }
  world.apply_fault_plan(plan);
  world.after(200ms, [&] { world.crash(world.client("c3")); });
  world.run_until_idle();
  return {world.trace_hash(), world.trace_text()};
}

TEST(FakeSendEvalWorldTest, ASentEvalOnAHangingLinkTimesOutInWaitForAndGet) {
  World world(1);
  SimClient& alice = world.add_client("alice");
  std::vector<std::string> log;
  world.partition(alice, 0);
  world.spawn(alice, [&] {
    const std::unique_ptr<PendingReply> pending = alice.backend().send_eval(incr_by(), {"n"}, {"1"}, EvalSync::none);
    EXPECT_FALSE(pending->wait_for(500ms));
    log.push_back(std::to_string(world.now_ms()) + " not yet");
    EXPECT_TRUE(pending->wait_for(10s));  // done: failed
    log.push_back(std::to_string(world.now_ms()) + " done");
    EXPECT_THROW((void)pending->get(), TimeoutError);
  });
  world.run_for(20s);
  EXPECT_EQ(log, (std::vector<std::string>{"500 not yet", "2000 done"}));
}

TEST(FakeSendEvalWorldTest, SameSeedSameTrace) {
  const auto first = parallel_run(11);
  const auto again = parallel_run(11);
  const auto other = parallel_run(12);
  EXPECT_EQ(first.first, again.first);
  EXPECT_EQ(first.second, again.second);
  EXPECT_NE(first.first, other.first);
  EXPECT_NE(first.second.find("c3 crashed"), std::string::npos);
  EXPECT_NE(first.second.find(" late "), std::string::npos) << "no call outlived its wait_for";
  EXPECT_NE(first.second.find(" failed "), std::string::npos) << "no fault hit a call";
  EXPECT_EQ(first.second.find(" task "), std::string::npos) << "a task failed";
}

}  // namespace
}  // namespace turnstile::sim
