// faults/fault_harness.h
//
// The fault harness: real `turnstile run` processes (tests/cli's
// CliProcess: fork/exec of the built binary, stopped by PID, SIGKILLed in
// teardown) whose command is interval_logger run through a shell —
// `sh -c 'interval_logger LOG HOLD --parent-too & wait'` — so the command
// is a process group with a grandchild, as real commands are. A
// CommandMonitor (support/command_intervals.h) records every command's
// interval; check() judges them and prints what it measured on one
// "fault-harness:" line (grep the test log for the numbers).
//
// Teardown order (members and locals destroyed in reverse): the test's
// CliProcesses are SIGKILLed first, then the monitor kills every command
// still alive (the orphans of a killed holder), then the scratch directory
// goes.

#ifndef TURNSTILE_TESTS_FAULTS_FAULT_HARNESS_H_
#define TURNSTILE_TESTS_FAULTS_FAULT_HARNESS_H_

#include <gtest/gtest.h>

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "cli/cli_process.h"
#include "turnstile/flavor.h"
#include "command_intervals.h"
#include "redis_server.h"

namespace turnstile::testing {

// Exit statuses of `turnstile run` the harness checks.
inline constexpr int kExitLockLost = 75;
inline constexpr int kExitSignalBase = 128;

// How long a logger holds when the test lets it end by itself.
inline constexpr std::chrono::milliseconds kShortHold{300};
// A generous bound on any "this must happen" wait beyond the ttls involved:
// reaching it is a failure, never a hang (a loaded 2-core machine included).
inline constexpr std::chrono::milliseconds kConditionTimeout{20'000};

class FaultTest : public ::testing::Test {
 protected:
  // The command: interval_logger holding `hold` (zero: until killed), run
  // through a shell that waits for it.
  std::vector<std::string> logged_command(std::chrono::milliseconds hold) const;

  // `run --redis URL options... NAME -- command...`.
  static std::vector<std::string> run_args(const std::string& url, const std::string& name,
                                           const std::vector<std::string>& options,
                                           const std::vector<std::string>& command);

  // Judges the intervals so far, prints the measurement with `what`, and
  // returns it.
  IntervalReport check(const std::string& what) const;
  // After a holder's death and the next holder's run: exactly two commands,
  // the first wholly dead (shell and logger) before the second started,
  // never two at once. Prints the measurement with `what`.
  void expect_dead_before_next(const std::string& what) const;

  ScratchDirectory scratch_;
  CommandMonitor monitor_{scratch_.file("intervals.log")};
};

// Waits until a hold-mode `turnstile run` (no command) says it holds.
::testing::AssertionResult holds(CliProcess& holder);

// Waits until someone waits for lock `name` of `flavor` on `server` (its
// channel, turnstile/key_layout.h, or a process's own wake channel of it
// has a subscriber).
::testing::AssertionResult waits(RedisServer& server, const std::string& name, Flavor flavor = Flavor::reentrant);

// Waits until fair lock `name`'s queue on `server` holds `count` waiters.
::testing::AssertionResult fair_queue_holds(RedisServer& server, const std::string& name, int count);

// "w<index>": the tag of a test's index-th waiter, and the environment that
// has its command log it (interval_logger's INTERVAL_LOGGER_TAG, read back
// as CommandInterval::tag).
std::string waiter_tag(int index);
CliProcess::Environment logger_tag(const std::string& tag);

// Milliseconds as `turnstile run` reads a duration ("1500ms").
std::string duration_arg(std::chrono::milliseconds duration);

// The children of process `parent`, read from /proc (each /proc/N/stat's
// fourth field is the parent's pid).
std::vector<pid_t> children_of(pid_t parent);
// A process's state letter from /proc/N/stat ('T': stopped); nullopt if
// it is gone.
std::optional<char> process_state(pid_t pid);

// A process the test did not start (a `turnstile run`'s guardian), held by
// a pidfd: a signal never reaches another process that reused its pid. If
// the test stopped it and did not continue it, it is continued when this
// goes (a failed assertion never leaves a stopped process behind).
class ForeignProcess {
 public:
  // The guardian of `holder` (a `turnstile run` with a command), whose
  // command's shell is `shell`: turnstile's one other child. Invalid
  // (valid() false) unless there is exactly one.
  static ForeignProcess guardian_of(CliProcess& holder, pid_t shell);

  ForeignProcess(ForeignProcess&& other) noexcept;
  ForeignProcess& operator=(ForeignProcess&&) = delete;
  ForeignProcess(const ForeignProcess&) = delete;
  ForeignProcess& operator=(const ForeignProcess&) = delete;
  ~ForeignProcess();

  bool valid() const { return pidfd_ >= 0; }
  pid_t pid() const { return pid_; }
  // SIGSTOP / SIGCONT through the pidfd; whether it was delivered (false
  // once the process is gone).
  bool stop();
  bool resume();

 private:
  ForeignProcess(pid_t pid, int pidfd) : pid_(pid), pidfd_(pidfd) {}

  pid_t pid_ = -1;
  int pidfd_ = -1;
  bool stopped_ = false;
};

}  // namespace turnstile::testing

#endif  // TURNSTILE_TESTS_FAULTS_FAULT_HARNESS_H_
