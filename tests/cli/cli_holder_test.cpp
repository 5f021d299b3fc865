// End to end: who holds a lock (key_layout.h, "The holder's identity") as
// `status`, `ls` and a `run` that gives up show it, on a real
// redis-server and on a Redis Cluster: shown while held, gone with the
// release, expiring with the lease when the holder is killed; a
// Redisson-held lock (and an identity naming someone else) shows none; a
// secret in the command's argv never reaches Redis.

#include <signal.h>
#include <unistd.h>

#include <array>
#include <cstdint>
#include <map>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli/cli_redis_test.h"
#include "redis_cluster.h"

namespace turnstile::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::Not;
using ::testing::StartsWith;

std::string host_name() {
  std::array<char, 256> host{};
  gethostname(host.data(), host.size() - 1);
  return host.data();
}

class CliHolderTest : public CliRedisTest {
 protected:
  nlohmann::json status_json(const std::string& name, const std::string& url) {
    const CliResult result = run_cli({"status", "--json", "--redis", url, name});
    EXPECT_EQ(result.status, 0) << result.err;
    return nlohmann::json::parse(result.out);
  }
};

TEST_F(CliHolderTest, ShownWhileHeldGoneAfterRelease) {
  CliProcess holder({"run", "--redis", url(), "--label", "nightly backup", "id:job"});  // held until SIGTERM
  ASSERT_TRUE(eventually([&] { return holder.out().find("holding") != std::string::npos; })) << holder.err();
  const std::string where = host_name() + ":" + std::to_string(holder.pid());

  const nlohmann::json status = status_json("id:job", url());
  ASSERT_EQ(status["holders"].size(), 1u) << status.dump();
  const nlohmann::json& by = status["holders"][0]["holder"];
  EXPECT_EQ(by["host"], host_name());
  EXPECT_EQ(by["pid"], holder.pid());
  EXPECT_EQ(by["command"], "turnstile run (no command)");
  EXPECT_EQ(by["label"], "nightly backup");
  EXPECT_THAT(by["started_at"].get<std::string>(), MatchesRegex("[0-9-]+T[0-9:.]+Z"));

  const CliResult text = run_cli({"status", "--redis", url(), "id:job"});
  EXPECT_THAT(text.out, HasSubstr("    by:      " + where + ", command \"turnstile run (no command)\", since "));
  EXPECT_THAT(text.out, HasSubstr(", label \"nightly backup\"\n"));

  const CliResult table = run_cli({"ls", "--redis", url(), "id:*"});
  EXPECT_THAT(table.out,
              MatchesRegex("NAME +FLAVOR +HELD +WAITING +AVAILABLE +LEASE +HOLDER\nid:job +reentrant\\? +1 +0 +- +"
                           "[0-9.]+s +" +
                           where + "\n"));

  const CliResult gave_up = run_cli({"run", "--redis", url(), "-n", "id:job", "--", "true"});
  EXPECT_EQ(gave_up.status, 1);
  EXPECT_THAT(gave_up.err,
              HasSubstr("'id:job' is held elsewhere by " + where + ", command \"turnstile run (no command)\", since "));

  holder.signal(SIGTERM);
  EXPECT_EQ(holder.wait_for(), 0) << holder.err();
  EXPECT_FALSE(exists("turnstile_holder:{id:job}"));
  EXPECT_EQ(status_json("id:job", url())["holders"].size(), 0u);
}

// Every flavor with a single holder writes one; the write half too. Each
// reader has its own (the value of its hold's timeout key), its label too.
TEST_F(CliHolderTest, EveryFlavorWithOneHolder) {
  for (const std::vector<std::string>& flags :
       std::vector<std::vector<std::string>>{{"--token"}, {"--fair"}, {"--write"}}) {
    std::vector<std::string> args = {"run", "--redis", url()};
    args.insert(args.end(), flags.begin(), flags.end());
    args.push_back("id:flavor" + flags[0]);
    CliProcess holder(args);
    ASSERT_TRUE(eventually([&] { return holder.out().find("holding") != std::string::npos; })) << holder.err();
    const nlohmann::json status = status_json("id:flavor" + flags[0], url());
    ASSERT_EQ(status["holders"].size(), 1u) << status.dump();
    EXPECT_EQ(status["holders"][0]["holder"]["pid"], holder.pid()) << flags[0];
    holder.signal(SIGTERM);
    EXPECT_EQ(holder.wait_for(), 0) << holder.err();
    EXPECT_FALSE(exists("turnstile_holder:{id:flavor" + flags[0] + "}")) << flags[0];
  }
  CliProcess reader({"run", "--redis", url(), "--read", "--label", "nightly report", "id:readers"});
  ASSERT_TRUE(eventually([&] { return reader.out().find("holding") != std::string::npos; })) << reader.err();
  CliProcess other({"run", "--redis", url(), "-s", "--label", "audit", "id:readers"});
  ASSERT_TRUE(eventually([&] { return other.out().find("holding") != std::string::npos; })) << other.err();
  const nlohmann::json status = status_json("id:readers", url());
  ASSERT_EQ(status["holders"].size(), 2u) << status.dump();
  std::map<std::int64_t, std::string> labels;
  for (const nlohmann::json& holder : status["holders"]) {
    ASSERT_TRUE(holder["holder"].is_object()) << status.dump();
    labels[holder["holder"]["pid"].get<std::int64_t>()] = holder["holder"]["label"].get<std::string>();
  }
  EXPECT_EQ(labels, (std::map<std::int64_t, std::string>{{reader.pid(), "nightly report"}, {other.pid(), "audit"}}));
  const CliResult text = run_cli({"status", "--redis", url(), "id:readers"});
  EXPECT_THAT(text.out, HasSubstr("label \"nightly report\""));
  EXPECT_THAT(text.out, HasSubstr("label \"audit\""));
  EXPECT_THAT(text.out, Not(HasSubstr("no identity")));
  reader.signal(SIGTERM);
  EXPECT_EQ(reader.wait_for(), 0) << reader.err();
  other.signal(SIGTERM);
  EXPECT_EQ(other.wait_for(), 0) << other.err();
  EXPECT_FALSE(exists("id:readers"));
}

// A fair lock's waiters are shown with who they are while they wait, in
// queue order, their labels too; gone with the queue.
TEST_F(CliHolderTest, AFairLocksWaitersShowWhoTheyAre) {
  CliProcess holder({"run", "--redis", url(), "--fair", "id:fair"});
  ASSERT_TRUE(eventually([&] { return holder.out().find("holding") != std::string::npos; })) << holder.err();
  CliProcess first({"run", "--redis", url(), "--fair", "-w", "60", "--label", "deploy eu", "id:fair", "--", "true"});
  ASSERT_TRUE(eventually([&] { return status_json("id:fair", url())["queue"].size() == 1; })) << first.err();
  CliProcess second({"run", "--redis", url(), "--fair", "-w", "60", "--label", "deploy us", "id:fair", "--", "true"});
  ASSERT_TRUE(eventually([&] { return status_json("id:fair", url())["queue"].size() == 2; })) << second.err();
  const nlohmann::json queue = status_json("id:fair", url())["queue"];
  ASSERT_TRUE(queue[0]["holder"].is_object() && queue[1]["holder"].is_object()) << queue.dump();
  EXPECT_EQ(queue[0]["holder"]["pid"], first.pid()) << queue.dump();
  EXPECT_EQ(queue[0]["holder"]["label"], "deploy eu") << queue.dump();
  EXPECT_EQ(queue[1]["holder"]["pid"], second.pid()) << queue.dump();
  EXPECT_EQ(queue[1]["holder"]["label"], "deploy us") << queue.dump();
  EXPECT_THAT(run_cli({"status", "--redis", url(), "id:fair"}).out, HasSubstr("label \"deploy us\""));
  holder.signal(SIGTERM);
  EXPECT_EQ(holder.wait_for(), 0) << holder.err();
  EXPECT_EQ(first.wait_for(), 0) << first.err();
  EXPECT_EQ(second.wait_for(), 0) << second.err();
  EXPECT_EQ(status_json("id:fair", url())["queue"].size(), 0u);
}

// kill -9 of turnstile: nothing releases; the identity carries the
// lease's expiry, never more than the lock's (its lapse in time is
// tested on the virtual clock: tests/locks/holder_identity_test.cpp).
TEST_F(CliHolderTest, AKilledHoldersIdentityExpiresWithTheLease) {
  CliProcess holder({"run", "--redis", url(), "--lease", "20s", "id:killed"});
  ASSERT_TRUE(eventually([&] { return holder.out().find("holding") != std::string::npos; })) << holder.err();
  holder.signal(SIGKILL);
  holder.wait_for();
  // Set by one script: the identity expires when the lock does (the
  // lock's read first: time runs on between the two reads).
  const std::int64_t lock_ttl = pttl_ms("id:killed");
  const std::int64_t identity_ttl = pttl_ms("turnstile_holder:{id:killed}");
  EXPECT_GT(identity_ttl, 0);
  EXPECT_LE(identity_ttl, lock_ttl);
  server().command({"DEL", "id:killed", "turnstile_holder:{id:killed}"});
}

// Redisson writes a lock hash and nothing beside it; a stale identity of
// another owner is not shown beside the one who holds it now.
TEST_F(CliHolderTest, ARedissonHeldLockShowsNoIdentity) {
  const std::string owner = "0a1b2c3d-0000-4000-8000-000000000001:1";
  server().command({"HSET", "id:redisson", owner, "1"});
  server().command({"PEXPIRE", "id:redisson", "20000"});
  server().command({"SET", "turnstile_holder:{id:redisson}",
                    "turnstile-holder 1\nowner=0a1b2c3d-0000-4000-8000-000000000002:1\nhost=h\npid=1\n"
                    "started_at_ms=0\ncommand=c\nlabel=",
                    "PX", "20000"});
  const nlohmann::json status = status_json("id:redisson", url());
  ASSERT_EQ(status["holders"].size(), 1u);
  EXPECT_TRUE(status["holders"][0]["holder"].is_null()) << status.dump();
  const CliResult text = run_cli({"status", "--redis", url(), "id:redisson"});
  EXPECT_THAT(text.out, HasSubstr("    by:      (no identity: foreign or older client)\n"));
  const CliResult gave_up = run_cli({"run", "--redis", url(), "-n", "id:redisson", "--", "true"});
  EXPECT_THAT(gave_up.err, HasSubstr("held elsewhere by (no identity: foreign or older client); gave up"));
  const CliResult table = run_cli({"ls", "--redis", url(), "id:redisson"});
  EXPECT_THAT(table.out, MatchesRegex("(.|\n)*id:redisson .* \\?\n"));
  server().command({"DEL", "id:redisson", "turnstile_holder:{id:redisson}"});
}

// Field round 2 (#50, row 10): an identity written by hand (or by a
// hostile client) with ESC and BEL bytes is printed escaped, never raw.
TEST_F(CliHolderTest, AnIdentityWithControlBytesIsPrintedEscaped) {
  const std::string owner = "0a1b2c3d-0000-4000-8000-000000000003:1";
  server().command({"HSET", "id:escape", owner, "1"});
  server().command({"PEXPIRE", "id:escape", "20000"});
  server().command({"SET", "turnstile_holder:{id:escape}",
                    "turnstile-holder 1\nowner=" + owner +
                        "\nhost=h\x1b]0;pwned\x07\npid=1\nstarted_at_ms=0\ncommand=rm \x1b[2J\nlabel=\xc2\x9b"
                        "31m",
                    "PX", "20000"});
  const auto no_raw_control = [](const std::string& out) {
    return out.find('\x1b') == std::string::npos && out.find('\x07') == std::string::npos &&
           out.find("\xc2\x9b") == std::string::npos;
  };
  const CliResult text = run_cli({"status", "--redis", url(), "id:escape"});
  EXPECT_TRUE(no_raw_control(text.out)) << text.out;
  EXPECT_THAT(text.out, HasSubstr("'h\\x1b]0;pwned\\x07':1, command \"'rm \\x1b[2J'\""));
  EXPECT_THAT(text.out, HasSubstr("label \"'\\xc2\\x9b31m'\""));
  const CliResult gave_up = run_cli({"run", "--redis", url(), "-n", "id:escape", "--", "true"});
  EXPECT_TRUE(no_raw_control(gave_up.err)) << gave_up.err;
  EXPECT_THAT(gave_up.err, HasSubstr("'rm \\x1b[2J'"));
  const CliResult table = run_cli({"ls", "--redis", url(), "id:escape"});
  EXPECT_TRUE(no_raw_control(table.out)) << table.out;
  EXPECT_THAT(table.out, HasSubstr("'h\\x1b]0;pwned\\x07':1"));
  const nlohmann::json status = status_json("id:escape", url());
  EXPECT_EQ(status["holders"][0]["holder"]["host"], "h\x1b]0;pwned\x07") << "JSON keeps the bytes, escaped by JSON";
  server().command({"DEL", "id:escape", "turnstile_holder:{id:escape}"});
}

// Field round 2 (#50, row 11): a side key of another type (someone's hash
// at the identity's name) is ignored and reported, never fatal: status
// shows the lock, ls lists it, unlock --force breaks it.
TEST_F(CliHolderTest, ASideKeyOfAnotherTypeIsANoteNotAFailure) {
  const std::string owner = "0a1b2c3d-0000-4000-8000-000000000004:1";
  server().command({"HSET", "id:clash", owner, "1"});
  server().command({"PEXPIRE", "id:clash", "20000"});
  server().command({"HSET", "turnstile_holder:{id:clash}", "field", "value"});
  const CliResult text = run_cli({"status", "--redis", url(), "id:clash"});
  EXPECT_EQ(text.status, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr("holders:     1\n"));
  EXPECT_THAT(text.out, HasSubstr("note:        side key 'turnstile_holder:{id:clash}' holds another type"));
  const nlohmann::json status = status_json("id:clash", url());
  ASSERT_EQ(status["notes"].size(), 1u) << status.dump();
  const CliResult table = run_cli({"ls", "--redis", url(), "id:clash"});
  EXPECT_EQ(table.status, 0) << table.err;
  EXPECT_THAT(table.out, HasSubstr("id:clash"));
  const CliResult forced = run_cli({"unlock", "--force", "--redis", url(), "id:clash"});
  EXPECT_EQ(forced.status, 0) << forced.err;
  EXPECT_FALSE(exists("id:clash"));
  server().command({"DEL", "turnstile_holder:{id:clash}"});
}

TEST_F(CliHolderTest, ASecretInTheCommandNeverReachesRedis) {
  CliProcess holder({"run", "--redis", url(), "id:secret", "--", "sh", "-c", "sleep 30", "x", "--password=hunter2",
                     "-a", "s3cret", "redis://user:pw0@db:6379"});
  ASSERT_TRUE(eventually([&] { return exists("turnstile_holder:{id:secret}"); })) << holder.err();
  const std::string stored = server().command({"GET", "turnstile_holder:{id:secret}"});
  EXPECT_THAT(stored, Not(HasSubstr("hunter2")));
  EXPECT_THAT(stored, Not(HasSubstr("s3cret")));
  EXPECT_THAT(stored, Not(HasSubstr("pw0")));
  const nlohmann::json status = status_json("id:secret", url());
  EXPECT_EQ(status["holders"][0]["holder"]["command"], "sh -c 'sleep 30' x --password=*** -a *** redis://***@db:6379");
  holder.signal(SIGTERM);
  holder.wait_for();
}

// On a cluster the identity is in its lock's slot (the hash tag), and `ls`
// (every master) shows it.
TEST_F(CliHolderTest, LsOnAClusterShowsTheHolder) {
  RedisCluster& cluster = shared_test_cluster();
  CliProcess holder({"run", "--redis", cluster.url(), "id:cluster"});
  ASSERT_TRUE(eventually([&] { return holder.out().find("holding") != std::string::npos; })) << holder.err();
  EXPECT_EQ(cluster.owner_of("turnstile_holder:{id:cluster}"), cluster.owner_of("id:cluster"));
  const CliResult table = run_cli({"ls", "--redis", cluster.url(), "id:*"});
  ASSERT_EQ(table.status, 0) << table.err;
  EXPECT_THAT(table.out, HasSubstr(" " + host_name() + ":" + std::to_string(holder.pid()) + "\n"));
  EXPECT_THAT(table.out, Not(HasSubstr("turnstile_holder")));
  const nlohmann::json status = status_json("id:cluster", cluster.url());
  EXPECT_EQ(status["holders"][0]["holder"]["pid"], holder.pid());
  holder.signal(SIGTERM);
  EXPECT_EQ(holder.wait_for(), 0) << holder.err();
  EXPECT_THAT(run_cli({"ls", "--redis", cluster.url(), "id:*"}).out, Not(HasSubstr("id:cluster")));
}

}  // namespace
}  // namespace turnstile::testing
