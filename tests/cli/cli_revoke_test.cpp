// End to end: `turnstile revoke` asking real `turnstile run` and `elect`
// processes (--on-revoke SIGNAL) to let go, on a real redis-server.

#include <signal.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli/cli_process.h"
#include "cli/cli_redis_test.h"

namespace turnstile::testing {
namespace {

using ::testing::HasSubstr;

constexpr int kConflict = 1;
constexpr int kUsage = 64;

class CliRevokeTest : public CliRedisTest {
 protected:
  std::vector<std::string> revoke(const std::string& name, const std::string& reason = "") const {
    std::vector<std::string> args = {"revoke", "--redis", url(), name};
    if (!reason.empty()) args.insert(args.end(), {"--reason", reason});
    return args;
  }
  // A command that says "asked" and exits 0 on SIGTERM, after touching `ready`.
  static std::string polite(const std::string& ready) {
    return "trap 'echo asked; exit 0' TERM; touch '" + ready + "'; while true; do sleep 0.05; done";
  }
};

TEST_F(CliRevokeTest, ARunAskedToReleaseSignalsItsCommandWhichDecides) {
  const std::string ready = scratch_.file("ready");
  CliProcess holder({"run", "--redis", url(), "--on-revoke", "TERM", "revoke:run", "--", "sh", "-c", polite(ready)});
  ASSERT_TRUE(eventually([&] { return file_exists(ready); }));
  const CliResult asked = run_cli(revoke("revoke:run", "deploy 4.2"));
  EXPECT_EQ(asked.status, 0) << asked.err;
  EXPECT_THAT(asked.out, HasSubstr("1 process listening"));
  EXPECT_EQ(holder.wait_for(), 0) << holder.err();
  EXPECT_EQ(holder.out(), "asked\n");
  EXPECT_THAT(holder.err(), HasSubstr("release of lock 'revoke:run' requested: deploy 4.2; sending SIGTERM"));
  EXPECT_FALSE(exists("revoke:run")) << "released when the command exited";
}

TEST_F(CliRevokeTest, AHolderThatDoesNotListenKeepsTheLock) {
  const std::string ready = scratch_.file("ready");
  CliProcess holder({"run", "--redis", url(), "revoke:deaf", "--", "sh", "-c", polite(ready)});
  ASSERT_TRUE(eventually([&] { return file_exists(ready); }));
  const CliResult asked = run_cli(revoke("revoke:deaf"));
  EXPECT_EQ(asked.status, kConflict) << asked.err;
  EXPECT_THAT(asked.err, HasSubstr("nobody listens for release requests of 'revoke:deaf'"));
  EXPECT_TRUE(holder.running());
  EXPECT_TRUE(exists("revoke:deaf"));
  holder.signal(SIGTERM);
  EXPECT_EQ(holder.wait_for(), 0) << holder.err();  // the trap's exit 0, passed on
}

TEST_F(CliRevokeTest, AHoldWithoutACommandIsReleasedAtOnce) {
  CliProcess holder({"run", "--redis", url(), "--on-revoke", "TERM", "revoke:hold"});
  ASSERT_TRUE(eventually([&] { return holder.out().find("holding 'revoke:hold'") != std::string::npos; }));
  EXPECT_EQ(run_cli(revoke("revoke:hold")).status, 0);
  EXPECT_EQ(holder.wait_for(), 0) << holder.err();
  EXPECT_THAT(holder.err(), HasSubstr("requested; releasing it"));
  EXPECT_FALSE(exists("revoke:hold"));
}

// A leader asked to step down: its command exits, it resigns, and the next
// candidate leads.
TEST_F(CliRevokeTest, ALeaderAskedToStepDownResignsToTheNextCandidate) {
  const std::string ready = scratch_.file("ready");
  CliProcess leader({"elect", "--redis", url(), "--on-revoke", "TERM", "--value", "old", "revoke:elect", "--", "sh",
                     "-c", polite(ready)});
  ASSERT_TRUE(eventually([&] { return file_exists(ready); }));
  const std::string next_ready = scratch_.file("next-ready");
  CliProcess next({"elect", "--redis", url(), "--value", "new", "revoke:elect", "--", "sh", "-c",
                   "touch '" + next_ready + "'; sleep 30"});
  EXPECT_EQ(run_cli(revoke("revoke:elect", "maintenance")).status, 0);
  EXPECT_EQ(leader.wait_for(), 0) << leader.err();
  ASSERT_TRUE(eventually([&] { return file_exists(next_ready); })) << next.err();
  const CliResult shown = run_cli({"leader", "--redis", url(), "revoke:elect"});
  EXPECT_THAT(shown.out, HasSubstr("leader:      new"));
  next.signal(SIGTERM);
  EXPECT_EQ(next.wait_for(), 128 + SIGTERM);
}

TEST_F(CliRevokeTest, BadSignalsAndNamesAreUsageErrors) {
  const CliResult kill = run_cli({"run", "--redis", url(), "--on-revoke", "KILL", "revoke:bad", "--", "true"});
  EXPECT_EQ(kill.status, kUsage);
  EXPECT_THAT(kill.err, HasSubstr("--on-revoke: SIGKILL would end or stop the command"));
  const CliResult unknown = run_cli({"run", "--redis", url(), "--on-revoke", "NOPE", "revoke:bad", "--", "true"});
  EXPECT_EQ(unknown.status, kUsage);
  EXPECT_EQ(run_cli(revoke("")).status, kUsage);
  EXPECT_EQ(run_cli(revoke("revoke:bad", std::string(2000, 'r'))).status, kUsage);
}

}  // namespace
}  // namespace turnstile::testing
