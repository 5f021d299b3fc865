// support/redis_server.h
//
// A real redis-server for tests: started on a free loopback port with no
// persistence, stopped by its PID. Tests that need Redis own one of these;
// there is no shared server and no fixed port.

#ifndef TURNSTILE_TESTS_SUPPORT_REDIS_SERVER_H_
#define TURNSTILE_TESTS_SUPPORT_REDIS_SERVER_H_

#include <sys/types.h>

#include <string>
#include <vector>

namespace turnstile::testing {

// A loopback TCP port that was free a moment ago.
int free_loopback_port();

// The same, low enough for a cluster node's bus port above it: without
// --cluster-port (which Redis before 7 lacks) a node listens on port +
// 10000 too, and exits at start if that passes 65535 (a third of the
// kernel's ephemeral ports do).
int free_loopback_port_with_bus_room();

// The major version of the redis-server on PATH (`redis-server --version`:
// 6 for Redis 6.2, 8 for Valkey 8), read once. Throws std::runtime_error
// if it cannot be read.
int redis_server_major_version();

// What lets the test server take DEBUG: `--enable-debug-command yes` from
// Redis 7 on, nothing before (6.2 allows DEBUG and refuses the option).
std::vector<std::string> debug_command_args();

class RedisServer {
 public:
  // Starts `redis-server --port <free> --bind 127.0.0.1 --save '' --appendonly no`
  // in a working directory of its own (a replica's full sync writes an RDB
  // file there; removed with the server), plus `extra_args` (e.g.
  // {"--requirepass", "secret"}), and returns once it answers PING. Throws
  // std::runtime_error if it does not come up in 10 s.
  explicit RedisServer(std::vector<std::string> extra_args = {});
  // The same, with `config_file` as redis-server's first argument (a
  // sentinel's: `config_file` plus "--sentinel" in extra_args).
  RedisServer(std::string config_file, std::vector<std::string> extra_args);
  ~RedisServer();
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  const std::string& host() const { return host_; }
  int port() const { return port_; }
  // The port after --tls-port in the extra arguments (the server also
  // serves TLS there), or 0.
  int tls_port() const { return tls_port_; }
  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0; }
  // redis://127.0.0.1:<port>
  std::string url() const;

  // SIGTERM, then SIGKILL after 5 s; waits for the process. Idempotent.
  void stop();
  // SIGKILL at once (a crash), and waits for the process.
  void kill();
  // Starts again on the same port with the same arguments (empty keyspace).
  void start();
  // SIGSTOP / SIGCONT: the server hangs without closing connections.
  void pause();
  void resume();

  // Runs one command over a fresh connection (for test set-up and checks),
  // returning the reply rendered as Reply::to_string() would.
  std::string command(const std::vector<std::string>& argv) const;

 private:
  void wait_until_ready();

  std::string host_ = "127.0.0.1";
  int port_ = 0;
  pid_t pid_ = -1;
  void start_on_free_port();

  std::vector<std::string> extra_args_;
  std::string config_file_;
  std::string password_;  // from --requirepass, so command() can AUTH
  int tls_port_ = 0;      // from --tls-port
  std::string dir_;       // the server's --dir, a fresh temporary directory
};

}  // namespace turnstile::testing

#endif  // TURNSTILE_TESTS_SUPPORT_REDIS_SERVER_H_
