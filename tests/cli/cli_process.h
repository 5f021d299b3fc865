// cli/cli_process.h
//
// `turnstile` processes for end-to-end tests: started with arguments and
// extra environment, stdout and stderr captured to files in a scratch
// directory, every wait bounded. A process still running when its
// CliProcess is destroyed is killed (SIGKILL) and reaped.

#ifndef TURNSTILE_TESTS_CLI_CLI_PROCESS_H_
#define TURNSTILE_TESTS_CLI_CLI_PROCESS_H_

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace turnstile::testing {

// Long enough for anything these tests do on a loaded 2-core machine;
// reaching it is a failure, never a hang.
inline constexpr std::chrono::seconds kProcessTimeout{30};

// A fresh directory under $TMPDIR (or /tmp), removed with its contents.
class ScratchDirectory {
 public:
  ScratchDirectory();
  ~ScratchDirectory();
  ScratchDirectory(const ScratchDirectory&) = delete;
  ScratchDirectory& operator=(const ScratchDirectory&) = delete;

  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// The whole content of a file ("" if it does not exist).
std::string read_file(const std::string& path);
bool file_exists(const std::string& path);

// Polls `condition` every few milliseconds until it holds or `timeout`
// passes; returns whether it held.
bool eventually(const std::function<bool()>& condition, std::chrono::milliseconds timeout = kProcessTimeout);

// How a CliProcess is started.
struct CliProcessOptions {
  // stderr on a pseudo-terminal (stdin and stdout as usual), read as it
  // comes by a thread of the test: err() is what was read so far, and
  // once the process has ended, all it wrote (the reader has drained the
  // terminal to its close, or waited kTerminalDrainTimeout for it).
  bool stderr_on_terminal = false;
  // A session of its own (setsid): no controlling terminal, so /dev/tty
  // cannot be opened, unless stderr_on_terminal makes that terminal its
  // controlling one (what --askpass prompts on; type_on_terminal()).
  bool own_session = false;
  // stdin on that terminal too (with stderr_on_terminal and own_session):
  // turnstile runs in the terminal's foreground, as typed at a shell.
  bool stdin_on_terminal = false;
};

// The master side of a pseudo-terminal, read into memory by a thread.
class TerminalReader {
 public:
  explicit TerminalReader(int master_fd);
  ~TerminalReader();
  TerminalReader(const TerminalReader&) = delete;
  TerminalReader& operator=(const TerminalReader&) = delete;
  std::string text();
  // Waits up to `timeout` until every holder of the other side closed it
  // and all they wrote was read; whether that happened.
  bool wait_closed(std::chrono::milliseconds timeout);
  int fd() const { return fd_; }

 private:
  int fd_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> closed_{false};
  std::mutex mutex_;
  std::string text_;
  std::thread thread_;
};

class CliProcess {
 public:
  using Environment = std::vector<std::pair<std::string, std::string>>;

  // Starts `turnstile args...` with `environment` added; TURNSTILE_REDIS is
  // removed from the inherited environment so only `args` choose Redis.
  explicit CliProcess(const std::vector<std::string>& args, Environment environment = {},
                      CliProcessOptions options = {});
  ~CliProcess();
  CliProcess(const CliProcess&) = delete;
  CliProcess& operator=(const CliProcess&) = delete;

  pid_t pid() const { return pid_; }
  void signal(int signal_number);
  // Types `text` on the process's terminal (stderr_on_terminal), as a
  // user at the keyboard would.
  void type_on_terminal(const std::string& text);

  // Waits up to `timeout` for the process to end; its exit status (128+N
  // if killed by signal N), or nullopt if it still runs.
  std::optional<int> wait_for(std::chrono::milliseconds timeout = kProcessTimeout);
  bool running();

  std::string out() const { return read_file(scratch_.file("stdout")); }
  std::string err() const;

 private:
  ScratchDirectory scratch_;
  std::unique_ptr<TerminalReader> terminal_;
  pid_t pid_ = -1;
  std::optional<int> status_;
};

struct CliResult {
  std::optional<int> status;  // nullopt: did not end in time (then killed)
  std::string out;
  std::string err;
};

// Runs `turnstile args...` to completion (bounded by kProcessTimeout).
CliResult run_cli(const std::vector<std::string>& args, CliProcess::Environment environment = {});

}  // namespace turnstile::testing

#endif  // TURNSTILE_TESTS_CLI_CLI_PROCESS_H_
