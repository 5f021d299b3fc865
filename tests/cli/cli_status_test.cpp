// End to end: `turnstile status` on every kind of value, text and JSON.

#include <signal.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli/cli_redis_test.h"

namespace turnstile::testing {
namespace {

using ::testing::HasSubstr;

class CliStatusTest : public CliRedisTest {
 protected:
  nlohmann::json status_json(const std::string& name) {
    const CliResult result = run_cli({"status", "--json", "--redis", server().url(), name});
    EXPECT_EQ(result.status, 0) << result.err;
    return nlohmann::json::parse(result.out);
  }
};

TEST_F(CliStatusTest, AFreeName) {
  const nlohmann::json status = status_json("st:free");
  EXPECT_TRUE(status["flavor"].is_null());
  EXPECT_EQ(status["name"], "st:free");
  EXPECT_TRUE(status["remaining_lease_ms"].is_null());
  EXPECT_EQ(status["holders"].size(), 0u);
  EXPECT_EQ(status["redis"], server().url() + "/0");
}

// Names are binary-safe in Redis: the text prints them escaped on one
// line, the JSON stays valid UTF-8 and carries the exact bytes escaped.
TEST_F(CliStatusTest, ANameOfAnyBytesPrintsOnOneLine) {
  const std::string name = "st:\xff\nx";
  const CliResult text = run_cli({"status", "--redis", server().url(), name});
  EXPECT_EQ(text.status, 0) << text.err;
  EXPECT_THAT(text.out, ::testing::HasSubstr("name:        'st:\\xff\\nx'\n"));
  const CliResult json = run_cli({"status", "--redis", server().url(), name, "--json"});
  ASSERT_EQ(json.status, 0) << json.err;
  const nlohmann::json status = nlohmann::json::parse(json.out);
  EXPECT_EQ(status["name"], "st:\xef\xbf\xbd\nx");
  EXPECT_EQ(status["name_escaped"], "'st:\\xff\\nx'");
}

TEST_F(CliStatusTest, AHeldReentrantLockShowsItsHolderCountAndTtl) {
  CliProcess holder({"run", "--redis", server().url(), "--lease", "20s", "st:held"});
  ASSERT_TRUE(eventually([&] { return holder.out().find("holding") != std::string::npos; })) << holder.err();
  // "holding 'st:held' (owner <uuid>:<task>, fencing token N)"
  const std::string line = holder.out();
  const std::string owner = line.substr(line.find("owner ") + 6, line.find(',') - line.find("owner ") - 6);

  const nlohmann::json status = status_json("st:held");
  // Redis alone cannot tell a reentrant lock from a fair one without a
  // queue (or a composite's node): the first that fits, and the others.
  EXPECT_EQ(status["flavor"], "reentrant");
  EXPECT_EQ(status["could_be"], nlohmann::json::array({"reentrant", "fair", "redlock", "multilock"}));
  ASSERT_EQ(status["holders"].size(), 1u);
  EXPECT_EQ(status["holders"][0]["foreign"], false);
  EXPECT_EQ(status["holders"][0]["owner"], owner);
  EXPECT_EQ(status["holders"][0]["hold_count"], 1);
  EXPECT_EQ(status["holder_count"], 1);
  EXPECT_GT(status["remaining_lease_ms"].get<std::int64_t>(), 10'000);
  EXPECT_LE(status["remaining_lease_ms"].get<std::int64_t>(), 20'000);
  EXPECT_GE(status["last_fencing_token"].get<std::int64_t>(), 1);

  const CliResult text = run_cli({"status", "--redis", server().url(), "st:held"});
  EXPECT_EQ(text.status, 0);
  EXPECT_THAT(text.out, ::testing::ContainsRegex(
                            "flavor: +reentrant \\(or fair, redlock, multilock: Redis alone cannot tell; --flavor or "
                            "--config says which\\)\n"));
  // Told the flavor, the flavor shown is that one, whatever the name holds now.
  const CliResult told = run_cli({"status", "--flavor", "fair", "--redis", server().url(), "st:held"});
  EXPECT_EQ(told.status, 0) << told.err;
  EXPECT_THAT(told.out, ::testing::ContainsRegex("flavor: +fair\n"));
  EXPECT_THAT(text.out, HasSubstr(owner + " (hold count 1)"));

  holder.signal(SIGTERM);
  EXPECT_EQ(holder.wait_for(), 0);
  EXPECT_TRUE(status_json("st:held")["flavor"].is_null());
  const CliResult free = run_cli({"status", "--json", "--flavor", "fair", "--redis", server().url(), "st:held"});
  ASSERT_EQ(free.status, 0) << free.err;
  EXPECT_EQ(nlohmann::json::parse(free.out)["flavor"], "fair");
  EXPECT_EQ(nlohmann::json::parse(free.out)["holder_count"], 0);
}

TEST_F(CliStatusTest, ATokenLock) {
  CliProcess holder({"run", "--redis", server().url(), "--token", "st:token"});
  ASSERT_TRUE(eventually([&] { return holder.out().find("holding") != std::string::npos; })) << holder.err();
  const nlohmann::json status = status_json("st:token");
  EXPECT_EQ(status["flavor"], "token");
  EXPECT_EQ(status["could_be"], nlohmann::json::array({"token"}));
  ASSERT_EQ(status["holders"].size(), 1u);
  const std::string token = server().command({"GET", "st:token"});
  EXPECT_EQ("\"" + status["holders"][0]["owner"].get<std::string>() + "\"", token);
  holder.signal(SIGINT);
  EXPECT_EQ(holder.wait_for(), 0);
}

TEST_F(CliStatusTest, AFairQueueWithPositions) {
  // Redisson's fair-lock layout, written directly: the holder and two waiters.
  const std::string holder = "5f0e8a4c-3b1d-4c6e-9f2a-7b8c9d0e1f2a:1";
  server().command({"HSET", "st:fair", holder, "2"});
  server().command({"PEXPIRE", "st:fair", "30000"});
  server().command({"RPUSH", "redisson_lock_queue:{st:fair}", "waiter:1", "waiter:2"});
  server().command(
      {"ZADD", "redisson_lock_timeout:{st:fair}", "1700000000000", "waiter:1", "1700000005000", "waiter:2"});
  const nlohmann::json status = status_json("st:fair");
  EXPECT_EQ(status["flavor"], "fair");
  EXPECT_EQ(status["could_be"], nlohmann::json::array({"fair"}));
  EXPECT_EQ(status["holders"][0]["hold_count"], 2);
  EXPECT_EQ(status["queue_length"], 2);
  ASSERT_EQ(status["queue"].size(), 2u);
  EXPECT_EQ(status["queue"][0]["position"], 1);
  EXPECT_EQ(status["queue"][0]["owner"], "waiter:1");
  EXPECT_EQ(status["queue"][1]["owner"], "waiter:2");
  EXPECT_EQ(status["queue"][1]["deadline_epoch_ms"], 1700000005000);
}

TEST_F(CliStatusTest, SemaphoresShowPermits) {
  server().command({"SET", "st:sem", "4"});
  nlohmann::json status = status_json("st:sem");
  // A count without held permits is either semaphore, as far as Redis shows.
  EXPECT_EQ(status["flavor"], "semaphore");
  EXPECT_EQ(status["could_be"], nlohmann::json::array({"semaphore", "counting-semaphore"}));
  EXPECT_EQ(status["permits_available"], 4);
  const CliResult counting =
      run_cli({"status", "--json", "--flavor", "counting-semaphore", "--redis", server().url(), "st:sem"});
  ASSERT_EQ(counting.status, 0) << counting.err;
  EXPECT_EQ(nlohmann::json::parse(counting.out)["flavor"], "counting-semaphore");
  const CliResult not_a_lock = run_cli({"status", "--flavor", "reentrant", "--redis", server().url(), "st:sem"});
  EXPECT_EQ(not_a_lock.status, 65);
  EXPECT_THAT(not_a_lock.err, HasSubstr("holds a semaphore, not a reentrant"));

  server().command({"SET", "st:safe", "1"});
  server().command(
      {"ZADD", "{st:safe}:timeout", "1700000000000", "aaaa", "1700000001000", "bbbb", "922337203685477", "cccc"});
  status = status_json("st:safe");
  EXPECT_EQ(status["flavor"], "semaphore");  // the crash-safe one, for sure: permits are held
  EXPECT_EQ(status["could_be"], nlohmann::json::array({"semaphore"}));
  EXPECT_EQ(status["permits_available"], 1);
  EXPECT_EQ(status["permits_held"], 3);
  ASSERT_EQ(status["permits"].size(), 3u);
  EXPECT_EQ(status["permits"][0]["id"], "aaaa");
  EXPECT_EQ(status["permits"][1]["expiry_epoch_ms"], 1700000001000);
  EXPECT_TRUE(status["permits"][2]["expiry_epoch_ms"].is_null());  // Redisson's "never"

  const CliResult unlock = run_cli({"unlock", "--force", "--redis", server().url(), "st:safe"});
  EXPECT_EQ(unlock.status, 65);
  EXPECT_THAT(unlock.err, HasSubstr("semaphore"));
}

// Issue #19: Redisson stores a permit id as its 16 raw bytes. status shows
// it as the 32 hex digits Redisson shows its callers, in text and JSON;
// a member of another shape is escaped, never printed raw.
TEST_F(CliStatusTest, PermitIdsStoredAsRawBytesAreShownAsHex) {
  const std::string raw("\x00\xff\x10\x80\xc3\x28\x7f\x0a\xde\xad\xbe\xef\x01\x02\x03\x04", 16);
  server().command({"SET", "st:raw", "0"});
  server().command({"ZADD", "{st:raw}:timeout", "1700000000000", raw, "1700000001000", std::string("odd\xff\n", 5)});
  const nlohmann::json status = status_json("st:raw");
  ASSERT_EQ(status["permits"].size(), 2u);
  EXPECT_EQ(status["permits"][0]["id"], "00ff1080c3287f0adeadbeef01020304");
  EXPECT_EQ(status["permits"][1]["id"], "odd\\xff\\x0a");
  // Instants: ISO 8601 UTC in JSON (beside the epoch ms), local time in text.
  EXPECT_EQ(status["permits"][0]["expiry_at"], "2023-11-14T22:13:20.000Z");
  EXPECT_EQ(status["permits"][1]["expiry_at"], "2023-11-14T22:13:21.000Z");
  const CliResult text = run_cli({"status", "--redis", server().url(), "st:raw"}, {{"TZ", "CET-1"}});
  EXPECT_EQ(text.status, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr("00ff1080c3287f0adeadbeef01020304 (expires at 2023-11-14 23:13:20.000 +0100)"));
  EXPECT_TRUE(std::all_of(text.out.begin(), text.out.end(), [](char c) {
    return c == '\n' || (c >= 0x20 && c < 0x7f);
  })) << text.out;
}

TEST_F(CliStatusTest, AnotherKindOfValueIsStatus65) {
  server().command({"SADD", "st:set", "x"});
  const CliResult result = run_cli({"status", "--redis", server().url(), "st:set"});
  EXPECT_EQ(result.status, 65);
  EXPECT_THAT(result.err, HasSubstr("holds a set"));
  server().command({"HSET", "st:userhash", "name", "alice"});
  EXPECT_EQ(run_cli({"status", "--redis", server().url(), "st:userhash"}).status, 65);
}

// Issue #18: a user's string or hash at a lock name is neither reported
// as a lock nor deleted by `unlock --force` (exit 65, one line). Issue
// #30: a hash whose every value is a count, with an expiry, is a lock as
// Redisson sees one (any field an owner): status shows it, with a foreign
// owner, but unlock --force never deletes it (it may be someone's data).
TEST_F(CliStatusTest, UserDataIsNotALockAndIsNeverForceUnlocked) {
  server().command({"SET", "st:user-string", "hello"});
  server().command({"HSET", "st:user-hash", "name", "alice", "visits", "5"});
  server().command({"PEXPIRE", "st:user-hash", "60000"});
  server().command({"HSET", "st:user-counts", "field", "5"});
  server().command({"PEXPIRE", "st:user-counts", "60000"});
  for (const std::string name : {"st:user-string", "st:user-hash", "st:user-counts"}) {
    const CliResult unlock = run_cli({"unlock", "--force", "--redis", server().url(), name});
    EXPECT_EQ(unlock.status, 65) << name;
    EXPECT_THAT(unlock.err, HasSubstr("not a turnstile lock")) << name;
    EXPECT_EQ(std::count(unlock.err.begin(), unlock.err.end(), '\n'), 1) << unlock.err;
    EXPECT_TRUE(exists(name)) << name;
    if (name == "st:user-counts") continue;
    const CliResult status = run_cli({"status", "--redis", server().url(), name});
    EXPECT_EQ(status.status, 65) << name;
    EXPECT_THAT(status.err, HasSubstr("not a turnstile lock")) << name;
    EXPECT_EQ(std::count(status.err.begin(), status.err.end(), '\n'), 1) << status.err;
  }
  const nlohmann::json counts = status_json("st:user-counts");
  EXPECT_EQ(counts["flavor"], "reentrant");
  ASSERT_EQ(counts["holders"].size(), 1u);
  EXPECT_EQ(counts["holders"][0]["owner"], "field");
  EXPECT_EQ(counts["holders"][0]["foreign"], true);
  EXPECT_EQ(server().command({"GET", "st:user-string"}), "\"hello\"");
  EXPECT_EQ(server().command({"HGET", "st:user-hash", "name"}), "\"alice\"");
  EXPECT_EQ(server().command({"HGET", "st:user-counts", "field"}), "\"5\"");
}

TEST_F(CliStatusTest, ErrorsAreOneLineWithTheirStatus) {
  EXPECT_EQ(run_cli({"status", "--redis", server().url(), ""}).status, 64);
  const int port = free_loopback_port();
  const CliResult down = run_cli({"status", "--redis", "redis://127.0.0.1:" + std::to_string(port), "st:x"});
  EXPECT_EQ(down.status, 69);
  EXPECT_THAT(down.err, HasSubstr("127.0.0.1:" + std::to_string(port)));
}

// ---- status --watch ----

// The JSON lines of a watch's output so far (a last line still being
// written is left out).
std::vector<nlohmann::json> watch_lines(const CliProcess& watch) {
  std::vector<nlohmann::json> lines;
  const std::string out = watch.out();
  std::size_t start = 0;
  for (std::size_t end = out.find('\n'); end != std::string::npos; end = out.find('\n', start)) {
    lines.push_back(nlohmann::json::parse(out.substr(start, end - start)));
    start = end + 1;
  }
  return lines;
}

// Whether some line after the first `after` lines satisfies `condition`.
bool watch_shows(const CliProcess& watch, std::size_t after,
                 const std::function<bool(const nlohmann::json&)>& condition) {
  const std::vector<nlohmann::json> lines = watch_lines(watch);
  return std::any_of(lines.begin() + static_cast<std::ptrdiff_t>(std::min(after, lines.size())), lines.end(),
                     condition);
}

TEST_F(CliStatusTest, WatchFollowsAHolderComingAndGoingUntilInterrupted) {
  CliProcess watch({"status", "--redis", server().url(), "st:watched", "--watch", "--json", "--interval", "100ms"});
  ASSERT_TRUE(eventually([&] { return watch_shows(watch, 0, [](const auto& l) { return l["flavor"].is_null(); }); }))
      << watch.err();

  CliProcess holder({"run", "--redis", server().url(), "--lease", "20s", "st:watched"});
  ASSERT_TRUE(eventually([&] { return holder.out().find("holding") != std::string::npos; })) << holder.err();
  ASSERT_TRUE(eventually([&] {
    return watch_shows(watch, 0, [](const auto& l) {
      return l["flavor"] == "reentrant" && l["holder_count"] == 1 && l["remaining_lease_ms"].is_number() &&
             l["remaining_lease_ms"].template get<std::int64_t>() > 0;
    });
  })) << watch.out();

  const std::size_t seen_held = watch_lines(watch).size();
  holder.signal(SIGTERM);
  ASSERT_EQ(holder.wait_for(), 0);
  ASSERT_TRUE(eventually([&] {
    return watch_shows(watch, seen_held, [](const auto& l) { return l["flavor"].is_null(); });
  })) << watch.out();

  EXPECT_TRUE(watch.running()) << "a watch ends only when interrupted";
  watch.signal(SIGINT);
  EXPECT_EQ(watch.wait_for(), 0) << watch.err();
  const std::vector<nlohmann::json> lines = watch_lines(watch);
  for (std::size_t i = 1; i < lines.size(); ++i) {
    EXPECT_LE(lines[i - 1]["observed_at_epoch_ms"], lines[i]["observed_at_epoch_ms"]);
  }
}

TEST_F(CliStatusTest, WatchStopsAfterCountSnapshotsEachHeadedByItsTime) {
  const CliResult result =
      run_cli({"status", "--redis", server().url(), "st:counted", "--watch", "--count", "3", "--interval", "100ms"});
  ASSERT_EQ(result.status, 0) << result.err;
  EXPECT_THAT(result.out, ::testing::ContainsRegex("^--- [0-9]{4}-[0-9]{2}-[0-9]{2} [0-9:]{8} UTC\n"));
  std::size_t headers = 0;
  for (std::size_t at = result.out.find("--- "); at != std::string::npos; at = result.out.find("--- ", at + 1)) {
    ++headers;
  }
  EXPECT_EQ(headers, 3u) << result.out;
  EXPECT_EQ(std::count(result.out.begin(), result.out.end(), '\n'), 3 * 5)
      << "header, name, redis, memory, flavor each time";
}

// A watch rides out Redis going away and coming back: the snapshots in
// between say it cannot be reached, and the watch goes on.
TEST_F(CliStatusTest, WatchRidesOutARedisRestart) {
  RedisServer own;
  CliProcess watch({"status", "--redis", own.url(), "st:restart", "--watch", "--json", "--interval", "100ms"});
  ASSERT_TRUE(eventually([&] { return watch_shows(watch, 0, [](const auto& l) { return l["flavor"].is_null(); }); }))
      << watch.err();
  own.stop();
  ASSERT_TRUE(eventually([&] {
    return watch_shows(watch, 0, [&](const auto& l) {
      return l.contains("error") &&
             l["error"].template get<std::string>().find(std::to_string(own.port())) != std::string::npos;
    });
  })) << watch.out();
  const std::size_t seen_error = watch_lines(watch).size();
  own.start();
  ASSERT_TRUE(eventually([&] {
    return watch_shows(watch, seen_error, [](const auto& l) { return !l.contains("error") && l["flavor"].is_null(); });
  })) << watch.out();
  watch.signal(SIGTERM);
  EXPECT_EQ(watch.wait_for(), 0) << watch.err();
}

TEST_F(CliStatusTest, WatchRefusesBadFlagsAndEndsOnAValueNotALock) {
  for (const std::vector<std::string>& flags : std::vector<std::vector<std::string>>{
           {"--watch", "--interval", "10ms"},  // below the minimum
           {"--watch", "--interval", "5"},     // no unit
           {"--interval", "1s"},               // without --watch
           {"--count", "2"},
           {"--watch", "--count", "0"},
       }) {
    std::vector<std::string> args = {"status", "--redis", server().url(), "st:bad-flags"};
    args.insert(args.end(), flags.begin(), flags.end());
    const CliResult result = run_cli(args);
    EXPECT_EQ(result.status, 64) << ::testing::PrintToString(flags) << result.err;
    EXPECT_EQ(result.out, "");
  }
  server().command({"SET", "st:watch-user-data", "hello"});
  const CliResult wrong =
      run_cli({"status", "--redis", server().url(), "st:watch-user-data", "--watch", "--interval", "100ms"});
  EXPECT_EQ(wrong.status, 65) << wrong.out;
  EXPECT_EQ(server().command({"GET", "st:watch-user-data"}), "\"hello\"");
}

}  // namespace
}  // namespace turnstile::testing
