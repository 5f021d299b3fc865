// redis/connection_pool.h
//
// A bounded, thread-safe pool of command connections (redis/connection.h).
//
//   * At most pool_size connections exist; they are opened lazily, when a
//     caller finds no idle one. A caller that finds all of them busy waits
//     up to command_timeout_ms for one to come back, then gets TimeoutError.
//   * A connection that broke is dropped, and its slot freed for a new one.
//     If it broke because the server closed or reset it (not a mere
//     timeout), every idle connection is dropped too: after a server restart
//     they are all stale, and letting each fail one more call helps no one.
//   * After a failed connect, further connects are refused with
//     ConnectionError (no network traffic, so callers fail fast) until a
//     backoff delay (redis/backoff.h) has passed; the next caller after it
//     tries again.

#ifndef TURNSTILE_REDIS_CONNECTION_POOL_H_
#define TURNSTILE_REDIS_CONNECTION_POOL_H_

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "redis/backoff.h"
#include "redis/connection.h"
#include "turnstile/redis_backend.h"

namespace turnstile::redis {

class ConnectionPool {
 public:
  explicit ConnectionPool(RedisOptions options);
  ~ConnectionPool();
  ConnectionPool(const ConnectionPool&) = delete;
  ConnectionPool& operator=(const ConnectionPool&) = delete;

  // Runs `use(Connection&)` on a connection lent exclusively to it, returns
  // what `use` returns, and takes the connection back (or drops it, if it
  // broke). Throws what acquiring a connection throws (ConnectionError,
  // TimeoutError, AuthenticationError, ...) and whatever `use` throws.
  template <typename Use>
  auto with_connection(Use&& use) {
    std::unique_ptr<Connection> connection = acquire();
    try {
      auto result = use(*connection);
      release(std::move(connection));
      return result;
    } catch (...) {
      release(std::move(connection));
      throw;
    }
  }

 private:
  std::unique_ptr<Connection> acquire();
  void release(std::unique_ptr<Connection> connection) noexcept;
  // Opens a connection for a slot already counted in open_count_.
  std::unique_ptr<Connection> open_counted();

  const RedisOptions options_;
  std::mutex mutex_;
  std::condition_variable returned_;  // a connection came back or a slot freed up
  std::vector<std::unique_ptr<Connection>> idle_;
  int open_count_ = 0;  // idle + lent out + being opened
  Backoff backoff_;
  std::chrono::steady_clock::time_point next_connect_ = {};
  std::string last_connect_error_;
};

}  // namespace turnstile::redis

#endif  // TURNSTILE_REDIS_CONNECTION_POOL_H_
