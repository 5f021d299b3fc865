#include "turnstile/sim/timeline.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "turnstile/client.h"
#include "turnstile/errors.h"
#include "turnstile/lock.h"

namespace turnstile::sim {
namespace {

using namespace std::chrono_literals;

TEST(TimelineTest, OneTrackPerClientWithWaitAndHoldSpansAndFaultInstants) {
  World world(9);
  Timeline timeline(world);
  SimClient& alice = world.add_client("alice");
  SimClient& bob = world.add_client("bob");
  world.spawn(alice, [&] {
    timeline.waiting(alice, "orders");
    alice.runtime().sleep_for(2ms);
    timeline.acquired(alice, "orders", 7);
    alice.runtime().sleep_for(5ms);
    timeline.released(alice, "orders");
  });
  world.spawn(bob, [&] {
    timeline.waiting(bob, "orders");
    bob.runtime().sleep_for(1s);
  });
  world.at(Instant{} + 10ms, [&] { world.crash(bob); });
  world.run_until_idle();

  const nlohmann::json trace = nlohmann::json::parse(timeline.chrome_trace_json());
  std::map<std::string, std::int64_t> track_of;
  std::vector<nlohmann::json> spans, instants;
  for (const auto& event : trace["traceEvents"]) {
    if (event["ph"] == "M") track_of[event["args"]["name"]] = event["tid"];
    if (event["ph"] == "X") spans.push_back(event);
    if (event["ph"] == "i") instants.push_back(event);
  }
  EXPECT_EQ(track_of.size(), 3u);  // world, alice, bob
  ASSERT_EQ(spans.size(), 3u);
  EXPECT_EQ(spans[0]["name"], "waiting orders");
  EXPECT_EQ(spans[0]["tid"], track_of["alice"]);
  EXPECT_EQ(spans[0]["dur"], 2000);
  EXPECT_EQ(spans[1]["name"], "holding orders");
  EXPECT_EQ(spans[1]["ts"], 2000);
  EXPECT_EQ(spans[1]["dur"], 5000);
  EXPECT_EQ(spans[1]["args"]["detail"], "fencing token 7");
  EXPECT_EQ(spans[2]["name"], "waiting orders");  // closed by bob's crash
  EXPECT_EQ(spans[2]["tid"], track_of["bob"]);
  EXPECT_EQ(spans[2]["dur"], 10'000);
  ASSERT_EQ(instants.size(), 1u);
  EXPECT_EQ(instants[0]["name"], "crashed");
  EXPECT_EQ(instants[0]["tid"], track_of["bob"]);
}

// TimelineOptions::commands: every script call of a client is an async
// span on its track (begin and end paired by id), with the script's name,
// its keys and the reply's kind; without the option, none.
TEST(TimelineTest, CommandSpansNameTheScriptItsKeysAndTheReplyKind) {
  for (const bool commands : {true, false}) {
    World world(9, WorldOptions{.request_delay = 1ms, .reply_delay = 2ms});
    Timeline timeline(world, TimelineOptions{.commands = commands});
    SimClient& alice = world.add_client("alice");
    SimClient& bob = world.add_client("bob");
    Client alice_client(alice.backend_ptr(), alice.runtime_ptr());
    Client bob_client(bob.backend_ptr(), bob.runtime_ptr());
    world.spawn(alice, [&] {
      ReentrantLock lock = alice_client.lock("orders");
      lock.lock();
      alice.runtime().sleep_for(100ms);
      lock.unlock();
    });
    world.spawn(bob, [&] {
      bob.runtime().sleep_for(50ms);
      ReentrantLock lock = bob_client.lock("orders");
      if (lock.try_lock()) {
        ADD_FAILURE() << "alice holds it from about 9 ms to 100 ms";
        lock.unlock();
      }
    });
    world.run_until_idle();

    const nlohmann::json trace = nlohmann::json::parse(timeline.chrome_trace_json());
    std::map<std::string, std::int64_t> track_of;
    std::map<std::int64_t, nlohmann::json> begun;                // by id
    std::vector<std::pair<nlohmann::json, std::int64_t>> calls;  // begin, end ts
    for (const auto& event : trace["traceEvents"]) {
      if (event["ph"] == "M") track_of[event["args"]["name"]] = event["tid"];
      if (event["ph"] == "b") {
        EXPECT_EQ(event["cat"], "command");
        begun[event["id"]] = event;
      }
      if (event["ph"] == "e") {
        ASSERT_TRUE(begun.contains(event["id"])) << event;
        calls.emplace_back(begun[event["id"]], event["ts"]);
        EXPECT_EQ(begun[event["id"]]["tid"], event["tid"]);
      }
    }
    if (!commands) {
      EXPECT_TRUE(calls.empty());
      continue;
    }
    EXPECT_EQ(begun.size(), calls.size()) << "every span ends";
    auto find = [&](const std::string& client, const std::string& script) -> const nlohmann::json* {
      for (const auto& [begin, end_ts] : calls) {
        if (begin["tid"] == track_of[client] && begin["name"] == script) return &begin;
      }
      return nullptr;
    };
    const nlohmann::json* acquired = find("alice", "reentrant_lock_acquire");
    ASSERT_NE(acquired, nullptr) << trace.dump();
    EXPECT_EQ((*acquired)["args"]["kind"], "script");
    EXPECT_EQ((*acquired)["args"]["reply"], "nil");
    EXPECT_EQ((*acquired)["args"]["server"], "server-0");
    EXPECT_EQ((*acquired)["args"]["keys"].get<std::string>().rfind("orders", 0), 0u) << (*acquired)["args"]["keys"];
    const nlohmann::json* refused = find("bob", "reentrant_lock_acquire");
    ASSERT_NE(refused, nullptr);
    // {alice's pttl, whether her release may announce on the shared channel
    // only}: the reply of a waiter registered for fleet-wide wake-ups.
    EXPECT_EQ((*refused)["args"]["reply"], "array");
    ASSERT_NE(find("alice", "reentrant_lock_unlock"), nullptr);
    for (const auto& [begin, end_ts] : calls) {
      // At least one round trip: 1 ms there, 2 back.
      EXPECT_GE(end_ts - begin["ts"].get<std::int64_t>(), 3000) << begin;
    }
  }
}

TEST(TimelineTest, WritesThroughATemporaryFileAndLeavesNothingOnFailure) {
  World world(1);
  Timeline timeline(world);
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "turnstile-timeline-test";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string good = (dir / "trace.json").string();
  timeline.write_chrome_trace(good);
  std::ifstream in(good);
  const nlohmann::json written = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(written.is_discarded());
  EXPECT_EQ(written["otherData"]["seed"], 1);
  EXPECT_FALSE(std::filesystem::exists(good + ".tmp"));

  const std::string bad = (dir / "missing-dir" / "trace.json").string();
  try {
    timeline.write_chrome_trace(bad);
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find(bad), std::string::npos);
  }
  EXPECT_FALSE(std::filesystem::exists(dir / "missing-dir"));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace turnstile::sim
