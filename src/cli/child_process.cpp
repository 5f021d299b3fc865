// fork/exec of the supervised command, with exec failures reported back to
// the parent through a close-on-exec pipe.

#include "cli/child_process.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cassert>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string_view>

#include "cli/exit_status.h"
#include "cli/signals.h"

namespace turnstile::cli {

ChildProcess ChildProcess::start(const std::vector<std::string>& argv, const EnvironmentVariables& environment) {
  assert(!argv.empty());
  // Everything the child needs is prepared before fork: after it, only
  // async-signal-safe calls (the process may have other threads).
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);

  int exec_pipe[2];
  if (pipe2(exec_pipe, O_CLOEXEC) != 0) {
    throw std::runtime_error(std::string("pipe2: ") + std::strerror(errno));
  }
  // The environment: ours minus the overridden names, plus `environment`.
  std::vector<std::string> entries;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string_view text(*entry);
    bool overridden = false;
    for (const auto& [name, value] : environment) {
      overridden = overridden || (text.size() > name.size() && text.starts_with(name) && text[name.size()] == '=');
    }
    if (!overridden) entries.emplace_back(text);
  }
  for (const auto& [name, value] : environment) entries.push_back(name + "=" + value);
  std::vector<char*> envp;
  envp.reserve(entries.size() + 1);
  for (std::string& entry : entries) envp.push_back(entry.data());
  envp.push_back(nullptr);

  const pid_t pid = fork();
  if (pid < 0) {
    const int error = errno;
    ::close(exec_pipe[0]);
    ::close(exec_pipe[1]);
    throw std::runtime_error(std::string("fork: ") + std::strerror(error));
  }
  if (pid == 0) {
    ::close(exec_pipe[0]);
    restore_signals_for_child();
    execvpe(args[0], args.data(), envp.data());
    const int error = errno;
    (void)!::write(exec_pipe[1], &error, sizeof(error));
    _exit(error == ENOENT ? kExitCommandNotFound : kExitCannotExecute);
  }

  ::close(exec_pipe[1]);
  ChildProcess child(pid);
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
    : pid_(other.pid_), wait_status_(other.wait_status_), exec_error_(std::move(other.exec_error_)) {
  other.pid_ = -1;
  other.wait_status_.reset();
}

ChildProcess::~ChildProcess() {
  // Only on an error path: the command does not outlive its supervisor.
  if (running()) {
    ::kill(pid_, SIGKILL);
    int status = 0;
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }
}

void ChildProcess::signal(int signal_number) {
  if (running()) ::kill(pid_, signal_number);
}

bool ChildProcess::try_reap() {
  if (wait_status_) return true;
  assert(pid_ > 0);
  int status = 0;
  pid_t reaped;
  do {
    reaped = waitpid(pid_, &status, WNOHANG);
  } while (reaped < 0 && errno == EINTR);
  if (reaped == 0) return false;
  if (reaped < 0) throw std::runtime_error(std::string("waitpid: ") + std::strerror(errno));
  wait_status_ = status;
  return true;
}

}  // namespace turnstile::cli
