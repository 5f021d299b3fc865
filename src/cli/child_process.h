// cli/child_process.h
//
// The command `turnstile run` supervises. It runs in a process group of its
// own, so that the whole group (the command and everything it started) can
// be signalled at once, and it cannot outlive turnstile:
//
//   * the command gets PR_SET_PDEATHSIG SIGKILL (it dies with the turnstile
//     thread that forked it), and it execs only once turnstile has set up
//     the rest (a pipe it waits on), so there is no window without it;
//   * a guardian process (forked by turnstile, ignoring terminal signals)
//     waits on a pipe only turnstile writes to: if turnstile dies without
//     saying the command has finished (SIGKILL, the OOM killer, a crash),
//     the guardian SIGKILLs the command's whole process group at once. A
//     guardian killed by someone is replaced (replace_dead_guardian()).
//   * the guardian also enforces the lease by itself: it knows the lock's
//     local deadline (GuardianDeadline, a page shared with it, moved on
//     every confirmed acquisition and renewal) and, if that deadline
//     passes, sends the command's group SIGTERM (and SIGCONT, for a
//     stopped command), and SIGKILL after the kill grace, exactly when
//     turnstile itself would. So a stopped
//     turnstile (SIGSTOP, a debugger, an overloaded host) cannot keep the
//     command running past its lease, and a stopped guardian does not
//     either (turnstile enforces the same deadline). Both stopped at once,
//     or the command frozen with them, is the limit (docs/safety.md).
//
// When turnstile runs in the foreground of a terminal, the terminal is
// handed to the command's group while it runs (so it may read the terminal
// and gets Ctrl-C directly), and taken back afterwards.
//
// The command gets the signal mask and dispositions turnstile had on entry,
// and extra environment variables. It is reaped without blocking when
// SIGCHLD arrives.

#ifndef TURNSTILE_CLI_CHILD_PROCESS_H_
#define TURNSTILE_CLI_CHILD_PROCESS_H_

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace turnstile::cli {

// Changes to the inherited environment: name = value, or (nullopt) the
// name removed.
using EnvironmentVariables = std::vector<std::pair<std::string, std::optional<std::string>>>;

// The lease deadline the guardian enforces, in a page of memory shared
// with it (mapped before any guardian is forked, so the guardian reads it
// with plain atomic loads: no call back into turnstile, nothing that is
// not async-signal-safe). Made before the lock is asked for; outlives
// every ChildProcess given it.
class GuardianDeadline {
 public:
  // `kill_grace`: the guardian's time between SIGTERM and SIGKILL.
  // Throws std::runtime_error if the page cannot be mapped.
  explicit GuardianDeadline(std::chrono::nanoseconds kill_grace);
  ~GuardianDeadline();
  GuardianDeadline(const GuardianDeadline&) = delete;
  GuardianDeadline& operator=(const GuardianDeadline&) = delete;

  // The lock's local deadline (ClientOptions::on_lease_deadline) as a
  // CLOCK_MONOTONIC instant, nanoseconds since its epoch. Kept as the
  // latest told: it only moves later (turnstile never extends). Any
  // thread; async-signal-safe. Until the first call there is no deadline.
  void publish(std::int64_t instant_ns);
  // Whether a guardian reached the deadline and signalled the group.
  bool enforced() const;
  // For the next hold (`turnstile elect` campaigning again): no guardian
  // has enforced its deadline yet. Call with no command running; the next
  // hold's deadline is later than every earlier one.
  void next_hold();

  // What the guardian reads (the page's layout).
  struct Shared {
    std::atomic<std::int64_t> deadline_ns;  // kNone: none yet
    std::int64_t kill_grace_ns;             // set before any fork, then read only
    std::atomic<bool> enforced;
  };
  static constexpr std::int64_t kNone = INT64_MAX;
  static_assert(std::atomic<std::int64_t>::is_always_lock_free && std::atomic<bool>::is_always_lock_free,
                "lock-free atomics work across processes and in async-signal-safe code");

  Shared* shared() const { return shared_; }

 private:
  Shared* shared_ = nullptr;
};

class ChildProcess {
 public:
  // Forks and execs argv[0] (searched in PATH) with argv, and the current
  // environment changed by `environment` (set or removed, by name).
  // If exec fails, the child exits 127 (not found) or 126 (not executable)
  // and start() reports it: `exec_error` is then set. `deadline` (may be
  // null: the guardian then acts only when turnstile dies) is the lease
  // deadline every guardian of this command enforces; it must outlive the
  // ChildProcess.
  static ChildProcess start(const std::vector<std::string>& argv, const EnvironmentVariables& environment,
                            const GuardianDeadline* deadline = nullptr);

  ChildProcess(ChildProcess&&) noexcept;
  ChildProcess& operator=(ChildProcess&&) = delete;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  // A child still running (an error path) is killed with SIGKILL and reaped.
  ~ChildProcess();

  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0 && !wait_status_; }
  // Why exec failed ("No such file or directory"), if it did.
  const std::optional<std::string>& exec_error() const { return exec_error_; }

  // Sends `signal_number` to the command's whole process group if the
  // command still runs (stragglers after it ended are the guardian's),
  // then SIGCONT, so that a stopped command acts on it (as systemd does).
  // For the signals run passes on and stops with: each ends or interrupts.
  void signal(int signal_number);
  // The command's group is being stopped for good: SIGKILL to the whole
  // group, now, whether or not the command itself is still running.
  void kill_group();
  // If the guardian died while the command runs (someone killed it), starts
  // a new one for the command's group and returns true; false if it lives
  // (or the command is over). Call on SIGCHLD. Throws std::runtime_error
  // if the new guardian cannot be started.
  bool replace_dead_guardian();
  // Job control at a terminal: if the command was stopped from its
  // terminal (Ctrl-Z's SIGTSTP, or SIGTTIN / SIGTTOU) while it had the
  // terminal, continues its whole group at once and returns that signal;
  // else nullopt. A stopped command would keep its lock, renewed, for ever:
  // the shell's prompt does not come back (turnstile, its job, still runs)
  // and the stopped group heeds no ^C. A stop by anyone else (SIGSTOP from
  // an operator, a debugger) is left as it is. Call on SIGCHLD.
  std::optional<int> continue_if_stopped_at_terminal();
  // Reaps the child if it has ended, without blocking. Returns whether it
  // has ended (its waitpid status is then wait_status()).
  bool try_reap();
  int wait_status() const { return *wait_status_; }

 private:
  explicit ChildProcess(pid_t pid) : pid_(pid) {}
  // Tells the guardian the command is over and ends it (SIGKILL: a stopped
  // guardian must not hold turnstile up), then reaps it. Idempotent. Runs
  // before the command is reaped, so that no guardian signal can reach a
  // process group whose id was reused.
  void end_guardian();
  // Takes the terminal back. Idempotent.
  void take_terminal_back();

  pid_t pid_ = -1;
  const GuardianDeadline* deadline_ = nullptr;
  pid_t guardian_pid_ = -1;
  int guardian_fd_ = -1;        // write end of the guardian's pipe
  bool took_terminal_ = false;  // the terminal was handed to the command's group
  std::optional<int> wait_status_;
  std::optional<std::string> exec_error_;
};

}  // namespace turnstile::cli

#endif  // TURNSTILE_CLI_CHILD_PROCESS_H_
