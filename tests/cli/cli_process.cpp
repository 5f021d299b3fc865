#include "cli/cli_process.h"

#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "cli/cli_test_paths.h"  // generated: TURNSTILE_CLI_PATH

namespace turnstile::testing {
namespace {

constexpr auto kPollInterval = std::chrono::milliseconds(5);
// How long err() of an ended process waits for its terminal's last bytes
// (a grandchild still holding the terminal keeps it open longer).
constexpr auto kTerminalDrainTimeout = std::chrono::milliseconds(2000);

int exit_status_of(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  return 128 + WTERMSIG(wait_status);
}

}  // namespace

ScratchDirectory::ScratchDirectory() {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/turnstile-cli-XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error(std::string("mkdtemp: ") + std::strerror(errno));
  path_ = pattern;
}

ScratchDirectory::~ScratchDirectory() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

std::string read_file(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  std::ostringstream text;
  text << file.rdbuf();
  return text.str();
}

bool file_exists(const std::string& path) { return std::filesystem::exists(path); }

bool eventually(const std::function<bool()>& condition, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (condition()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(kPollInterval);
  }
}

TerminalReader::TerminalReader(int master_fd) : fd_(master_fd) {
  thread_ = std::thread([this] {
    char buffer[4096];
    while (!stop_.load()) {
      pollfd ready{fd_, POLLIN, 0};
      if (::poll(&ready, 1, 20) <= 0) continue;
      const ssize_t got = ::read(fd_, buffer, sizeof(buffer));
      if (got <= 0) {
        if (got < 0 && errno == EINTR) continue;
        closed_ = true;  // EIO: every holder of the terminal's other side closed it
        return;
      }
      std::lock_guard guard(mutex_);
      text_.append(buffer, static_cast<std::size_t>(got));
    }
  });
}

TerminalReader::~TerminalReader() {
  stop_ = true;
  thread_.join();
  ::close(fd_);
}

std::string TerminalReader::text() {
  std::lock_guard guard(mutex_);
  return text_;
}

bool TerminalReader::wait_closed(std::chrono::milliseconds timeout) {
  return eventually([this] { return closed_.load(); }, timeout);
}

std::string CliProcess::err() const {
  if (!terminal_) return read_file(scratch_.file("stderr"));
  // Ended: what it wrote may still be in the terminal, not yet read.
  if (status_) terminal_->wait_closed(kTerminalDrainTimeout);
  return terminal_->text();
}

CliProcess::CliProcess(const std::vector<std::string>& args, Environment environment, CliProcessOptions options) {
  std::vector<std::string> argv = {TURNSTILE_CLI_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> arg_pointers;
  for (std::string& arg : argv) arg_pointers.push_back(arg.data());
  arg_pointers.push_back(nullptr);

  std::vector<std::string> entries;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    if (!std::string_view(*entry).starts_with("TURNSTILE_")) entries.emplace_back(*entry);
  }
  for (const auto& [name, value] : environment) entries.push_back(name + "=" + value);
  std::vector<char*> env_pointers;
  for (std::string& entry : entries) env_pointers.push_back(entry.data());
  env_pointers.push_back(nullptr);

  const std::string out_path = scratch_.file("stdout");
  const std::string err_path = scratch_.file("stderr");
  int terminal_master = -1;
  int terminal_side = -1;
  if (options.stderr_on_terminal && openpty(&terminal_master, &terminal_side, nullptr, nullptr, nullptr) != 0) {
    throw std::runtime_error(std::string("openpty: ") + std::strerror(errno));
  }
  const pid_t parent = getpid();
  pid_ = fork();
  if (pid_ < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid_ == 0) {
    // Dies with the test, so a failed test never leaves a lock holder.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    const int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int null = open("/dev/null", O_RDONLY);
    if (out < 0 || err < 0 || null < 0) _exit(127);
    if (options.own_session) {
      if (setsid() < 0) _exit(127);
      if (terminal_side >= 0 && ioctl(terminal_side, TIOCSCTTY, 0) != 0) _exit(127);
    }
    dup2(options.stdin_on_terminal && terminal_side >= 0 ? terminal_side : null, 0);
    dup2(out, 1);
    dup2(terminal_side >= 0 ? terminal_side : err, 2);
    if (terminal_side >= 0) {
      ::close(terminal_side);
      ::close(terminal_master);
    }
    execve(arg_pointers[0], arg_pointers.data(), env_pointers.data());
    _exit(127);
  }
  if (terminal_side >= 0) {
    ::close(terminal_side);
    terminal_ = std::make_unique<TerminalReader>(terminal_master);
  }
}

CliProcess::~CliProcess() {
  if (running()) {
    ::kill(pid_, SIGKILL);
    int status = 0;
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }
}

void CliProcess::signal(int signal_number) {
  if (running()) ::kill(pid_, signal_number);
}

void CliProcess::type_on_terminal(const std::string& text) {
  if (!terminal_) throw std::logic_error("type_on_terminal: started without a terminal");
  std::size_t written = 0;
  while (written < text.size()) {
    const ssize_t wrote = ::write(terminal_->fd(), text.data() + written, text.size() - written);
    if (wrote < 0 && errno == EINTR) continue;
    if (wrote <= 0) throw std::runtime_error(std::string("writing to the terminal: ") + std::strerror(errno));
    written += static_cast<std::size_t>(wrote);
  }
}

bool CliProcess::running() {
  if (status_) return false;
  int status = 0;
  const pid_t reaped = waitpid(pid_, &status, WNOHANG);
  if (reaped == pid_) {
    status_ = exit_status_of(status);
    return false;
  }
  return true;
}

std::optional<int> CliProcess::wait_for(std::chrono::milliseconds timeout) {
  eventually([this] { return !running(); }, timeout);
  return status_;
}

CliResult run_cli(const std::vector<std::string>& args, CliProcess::Environment environment) {
  CliProcess process(args, std::move(environment));
  CliResult result;
  result.status = process.wait_for();
  result.out = process.out();
  result.err = process.err();
  return result;
}

}  // namespace turnstile::testing
