// End to end: the fair lock (--fair), the crash-safe semaphore (--permits
// N) and the read-write lock (--read / --write) through `turnstile run`.

#include <signal.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli/cli_redis_test.h"

namespace turnstile::testing {
namespace {

using ::testing::HasSubstr;

constexpr int kWrongKind = 65;
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
    waiters.push_back(std::make_unique<CliProcess>(
        std::vector<std::string>{"run", "--redis", url(), "--fair", "fair:order", "--", "sh", "-c",
                                 "echo " + std::to_string(i) + " >> '" + order + "'"}));
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
  CliProcess holder({"run", "--redis", url(), "--fair", "--lease", "900ms", "--kill-grace", "400ms", "fair:forced",
                     "--", "sh", "-c", "touch '" + ready + "'; exec sleep 30"});
  ASSERT_TRUE(eventually([&] { return file_exists(ready); })) << holder.err();
  CliProcess waiter({"run", "--redis", url(), "--fair", "--wait", "20s", "fair:forced", "--", "echo", "next"});
  ASSERT_TRUE(eventually([&] { return queue_length("fair:forced") == 1; })) << waiter.err();

  const CliResult unlocked = run_cli({"unlock", "--force", "--redis", url(), "fair:forced"});
  EXPECT_EQ(unlocked.status, 0) << unlocked.err;
  EXPECT_EQ(waiter.wait_for(), 0) << waiter.err();
  EXPECT_EQ(waiter.out(), "next\n");
  EXPECT_EQ(holder.wait_for(), kLockLost) << holder.err();
}

TEST_F(CliFlavorTest, NineProcessesWithThreePermitsNeverHaveMoreThanThreeInside) {
  constexpr int kProcesses = 9;
  const std::string dir = scratch_.path();
  // Each command marks itself inside, counts the marks, holds a while.
  const std::string script = "touch '" + dir + "/in.'$$; ls '" + dir + "' | grep -c '^in\\.' >> '" + dir +
                             "/counts'; sleep 0.5; rm '" + dir + "/in.'$$";
  std::vector<std::unique_ptr<CliProcess>> processes;
  for (int i = 0; i < kProcesses; ++i) {
    processes.push_back(std::make_unique<CliProcess>(std::vector<std::string>{
        "run", "--redis", url(), "--permits", "3", "--lease", "2s", "sem:nine", "--", "sh", "-c", script}));
  }
  for (auto& process : processes) EXPECT_EQ(process->wait_for(), 0) << process->err();
  std::istringstream counts(read_file(scratch_.file("counts")));
  std::vector<int> seen;
  for (int count; counts >> count;) seen.push_back(count);
  ASSERT_EQ(seen.size(), static_cast<std::size_t>(kProcesses));
  EXPECT_LE(*std::max_element(seen.begin(), seen.end()), 3);
  EXPECT_EQ(*std::max_element(seen.begin(), seen.end()), 3);
}

// The semaphore owns its count: a run naming another is told so and takes
// a permit at the semaphore's own count (it used to fail with 65).
TEST_F(CliFlavorTest, ARunNamingAnotherCountUsesTheSemaphoresOwn) {
  CliProcess holder({"run", "--redis", url(), "--permits", "3", "sem:agree"});
  ASSERT_TRUE(eventually([&] { return holder.out().find("holding") != std::string::npos; })) << holder.err();
  const CliResult other = run_cli({"run", "--redis", url(), "--permits", "2", "-n", "sem:agree", "--", "echo", "ran"});
  EXPECT_EQ(other.status, 0) << other.err;
  EXPECT_EQ(other.out, "ran\n");
  EXPECT_THAT(other.err, HasSubstr("'sem:agree' has 3 permits, its own count (2 sizes it only when it does not exist"));

  const CliResult status = run_cli({"status", "--json", "--redis", url(), "sem:agree"});
  ASSERT_EQ(status.status, 0) << status.err;
  const nlohmann::json json = nlohmann::json::parse(status.out);
  EXPECT_EQ(json["flavor"], "semaphore");
  EXPECT_EQ(json["permits_available"], 2);
  EXPECT_EQ(json["permits_held"], 1);
  ASSERT_EQ(json["permits"].size(), 1u);
  // The holder's owner is its permit id.
  EXPECT_THAT(holder.out(), HasSubstr("owner " + json["permits"][0]["id"].get<std::string>()));
  const CliResult same = run_cli({"run", "--redis", url(), "--permits", "3", "-n", "sem:agree", "--", "echo", "ran"});
  EXPECT_EQ(same.status, 0) << same.err;
  EXPECT_EQ(same.out, "ran\n");
  holder.signal(SIGTERM);
  EXPECT_EQ(holder.wait_for(), 0);
}

TEST_F(CliFlavorTest, TheCommandSeesItsPermitId) {
  const CliResult result = run_cli({"run", "--redis", url(), "--permits", "2", "sem:env", "--", "sh", "-c",
                                    "echo \"$TURNSTILE_OWNER|$TURNSTILE_PERMIT_IDS|[$TURNSTILE_FENCING_TOKEN]\""});
  ASSERT_EQ(result.status, 0) << result.err;
  EXPECT_TRUE(std::regex_match(result.out, std::regex("([0-9a-f]{32})\\|\\1\\|\\[\\]\n"))) << result.out;
  EXPECT_EQ(server().command({"ZCARD", "{sem:env}:timeout"}), "(integer) 0");  // released
}

TEST_F(CliFlavorTest, PermitsOnANameHoldingALockAreStatus65) {
  server().command({"HSET", "sem:hash", "owner", "1"});
  const CliResult result = run_cli({"run", "--redis", url(), "--permits", "2", "sem:hash", "--", "echo", "ran"});
  EXPECT_EQ(result.status, kWrongKind) << result.err;
  EXPECT_EQ(result.out, "");
}

TEST_F(CliFlavorTest, ALostPermitTerminatesTheCommand) {
  const std::string ready = scratch_.file("ready");
  CliProcess process({"run", "--redis", url(), "--permits", "2", "--lease", "900ms", "--kill-grace", "400ms",
                      "sem:lost", "--", "sh", "-c", "touch '" + ready + "'; exec sleep 30"});
  ASSERT_TRUE(eventually([&] { return file_exists(ready); })) << process.err();
  server().command({"DEL", "{sem:lost}:timeout"});  // the permit is gone
  EXPECT_EQ(process.wait_for(), kLockLost) << process.err();
  EXPECT_THAT(process.err(), HasSubstr("lost"));
}

// A permit's holder frozen (SIGSTOP to turnstile alone, its connection
// open): the guardian process stops the command at the lease deadline,
// another run gets the permit once the lease ends on the server, and the
// holder, continued, exits 75 naming the loss.
TEST_F(CliFlavorTest, AFrozenPermitHoldersCommandIsStoppedAndThePermitPassesOn) {
  const std::string ready = scratch_.file("ready");
  const std::string terminated = scratch_.file("terminated");
  CliProcess holder(
      {"run", "--redis", url(), "--permits", "1", "--lease", "1s", "--kill-grace", "400ms", "sem:frozen", "--", "sh",
       "-c",
       "trap 'echo TERM > \"" + terminated + "\"; exit 0' TERM; touch '" + ready + "'; while :; do sleep 0.05; done"});
  ASSERT_TRUE(eventually([&] { return file_exists(ready); })) << holder.err();
  holder.signal(SIGSTOP);
  const CliResult next =
      run_cli({"run", "--redis", url(), "--permits", "1", "--wait", "20s", "sem:frozen", "--", "echo", "next"});
  EXPECT_EQ(next.status, 0) << next.err;
  EXPECT_EQ(next.out, "next\n");
  // Signalled by the guardian (turnstile is stopped), handled by sh.
  ASSERT_TRUE(eventually([&] { return read_file(terminated) == "TERM\n"; }));
  holder.signal(SIGCONT);
  EXPECT_EQ(holder.wait_for(), kLockLost) << holder.err();
  EXPECT_THAT(holder.err(), HasSubstr("lost permit of 'sem:frozen'"));
}

TEST_F(CliFlavorTest, ReadersShareAReadWriteLockAndAWriterIsKeptOut) {
  CliProcess reader({"run", "--redis", url(), "--read", "rw:docs"});
  ASSERT_TRUE(eventually([&] { return reader.out().find("holding") != std::string::npos; })) << reader.err();
  const CliResult second = run_cli({"run", "--redis", url(), "--read", "-n", "rw:docs", "--", "echo", "read"});
  EXPECT_EQ(second.status, 0) << second.err;
  EXPECT_EQ(second.out, "read\n");
  const CliResult writer = run_cli({"run", "--redis", url(), "--write", "-n", "rw:docs", "--", "echo", "wrote"});
  EXPECT_EQ(writer.status, 1) << writer.err;
  EXPECT_EQ(writer.out, "");

  const CliResult status = run_cli({"status", "--json", "--redis", url(), "rw:docs"});
  ASSERT_EQ(status.status, 0) << status.err;
  const nlohmann::json json = nlohmann::json::parse(status.out);
  EXPECT_EQ(json["flavor"], "read-write");
  EXPECT_EQ(json["mode"], "read");
  ASSERT_EQ(json["holders"].size(), 1u);
  EXPECT_EQ(json["holders"][0]["writes"], false);
  EXPECT_THAT(reader.out(), HasSubstr("owner " + json["holders"][0]["owner"].get<std::string>()));

  reader.signal(SIGTERM);
  EXPECT_EQ(reader.wait_for(), 0) << reader.err();
  const CliResult after = run_cli({"run", "--redis", url(), "--write", "-n", "rw:docs", "--", "echo", "wrote"});
  EXPECT_EQ(after.status, 0) << after.err;
  EXPECT_EQ(after.out, "wrote\n");
  EXPECT_EQ(server().command({"EXISTS", "rw:docs"}), "(integer) 0");
}

TEST_F(CliFlavorTest, AWriterKeepsReadersOutAndForceUnlockLetsThemIn) {
  CliProcess writer({"run", "--redis", url(), "--write", "--lease", "2s", "rw:board"});
  ASSERT_TRUE(eventually([&] { return writer.out().find("holding") != std::string::npos; })) << writer.err();
  const CliResult reader = run_cli({"run", "--redis", url(), "--read", "-n", "rw:board", "--", "echo", "read"});
  EXPECT_EQ(reader.status, 1) << reader.err;
  const CliResult status = run_cli({"status", "--redis", url(), "rw:board"});
  ASSERT_EQ(status.status, 0) << status.err;
  EXPECT_THAT(status.out, HasSubstr("mode:        write"));
  EXPECT_THAT(status.out, HasSubstr("(writes, hold count 1)"));
  const CliResult unlock = run_cli({"unlock", "--force", "--redis", url(), "rw:board"});
  EXPECT_EQ(unlock.status, 0) << unlock.err;
  const CliResult now = run_cli({"run", "--redis", url(), "--read", "-n", "rw:board", "--", "echo", "read"});
  EXPECT_EQ(now.status, 0) << now.err;
  EXPECT_EQ(writer.wait_for(), kLockLost) << writer.err();  // its next renewal finds it gone
}

TEST_F(CliFlavorTest, ReadAndWriteFlagsAreOneFlavorOfTheirOwn) {
  for (const std::vector<std::string>& flags : {std::vector<std::string>{"--read", "--write"},
                                                {"--read", "--fair"},
                                                {"--write", "--token"},
                                                {"--read", "--permits", "2"}}) {
    std::vector<std::string> argv = {"run", "--redis", url()};
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.insert(argv.end(), {"-n", "rw:flags", "--", "echo", "ran"});
    const CliResult result = run_cli(argv);
    EXPECT_EQ(result.status, 64) << flags[0] << " " << flags[1] << ": " << result.err;
    EXPECT_EQ(result.out, "");
  }
  // Another flavor at the name is refused, and left alone.
  server().command({"HSET", "rw:hash", "owner", "1"});
  const CliResult other = run_cli({"run", "--redis", url(), "--read", "-n", "rw:hash", "--", "echo", "ran"});
  EXPECT_EQ(other.status, kWrongKind) << other.err;
  EXPECT_EQ(server().command({"HGET", "rw:hash", "owner"}), "\"1\"");
  // A hash with a 'mode' that is not a read-write lock's is not ours either.
  server().command({"HSET", "rw:odd", "mode", "exclusive"});
  server().command({"PEXPIRE", "rw:odd", "60000"});
  const CliResult status = run_cli({"status", "--redis", url(), "rw:odd"});
  EXPECT_EQ(status.status, kWrongKind) << status.err;
  const CliResult unlock = run_cli({"unlock", "--force", "--redis", url(), "rw:odd"});
  EXPECT_EQ(unlock.status, kWrongKind) << unlock.err;
  EXPECT_EQ(server().command({"HGET", "rw:odd", "mode"}), "\"exclusive\"");
}

}  // namespace
}  // namespace turnstile::testing
