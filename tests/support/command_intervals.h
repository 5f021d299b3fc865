// support/command_intervals.h
//
// When did the commands run under a lock? The fault harness runs
// tests/faults/interval_logger as the command of `turnstile run`; each
// logger appends its pid, (optionally) its parent's pid, a CLOCK_MONOTONIC
// start instant, its fencing token and (optionally) a tag naming which of
// the test's processes ran it to a log file, and, if it held to the end, a
// stop line with its CLOCK_MONOTONIC instant just before it exits.
// CommandMonitor reads that file and watches every logged pid with a
// pidfd: a command's interval runs from the logger's own start instant
// until the last of its watched processes died. A command whose logger
// wrote its stop line ended there (after it the logger only exits, its
// parent shell only waited for it, and `turnstile run` releases only once
// they exited); any other death is when the monitor
// saw it (exact under SIGKILL up to the monitor's own scheduling lag,
// which can only lengthen an interval: conservative for the checks, and
// why a normal end is taken from the logger's own clock: a lag of a few ms
// on a loaded machine is longer than a fast handoff).
//
// check_intervals() then judges them: for a lock no two intervals overlap,
// for N permits never more than N at once, and tells what it measured (the
// longest overlap, and the takeover gaps between one command's end and the
// next one's start).
//
// The monitor never signals a process except in its destructor: every
// watched process still alive then is killed (SIGKILL through its pidfd, so
// never a reused pid) — the commands a killed `turnstile run` orphaned.

#ifndef TURNSTILE_TESTS_SUPPORT_COMMAND_INTERVALS_H_
#define TURNSTILE_TESTS_SUPPORT_COMMAND_INTERVALS_H_

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace turnstile::testing {

using MonotonicClock = std::chrono::steady_clock;  // CLOCK_MONOTONIC on Linux

struct CommandInterval {
  pid_t pid = 0;
  pid_t parent_pid = 0;  // 0: the parent is not part of the command
  MonotonicClock::time_point start;
  std::optional<MonotonicClock::time_point> stop;  // nullopt: still running
  // The first of its processes to die (e.g. the shell, when only it was
  // signalled and the logger was orphaned); nullopt while all run.
  std::optional<MonotonicClock::time_point> first_exit;
  std::string fencing_token;  // "-" if none
  std::string tag;            // the logger's INTERVAL_LOGGER_TAG; "" if none
};

class CommandMonitor {
 public:
  // Most commands one monitor follows (a bound on its work, not a limit any
  // test comes near).
  static constexpr std::size_t kMaxCommands = 256;

  // Follows the logger lines appended to `log_path` (created empty).
  explicit CommandMonitor(std::string log_path);
  ~CommandMonitor();
  CommandMonitor(const CommandMonitor&) = delete;
  CommandMonitor& operator=(const CommandMonitor&) = delete;

  const std::string& log_path() const;
  // A snapshot, in start order.
  std::vector<CommandInterval> intervals() const;
  // Waits until at least `count` commands started; false after `timeout`.
  bool wait_for_starts(std::size_t count, std::chrono::milliseconds timeout) const;
  // Waits until every command that started has stopped; false after `timeout`.
  bool wait_for_all_stopped(std::chrono::milliseconds timeout) const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

struct IntervalReport {
  int max_concurrent = 0;
  std::chrono::microseconds max_overlap{0};  // longest time two commands ran together
  // For each command after the first (in start order): its start minus the
  // latest end of the commands before it (negative: an overlap).
  std::vector<std::chrono::microseconds> takeover_gaps;
  // One line of what was measured, for the test log; it ends with each
  // command as "start/first exit/stop" in ms since the first start.
  std::string summary;
};

// Judges `intervals`; a command still running counts as running until now.
IntervalReport check_intervals(const std::vector<CommandInterval>& intervals);

std::string format_ms(std::chrono::microseconds duration);

}  // namespace turnstile::testing

#endif  // TURNSTILE_TESTS_SUPPORT_COMMAND_INTERVALS_H_
