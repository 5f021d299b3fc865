// End to end: the fair lock (--fair) through `turnstile run`.

#include <signal.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "cli/cli_redis_test.h"

namespace turnstile::testing {
namespace {

using ::testing::HasSubstr;

constexpr int kLockLost = 75;

class CliFlavorTest : public CliRedisTest {
 protected:
  std::int64_t queue_length(const std::string& name) {
    const CliResult result = run_cli({"status", "--json", "--redis", url(), name});
    if (result.status != 0) return -1;
    return nlohmann::json::parse(result.out)["queue_length"].get<std::int64_t>();
  }
};

TEST_F(CliFlavorTest, FairLockServesProcessesInArrivalOrder) {
  constexpr int kWaiters = 4;
  const std::string ready = scratch_.file("ready");
  const std::string release = scratch_.file("release");
  const std::string order = scratch_.file("order");
  CliProcess holder({"run", "--redis", url(), "--fair", "fair:order", "--", "sh", "-c",
                     "touch '" + ready + "'; while [ ! -e '" + release + "' ]; do sleep 0.02; done"});
  ASSERT_TRUE(eventually([&] { return file_exists(ready); })) << holder.err();

  std::vector<std::unique_ptr<CliProcess>> waiters;
  for (int i = 1; i <= kWaiters; ++i) {
    waiters.push_back(std::make_unique<CliProcess>(std::vector<std::string>{
        "run", "--redis", url(), "--fair", "fair:order", "--", "sh", "-c", "echo " + std::to_string(i) + " >> '" + order + "'"}));
    // Started a few hundred ms apart; each is queued before the next starts.
    ASSERT_TRUE(eventually([&] { return queue_length("fair:order") == i; })) << waiters.back()->err();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  std::ofstream(release).put('\n');
  EXPECT_EQ(holder.wait_for(), 0) << holder.err();
  for (auto& waiter : waiters) EXPECT_EQ(waiter->wait_for(), 0) << waiter->err();
  EXPECT_EQ(read_file(order), "1\n2\n3\n4\n");
}

TEST_F(CliFlavorTest, ForceUnlockingAFairLockWakesTheHeadOfTheQueue) {
  const std::string ready = scratch_.file("ready");
  CliProcess holder({"run", "--redis", url(), "--fair", "--ttl", "900ms", "--kill-grace", "1s", "fair:forced", "--",
                     "sh", "-c", "touch '" + ready + "'; exec sleep 30"});
  ASSERT_TRUE(eventually([&] { return file_exists(ready); })) << holder.err();
  CliProcess waiter({"run", "--redis", url(), "--fair", "--wait", "20s", "fair:forced", "--", "echo", "next"});
  ASSERT_TRUE(eventually([&] { return queue_length("fair:forced") == 1; })) << waiter.err();

  const CliResult unlocked = run_cli({"unlock", "--force", "--redis", url(), "fair:forced"});
  EXPECT_EQ(unlocked.status, 0) << unlocked.err;
  EXPECT_EQ(waiter.wait_for(), 0) << waiter.err();
  EXPECT_EQ(waiter.out(), "next\n");
  EXPECT_EQ(holder.wait_for(), kLockLost) << holder.err();
}

}  // namespace
}  // namespace turnstile::testing
