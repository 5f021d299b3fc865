// What `turnstile run` stores as its holder's command (cli/holder_identity.h):
// secrets in argv redacted, long lines cut; how a holder is shown; and an
// unknown flag named in one line with its command (exit 64).

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli/holder_identity.h"
#include "cli_process.h"
#include "turnstile/key_layout.h"

namespace turnstile::testing {
namespace {

using cli::redacted_command_line;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(HolderCommandTest, PlainArgumentsAsTyped) {
  EXPECT_EQ(redacted_command_line({"pg_dump", "--format=custom", "-f", "/backup/db.dump", "shop"}),
            "pg_dump --format=custom -f /backup/db.dump shop");
  EXPECT_EQ(redacted_command_line({"/bin/sh", "-c", "sleep 3; echo done"}), "/bin/sh -c 'sleep 3; echo done'");
}

TEST(HolderCommandTest, SecretOptionValuesAreRedacted) {
  EXPECT_EQ(redacted_command_line({"tool", "--password=hunter2", "--db-pass", "s3cret", "x"}),
            "tool --password=*** --db-pass *** x");
  EXPECT_EQ(redacted_command_line({"redis-cli", "-a", "s3cret", "ping"}), "redis-cli -a *** ping");
  // Field round 2 (#50, row 13): mysql's glued -p and --pw= were shown.
  EXPECT_EQ(redacted_command_line({"mysql", "-pHunter2", "-u", "root", "-p", "shop"}), "mysql -p*** -u root -p shop");
  EXPECT_EQ(redacted_command_line({"tool", "--pw=hunter2", "--db-pwd", "x", "--passphrase=y"}),
            "tool --pw=*** --db-pwd *** --passphrase=***");
  EXPECT_EQ(redacted_command_line({"/bin/sh", "-c", "mysqldump -pHunter2 shop"}), "/bin/sh -c 'mysqldump -p*** shop'");
  EXPECT_EQ(redacted_command_line({"curl", "--AUTH-TOKEN", "abc", "-H", "x"}), "curl --AUTH-TOKEN *** -H x");
  EXPECT_EQ(redacted_command_line({"aws", "--api-key=k", "--client-secret=z", "--credentials", "c"}),
            "aws --api-key=*** --client-secret=*** --credentials ***");
}

TEST(HolderCommandTest, SecretVariablesAndUrlCredentialsAreRedacted) {
  EXPECT_EQ(redacted_command_line({"env", "PGPASSWORD=hunter2", "AWS_SECRET_ACCESS_KEY=k", "LANG=C", "psql"}),
            "env PGPASSWORD=*** AWS_SECRET_ACCESS_KEY=*** LANG=C psql");
  EXPECT_EQ(redacted_command_line({"sync", "redis://user:pw@db:6379/0", "--to=https://:tok@host/x?a=b@c"}),
            "sync redis://***@db:6379/0 --to=https://***@host/x?a=b@c");
  EXPECT_EQ(redacted_command_line({"open", "https://example.com/a@b"}), "open https://example.com/a@b");
  // A shell string (run -c) word by word.
  EXPECT_EQ(redacted_command_line({"/bin/sh", "-c", "mysql --password hunter2 -e 'select 1'"}),
            "/bin/sh -c \"mysql --password *** -e 'select 1'\"");
}

TEST(HolderCommandTest, LongLinesAreCutAndCleaned) {
  const std::string line = redacted_command_line({"echo", std::string(1000, 'a'), "tail"});
  EXPECT_EQ(line.size(), kMaxHolderCommandBytes);
  EXPECT_TRUE(line.ends_with("...")) << line;
  EXPECT_EQ(redacted_command_line({"printf", "a\nb\x01"}), "printf a?b?");
}

TEST(HolderIdentityValueTest, RoundTripsAndRefusesOtherShapes) {
  const HolderIdentity identity{.owner = "0a1b2c3d-0000-4000-8000-000000000001:7",
                                .host = "db-1",
                                .pid = 4242,
                                .command = "pg_dump shop",
                                .started_at_epoch_ms = 1795666315359,
                                .label = "nightly backup"};
  const std::optional<HolderIdentity> back = parse_holder_identity(holder_identity_value(identity));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->owner, identity.owner);
  EXPECT_EQ(back->host, "db-1");
  EXPECT_EQ(back->pid, 4242);
  EXPECT_EQ(back->command, "pg_dump shop");
  EXPECT_EQ(back->started_at_epoch_ms, 1795666315359);
  EXPECT_EQ(back->label, "nightly backup");
  EXPECT_FALSE(parse_holder_identity("hello"));
  EXPECT_FALSE(parse_holder_identity("turnstile-holder 1\npid=x\nowner=a"));
  EXPECT_FALSE(parse_holder_identity("turnstile-holder 1\nhost=h"));  // no owner
  EXPECT_EQ(side_key_owner(key_layout(Flavor::token, "jobs:1").holder_identity), "jobs:1");
}

TEST(HolderIdentityValueTest, WritesEachFieldOnItsLineCleanedAndCut) {
  HolderIdentity identity{.owner = "o:1",
                          .host = "h\x01",
                          .pid = 7,
                          .command = std::string(kMaxHolderCommandBytes + 1, 'c'),
                          .started_at_epoch_ms = 5,
                          .label = "l"};
  const std::string fixed = "turnstile-holder 1\nowner=o:1\nhost=h?\npid=7\nstarted_at_ms=5\ncommand=" +
                            std::string(kMaxHolderCommandBytes - 3, 'c') + "...\nlabel=l";
  EXPECT_EQ(holder_identity_value(identity), fixed);
  identity.lock_delay_ms = 250;
  EXPECT_EQ(holder_identity_value(identity), fixed + "\nlock_delay_ms=250");
}

TEST(HolderShownTest, WithoutAnIdentitySaysWhy) {
  LockHolder holder{.owner = "x", .hold_count = 1};
  EXPECT_EQ(cli::holder_identity_text(holder.identity), "(no identity: foreign or older client)");
  EXPECT_EQ(cli::holder_host_pid(holder.identity), "?");
  holder.identity = HolderIdentity{.owner = "x", .host = "h", .pid = 9, .command = "c", .started_at_epoch_ms = 0};
  EXPECT_EQ(cli::holder_host_pid(holder.identity), "h:9");
  EXPECT_THAT(cli::holder_identity_text(holder.identity), HasSubstr("h:9, command \"c\", since "));
  EXPECT_THAT(cli::holder_identity_text(holder.identity), Not(HasSubstr("label")));
}

TEST(UnknownFlagTest, NamedWithItsCommandInOneLine) {
  const CliResult run = run_cli({"run", "--bogus", "name", "--", "true"});
  EXPECT_EQ(run.status, 64);
  EXPECT_EQ(run.err, "turnstile: unknown option '--bogus' for 'turnstile run' (see turnstile run --help)\n");
  const CliResult status = run_cli({"status", "one", "two"});
  EXPECT_EQ(status.status, 64);
  EXPECT_EQ(status.err, "turnstile: unexpected argument 'two' for 'turnstile status' (see turnstile status --help)\n");
  // A redis-cli habit (#50, row 14): the value never reaches the message.
  const CliResult secret = run_cli({"run", "--password=hunter2", "name", "--", "true"});
  EXPECT_EQ(secret.status, 64);
  EXPECT_EQ(secret.err, "turnstile: unknown option '--password' for 'turnstile run' (see turnstile run --help)\n");
  const CliResult top = run_cli({"--nope"});
  EXPECT_EQ(top.status, 64);
  EXPECT_THAT(top.err, HasSubstr("'--nope' for 'turnstile' (see turnstile --help)"));
}

}  // namespace
}  // namespace turnstile::testing
