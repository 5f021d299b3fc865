// `turnstile semaphore` end to end on a real redis-server: resize both
// kinds, free a stuck permit by id, reset with --force only; a lock or
// anyone's data at the name is refused (65) and left as it was; wrong
// turns (a free name, unlock on a semaphore) are told the way.

#include <signal.h>
#include <sys/types.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/cli_redis_test.h"
#include "turnstile/key_layout.h"

namespace turnstile::testing {
namespace {

using ::testing::HasSubstr;

class CliSemaphoreTest : public CliRedisTest {
 protected:
  std::vector<std::string> semaphore(const std::string& name, std::vector<std::string> extra = {}) const {
    std::vector<std::string> args = {"semaphore", "--redis", url(), name};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  }
  std::string held_permit(const std::string& name) const {
    const CliResult status = run_cli({"status", "--redis", url(), "--json", name});
    return nlohmann::json::parse(status.out)["permits"][0]["id"];
  }
};

TEST_F(CliSemaphoreTest, FreesAStuckPermitResizesAndResets) {
  // A permit stuck under a long lease: its holder is gone (SIGKILL).
  CliProcess holder(
      {"run", "--redis", url(), "--permits", "2", "--lease", "10m", "--label", "nightly export", "sem:jobs"});
  ASSERT_TRUE(eventually([&] { return holder.out().find("holding") != std::string::npos; })) << holder.err();
  const pid_t pid = holder.pid();
  holder.signal(SIGKILL);
  holder.wait_for();
  const std::string stuck = held_permit("sem:jobs");
  ASSERT_EQ(stuck.size(), 32u);
  // Whose it is: status names the permit's holder, its label too.
  const nlohmann::json status = nlohmann::json::parse(run_cli({"status", "--redis", url(), "--json", "sem:jobs"}).out);
  EXPECT_EQ(status["permits"][0]["holder"]["pid"], pid) << status.dump();
  EXPECT_EQ(status["permits"][0]["holder"]["label"], "nightly export") << status.dump();
  EXPECT_THAT(run_cli({"status", "--redis", url(), "sem:jobs"}).out, HasSubstr("label \"nightly export\""));

  const CliResult freed = run_cli(semaphore("sem:jobs", {"--release", stuck}));
  EXPECT_EQ(freed.status, 0) << freed.err;
  EXPECT_THAT(freed.err, HasSubstr("released permit " + stuck + " of 'sem:jobs', held by "));
  EXPECT_THAT(freed.err, HasSubstr(":" + std::to_string(pid) + ", command "));
  EXPECT_THAT(freed.err, HasSubstr("label \"nightly export\""));
  EXPECT_FALSE(exists(permit_identity_key("sem:jobs", stuck)));  // gone with the permit
  EXPECT_EQ(server().command({"GET", "sem:jobs"}), "\"2\"");
  // A value of another type where a permit's identity goes (anyone's
  // data) does not keep an operator from releasing it.
  CliProcess second({"run", "--redis", url(), "--permits", "2", "--lease", "10m", "sem:odd"});
  ASSERT_TRUE(eventually([&] { return second.out().find("holding") != std::string::npos; })) << second.err();
  second.signal(SIGKILL);
  second.wait_for();
  const std::string odd = held_permit("sem:odd");
  server().command({"DEL", permit_identity_key("sem:odd", odd)});
  server().command({"RPUSH", permit_identity_key("sem:odd", odd), "junk"});
  const CliResult odd_freed = run_cli(semaphore("sem:odd", {"--release", odd}));
  EXPECT_EQ(odd_freed.status, 0) << odd_freed.err;
  EXPECT_THAT(odd_freed.err, HasSubstr("released permit " + odd + " of 'sem:odd', held by (no identity"));
  EXPECT_EQ(server().command({"GET", "sem:odd"}), "\"2\"");

  const CliResult again = run_cli(semaphore("sem:jobs", {"--release", stuck}));
  EXPECT_EQ(again.status, 1) << again.err;
  EXPECT_THAT(again.err, HasSubstr("was not held"));

  const CliResult resized = run_cli(semaphore("sem:jobs", {"--flavor", "semaphore", "--set-permits", "5"}));
  EXPECT_EQ(resized.status, 0) << resized.err;
  EXPECT_EQ(server().command({"GET", "sem:jobs"}), "\"5\"");
  const CliResult shown = run_cli(semaphore("sem:jobs"));
  EXPECT_EQ(shown.status, 0) << shown.err;
  EXPECT_THAT(shown.out, HasSubstr("5 permits"));

  EXPECT_EQ(run_cli(semaphore("sem:jobs", {"--reset"})).status, 64);  // --force confirms
  EXPECT_TRUE(exists("sem:jobs"));
  const CliResult reset = run_cli(semaphore("sem:jobs", {"--flavor", "semaphore", "--reset", "--force"}));
  EXPECT_EQ(reset.status, 0) << reset.err;
  EXPECT_FALSE(exists("sem:jobs"));
  EXPECT_EQ(run_cli(semaphore("sem:jobs", {"--reset", "--force"})).status, 1);
}

// The semaphore owns its size: resized by `semaphore --set-permits`, it is
// used at its own count by a `run --permits N` naming another (which says
// so, unless -q), where every such run used to fail with 65; N sizes only
// a semaphore that does not exist yet.
TEST_F(CliSemaphoreTest, ARunUsesTheSemaphoresOwnCountOnceItExists) {
  ASSERT_EQ(run_cli({"run", "--redis", url(), "--permits", "3", "sem:owned", "--", "true"}).status, 0);
  const CliResult resized = run_cli(semaphore("sem:owned", {"--flavor", "semaphore", "--set-permits", "4"}));
  ASSERT_EQ(resized.status, 0) << resized.err;
  const CliResult taken = run_cli({"run", "--redis", url(), "--permits", "3", "sem:owned", "--", "true"});
  EXPECT_EQ(taken.status, 0) << taken.err;
  EXPECT_THAT(taken.err, HasSubstr("'sem:owned' has 4 permits, its own count"));
  const CliResult quiet = run_cli({"run", "-q", "--redis", url(), "--permits", "3", "sem:owned", "--", "true"});
  EXPECT_EQ(quiet.status, 0) << quiet.err;
  EXPECT_EQ(quiet.err, "");
  EXPECT_EQ(server().command({"GET", "sem:owned"}), "\"4\"");  // still its own count, every permit back
  const CliResult same = run_cli({"run", "--redis", url(), "--permits", "4", "sem:owned", "--", "true"});
  EXPECT_EQ(same.status, 0) << same.err;
  EXPECT_THAT(same.err, ::testing::Not(HasSubstr("its own count")));
}

// Issue #50, row 9: a user's integer (a counter, a cache entry) looks like
// an idle semaphore; without a sign of one (a permit held, a waiter) or the
// kind named, neither a resize nor a reset touches it.
TEST_F(CliSemaphoreTest, AUsersIntegerIsNeitherResizedNorDeleted) {
  server().command({"SET", "sem:counter", "7"});
  for (const std::vector<std::string>& action :
       {std::vector<std::string>{"--set-permits", "5"}, std::vector<std::string>{"--reset", "--force"}}) {
    const CliResult refused = run_cli(semaphore("sem:counter", action));
    EXPECT_EQ(refused.status, 65) << refused.err;
    EXPECT_THAT(refused.err, HasSubstr("may be anyone's counter"));
    EXPECT_EQ(server().command({"GET", "sem:counter"}), "\"7\"");
  }
  // Shown (read-only) as what it could be, still untouched.
  EXPECT_EQ(run_cli(semaphore("sem:counter")).status, 0);
  EXPECT_EQ(server().command({"GET", "sem:counter"}), "\"7\"");
}

TEST_F(CliSemaphoreTest, ACountingSemaphoreIsResizedByItsCount) {
  server().command({"SET", "sem:count", "1"});
  const CliResult resized = run_cli(semaphore("sem:count", {"--flavor", "counting-semaphore", "--set-permits", "7"}));
  EXPECT_EQ(resized.status, 0) << resized.err;
  EXPECT_THAT(resized.err, HasSubstr("7 permits available (was 1)"));
  EXPECT_EQ(server().command({"GET", "sem:count"}), "\"7\"");
  const CliResult no_ids = run_cli(
      semaphore("sem:count", {"--flavor", "counting-semaphore", "--release", "00112233445566778899aabbccddeeff"}));
  EXPECT_EQ(no_ids.status, 64) << no_ids.err;
}

TEST_F(CliSemaphoreTest, ALockOrDataIsRefusedAndUntouched) {
  server().command({"HSET", "sem:a-lock", "0a1b2c3d-0000-4000-8000-000000000001:1", "1"});
  server().command({"PEXPIRE", "sem:a-lock", "60000"});
  server().command({"SET", "sem:data", "hello"});
  for (const std::string name : {"sem:a-lock", "sem:data"}) {
    for (const std::vector<std::string>& action :
         {std::vector<std::string>{"--set-permits", "3"}, std::vector<std::string>{"--reset", "--force"}}) {
      const CliResult refused = run_cli(semaphore(name, action));
      EXPECT_EQ(refused.status, 65) << name << ": " << refused.err;
      EXPECT_TRUE(exists(name)) << name;
    }
  }
  EXPECT_EQ(server().command({"GET", "sem:data"}), "\"hello\"");
  EXPECT_EQ(run_cli(semaphore("sem:x", {"--set-permits", "-1"})).status, 64);
  EXPECT_EQ(run_cli(semaphore("sem:x", {"--release", "not-hex"})).status, 64);
  EXPECT_EQ(run_cli(semaphore("sem:x", {"--force"})).status, 64);
  EXPECT_EQ(run_cli(semaphore("sem:x", {"--set-permits", "1", "--reset"})).status, 64);
}

// What a new SRE tries: a name nobody used yet is shown as free (and left
// free); `unlock --force` on a semaphore is refused naming the semaphore
// commands; a lock's `run` on a semaphore's name is refused; nothing changes.
TEST_F(CliSemaphoreTest, WrongTurnsAreToldTheWayAndChangeNothing) {
  const CliResult nothing = run_cli(semaphore("sem:typo"));
  EXPECT_EQ(nothing.status, 0) << nothing.err;
  EXPECT_THAT(nothing.out, ::testing::ContainsRegex("flavor: +free\n"));
  EXPECT_FALSE(exists("sem:typo"));

  ASSERT_EQ(run_cli(semaphore("sem:admin", {"--set-permits", "2"})).status, 0);
  const CliResult unlock = run_cli({"unlock", "--force", "--redis", url(), "sem:admin"});
  EXPECT_EQ(unlock.status, 65) << unlock.err;
  EXPECT_THAT(unlock.err, HasSubstr("'sem:admin' is a semaphore"));
  EXPECT_THAT(unlock.err, HasSubstr("turnstile semaphore NAME --release ID"));
  EXPECT_THAT(unlock.err, HasSubstr("--reset --force"));
  const CliResult as_lock = run_cli({"run", "--redis", url(), "-n", "sem:admin", "--", "true"});
  EXPECT_EQ(as_lock.status, 65) << as_lock.err;
  EXPECT_EQ(server().command({"GET", "sem:admin"}), "\"2\"");
}

}  // namespace
}  // namespace turnstile::testing
