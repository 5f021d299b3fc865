// LockPolicy: first-match glob rules, the default, and every malformed file
// refused with file:line:column.

#include "turnstile/lock_policy.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "cli/cli_process.h"
#include "turnstile/errors.h"
#include "turnstile/redis_backend.h"

namespace turnstile {
namespace {

using std::chrono::milliseconds;
using ::testing::HasSubstr;

constexpr std::string_view kPolicy = R"(
[default]
flavor = "token"
lease_ms = 5000

[[rule]]
match = "lock:order:*"
flavor = "fair"
lease_ms = 10000
wait_ms = 2000

[[rule]]
match = "lock:*"
flavor = "reentrant"

[[rule]]
match = "deploy:[ab]?"
flavor = "semaphore"
permits = 3
)";

std::string error_of(std::string_view text) {
  try {
    (void)LockPolicy::parse(text, "locks.toml");
  } catch (const InvalidArgumentError& error) {
    return error.what();
  }
  return "(accepted)";
}

TEST(LockPolicyTest, FirstMatchingRuleWins) {
  const LockPolicy policy = LockPolicy::parse(kPolicy, "locks.toml");
  ASSERT_EQ(policy.rules().size(), 3u);

  const LockRule& order = policy.rule_for("lock:order:42");
  EXPECT_EQ(order.flavor, Flavor::fair);
  EXPECT_EQ(order.lease, milliseconds(10'000));
  EXPECT_EQ(order.wait, milliseconds(2'000));
  EXPECT_EQ(order.pattern, "lock:order:*");
  EXPECT_EQ(order.line, 6);

  const LockRule& other = policy.rule_for("lock:user:7");
  EXPECT_EQ(other.flavor, Flavor::reentrant);
  EXPECT_FALSE(other.lease.has_value());
  EXPECT_FALSE(other.wait.has_value());

  const LockRule& deploy = policy.rule_for("deploy:a1");
  EXPECT_EQ(deploy.flavor, Flavor::semaphore);
  EXPECT_EQ(deploy.permits, 3);
}

TEST(LockPolicyTest, UnmatchedKeysGetTheDefault) {
  const LockPolicy policy = LockPolicy::parse(kPolicy, "locks.toml");
  for (std::string_view key : {"deploy:c1", "deploy:a12", "Lock:order:1", "", "job"}) {
    const LockRule& rule = policy.rule_for(key);
    EXPECT_EQ(&rule, &policy.default_rule()) << key;
    EXPECT_EQ(rule.flavor, Flavor::token);
    EXPECT_EQ(rule.lease, milliseconds(5'000));
  }
}

// allow_evicting (issue #32): `turnstile run` holds on an evicting Redis
// for this rule; false unless said, a boolean or refused.
TEST(LockPolicyTest, AllowEvictingIsReadPerRuleAndDefault) {
  const LockPolicy policy = LockPolicy::parse(
      "[default]\nallow_evicting = true\n[[rule]]\nmatch = \"cache:*\"\n"
      "[[rule]]\nmatch = \"jobs:*\"\nallow_evicting = true\n",
      "locks.toml");
  EXPECT_TRUE(policy.default_rule().allow_evicting);
  EXPECT_FALSE(policy.rule_for("cache:a").allow_evicting);
  EXPECT_TRUE(policy.rule_for("jobs:a").allow_evicting);
  EXPECT_FALSE(LockPolicy().rule_for("x").allow_evicting);
  const std::string refused = error_of("[[rule]]\nmatch = \"a\"\nallow_evicting = 1\n");
  EXPECT_THAT(refused, HasSubstr("locks.toml:3:"));
  EXPECT_THAT(refused, HasSubstr("'allow_evicting' must be true or false"));
}

// lock_delay_ms (issue #53): a lock-delay per name, within [0, an hour].
TEST(LockPolicyTest, LockDelayIsReadPerRuleWithinAnHour) {
  const LockPolicy policy = LockPolicy::parse(
      "[default]\nlock_delay_ms = 0\n[[rule]]\nmatch = \"jobs:*\"\nlock_delay_ms = 15000\n", "locks.toml");
  EXPECT_EQ(policy.rule_for("jobs:a").lock_delay, Duration(std::chrono::seconds(15)));
  EXPECT_EQ(policy.rule_for("other").lock_delay, Duration::zero());
  EXPECT_FALSE(LockPolicy().rule_for("x").lock_delay.has_value());
  EXPECT_THAT(error_of("[[rule]]\nmatch = \"a\"\nlock_delay_ms = 3600001\n"), HasSubstr("locks.toml:3:"));
  EXPECT_THAT(error_of("[[rule]]\nmatch = \"a\"\nlock_delay_ms = -1\n"), HasSubstr("lock_delay_ms"));
}

TEST(LockPolicyTest, AnEmptyPolicyIsAllReentrant) {
  const LockPolicy parsed = LockPolicy::parse("", "empty.toml");
  EXPECT_TRUE(parsed.rules().empty());
  EXPECT_EQ(parsed.rule_for("x").flavor, Flavor::reentrant);
  EXPECT_EQ(LockPolicy().rule_for("x").flavor, Flavor::reentrant);
}

TEST(LockPolicyTest, GlobsFollowFnmatch) {
  const LockPolicy policy = LockPolicy::parse(R"(
[[rule]]
match = "a*z"
flavor = "token"
)",
                                              "globs.toml");
  EXPECT_EQ(policy.rule_for("az").flavor, Flavor::token);
  EXPECT_EQ(policy.rule_for("a:b/c:z").flavor, Flavor::token);  // '*' crosses ':' and '/'
  EXPECT_EQ(policy.rule_for("a:b:zz!").flavor, Flavor::reentrant);
}

TEST(LockPolicyTest, MalformedTomlNamesFileLineAndColumn) {
  EXPECT_THAT(error_of("[[rule]]\nmatch = \"x\"\nflavor = \n"), HasSubstr("locks.toml:3:"));
  EXPECT_THAT(error_of("[[rule]\n"), HasSubstr("locks.toml:1:"));
}

TEST(LockPolicyTest, RefusesWrongContentWithItsLine) {
  EXPECT_THAT(error_of("[[rule]]\nmatch = \"x\"\nflavor = \"fiar\"\n"),
              HasSubstr("locks.toml:3:10: unknown flavor 'fiar'"));
  EXPECT_THAT(error_of("[[rule]]\nmatch = \"x\"\ncolour = \"red\"\n"),
              HasSubstr("locks.toml:3:1: unknown key 'colour'"));
  EXPECT_THAT(error_of("surprise = 1\n"), HasSubstr("locks.toml:1:1: unknown key 'surprise'"));
  EXPECT_THAT(error_of("[[rule]]\nflavor = \"token\"\n"),
              HasSubstr("locks.toml:1:1: a rule needs a non-empty 'match'"));
  EXPECT_THAT(error_of("[[rule]]\nmatch = 7\n"), HasSubstr("locks.toml:2:9: 'match' must be a string"));
  EXPECT_THAT(error_of("[[rule]]\nmatch = \"x\"\nttl_ms = \"10s\"\n"),
              HasSubstr("locks.toml:3:10: 'ttl_ms' must be an integer"));
  EXPECT_THAT(error_of("[[rule]]\nmatch = \"x\"\nttl_ms = 0\n"),
              HasSubstr("locks.toml:3:10: 'ttl_ms' must be within [1, 9676800000], got 0"));
  EXPECT_THAT(error_of("[[rule]]\nmatch = \"x\"\nttl_ms = 3000000000000\n"),
              HasSubstr("locks.toml:3:10: 'ttl_ms' must be within"));
  EXPECT_THAT(error_of("[[rule]]\nmatch = \"x\"\nwait_ms = 9223372036854775807\n"),
              HasSubstr("locks.toml:3:11: 'wait_ms' must be within"));
  EXPECT_THAT(error_of("[[rule]]\nmatch = \"x\"\nflavor = \"semaphore\"\npermits = 9007199254740993\n"),
              HasSubstr("locks.toml:4:11: 'permits' must be within [1, 9007199254740992]"));
  EXPECT_THAT(error_of("[[rule]]\nmatch = \"x\"\nflavor = \"semaphore\"\npermits = 1e17\n"),
              HasSubstr("locks.toml:4:11: 'permits' must be an integer"));
  EXPECT_THAT(error_of("[[rule]]\nmatch = \"x\"\nwait_ms = -1\n"),
              HasSubstr("locks.toml:3:11: 'wait_ms' must be within [0, 9676800000], got -1"));
  EXPECT_THAT(error_of("[[rule]]\nmatch = \"x\"\nflavor = \"semaphore\"\n"),
              HasSubstr("locks.toml:3:10: a semaphore needs 'permits'"));
  EXPECT_THAT(error_of("[[rule]]\nmatch = \"x\"\nflavor = \"semaphore\"\npermits = 0\n"),
              HasSubstr("locks.toml:4:11: 'permits' must be within [1, 9007199254740992], got 0"));
  EXPECT_THAT(error_of("[[rule]]\nmatch = \"x\"\npermits = 2\n"), HasSubstr("locks.toml:3:11: 'permits' is only for"));
  EXPECT_THAT(error_of("rule = 3\n"), HasSubstr("locks.toml:1:8: 'rule' must be an array of tables"));
  EXPECT_THAT(error_of("default = 3\n"), HasSubstr("locks.toml:1:11: 'default' must be a table"));
}

TEST(LockPolicyTest, RefusesMoreRulesThanTheBound) {
  std::string text;
  for (std::size_t i = 0; i <= LockPolicy::kMaxRules; ++i) text += "[[rule]]\nmatch = \"k" + std::to_string(i) + "\"\n";
  EXPECT_THAT(error_of(text), HasSubstr("more than 1000 rules"));
}

// lease_ms was ttl_ms: the old name is still read (deprecated), and a table
// may not give both.
TEST(LockPolicyTest, ReadsTheOldNameOfTheLeaseButNotBothNames) {
  const LockPolicy old = LockPolicy::parse("[[rule]]\nmatch = \"k\"\nttl_ms = 7000\n", "locks.toml");
  EXPECT_EQ(old.rule_for("k").lease, milliseconds(7'000));
  EXPECT_THAT(error_of("[[rule]]\nmatch = \"k\"\nlease_ms = 1000\nttl_ms = 2000\n"),
              HasSubstr("locks.toml:4:10: 'ttl_ms' is the old name of 'lease_ms': give one of them"));
  EXPECT_THAT(error_of("[[rule]]\nmatch = \"x\"\nlease_ms = 0\n"),
              HasSubstr("locks.toml:3:12: 'lease_ms' must be within [1, 9676800000], got 0"));
  EXPECT_THAT(error_of("[default]\nlease_ms = \"10s\"\n"), HasSubstr("locks.toml:2:12: 'lease_ms' must be an integer"));
}

// fuzz/corpus/lock_policy/regression_huge_ttl.toml: a ttl_ms beyond what a
// Duration (nanoseconds) holds overflowed while being converted (UBSan).
TEST(LockPolicyTest, RefusesTtlAndWaitLongerThanTheMaximum) {
  EXPECT_THAT(error_of("[[rule]]\nmatch = \"k\"\nttl_ms = 9223372036854775807\n"),
              HasSubstr("locks.toml:3:10: 'ttl_ms' must be within [1, 9676800000], got 9223372036854775807"));
  EXPECT_THAT(error_of("[default]\nwait_ms = 9676800001\n"),
              HasSubstr("locks.toml:2:11: 'wait_ms' must be within [0, 9676800000]"));
  const LockPolicy longest = LockPolicy::parse("[default]\nttl_ms = 9676800000\nwait_ms = 9676800000\n", "locks.toml");
  EXPECT_EQ(longest.default_rule().lease, kMaxLease);
  EXPECT_EQ(longest.default_rule().wait, kMaxLease);
}

TEST(LockPolicyTest, LoadsFromAFileAndNamesAMissingOne) {
  testing::ScratchDirectory scratch;
  const std::string path = scratch.file("locks.toml");
  std::ofstream(path) << kPolicy;
  EXPECT_EQ(LockPolicy::load(path).rule_for("lock:order:1").flavor, Flavor::fair);
  try {
    (void)LockPolicy::load(scratch.file("missing.toml"));
    FAIL() << "loaded a missing file";
  } catch (const InvalidArgumentError& error) {
    EXPECT_THAT(error.what(), HasSubstr("missing.toml"));
  }
  std::ofstream(path) << "[[rule]]\nmatch = \"x\"\nflavor = \"nope\"\n";
  EXPECT_THROW((void)LockPolicy::load(path), InvalidArgumentError);
}

TEST(LockPolicyTest, LockForMakesTheConfiguredFlavor) {
  const LockPolicy policy = LockPolicy::parse(kPolicy, "locks.toml");
  // Making lock objects does not talk to Redis; no server is needed.
  Client client(make_redis_backend(RedisOptions::from_url("redis://127.0.0.1:1")));
  std::unique_ptr<Lock> reentrant = policy.lock_for(client, "lock:user:1");
  EXPECT_NE(dynamic_cast<ReentrantLock*>(reentrant.get()), nullptr);
  EXPECT_EQ(reentrant->name(), "lock:user:1");
  std::unique_ptr<Lock> token = policy.lock_for(client, "job");
  EXPECT_NE(dynamic_cast<TokenLock*>(token.get()), nullptr);
  std::unique_ptr<Lock> fair = policy.lock_for(client, "lock:order:42");
  EXPECT_NE(dynamic_cast<FairLock*>(fair.get()), nullptr);
  EXPECT_THROW((void)policy.lock_for(client, "deploy:a1"), InvalidArgumentError);

  PermitSemaphore semaphore = policy.semaphore_for(client, "deploy:a1");
  EXPECT_EQ(semaphore.name(), "deploy:a1");
  EXPECT_EQ(policy.rule_for("deploy:a1").permits, 3);
  EXPECT_THROW((void)policy.semaphore_for(client, "lock:user:1"), InvalidArgumentError);
}

TEST(LockPolicyTest, FlavorNamesRoundTrip) {
  for (Flavor flavor : {Flavor::reentrant, Flavor::fair, Flavor::token, Flavor::semaphore}) {
    EXPECT_EQ(parse_flavor(flavor_name(flavor)), flavor);
  }
  EXPECT_EQ(parse_flavor("Fair"), std::nullopt);
}

}  // namespace
}  // namespace turnstile
