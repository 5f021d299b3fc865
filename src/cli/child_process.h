// cli/child_process.h
//
// The command `turnstile run` supervises: started with fork/exec in the
// same process group (so a terminal's Ctrl-C reaches it directly), with the
// signal mask and dispositions turnstile had on entry, and extra
// environment variables. Reaped without blocking when SIGCHLD arrives.

#ifndef TURNSTILE_CLI_CHILD_PROCESS_H_
#define TURNSTILE_CLI_CHILD_PROCESS_H_

#include <sys/types.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace turnstile::cli {

using EnvironmentVariables = std::vector<std::pair<std::string, std::string>>;

class ChildProcess {
 public:
  // Forks and execs argv[0] (searched in PATH) with argv, and the current
  // environment plus `environment` (overriding same-named variables).
  // If exec fails, the child exits 127 (not found) or 126 (not executable)
  // and start() reports it: `exec_error` is then set.
  static ChildProcess start(const std::vector<std::string>& argv, const EnvironmentVariables& environment);

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

  // Sends `signal_number` if the child still runs.
  void signal(int signal_number);
  // Reaps the child if it has ended, without blocking. Returns whether it
  // has ended (its waitpid status is then wait_status()).
  bool try_reap();
  int wait_status() const { return *wait_status_; }

 private:
  explicit ChildProcess(pid_t pid) : pid_(pid) {}

  pid_t pid_ = -1;
  std::optional<int> wait_status_;
  std::optional<std::string> exec_error_;
};

}  // namespace turnstile::cli

#endif  // TURNSTILE_CLI_CHILD_PROCESS_H_
