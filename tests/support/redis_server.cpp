#include "redis_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <thread>

#include "hiredis_reply.h"

namespace turnstile::testing {
namespace {

constexpr auto kStartTimeout = std::chrono::seconds(10);
constexpr auto kStopGrace = std::chrono::seconds(5);
constexpr auto kPollInterval = std::chrono::milliseconds(10);
constexpr int kStartAttempts = 5;

bool reap(pid_t pid, bool block) {
  int status = 0;
  for (;;) {
    const pid_t result = waitpid(pid, &status, block ? 0 : WNOHANG);
    if (result == pid) return true;
    if (result == 0) return false;
    if (errno == EINTR) continue;
    return true;  // ECHILD: already gone
  }
}

}  // namespace

int free_loopback_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  socklen_t length = sizeof(address);
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    const std::string reason = std::strerror(errno);
    close(fd);
    throw std::runtime_error("binding a loopback port: " + reason);
  }
  close(fd);
  return ntohs(address.sin_port);
}

int free_loopback_port_with_bus_room() {
  constexpr int kBusPortOffset = 10000;
  constexpr int kMaxPort = 65535;
  constexpr int kMaxPortTries = 1000;
  for (int attempt = 0; attempt < kMaxPortTries; ++attempt) {
    const int port = free_loopback_port();
    if (port + kBusPortOffset <= kMaxPort) return port;
  }
  throw std::runtime_error("no free loopback port with room for a cluster bus port above it");
}

int redis_server_major_version() {
  static const int major = [] {
    const std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen("redis-server --version 2>&1", "r"), pclose);
    if (!pipe) throw std::runtime_error("cannot run redis-server --version");
    std::string output;
    char chunk[256];
    while (std::fgets(chunk, sizeof chunk, pipe.get()) != nullptr) output += chunk;
    // "Redis server v=7.0.15 sha=..." (Valkey: "Server v=8.0.1 ...").
    const std::size_t at = output.find(" v=");
    if (at == std::string::npos) throw std::runtime_error("no version in `redis-server --version`: " + output);
    return std::atoi(output.c_str() + at + 3);
  }();
  return major;
}

std::vector<std::string> debug_command_args() {
  if (redis_server_major_version() >= 7) return {"--enable-debug-command", "yes"};
  return {};
}

RedisServer::RedisServer(std::vector<std::string> extra_args) : extra_args_(std::move(extra_args)) {
  start_on_free_port();
}

RedisServer::RedisServer(std::string config_file, std::vector<std::string> extra_args)
    : extra_args_(std::move(extra_args)), config_file_(std::move(config_file)) {
  start_on_free_port();
}

void RedisServer::start_on_free_port() {
  std::string dir_template = (std::filesystem::temp_directory_path() / "turnstile-redis-XXXXXX").string();
  if (mkdtemp(dir_template.data()) == nullptr) {
    throw std::runtime_error(std::string("mkdtemp: ") + std::strerror(errno));
  }
  dir_ = dir_template;
  for (std::size_t i = 0; i + 1 < extra_args_.size(); ++i) {
    if (extra_args_[i] == "--requirepass") password_ = extra_args_[i + 1];
    if (extra_args_[i] == "--tls-port") tls_port_ = std::stoi(extra_args_[i + 1]);
  }
  // A cluster node without --cluster-port listens on its bus port too.
  bool cluster_enabled = false;
  bool bus_port_given = false;
  for (std::size_t i = 0; i < extra_args_.size(); ++i) {
    if (extra_args_[i] == "--cluster-enabled" && i + 1 < extra_args_.size()) {
      cluster_enabled = extra_args_[i + 1] == "yes";
    }
    if (extra_args_[i] == "--cluster-port") bus_port_given = true;
  }
  for (int attempt = 1;; ++attempt) {
    port_ = cluster_enabled && !bus_port_given ? free_loopback_port_with_bus_room() : free_loopback_port();
    try {
      start();
      return;
    } catch (const std::exception&) {
      // Another process may have taken the port in between; try a new one.
      if (attempt == kStartAttempts) throw;
    }
  }
}

RedisServer::~RedisServer() {
  stop();
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

std::string RedisServer::url() const { return "redis://" + host_ + ":" + std::to_string(port_); }

void RedisServer::start() {
  if (running()) return;
  std::vector<std::string> args = {"redis-server"};
  if (!config_file_.empty()) args.push_back(config_file_);
  const std::vector<std::string> standard = {
      "--port", std::to_string(port_), "--bind", host_,       "--save", "",      "--appendonly",
      "no",     "--daemonize",         "no",     "--logfile", "",       "--dir", dir_};
  args.insert(args.end(), standard.begin(), standard.end());
  args.insert(args.end(), extra_args_.begin(), extra_args_.end());
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);

  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    // Dies with the test: an orphaned server would keep `meson test`'s
    // output pipe open and hang the run.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    const int null_fd = open("/dev/null", O_WRONLY);
    if (null_fd >= 0) {
      dup2(null_fd, STDOUT_FILENO);
      dup2(null_fd, STDERR_FILENO);
      close(null_fd);
    }
    execvp("redis-server", argv.data());
    _exit(127);
  }
  pid_ = pid;
  try {
    wait_until_ready();
  } catch (...) {
    kill();
    throw;
  }
}

void RedisServer::wait_until_ready() {
  const auto deadline = std::chrono::steady_clock::now() + kStartTimeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (reap(pid_, false)) {
      pid_ = -1;
      throw std::runtime_error("redis-server exited at start (port " + std::to_string(port_) +
                               "; is redis-server installed?)");
    }
    try {
      if (command({"PING"}) == "PONG") return;
    } catch (const std::exception&) {
      // not listening yet
    }
    std::this_thread::sleep_for(kPollInterval);
  }
  throw std::runtime_error("redis-server on port " + std::to_string(port_) + " did not answer PING within 10 s");
}

void RedisServer::stop() {
  if (!running()) return;
  ::kill(pid_, SIGCONT);  // a paused server cannot handle SIGTERM
  ::kill(pid_, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + kStopGrace;
  while (!reap(pid_, false)) {
    if (std::chrono::steady_clock::now() >= deadline) {
      ::kill(pid_, SIGKILL);
      reap(pid_, true);
      break;
    }
    std::this_thread::sleep_for(kPollInterval);
  }
  pid_ = -1;
}

void RedisServer::kill() {
  if (!running()) return;
  ::kill(pid_, SIGKILL);
  reap(pid_, true);
  pid_ = -1;
}

void RedisServer::pause() {
  if (running()) ::kill(pid_, SIGSTOP);
}

void RedisServer::resume() {
  if (running()) ::kill(pid_, SIGCONT);
}

std::string RedisServer::command(const std::vector<std::string>& argv) const {
  const timeval timeout{2, 0};
  redisContext* context = redisConnectWithTimeout(host_.c_str(), port_, timeout);
  if (context == nullptr || context->err != 0) {
    const std::string reason = context != nullptr ? context->errstr : "out of memory";
    if (context != nullptr) redisFree(context);
    throw std::runtime_error("connecting to " + host_ + ":" + std::to_string(port_) + ": " + reason);
  }
  redisSetTimeout(context, timeout);
  if (!password_.empty()) {
    auto* auth = static_cast<redisReply*>(redisCommand(context, "AUTH %s", password_.c_str()));
    if (auth != nullptr) freeReplyObject(auth);
  }
  const Reply reply = hiredis_command(context, argv);
  redisFree(context);
  return reply.to_string();
}

}  // namespace turnstile::testing
