// End to end: real redis-server, real `turnstile run` processes, real
// commands. Overlap is detected with mkdir (atomic on every file system);
// every wait is bounded.

#include <signal.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <memory>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "cli/cli_redis_test.h"

namespace turnstile::testing {
namespace {

using std::chrono::milliseconds;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr int kConflict = 1;
constexpr int kUsage = 64;
constexpr int kWrongKind = 65;
constexpr int kUnavailable = 69;
constexpr int kLockLost = 75;

class CliRunTest : public CliRedisTest {
 protected:
  // `turnstile run --redis URL extra... NAME -- sh -c SCRIPT`.
  std::vector<std::string> run_sh(const std::string& name, const std::string& script,
                                  std::vector<std::string> options = {}) const {
    std::vector<std::string> args = {"run", "--redis", url()};
    args.insert(args.end(), options.begin(), options.end());
    args.insert(args.end(), {name, "--", "sh", "-c", script});
    return args;
  }
};

TEST_F(CliRunTest, ExitsWithTheCommandsStatusAndReleases) {
  const CliResult result = run_cli(run_sh("run:status", "exit 7"));
  EXPECT_EQ(result.status, 7) << result.err;
  EXPECT_FALSE(exists("run:status"));
  const CliResult ok = run_cli(run_sh("run:status", "true"));
  EXPECT_EQ(ok.status, 0) << ok.err;
}

// Issue #18: a plain string or a hash of counts at the name is no lock to
// wait for: 65 at once, for the default flavor and --token alike, and the
// data is left as it was.
TEST_F(CliRunTest, UserDataAtTheNameIsRefusedNotWaitedOn) {
  server().command({"SET", "run:user-string", "hello"});
  server().command({"HSET", "run:user-counts", "field", "5"});
  for (const std::string name : {"run:user-string", "run:user-counts"}) {
    for (const std::vector<std::string>& flavor : {std::vector<std::string>{}, std::vector<std::string>{"--token"}}) {
      const CliResult result = run_cli(run_sh(name, "echo ran", flavor));
      EXPECT_EQ(result.status, kWrongKind) << name << " " << result.err;
      EXPECT_THAT(result.out, Not(HasSubstr("ran")));
      EXPECT_THAT(result.err, HasSubstr(name));
    }
  }
  EXPECT_EQ(server().command({"GET", "run:user-string"}), "\"hello\"");
  EXPECT_EQ(server().command({"HGET", "run:user-counts", "field"}), "\"5\"");
}

// Issue #30: a lock held by another client of Redisson's layout (the
// node-redisson port's owner "<uuid>:<uuid>") is held: -n says 1 (not 65),
// and a waiter runs its command once the holder lets go.
TEST_F(CliRunTest, AForeignRedissonLayoutHolderIsWaitedFor) {
  const std::string owner = "0c9a1e0e-7d52-4e44-9a8e-0123456789ab:6d1f3c2a-9b8e-4f70-a1b2-c3d4e5f60718";
  server().command({"HSET", "run:foreign", owner, "1"});
  server().command({"PEXPIRE", "run:foreign", "60000"});
  const CliResult once = run_cli(run_sh("run:foreign", "echo ran", {"-n"}));
  EXPECT_EQ(once.status, 1) << once.err;
  EXPECT_EQ(once.out, "");
  CliProcess waiter(run_sh("run:foreign", "echo ran"));
  ASSERT_TRUE(eventually([&] {
    return server().command({"PUBSUB", "NUMSUB", "redisson_lock__channel:{run:foreign}"}).find("(integer) 1") !=
           std::string::npos;
  })) << waiter.err();
  server().command({"DEL", "run:foreign"});
  server().command({"PUBLISH", "redisson_lock__channel:{run:foreign}", "0"});  // as the holder's unlock does
  EXPECT_EQ(waiter.wait_for(), 0) << waiter.err();
  EXPECT_EQ(waiter.out(), "ran\n");
}

// Issue #18: "{x}" would share "x"'s side keys; a 120 KB name is no
// name. Both are usage errors before anything is sent.
TEST_F(CliRunTest, AmbiguousOrOverlongNamesAreUsageErrors) {
  const CliResult tag = run_cli(run_sh("{run:x}", "echo ran", {"--permits", "2"}));
  EXPECT_EQ(tag.status, kUsage) << tag.err;
  EXPECT_THAT(tag.err, HasSubstr("hash tag"));
  EXPECT_THAT(tag.out, Not(HasSubstr("ran")));
  const CliResult long_name = run_cli(run_sh(std::string(120 * 1024, 'n'), "echo ran"));
  EXPECT_EQ(long_name.status, kUsage);
  EXPECT_THAT(long_name.err, HasSubstr("longer than 4096"));
  EXPECT_FALSE(exists("{run:x}:timeout"));
}

TEST_F(CliRunTest, ACommandKilledBySignalGives128PlusTheSignal) {
  const CliResult result = run_cli(run_sh("run:killed", "kill -KILL $$"));
  EXPECT_EQ(result.status, 128 + SIGKILL) << result.err;
  EXPECT_FALSE(exists("run:killed"));
}

TEST_F(CliRunTest, TheCommandSeesNameOwnerAndAGrowingFencingToken) {
  const std::string script = "echo \"$TURNSTILE_LOCK_NAME|$TURNSTILE_OWNER|$TURNSTILE_FENCING_TOKEN\"";
  const CliResult first = run_cli(run_sh("run:env", script));
  const CliResult second = run_cli(run_sh("run:env", script));
  ASSERT_EQ(first.status, 0) << first.err;
  ASSERT_EQ(second.status, 0) << second.err;
  const std::regex line("run:env\\|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}:[0-9]+\\|([0-9]+)\n");
  std::smatch first_match;
  std::smatch second_match;
  ASSERT_TRUE(std::regex_match(first.out, first_match, line)) << first.out;
  ASSERT_TRUE(std::regex_match(second.out, second_match, line)) << second.out;
  EXPECT_GT(std::stoll(second_match[1]), std::stoll(first_match[1]));
}

TEST_F(CliRunTest, TheTokenFlavorHasNoFencingToken) {
  const CliResult result = run_cli(run_sh("run:token-env", "echo \"[$TURNSTILE_FENCING_TOKEN]\"", {"--token"}));
  ASSERT_EQ(result.status, 0) << result.err;
  EXPECT_EQ(result.out, "[]\n");
}

class CliExclusionTest : public CliRunTest, public ::testing::WithParamInterface<std::vector<std::string>> {};

TEST_P(CliExclusionTest, ProcessesNeverOverlap) {
  constexpr int kProcesses = 6;
  const std::string inside = scratch_.file("inside");
  const std::string script = "mkdir '" + inside + "' || echo overlap >> '" + scratch_.file("overlaps") +
                             "'; echo in >> '" + scratch_.file("entries") + "'; sleep 0.05; rmdir '" + inside + "'";
  std::vector<std::unique_ptr<CliProcess>> processes;
  for (int i = 0; i < kProcesses; ++i) {
    processes.push_back(std::make_unique<CliProcess>(run_sh("run:exclusive", script, GetParam())));
  }
  for (auto& process : processes) EXPECT_EQ(process->wait_for(), 0) << process->err();
  EXPECT_FALSE(file_exists(scratch_.file("overlaps")));
  const std::string entries = read_file(scratch_.file("entries"));
  EXPECT_EQ(std::count(entries.begin(), entries.end(), '\n'), kProcesses) << entries;
}

INSTANTIATE_TEST_SUITE_P(Flavors, CliExclusionTest,
                         ::testing::Values(std::vector<std::string>{}, std::vector<std::string>{"--token"}),
                         [](const auto& info) { return info.param.empty() ? "Reentrant" : "Token"; });

// Waits until `path` exists (a command's "I am inside" marker).
::testing::AssertionResult appears(const std::string& path) {
  if (eventually([&] { return file_exists(path); })) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << path << " never appeared";
}

TEST_F(CliRunTest, NonblockingOnAHeldLockExitsWithTheConflictStatusAtOnce) {
  CliProcess holder({"run", "--redis", url(), "run:held"});  // hold mode: no command
  ASSERT_TRUE(eventually([&] { return holder.out().find("holding 'run:held'") != std::string::npos; })) << holder.err();
  EXPECT_TRUE(exists("run:held"));

  const CliResult refused = run_cli(run_sh("run:held", "echo ran", {"-n"}));
  EXPECT_EQ(refused.status, kConflict) << refused.err;
  EXPECT_EQ(refused.out, "");
  EXPECT_THAT(refused.err, HasSubstr("'run:held' is held elsewhere"));
  // -q: a skipped run (a cron job's) is silent, as flock -n; the status tells.
  const CliResult quiet = run_cli(run_sh("run:held", "echo ran", {"-n", "-q"}));
  EXPECT_EQ(quiet.status, kConflict) << quiet.err;
  EXPECT_EQ(quiet.out, "");
  EXPECT_EQ(quiet.err, "");
  const CliResult custom = run_cli(run_sh("run:held", "echo ran", {"-E", "42", "--wait", "0"}));
  EXPECT_EQ(custom.status, 42) << custom.err;
  const CliResult waited = run_cli(run_sh("run:held", "echo ran", {"--wait", "200ms"}));
  EXPECT_EQ(waited.status, kConflict) << waited.err;

  holder.signal(SIGTERM);  // the way to release in hold mode
  EXPECT_EQ(holder.wait_for(), 0) << holder.err();
  EXPECT_FALSE(exists("run:held"));
  EXPECT_EQ(run_cli(run_sh("run:held", "true", {"-n"})).status, 0);
}

// flock(1) habits: -w takes bare seconds, -c a shell string, -s / -x are
// the read-write lock's halves, -o is accepted; the lock is what flock's
// would be: a second -x waits for the first, two -s share it.
TEST_F(CliRunTest, FlockHabitsWork) {
  CliProcess holder({"run", "--redis", url(), "-x", "run:flock"});  // the write half, held
  ASSERT_TRUE(eventually([&] { return holder.out().find("holding") != std::string::npos; })) << holder.err();
  EXPECT_EQ(server().command({"HGET", "run:flock", "mode"}), "\"write\"");

  const CliResult waited = run_cli({"run", "--redis", url(), "-w", "0.2", "-x", "run:flock", "-c", "echo ran"});
  EXPECT_EQ(waited.status, kConflict) << waited.err;
  EXPECT_EQ(waited.out, "");
  const CliResult shared = run_cli({"run", "--redis", url(), "--wait", "0.2", "-s", "run:flock", "-c", "echo ran"});
  EXPECT_EQ(shared.status, kConflict) << shared.err;  // a writer keeps readers out
  holder.signal(SIGTERM);
  EXPECT_EQ(holder.wait_for(), 0) << holder.err();

  const std::string marker = scratch_.file("both-readers");
  CliProcess reader({"run", "--redis", url(), "-s", "run:flock", "-c", "touch '" + marker + "'; sleep 30"});
  ASSERT_TRUE(appears(marker)) << reader.err();
  const CliResult second = run_cli({"run", "--redis", url(), "-w", "5", "--shared", "-o", "run:flock", "-c",
                                    "test \"$TURNSTILE_LOCK_NAME\" = run:flock && echo \"in with $0\""});
  EXPECT_EQ(second.status, 0) << second.err;
  EXPECT_EQ(second.out, "in with /bin/sh\n");  // beside the first reader, through the shell
  reader.signal(SIGTERM);
  EXPECT_EQ(reader.wait_for(), 128 + SIGTERM) << reader.err();

  const CliResult status = run_cli({"run", "--redis", url(), "run:flock", "-c", "exit 9"});
  EXPECT_EQ(status.status, 9) << status.err;
  EXPECT_FALSE(exists("run:flock"));
}

// flock's -x is its default lock: `run NAME`, `run -x NAME` and `run -s
// NAME` on one name exclude each other (a plain lock and a read-write
// lock's halves wait on each other), never "another kind of value" (65).
// Each holder's lease is 60 s, so a waiter that got in within its -w 10
// was woken by the release, not by its retry when the lease would end.
TEST_F(CliRunTest, PlainExclusiveAndSharedLocksWaitForEachOtherOnOneName) {
  struct Mix {
    std::vector<std::string> held;     // the holder's flavor flags
    std::vector<std::string> waiting;  // the waiter's
  };
  const std::vector<Mix> mixes = {
      {{}, {"-x"}}, {{"-x"}, {}}, {{}, {"-s"}}, {{"-s"}, {}}, {{"-s"}, {"-x"}},
  };
  int round = 0;
  for (const Mix& mix : mixes) {
    const std::string name = "run:mix" + std::to_string(round++);
    SCOPED_TRACE(name);
    std::vector<std::string> hold_args{"run", "--redis", url(), "--lease", "60s"};
    hold_args.insert(hold_args.end(), mix.held.begin(), mix.held.end());
    hold_args.push_back(name);
    CliProcess holder(hold_args);
    ASSERT_TRUE(eventually([&] { return holder.out().find("holding") != std::string::npos; })) << holder.err();

    std::vector<std::string> try_args = mix.waiting;
    try_args.emplace_back("-n");
    const CliResult refused = run_cli(run_sh(name, "echo ran", try_args));
    EXPECT_EQ(refused.status, kConflict) << refused.err;  // held elsewhere, not another kind of value
    EXPECT_EQ(refused.out, "");

    std::vector<std::string> wait_args{"run", "--redis", url(), "--lease", "60s", "-w", "10"};
    wait_args.insert(wait_args.end(), mix.waiting.begin(), mix.waiting.end());
    wait_args.insert(wait_args.end(), {name, "-c", "echo in"});
    CliProcess waiter(wait_args);
    ASSERT_TRUE(eventually([&] { return exists("turnstile_lock_wake:{" + name + "}"); }))
        << "the waiter never registered: " << waiter.err();
    EXPECT_TRUE(waiter.running());
    holder.signal(SIGTERM);
    EXPECT_EQ(holder.wait_for(), 0) << holder.err();
    EXPECT_EQ(waiter.wait_for(), 0) << waiter.err();
    EXPECT_EQ(waiter.out(), "in\n");
    EXPECT_FALSE(exists(name));
  }
}

// --metrics-textfile: node_exporter's textfile format, written at exit
// whatever the outcome, the name label escaped.
TEST_F(CliRunTest, MetricsTextfileTellsTheOutcome) {
  const std::string file = scratch_.file("run.prom");
  const auto read_file = [&file] {
    std::ifstream in(file);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  const CliResult ran = run_cli(run_sh("run:metrics\"q", "exit 3", {"--metrics-textfile", file}));
  EXPECT_EQ(ran.status, 3) << ran.err;
  std::string text = read_file();
  EXPECT_THAT(text, HasSubstr("# TYPE turnstile_run_outcome gauge\n"));
  EXPECT_THAT(text, HasSubstr("turnstile_run_outcome{name=\"run:metrics\\\"q\",outcome=\"acquired\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("turnstile_run_outcome{name=\"run:metrics\\\"q\",outcome=\"skipped\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("turnstile_run_exit_status{name=\"run:metrics\\\"q\"} 3\n"));
  EXPECT_TRUE(std::regex_search(text, std::regex("turnstile_run_hold_seconds\\{[^}]*\\} [0-9]+\\.[0-9]{6}\n"))) << text;
  // The client's own metrics follow: one hold taken, held no more, its
  // hold time recorded.
  EXPECT_THAT(text, HasSubstr("turnstile_acquisitions_total{name=\"run:metrics\\\"q\",flavor=\"reentrant\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE turnstile_holds gauge\n"));
  EXPECT_THAT(text, HasSubstr("turnstile_holds{name=\"run:metrics\\\"q\",flavor=\"reentrant\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("turnstile_hold_seconds_count{name=\"run:metrics\\\"q\"} 1\n"));

  CliProcess holder({"run", "--redis", url(), "run:metrics-held"});
  ASSERT_TRUE(eventually([&] { return holder.out().find("holding") != std::string::npos; })) << holder.err();
  const CliResult skipped = run_cli(run_sh("run:metrics-held", "true", {"-n", "--metrics-textfile", file}));
  EXPECT_EQ(skipped.status, kConflict) << skipped.err;
  text = read_file();
  EXPECT_THAT(text, HasSubstr("outcome=\"skipped\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("turnstile_run_hold_seconds{name=\"run:metrics-held\"} 0.000000\n"));
  holder.signal(SIGTERM);
  EXPECT_EQ(holder.wait_for(), 0) << holder.err();

  const CliResult unreachable =
      run_cli({"run", "--redis", "redis://127.0.0.1:1", "--metrics-textfile", file, "run:metrics", "--", "true"});
  EXPECT_EQ(unreachable.status, kUnavailable) << unreachable.err;
  EXPECT_THAT(read_file(), HasSubstr("outcome=\"error\"} 1\n"));
  // Checked before anything is held: a directory that is not there is 64.
  const CliResult nowhere =
      run_cli(run_sh("run:metrics", "true", {"--metrics-textfile", scratch_.file("missing-dir") + "/run.prom"}));
  EXPECT_EQ(nowhere.status, kUsage) << nowhere.err;
  EXPECT_THAT(nowhere.err, HasSubstr("--metrics-textfile: cannot write in"));
}

TEST_F(CliRunTest, ASignalWhileWaitingEndsTheWaitWith128PlusTheSignal) {
  CliProcess holder({"run", "--redis", url(), "run:interrupted"});
  ASSERT_TRUE(eventually([&] { return holder.out().find("holding") != std::string::npos; })) << holder.err();
  CliProcess waiter(run_sh("run:interrupted", "echo ran"));  // waits forever
  std::this_thread::sleep_for(milliseconds(200));
  ASSERT_TRUE(waiter.running()) << waiter.err();
  waiter.signal(SIGINT);
  EXPECT_EQ(waiter.wait_for(), 128 + SIGINT);
  EXPECT_EQ(waiter.out(), "");
  EXPECT_THAT(waiter.err(), HasSubstr("while waiting for 'run:interrupted'"));
  EXPECT_TRUE(holder.running());
  holder.signal(SIGTERM);
  EXPECT_EQ(holder.wait_for(), 0);
}

TEST_F(CliRunTest, ForwardsSigtermToTheCommandAndReleases) {
  const std::string ready = scratch_.file("ready");
  CliProcess process(run_sh("run:forward", "trap 'exit 3' TERM; touch '" + ready + "'; while :; do sleep 0.05; done"));
  ASSERT_TRUE(appears(ready));
  process.signal(SIGTERM);
  EXPECT_EQ(process.wait_for(), 3) << process.err();
  EXPECT_FALSE(exists("run:forward"));
}

TEST_F(CliRunTest, AHolderKilledWithSigkillFreesTheLockWithinItsLease) {
  const std::string pid_file = scratch_.file("pid");
  auto holder = std::make_unique<CliProcess>(
      run_sh("run:crash", "echo $$ > '" + pid_file + "'; exec sleep 30", {"--lease", "1s"}));
  ASSERT_TRUE(eventually([&] { return read_file(pid_file).find('\n') != std::string::npos; }));
  ASSERT_TRUE(exists("run:crash"));
  holder->signal(SIGKILL);
  EXPECT_EQ(holder->wait_for(), 128 + SIGKILL);
  ::kill(std::stoi(read_file(pid_file)), SIGKILL);  // the orphaned command

  // Nobody renews it any more: a waiter gets it once the 1 s lease runs out.
  const CliResult next = run_cli(run_sh("run:crash", "echo next", {"--lease", "1s", "--wait", "5s"}));
  EXPECT_EQ(next.status, 0) << next.err;
  EXPECT_EQ(next.out, "next\n");
}

TEST_F(CliRunTest, ALockLostWhileTheCommandRunsTerminatesIt) {
  const std::string ready = scratch_.file("ready");
  const std::string terminated = scratch_.file("terminated");
  CliProcess process(run_sh(
      "run:lost",
      "trap 'echo TERM > \"" + terminated + "\"; exit 0' TERM; touch '" + ready + "'; while :; do sleep 0.05; done",
      {"--lease", "900ms", "--kill-grace", "400ms"}));
  ASSERT_TRUE(appears(ready));
  server().command({"DEL", "run:lost"});  // the next renewal (every 300 ms) finds it gone
  EXPECT_EQ(process.wait_for(), kLockLost) << process.err();
  EXPECT_EQ(read_file(terminated), "TERM\n");
  EXPECT_THAT(process.err(), HasSubstr("lost lock 'run:lost'"));
  EXPECT_THAT(process.err(), HasSubstr(url().substr(std::string("redis://").size())));
}

// Issue #22: --max-hold 1s stops a command that would run for 30 s as on
// any loss (SIGTERM to its group, exit 75), the lease then lapses, and the
// next holder gets the lock.
TEST_F(CliRunTest, MaxHoldStopsTheCommandAsALostLock) {
  const std::string ready = scratch_.file("ready");
  const std::string finished = scratch_.file("finished");
  CliProcess process(run_sh("run:max-hold", "touch '" + ready + "'; sleep 30; touch '" + finished + "'",
                            {"--max-hold", "1s", "--lease", "2s", "--kill-grace", "400ms"}));
  ASSERT_TRUE(appears(ready));
  EXPECT_EQ(process.wait_for(), kLockLost) << process.err();
  EXPECT_THAT(process.err(), HasSubstr("lost lock 'run:max-hold'"));
  EXPECT_THAT(process.err(), HasSubstr("--max-hold"));
  EXPECT_FALSE(file_exists(finished)) << "stopped, not run to its end";

  const CliResult next = run_cli(run_sh("run:max-hold", "echo next", {"--wait", "20s"}));
  EXPECT_EQ(next.status, 0) << next.err;
  EXPECT_EQ(next.out, "next\n");
}

// Issue #53: --lock-delay keeps a SIGKILLed holder's lock from the others
// for the delay beyond its lease (it is the key's expiry: PTTL and status
// show it), while a clean exit releases at once whatever the delay.
TEST_F(CliRunTest, LockDelayOutlivesAKilledHolderButNotACleanExit) {
  const CliResult clean = run_cli(run_sh("run:delay", "true", {"--lock-delay", "1h"}));
  EXPECT_EQ(clean.status, 0) << clean.err;
  EXPECT_FALSE(exists("run:delay")) << "a clean exit releases: no delay";

  const std::string pid_file = scratch_.file("pid");
  auto holder = std::make_unique<CliProcess>(
      run_sh("run:delay", "echo $$ > '" + pid_file + "'; exec sleep 30", {"--lease", "1s", "--lock-delay", "5s"}));
  ASSERT_TRUE(eventually([&] { return read_file(pid_file).find('\n') != std::string::npos; }));
  const std::int64_t armed_ms = pttl_ms("run:delay");
  EXPECT_GT(armed_ms, 1'000) << "the lease and the delay: more than the lease alone";
  EXPECT_LE(armed_ms, 6'000);
  const CliResult status = run_cli({"status", "--redis", url(), "run:delay"});
  EXPECT_THAT(status.out, HasSubstr("lock-delay 5s")) << status.out << status.err;
  const CliResult listed = run_cli({"ls", "--redis", url(), "run:delay"});
  EXPECT_THAT(listed.out, HasSubstr("(lock-delay 5s)")) << listed.out << listed.err;
  holder->signal(SIGKILL);
  EXPECT_EQ(holder->wait_for(), 128 + SIGKILL);
  ::kill(std::stoi(read_file(pid_file)), SIGKILL);  // the orphaned command

  // Nobody renews it; it is still held for what is left of lease and delay.
  EXPECT_EQ(run_cli(run_sh("run:delay", "echo no", {"-n"})).status, kConflict);
  const std::int64_t left_ms = pttl_ms("run:delay");
  ASSERT_GT(left_ms, 0);
  const auto waited_from = std::chrono::steady_clock::now();
  const CliResult next = run_cli(run_sh("run:delay", "echo next", {"--wait", "20s"}));
  EXPECT_EQ(next.status, 0) << next.err;
  EXPECT_EQ(next.out, "next\n");
  // A lower bound only: the key cannot expire before its PTTL ran out.
  EXPECT_GE(std::chrono::steady_clock::now() - waited_from, milliseconds(left_ms) - milliseconds(100));
}

// A command stopped by SIGSTOP keeps a forwarded SIGTERM pending until it
// is continued: run continues it, so it ends at once rather than holding
// the lock until someone sends SIGCONT (or a kill grace that never comes:
// a forwarded signal arms none).
TEST_F(CliRunTest, ASigtermReachesAStoppedCommand) {
  const std::string pid_file = scratch_.file("pid");
  CliProcess process(run_sh(
      "run:stopped", "echo $$ > '" + pid_file + ".tmp'; mv '" + pid_file + ".tmp' '" + pid_file + "'; exec sleep 30"));
  ASSERT_TRUE(appears(pid_file));
  const pid_t command = static_cast<pid_t>(std::stol(read_file(pid_file)));
  ASSERT_EQ(::kill(command, SIGSTOP), 0);
  ASSERT_TRUE(eventually([&] {
    const std::string stat = read_file("/proc/" + std::to_string(command) + "/stat");
    const std::size_t after_name = stat.rfind(") ");
    return after_name != std::string::npos && stat.compare(after_name + 2, 1, "T") == 0;
  }));
  EXPECT_TRUE(exists("run:stopped"));
  process.signal(SIGTERM);
  EXPECT_EQ(process.wait_for(), 128 + SIGTERM) << process.err();
  EXPECT_FALSE(exists("run:stopped"));
}

TEST_F(CliRunTest, ACommandIgnoringSigtermIsKilledAfterTheGrace) {
  const std::string ready = scratch_.file("ready");
  CliProcess process(run_sh("run:stubborn", "trap '' TERM; touch '" + ready + "'; exec sleep 30",
                            {"--lease", "900ms", "--kill-grace", "300ms"}));
  ASSERT_TRUE(appears(ready));
  server().command({"DEL", "run:stubborn"});
  EXPECT_EQ(process.wait_for(), kLockLost) << process.err();
  EXPECT_THAT(process.err(), HasSubstr("SIGKILL after 300ms"));
}

TEST_F(CliRunTest, ForceUnlockMakesTheHolderLoseTheLock) {
  const std::string ready = scratch_.file("ready");
  CliProcess holder(
      run_sh("run:forced", "touch '" + ready + "'; exec sleep 30", {"--lease", "900ms", "--kill-grace", "400ms"}));
  ASSERT_TRUE(appears(ready));
  const CliResult unconfirmed = run_cli({"unlock", "--redis", url(), "run:forced"});
  EXPECT_EQ(unconfirmed.status, kUsage);
  EXPECT_THAT(unconfirmed.err, HasSubstr("--force"));
  EXPECT_TRUE(exists("run:forced"));

  const CliResult unlocked = run_cli({"unlock", "--force", "--redis", url(), "run:forced"});
  EXPECT_EQ(unlocked.status, 0) << unlocked.err;
  EXPECT_FALSE(exists("run:forced"));
  EXPECT_EQ(holder.wait_for(), kLockLost) << holder.err();  // sleep ends by SIGTERM

  const CliResult again = run_cli({"unlock", "--force", "--redis", url(), "run:forced"});
  EXPECT_EQ(again.status, 1);
  EXPECT_THAT(again.err, HasSubstr("was not locked"));
}

TEST_F(CliRunTest, RedisStoppingWhileHeldTerminatesTheCommand) {
  RedisServer own;
  const std::string ready = scratch_.file("ready");
  const std::string terminated = scratch_.file("terminated");
  CliProcess process(
      {"run", "--redis", own.url(), "--lease", "900ms", "--kill-grace", "400ms", "run:down", "--", "sh", "-c",
       "trap 'echo TERM > \"" + terminated + "\"; exit 0' TERM; touch '" + ready + "'; while :; do sleep 0.05; done"});
  ASSERT_TRUE(appears(ready));
  own.stop();
  EXPECT_EQ(process.wait_for(), kLockLost) << process.err();
  EXPECT_EQ(read_file(terminated), "TERM\n");
  // Whichever enforcer gets there first: turnstile, finding Redis
  // unreachable, or (turnstile starved of CPU on a loaded host) its
  // guardian at the lease deadline. Either stops the command in time.
  const bool told = process.err().find("unreachable") != std::string::npos ||
                    process.err().find("the guardian process sent SIGTERM") != std::string::npos;
  EXPECT_TRUE(told) << process.err();
  EXPECT_THAT(process.err(), HasSubstr("127.0.0.1:" + std::to_string(own.port())));
}

// Issue #53: --warn-before 1s --warn-signal USR1: Redis goes away while
// the command runs; a second before the lease's deadline the command gets
// SIGUSR1 and a line says the lock is at risk, then it is stopped as on
// any loss (SIGTERM, exit 75).
TEST_F(CliRunTest, WarnBeforeSignalsTheCommandBeforeALoss) {
  RedisServer own;
  const std::string ready = scratch_.file("ready");
  const std::string warned = scratch_.file("warned");
  const std::string terminated = scratch_.file("terminated");
  CliProcess process({"run", "--redis", own.url(), "--lease", "3s", "--kill-grace", "400ms", "--warn-before", "1s",
                      "--warn-signal", "USR1", "run:warn", "--", "sh", "-c",
                      "trap 'echo USR1 >> \"" + warned + "\"' USR1; trap 'echo TERM > \"" + terminated +
                          "\"; exit 0' TERM; touch '" + ready + "'; while :; do sleep 0.05; done"});
  ASSERT_TRUE(appears(ready));
  own.stop();
  EXPECT_EQ(process.wait_for(), kLockLost) << process.err();
  EXPECT_EQ(read_file(terminated), "TERM\n");
  // Told by turnstile (not its guardian, which enforces the deadline alone
  // when turnstile is starved of CPU): the warning came first.
  if (process.err().find("the guardian process sent SIGTERM") == std::string::npos) {
    EXPECT_THAT(process.err(), HasSubstr("lock 'run:warn' at risk: no renewal confirmed; lost in"));
    EXPECT_THAT(process.err(), HasSubstr("sending SIGUSR1 to the command's group"));
    EXPECT_EQ(read_file(warned), "USR1\n");
    EXPECT_LT(process.err().find("at risk"), process.err().find("lost lock")) << process.err();
  }
}

// A lock-delay per name, from the policy file (lock_delay_ms); the flag
// overrides it.
TEST_F(CliRunTest, TakesTheLockDelayOfTheConfigFile) {
  const std::string config = scratch_.file("locks.toml");
  std::ofstream(config) << "[[rule]]\nmatch = \"cfg:delay:*\"\nlock_delay_ms = 7000\n";
  for (const bool flag : {false, true}) {
    const std::string ready = scratch_.file(flag ? "ready-flag" : "ready");
    std::vector<std::string> options = {"--config", config};
    if (flag) options.insert(options.end(), {"--lock-delay", "3s"});
    CliProcess holder(run_sh("cfg:delay:1", "touch '" + ready + "'; exec sleep 30", options));
    ASSERT_TRUE(eventually([&] { return file_exists(ready); }));
    const CliResult status = run_cli({"status", "--redis", url(), "cfg:delay:1"});
    EXPECT_THAT(status.out, HasSubstr(flag ? "lock-delay 3s" : "lock-delay 7s")) << status.out;
    holder.signal(SIGTERM);
    EXPECT_EQ(holder.wait_for(), 128 + SIGTERM) << holder.err();
  }
}

TEST_F(CliRunTest, UsesTheFlavorOfTheConfigFile) {
  const std::string config = scratch_.file("locks.toml");
  std::ofstream(config) << "[[rule]]\nmatch = \"cfg:token:*\"\nflavor = \"token\"\nlease_ms = 5000\n";
  const CliResult token = run_cli(run_sh("cfg:token:1", "echo \"[$TURNSTILE_FENCING_TOKEN]\"", {"--config", config}));
  EXPECT_EQ(token.status, 0) << token.err;
  EXPECT_EQ(token.out, "[]\n");  // the token flavor has none; the default (reentrant) has one
  const CliResult other = run_cli(run_sh("cfg:other", "echo \"[$TURNSTILE_FENCING_TOKEN]\"", {"--config", config}));
  EXPECT_EQ(other.status, 0) << other.err;
  EXPECT_THAT(other.out, Not(HasSubstr("[]")));

  // While held under the config, the key is a token lock's string.
  CliProcess holder({"run", "--redis", url(), "--config", config, "cfg:token:2"});
  ASSERT_TRUE(eventually([&] { return holder.out().find("holding") != std::string::npos; })) << holder.err();
  EXPECT_EQ(server().command({"TYPE", "cfg:token:2"}), "string");
  const std::string pttl = server().command({"PTTL", "cfg:token:2"});
  EXPECT_GT(std::stoll(pttl.substr(pttl.find(' ') + 1)), 1000) << pttl;  // lease_ms = 5000
  holder.signal(SIGINT);
  EXPECT_EQ(holder.wait_for(), 0);
}

TEST_F(CliRunTest, ABadConfigFileIsAUsageErrorWithItsLine) {
  const std::string config = scratch_.file("bad.toml");
  std::ofstream(config) << "[[rule]]\nmatch = \"x\"\nflavor = \"fiar\"\n";
  const CliResult result = run_cli(run_sh("cfg:bad", "true", {"--config", config}));
  EXPECT_EQ(result.status, kUsage);
  EXPECT_THAT(result.err, HasSubstr("bad.toml:3:"));
  EXPECT_THAT(result.err, HasSubstr("fiar"));
}

// ---- errors: one clear line, the documented status, no hang -------------

TEST_F(CliRunTest, UnreachableRedisIsStatus69NamingTheAddressNotThePassword) {
  const int port = free_loopback_port();
  const CliResult result =
      run_cli({"run", "--redis", "redis://:s3cret@127.0.0.1:" + std::to_string(port), "err:down", "--", "true"});
  EXPECT_EQ(result.status, kUnavailable) << result.err;
  EXPECT_THAT(result.err, HasSubstr("127.0.0.1:" + std::to_string(port)));
  EXPECT_THAT(result.err, Not(HasSubstr("s3cret")));
  // The error line, after the warning that a password in argv is public.
  EXPECT_THAT(result.err, HasSubstr("warning: the password in --redis is visible"));
  EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 2) << result.err;
}

// Issue #50, row 6: a user whose ACL refuses a command a script calls
// (TIME, which a fenced lock's first token reads; PUBLISH, which a release
// announces) is told so with 69 and "refused by ACL", not 70 "internal
// error"; and the refused script leaves no lock behind (the token, whose
// floor reads TIME, is drawn before anything is written).
TEST_F(CliRunTest, AScriptCommandRefusedByAclIsRefusal69AndLeavesNoLock) {
  const std::string password_url = "redis://acl-user:acl-pass@" + url().substr(std::string("redis://").size());
  struct Case {
    const char* refused;
    std::vector<std::string> flavor;
  };
  for (const Case& refusal : {Case{"-time", {}}, Case{"-time", {"--fair"}}, Case{"-publish", {}}}) {
    ASSERT_EQ(server().command(
                  {"ACL", "SETUSER", "acl-user", "reset", "on", ">acl-pass", "~*", "&*", "+@all", refusal.refused}),
              "OK");
    const std::string name = std::string("err:acl") + refusal.refused + (refusal.flavor.empty() ? "" : "-fair");
    std::vector<std::string> args = {"run", "--redis", password_url};
    args.insert(args.end(), refusal.flavor.begin(), refusal.flavor.end());
    args.insert(args.end(), {name, "--", "true"});
    const CliResult result = run_cli(args);
    EXPECT_EQ(result.status, kUnavailable) << name << ": " << result.err;
    EXPECT_THAT(result.err, HasSubstr("refused by ACL")) << name;
    EXPECT_THAT(result.err, Not(HasSubstr("internal error"))) << name;
    EXPECT_THAT(result.err, Not(HasSubstr("acl-pass"))) << name;
    EXPECT_FALSE(exists(name)) << name << ": a lock held by nobody";
  }
}

// Issue #50: a password given in --redis stayed in turnstile's command line
// and in its guardian's (a fork), for every user's ps. Once parsed, it is
// masked in place; the command reads its parent's command line to check.
TEST_F(CliRunTest, APasswordInTheUrlIsMaskedInTheCommandLine) {
  RedisServer guarded({"--requirepass", "s3cret"});
  const std::string url = "redis://:s3cret@127.0.0.1:" + std::to_string(guarded.port());
  const CliResult result =
      run_cli({"run", "--redis", url, "err:masked", "--", "sh", "-c", "tr '\\0' ' ' < /proc/$PPID/cmdline"});
  EXPECT_EQ(result.status, 0) << result.err;
  EXPECT_THAT(result.out, HasSubstr("redis://:xxxxxx@127.0.0.1:")) << result.out;
  EXPECT_THAT(result.out, Not(HasSubstr("s3cret"))) << result.out;
}

TEST_F(CliRunTest, TheRedisUrlComesFromTheEnvironment) {
  const CliResult result = run_cli({"run", "err:env", "--", "true"}, {{"TURNSTILE_REDIS", url()}});
  EXPECT_EQ(result.status, 0) << result.err;
}

TEST_F(CliRunTest, WrongPasswordIsRefusal69) {
  RedisServer guarded({"--requirepass", "right"});
  const CliResult result = run_cli(
      {"run", "--redis", "redis://:wrong@127.0.0.1:" + std::to_string(guarded.port()), "err:auth", "--", "true"});
  EXPECT_EQ(result.status, kUnavailable) << result.err;
  EXPECT_THAT(result.err, Not(HasSubstr("wrong@")));
}

TEST_F(CliRunTest, ADatabaseOutOfRangeIsRefusal69WithRedisReason) {
  const CliResult result = run_cli({"run", "--redis", url() + "/99", "err:db", "--", "true"});
  EXPECT_EQ(result.status, kUnavailable) << result.err;
  EXPECT_THAT(result.err, HasSubstr("refused to select the URL's database"));
  EXPECT_THAT(result.err, HasSubstr("DB index is out of range"));
  EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << result.err;
}

// The password never needs argv, and the command never receives it.
TEST_F(CliRunTest, ThePasswordComesFromTheEnvironmentOrAFileAndNeverReachesTheCommand) {
  RedisServer guarded({"--requirepass", "pa55word"});
  const std::string plain_url = "redis://127.0.0.1:" + std::to_string(guarded.port());
  const std::string dump = "env | grep -c pa55word || true";

  const CliResult from_variable = run_cli({"run", "--redis", plain_url, "pw:env", "--", "sh", "-c", dump},
                                          {{"TURNSTILE_REDIS_PASSWORD", "pa55word"}});
  EXPECT_EQ(from_variable.status, 0) << from_variable.err;
  EXPECT_EQ(from_variable.out, "0\n");
  EXPECT_THAT(from_variable.err, Not(HasSubstr("warning")));

  const std::string file = scratch_.file("password");
  std::ofstream(file) << "pa55word\n";
  const CliResult from_file =
      run_cli({"run", "--redis", plain_url, "--password-file", file, "pw:file", "--", "sh", "-c", dump});
  EXPECT_EQ(from_file.status, 0) << from_file.err;
  EXPECT_EQ(from_file.out, "0\n");

  // A URL with the password, from the environment: works, and the command
  // gets neither the variable nor the URL.
  const std::string secret_url = "redis://:pa55word@127.0.0.1:" + std::to_string(guarded.port());
  const CliResult from_url = run_cli({"run", "pw:url", "--", "sh", "-c", dump}, {{"TURNSTILE_REDIS", secret_url}});
  EXPECT_EQ(from_url.status, 0) << from_url.err;
  EXPECT_EQ(from_url.out, "0\n");

  // In argv it still works, with a warning naming the safe ways.
  const CliResult in_argv = run_cli({"run", "--redis", secret_url, "pw:argv", "--", "true"});
  EXPECT_EQ(in_argv.status, 0) << in_argv.err;
  EXPECT_THAT(in_argv.err, HasSubstr("TURNSTILE_REDIS_PASSWORD"));
  EXPECT_THAT(in_argv.err, Not(HasSubstr("pa55word")));

  // redis-cli's variable works too (read after ours), and stays the
  // command's: it is redis-cli's to use.
  const CliResult from_redis_cli =
      run_cli({"run", "--redis", plain_url, "pw:rediscli", "--", "sh", "-c", dump}, {{"REDISCLI_AUTH", "pa55word"}});
  EXPECT_EQ(from_redis_cli.status, 0) << from_redis_cli.err;
  EXPECT_EQ(from_redis_cli.out, "1\n");
  const CliResult ours_first = run_cli({"run", "--redis", plain_url, "pw:ours-first", "--", "true"},
                                       {{"TURNSTILE_REDIS_PASSWORD", "pa55word"}, {"REDISCLI_AUTH", "wrong"}});
  EXPECT_EQ(ours_first.status, 0) << ours_first.err;

  // The file's password wins over a wrong one in the variable.
  const CliResult wrong_variable =
      run_cli({"run", "--redis", plain_url, "--password-file", file, "pw:order", "--", "true"},
              {{"TURNSTILE_REDIS_PASSWORD", "wrong"}});
  EXPECT_EQ(wrong_variable.status, 0) << wrong_variable.err;
}

// --askpass prompts on the controlling terminal (a pseudo-terminal here,
// typed on as a user would), with echo off: the password never shows on
// the terminal nor reaches the command. Without a terminal: a usage error
// naming the other ways, before anything is sent.
TEST_F(CliRunTest, AskpassPromptsOnTheTerminalWithoutEcho) {
  RedisServer guarded({"--requirepass", "pa55word"});
  const std::string plain_url = "redis://127.0.0.1:" + std::to_string(guarded.port());
  CliProcess asking(
      {"run", "--askpass", "--redis", plain_url, "pw:ask", "--", "sh", "-c", "env | grep -c pa55word || true"}, {},
      {.stderr_on_terminal = true, .own_session = true});
  ASSERT_TRUE(eventually([&] { return asking.err().find("Redis password: ") != std::string::npos; })) << asking.err();
  asking.type_on_terminal("pa55word\n");
  EXPECT_EQ(asking.wait_for(), 0) << asking.err();
  EXPECT_EQ(asking.out(), "0\n");
  EXPECT_THAT(asking.err(), Not(HasSubstr("pa55word")));
  EXPECT_THAT(asking.err(), Not(HasSubstr("warning")));

  CliProcess wrong({"run", "--askpass", "--redis", plain_url, "pw:ask", "--", "true"}, {},
                   {.stderr_on_terminal = true, .own_session = true});
  ASSERT_TRUE(eventually([&] { return wrong.err().find("Redis password: ") != std::string::npos; })) << wrong.err();
  wrong.type_on_terminal("guess\n");
  EXPECT_EQ(wrong.wait_for(), kUnavailable) << wrong.err();
  EXPECT_THAT(wrong.err(), Not(HasSubstr("guess")));

  CliProcess no_terminal({"run", "--askpass", "--redis", plain_url, "pw:ask", "--", "true"}, {}, {.own_session = true});
  EXPECT_EQ(no_terminal.wait_for(), kUsage);
  EXPECT_THAT(no_terminal.err(), HasSubstr("--askpass: no terminal to ask on"));
  EXPECT_EQ(guarded.command({"EXISTS", "pw:ask"}), "(integer) 0");
}

// Issue #50 (row 3): Ctrl-Z at an interactive shell stopped the command,
// whose group has the terminal, and nothing else: turnstile (the shell's
// job) ran on, so the prompt never came back, the stopped group heeded no
// ^C, and the lock stayed held and renewed for ever. Now the stop is
// refused, told on the terminal, and the command goes on. (Typed on a
// pseudo-terminal that turnstile has as its controlling one, stdin
// included, as a shell's foreground job has it.)
TEST_F(CliRunTest, CtrlZAtTheTerminalIsRefusedNotAStopForEver) {
  CliProcess job(run_sh("run:ctrl-z", "echo started; read line; echo \"finished $line\""), {},
                 {.stderr_on_terminal = true, .own_session = true, .stdin_on_terminal = true});
  ASSERT_TRUE(eventually([&] { return job.out().find("started") != std::string::npos; })) << job.err();
  EXPECT_TRUE(exists("run:ctrl-z"));
  job.type_on_terminal("\x1a");  // Ctrl-Z: SIGTSTP to the terminal's foreground group, the command's
  ASSERT_TRUE(eventually([&] { return job.err().find("Ctrl-Z refused") != std::string::npos; })) << job.err();
  EXPECT_THAT(job.err(), HasSubstr("continued it"));
  job.type_on_terminal("go\n");  // the command reads on: it was continued
  EXPECT_EQ(job.wait_for(), 0) << job.err();
  EXPECT_THAT(job.out(), HasSubstr("finished go"));
  EXPECT_FALSE(exists("run:ctrl-z"));
}

TEST_F(CliRunTest, BadInputIsAUsageError) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"run", "--redis", url(), "", "--", "true"}, "name must not be empty"},
      {{"run", "--redis", url(), "--wait", "5x", "err:usage", "--", "true"}, "--wait: malformed duration '5x'"},
      {{"run", "--redis", url(), "-w", "-2", "err:usage", "--", "true"}, "--wait: malformed duration '-2'"},
      {{"run", "--redis", url(), "--lease", "2", "err:usage", "--", "true"}, "missing unit"},  // seconds only for -w
      {{"run", "--redis", url(), "-c", "true", "err:usage", "--", "true"}, "not both"},
      {{"run", "--redis", url(), "-s", "-x", "err:usage", "--", "true"}, "excludes"},
      {{"run", "--redis", url(), "--lease", "-1s", "err:usage", "--", "true"}, "--lease: malformed duration"},
      {{"run", "--redis", url(), "--lease", "10ms", "err:usage", "--", "true"}, "must be at least 100ms, got 10ms"},
      // --ttl, the old spelling, is --lease (a deprecated alias); not both.
      {{"run", "--redis", url(), "--ttl", "10ms", "err:usage", "--", "true"}, "must be at least 100ms, got 10ms"},
      {{"run", "--redis", url(), "--ttl", "1s", "--lease", "1s", "err:usage", "--", "true"}, "excludes"},
      {{"run", "--redis", url(), "--kill-grace", "1.0001s", "err:usage", "--", "true"}, "finer than 1 ms"},
      // The grace comes out of the lease: more than half of it leaves too little.
      {{"run", "--redis", url(), "--lease", "1s", "--kill-grace", "501ms", "err:usage", "--", "true"}, "at most half"},
      {{"run", "--redis", url(), "--kill-grace", "20s", "err:usage", "--", "true"}, "--lease 30s"},
      {{"run", "--redis", url(), "--unreachable-limit", "soon", "err:usage", "--", "true"}, "--unreachable-limit"},
      {{"run", "--redis", url(), "--max-hold", "0", "err:usage", "--", "true"}, "--max-hold must be above zero"},
      {{"run", "--redis", url(), "--max-hold", "3000h", "err:usage", "--", "true"}, "--max-hold"},
      {{"run", "--redis", url(), "--lock-delay", "2h", "err:usage", "--", "true"}, "--lock-delay must be within"},
      // A warning healthy renewals would give (more than half the window).
      {{"run", "--redis", url(), "--warn-before", "15s", "err:usage", "--", "true"}, "--warn-before must be"},
      {{"run", "--redis", url(), "--warn-signal", "USR1", "err:usage", "--", "true"}, "goes with --warn-before"},
      {{"run", "--redis", url(), "--warn-before", "2s", "--warn-signal", "KILL", "err:usage", "--", "true"},
       "would end or stop the command"},
      {{"run", "--redis", url(), "--warn-before", "2s", "--warn-signal", "USR9", "err:usage", "--", "true"},
       "unknown signal 'USR9'"},
      {{"run", "--redis", url(), "--permits", "0", "err:usage", "--", "true"}, "--permits must be within [1, 2^53"},
      // Lua counts are doubles: past 2^53 a count is refused before anything is written.
      {{"run", "--redis", url(), "--permits", "9223372036854775807", "err:usage", "--", "true"}, "2^53"},
      {{"run", "--redis", url(), "--permits", "9007199254740993", "err:usage", "--", "true"}, "2^53"},
      {{"run", "--redis", url(), "--password-file", scratch_.file("no-such-file"), "err:usage", "--", "true"},
       "--password-file: cannot read"},
      {{"run", "--redis", url(), "--fair", "--token", "err:usage", "--", "true"}, "excludes"},
      {{"run", "--redis", url(), "-n", "--wait", "1s", "err:usage", "--", "true"}, "excludes"},
      {{"run", "--redis", url(), "-E", "256", "err:usage", "--", "true"}, "256"},
      {{"run", "--redis", "http://127.0.0.1", "err:usage", "--", "true"}, "--redis"},
      {{"run", "--redis", url(), "--config", scratch_.file("missing.toml"), "err:usage"}, "missing.toml"},
      {{"run"}, "name"},
      {{"frobnicate"}, "frobnicate"},
      {{}, "subcommand"},
  };
  for (const Case& c : cases) {
    const CliResult result = run_cli(c.args);
    EXPECT_EQ(result.status, kUsage) << ::testing::PrintToString(c.args) << ": " << result.err;
    EXPECT_THAT(result.err, HasSubstr(c.message)) << ::testing::PrintToString(c.args);
    EXPECT_THAT(result.err, HasSubstr("turnstile: ")) << ::testing::PrintToString(c.args);
  }
  EXPECT_FALSE(exists("err:usage"));
}

TEST_F(CliRunTest, ANameHoldingAnotherKindOfValueIsStatus65AndUntouched) {
  server().command({"RPUSH", "err:list", "a"});
  const CliResult list = run_cli(run_sh("err:list", "echo ran"));
  EXPECT_EQ(list.status, kWrongKind) << list.err;
  EXPECT_EQ(list.out, "");
  EXPECT_THAT(list.err, HasSubstr("'err:list' holds another kind of value"));
  EXPECT_EQ(server().command({"LRANGE", "err:list", "0", "-1"}), "[\"a\"]");

  server().command({"HSET", "err:hash", "field", "1"});
  const CliResult token_on_hash = run_cli(run_sh("err:hash", "echo ran", {"--token"}));
  EXPECT_EQ(token_on_hash.status, kWrongKind) << token_on_hash.err;
  EXPECT_EQ(token_on_hash.out, "");

  // A side key of another type, met by redis.call inside the script: one
  // line naming that key and what it holds (not the script's SHA and line).
  server().command({"RPUSH", "{err:side}:timeout", "a"});
  const CliResult side = run_cli(run_sh("err:side", "echo ran", {"--permits", "1"}));
  EXPECT_EQ(side.status, kWrongKind) << side.err;
  EXPECT_EQ(side.out, "");
  EXPECT_THAT(side.err, HasSubstr("'{err:side}:timeout' holds a list"));
  EXPECT_THAT(side.err, Not(HasSubstr("user_script")));
  EXPECT_EQ(std::count(side.err.begin(), side.err.end(), '\n'), 1) << side.err;
  EXPECT_EQ(server().command({"LRANGE", "{err:side}:timeout", "0", "-1"}), "[\"a\"]");

  // A name with a newline prints escaped, on one line.
  server().command({"RPUSH", "err:new\nline", "a"});
  const CliResult newline = run_cli(run_sh("err:new\nline", "echo ran"));
  EXPECT_EQ(newline.status, kWrongKind) << newline.err;
  EXPECT_THAT(newline.err, HasSubstr("'err:new\\nline'"));
  EXPECT_EQ(std::count(newline.err.begin(), newline.err.end(), '\n'), 1) << newline.err;
}

TEST_F(CliRunTest, ACommandThatCannotRunIs127) {
  const CliResult result = run_cli({"run", "--redis", url(), "err:exec", "--", "/nonexistent/command"});
  EXPECT_EQ(result.status, 127);
  EXPECT_THAT(result.err, HasSubstr("cannot run '/nonexistent/command'"));
  EXPECT_FALSE(exists("err:exec"));
}

TEST_F(CliRunTest, HelpDocumentsTheExitStatuses) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--help"}, std::vector<std::string>{"run", "--help"}}) {
    const CliResult help = run_cli(args);
    EXPECT_EQ(help.status, 0);
    EXPECT_THAT(help.out, HasSubstr("Exit status"));
    EXPECT_THAT(help.out, HasSubstr("75       run: the lock was lost"));
    EXPECT_THAT(help.out, HasSubstr("69       Redis unreachable"));
    // Every "Excludes:" names what it excludes (the hidden --ttl left an
    // empty one after --lease, in the man page too).
    EXPECT_THAT(help.out, Not(::testing::ContainsRegex("Excludes: *($|\n|  )"))) << help.out;
  }
}

}  // namespace
}  // namespace turnstile::testing
