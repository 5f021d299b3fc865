#include "turnstile/sim/timeline.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "turnstile/errors.h"

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
