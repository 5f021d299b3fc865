// fork/exec of the supervised command, with exec failures reported back to
// the parent through a close-on-exec pipe.

#include "cli/child_process.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string_view>
#include <tuple>
#include <utility>

#include "core/check.h"
#include "cli/exit_status.h"
#include "cli/signals.h"

namespace turnstile::cli {

namespace {

void close_quietly(int fd) {
  if (fd >= 0) ::close(fd);
}

// Waits for `pid` to end, retrying on EINTR.
void reap(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
}

constexpr std::int64_t kNanosPerSecond = 1'000'000'000;

// CLOCK_MONOTONIC in nanoseconds. Async-signal-safe.
std::int64_t monotonic_ns() {
  timespec now{};
  (void)clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<std::int64_t>(now.tv_sec) * kNanosPerSecond + now.tv_nsec;
}

// What the guardian's pipe said while it waited.
enum class PipeEvent {
  timed_out,  // `until` came first
  done,       // turnstile wrote 'd': the command is over
  closed,     // the pipe ended: turnstile is gone
};

// Waits on the guardian's pipe until it says something or CLOCK_MONOTONIC
// reaches `until` (GuardianDeadline::kNone: no time limit).
// Async-signal-safe.
PipeEvent wait_on_pipe(int fd, std::int64_t until) {
  for (;;) {
    timespec timeout{};
    timespec* limit = nullptr;
    if (until != GuardianDeadline::kNone) {
      const std::int64_t left = until - monotonic_ns();
      if (left <= 0) return PipeEvent::timed_out;
      timeout.tv_sec = static_cast<time_t>(left / kNanosPerSecond);
      timeout.tv_nsec = static_cast<long>(left % kNanosPerSecond);
      limit = &timeout;
    }
    pollfd readable{fd, POLLIN, 0};
    // ppoll: nanosecond timeouts (poll's milliseconds would round the
    // deadline up by up to 1 ms, out of a 2 ms stop margin). Errors
    // (EINTR, ENOMEM) are retried: the time is read again anyway.
    if (ppoll(&readable, 1, limit, nullptr) <= 0) continue;
    char byte = 0;
    const ssize_t got = ::read(fd, &byte, 1);
    if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (got == 1 && byte == 'd') return PipeEvent::done;
    if (got == 1) continue;
    return PipeEvent::closed;
  }
}

// The guardian: in a forked copy of turnstile, so only async-signal-safe
// calls. Waits on its pipe until turnstile says "done" ('d': it exits) or
// the pipe ends because turnstile died (it kills the group at once). With
// a `deadline`, it also stops the group by itself when the lease deadline
// passes: SIGTERM at it, SIGKILL a kill grace later, as turnstile would
// (whose own loop may be stopped). After that it keeps waiting for 'd', so
// that turnstile does not take it for killed and start another.
[[noreturn]] void run_guardian(int pipe_read_fd, pid_t group, GuardianDeadline::Shared* deadline) {
  // Terminal signals and a kill of turnstile's group do not reach it.
  (void)setpgid(0, 0);
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  for (int number : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGTSTP, SIGTTIN, SIGTTOU, SIGPIPE}) {
    (void)sigaction(number, &ignore, nullptr);
  }
  // Nothing else of turnstile's stays open here (sockets, the signalfd).
  const int fd = dup2(pipe_read_fd, 3) < 0 ? pipe_read_fd : 3;
  (void)close_range(fd + 1, ~0U, 0);
  const auto stand_down = [&](PipeEvent event) {
    if (event == PipeEvent::closed) (void)::kill(-group, SIGKILL);  // turnstile is gone: so is its command
    _exit(0);
  };
  for (;;) {
    const std::int64_t until = deadline == nullptr ? GuardianDeadline::kNone : deadline->deadline_ns.load();
    const PipeEvent event = wait_on_pipe(fd, until);
    if (event != PipeEvent::timed_out) stand_down(event);
    // Timed out (so there is a deadline): the deadline as it was when the
    // wait began has come; a renewal confirmed meanwhile moved it later.
    const std::int64_t lapsed = deadline->deadline_ns.load();
    if (lapsed > monotonic_ns()) continue;
    deadline->enforced.store(true);
    (void)::kill(-group, SIGTERM);
    (void)::kill(-group, SIGCONT);  // a stopped command acts on it at once
    // SIGKILL by the deadline's own schedule, even if this woke late.
    const PipeEvent in_grace = wait_on_pipe(fd, lapsed + deadline->kill_grace_ns);
    if (in_grace != PipeEvent::timed_out) stand_down(in_grace);
    (void)::kill(-group, SIGKILL);
    stand_down(wait_on_pipe(fd, GuardianDeadline::kNone));
  }
}

// A guardian for `group`, with its pipe: {pid, write end}. Throws
// std::runtime_error if the pipe or the fork fails (nothing is left open).
std::pair<pid_t, int> spawn_guardian(pid_t group, const GuardianDeadline* deadline) {
  int guardian_pipe[2] = {-1, -1};
  if (pipe2(guardian_pipe, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe2: ") + std::strerror(errno));
  const pid_t guardian = fork();
  if (guardian < 0) {
    const int error = errno;
    close_quietly(guardian_pipe[0]);
    close_quietly(guardian_pipe[1]);
    throw std::runtime_error(std::string("fork (guardian): ") + std::strerror(error));
  }
  // The guardian closes all but its read end.
  if (guardian == 0) run_guardian(guardian_pipe[0], group, deadline == nullptr ? nullptr : deadline->shared());
  ::close(guardian_pipe[0]);
  return {guardian, guardian_pipe[1]};
}

// Whether turnstile runs in the foreground of a terminal on its stdin.
bool in_terminal_foreground() { return isatty(STDIN_FILENO) == 1 && tcgetpgrp(STDIN_FILENO) == getpgrp(); }

// tcsetpgrp from a background group needs SIGTTOU blocked.
void give_terminal_to(pid_t group) {
  sigset_t ttou;
  sigset_t previous;
  sigemptyset(&ttou);
  sigaddset(&ttou, SIGTTOU);
  pthread_sigmask(SIG_BLOCK, &ttou, &previous);
  (void)tcsetpgrp(STDIN_FILENO, group);
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
}

}  // namespace

GuardianDeadline::GuardianDeadline(std::chrono::nanoseconds kill_grace) {
  void* page = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (page == MAP_FAILED) throw std::runtime_error(std::string("mmap: ") + std::strerror(errno));
  shared_ = new (page) Shared{};
  shared_->deadline_ns.store(kNone);
  shared_->kill_grace_ns = std::max<std::int64_t>(0, kill_grace.count());
  shared_->enforced.store(false);
}

GuardianDeadline::~GuardianDeadline() {
  shared_->~Shared();
  (void)munmap(shared_, sizeof(Shared));
}

void GuardianDeadline::publish(std::int64_t instant_ns) {
  std::int64_t known = shared_->deadline_ns.load();
  // Deadlines from the acquiring thread and the watchdog's may cross.
  while ((known == kNone || known < instant_ns) && !shared_->deadline_ns.compare_exchange_weak(known, instant_ns)) {
  }
}

bool GuardianDeadline::enforced() const { return shared_->enforced.load(); }

void GuardianDeadline::next_hold() { shared_->enforced.store(false); }

ChildProcess ChildProcess::start(const std::vector<std::string>& argv, const EnvironmentVariables& environment,
                                 const GuardianDeadline* deadline) {
  TURNSTILE_CHECK(!argv.empty());
  // Everything the child needs is prepared before fork: after it, only
  // async-signal-safe calls (the process may have other threads).
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);

  // The environment: ours minus the names `environment` sets or removes,
  // plus what it sets.
  std::vector<std::string> entries;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string_view text(*entry);
    bool overridden = false;
    for (const auto& [name, value] : environment) {
      overridden = overridden || (text.size() > name.size() && text.starts_with(name) && text[name.size()] == '=');
    }
    if (!overridden) entries.emplace_back(text);
  }
  for (const auto& [name, value] : environment) {
    if (value) entries.push_back(name + "=" + *value);
  }
  std::vector<char*> envp;
  envp.reserve(entries.size() + 1);
  for (std::string& entry : entries) envp.push_back(entry.data());
  envp.push_back(nullptr);

  // exec_pipe: an exec failure, back to us. go_pipe: the command waits on it
  // until the guardian stands (its own pipe is turnstile's life line).
  int exec_pipe[2] = {-1, -1};
  int go_pipe[2] = {-1, -1};
  const auto close_all = [&] {
    for (int fd : {exec_pipe[0], exec_pipe[1], go_pipe[0], go_pipe[1]}) close_quietly(fd);
  };
  if (pipe2(exec_pipe, O_CLOEXEC) != 0 || pipe2(go_pipe, O_CLOEXEC) != 0) {
    const int error = errno;
    close_all();
    throw std::runtime_error(std::string("pipe2: ") + std::strerror(error));
  }
  const bool foreground = in_terminal_foreground();
  const pid_t supervisor = getpid();

  const pid_t pid = fork();
  if (pid < 0) {
    const int error = errno;
    close_all();
    throw std::runtime_error(std::string("fork: ") + std::strerror(error));
  }
  if (pid == 0) {
    ::close(exec_pipe[0]);
    ::close(go_pipe[1]);
    (void)setpgid(0, 0);
    // Dies with the thread that forked it; if that already happened, now.
    (void)prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != supervisor) _exit(kExitSignalBase + SIGKILL);
    char go = 0;
    ssize_t got;
    do {
      got = ::read(go_pipe[0], &go, 1);
    } while (got < 0 && errno == EINTR);
    if (got != 1) _exit(kExitSignalBase + SIGKILL);  // turnstile gave up or died before the guardian stood
    if (foreground) give_terminal_to(getpid());
    restore_signals_for_child();
    execvpe(args[0], args.data(), envp.data());
    const int error = errno;
    (void)!::write(exec_pipe[1], &error, sizeof(error));
    _exit(error == ENOENT ? kExitCommandNotFound : kExitCannotExecute);
  }
  (void)setpgid(pid, pid);  // also here: no race with a signal to the group
  ChildProcess child(pid);
  child.deadline_ = deadline;
  child.took_terminal_ = foreground;
  ::close(exec_pipe[1]);
  ::close(go_pipe[0]);
  exec_pipe[1] = go_pipe[0] = -1;

  try {
    std::tie(child.guardian_pid_, child.guardian_fd_) = spawn_guardian(pid, deadline);
  } catch (...) {
    close_all();  // the command reads EOF on go and exits
    throw;
  }

  const char go = 'g';
  (void)!::write(go_pipe[1], &go, 1);
  ::close(go_pipe[1]);
  go_pipe[1] = -1;

  int error = 0;
  ssize_t got;
  do {
    got = ::read(exec_pipe[0], &error, sizeof(error));  // EOF at a successful exec
  } while (got < 0 && errno == EINTR);
  ::close(exec_pipe[0]);
  if (got == static_cast<ssize_t>(sizeof(error))) child.exec_error_ = std::strerror(error);
  return child;
}

ChildProcess::ChildProcess(ChildProcess&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)),
      deadline_(std::exchange(other.deadline_, nullptr)),
      guardian_pid_(std::exchange(other.guardian_pid_, -1)),
      guardian_fd_(std::exchange(other.guardian_fd_, -1)),
      took_terminal_(std::exchange(other.took_terminal_, false)),
      wait_status_(std::exchange(other.wait_status_, std::nullopt)),
      exec_error_(std::move(other.exec_error_)) {}

ChildProcess::~ChildProcess() {
  // Only on an error path: the command does not outlive its supervisor.
  if (running()) {
    kill_group();
    end_guardian();
    reap(pid_);
  }
  end_guardian();
  take_terminal_back();
}

void ChildProcess::signal(int signal_number) {
  if (!running()) return;
  ::kill(-pid_, signal_number);
  // A stopped command (SIGSTOP, Ctrl-Z of its own) would keep the signal
  // pending, and turnstile the lock, until continued: continue it.
  ::kill(-pid_, SIGCONT);
}

void ChildProcess::kill_group() {
  if (pid_ > 0) ::kill(-pid_, SIGKILL);
}

void ChildProcess::take_terminal_back() {
  if (took_terminal_) {
    give_terminal_to(getpgrp());
    took_terminal_ = false;
  }
}

void ChildProcess::end_guardian() {
  if (guardian_fd_ >= 0) {
    const char done = 'd';
    (void)!::write(guardian_fd_, &done, 1);
    ::close(guardian_fd_);
    guardian_fd_ = -1;
  }
  if (guardian_pid_ > 0) {
    // It has nothing left to do; a stopped one would never read 'd'.
    (void)::kill(guardian_pid_, SIGKILL);
    reap(guardian_pid_);
    guardian_pid_ = -1;
  }
}

bool ChildProcess::replace_dead_guardian() {
  if (!running() || guardian_pid_ <= 0) return false;
  int status = 0;
  pid_t reaped;
  do {
    reaped = waitpid(guardian_pid_, &status, WNOHANG);
  } while (reaped < 0 && errno == EINTR);
  if (reaped == 0) return false;  // alive
  // Killed by someone (it never exits on its own while the command runs):
  // the command would outlive a turnstile killed next. A new guardian
  // stands before this returns.
  close_quietly(guardian_fd_);
  guardian_fd_ = -1;
  guardian_pid_ = -1;
  std::tie(guardian_pid_, guardian_fd_) = spawn_guardian(pid_, deadline_);
  return true;
}

std::optional<int> ChildProcess::continue_if_stopped_at_terminal() {
  if (!running() || !took_terminal_) return std::nullopt;
  siginfo_t info{};
  int peeked;
  do {
    // Consumes the stop's report: each stop is seen once.
    peeked = waitid(P_PID, static_cast<id_t>(pid_), &info, WSTOPPED | WNOHANG);
  } while (peeked < 0 && errno == EINTR);
  if (peeked < 0 || info.si_pid == 0 || info.si_code != CLD_STOPPED) return std::nullopt;
  const int stop = info.si_status;
  if (stop != SIGTSTP && stop != SIGTTIN && stop != SIGTTOU) return std::nullopt;
  (void)::kill(-pid_, SIGCONT);
  return stop;
}

bool ChildProcess::try_reap() {
  if (wait_status_) return true;
  TURNSTILE_CHECK(pid_ > 0);
  // Looked at without reaping first: while the command is a zombie its pid
  // (and so its group id) cannot be reused, so the group kill below cannot
  // hit anybody else.
  siginfo_t info{};
  int peeked;
  do {
    peeked = waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT);
  } while (peeked < 0 && errno == EINTR);
  if (peeked < 0) throw std::runtime_error(std::string("waitid: ") + std::strerror(errno));
  if (info.si_pid == 0) return false;
  // The command is over: whatever it left running in its group is not to
  // outlive it (the lock is released next), and the guardian can go, while
  // the command's pid (the group's id) is still taken by its zombie.
  kill_group();
  end_guardian();
  int status = 0;
  pid_t reaped;
  do {
    reaped = waitpid(pid_, &status, 0);
  } while (reaped < 0 && errno == EINTR);
  if (reaped < 0) throw std::runtime_error(std::string("waitpid: ") + std::strerror(errno));
  wait_status_ = status;
  take_terminal_back();
  return true;
}

}  // namespace turnstile::cli
