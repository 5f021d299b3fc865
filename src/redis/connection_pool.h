// redis/connection_pool.h
//
// A bounded, thread-safe pool of command connections (redis/connection.h).
//
//   * At most pool_size connections exist; they are opened lazily, when a
//     caller finds no idle one. A caller that finds all of them busy queues
//     for one, first come first served: a connection given back (or a slot
//     freed) goes to the longest-waiting caller, never to one that arrived
//     later. A caller waits its turn up to command_timeout_ms (or less: its
//     own bound, EvalOptions::send_within), then gets PoolExhaustedError
//     (nothing was sent). At most kMaxPoolWaiters wait;
//     one more gets PoolExhaustedError at once.
//   * A connection that broke is dropped, and its slot freed for a new one.
//     If it broke because the server closed or reset it (not a mere
//     timeout), every idle connection is dropped too: after a server restart
//     they are all stale, and letting each fail one more call helps no one.
//   * Each connection opened reports its server's run_id to the backend's
//     ServerIdentities (redis/server_identity.h), which tells the restart
//     watches when the server is another process than before.
//   * After a failed connect, further connects are refused with
//     ConnectionError (no network traffic, so callers fail fast) until a
//     backoff delay (redis/backoff.h) has passed; the next caller after it
//     tries again.
//   * A connection can also be lent beyond one callback's scope, as a Lease
//     (a pipelined call whose reply is read later). A lease given back is
//     taken back as with_connection() does; a lease destroyed while still
//     holding its connection drops that one connection (what was sent on it
//     is abandoned, so it is never lent again) and frees its slot.

#ifndef TURNSTILE_REDIS_CONNECTION_POOL_H_
#define TURNSTILE_REDIS_CONNECTION_POOL_H_

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/check.h"
#include "redis/backoff.h"
#include "redis/connection.h"
#include "redis/counters.h"
#include "turnstile/mutex.h"
#include "turnstile/redis_backend.h"

namespace turnstile::redis {

// Callers queued for a connection of one pool, at most (each is a thread
// blocked in acquire()).
inline constexpr std::size_t kMaxPoolWaiters = 65'536;

class ConnectionPool : public std::enable_shared_from_this<ConnectionPool> {
 public:
  // One connection lent out; move-only. Holds the pool alive, so it may
  // outlive the pool's other owner.
  class Lease {
   public:
    Lease() = default;
    Lease(Lease&& other) noexcept = default;
    Lease& operator=(Lease&& other) noexcept;
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    // Drops the connection if it is still held.
    ~Lease() { drop(); }

    // Whether the lease still holds its connection.
    explicit operator bool() const { return connection_ != nullptr; }
    Connection& operator*() const {
      TURNSTILE_CHECK(connection_ != nullptr);
      return *connection_;
    }
    Connection* operator->() const { return &**this; }

    // The connection goes back to the pool (dropped instead if it broke,
    // with the idle ones too if the server closed it, as with_connection()
    // does). Only for a connection with nothing left in flight.
    void give_back() noexcept;
    // The connection is closed and its slot freed; nothing else changes.
    void drop() noexcept;

   private:
    friend class ConnectionPool;
    Lease(std::shared_ptr<ConnectionPool> pool, std::unique_ptr<Connection> connection)
        : pool_(std::move(pool)), connection_(std::move(connection)) {}

    std::shared_ptr<ConnectionPool> pool_;
    std::unique_ptr<Connection> connection_;
  };

  // Owned by a shared_ptr (lease() needs one). Counts its reconnects in
  // `counters` (a fresh set if null).
  explicit ConnectionPool(RedisOptions options, std::shared_ptr<Counters> counters = nullptr);
  ~ConnectionPool();
  ConnectionPool(const ConnectionPool&) = delete;
  ConnectionPool& operator=(const ConnectionPool&) = delete;

  // How long a caller may wait for a connection: command_timeout_ms, or
  // `send_within` if that is shorter (the caller's deadline).
  using SendWithin = std::optional<std::chrono::nanoseconds>;

  // A connection lent until the lease gives it back or is destroyed. Throws
  // what acquiring a connection throws; `send_within` bounds the wait for
  // it (SendWithin). The pool must be owned by a std::shared_ptr.
  Lease lease(SendWithin send_within = std::nullopt);

  // Runs `use(Connection&)` on a connection lent exclusively to it, returns
  // what `use` returns, and takes the connection back (or drops it, if it
  // broke). Throws what acquiring a connection throws (ConnectionError,
  // PoolExhaustedError, AuthenticationError, ...) and whatever `use` throws.
  // `send_within` bounds the wait for a connection (SendWithin).
  template <typename Use>
  auto with_connection(Use&& use, SendWithin send_within = std::nullopt) {
    std::unique_ptr<Connection> connection = acquire(send_within);
    try {
      auto result = use(*connection);
      release(std::move(connection));
      return result;
    } catch (...) {
      release(std::move(connection));
      throw;
    }
  }

  // Callers queued for a connection now (for tests).
  std::size_t waiting() const;

 private:
  // A caller queued in acquire(): what it is handed, a connection or a
  // slot to open one in (already counted in open_count_).
  // Its members are guarded by the pool's mutex_ (which the analysis
  // cannot name from here).
  struct Waiter {
    std::condition_variable handed_over;
    std::unique_ptr<Connection> connection;
    bool slot = false;
  };

  std::unique_ptr<Connection> acquire(SendWithin send_within = std::nullopt);
  // What ends a caller's wait for a connection, named by its error.
  enum class WaitBound { command_timeout, callers_deadline };
  // Queues the caller until it is handed a connection (returned) or a slot
  // (nullptr returned), or its wait ends at `deadline` (PoolExhaustedError
  // naming `bound`).
  std::unique_ptr<Connection> wait_turn_locked(MutexLock& lock, std::chrono::steady_clock::time_point deadline,
                                               WaitBound bound) TURNSTILE_REQUIRES(mutex_);
  // Slots freed up: each handed to the longest waiter (counted again), as
  // long as anyone waits.
  void hand_free_slots_locked() TURNSTILE_REQUIRES(mutex_);
  // Opens a connection in a slot of our own (counted), unless connects are
  // backing off (ConnectionError; the slot is passed on). A handshake the
  // caller's deadline cuts short throws PoolExhaustedError and starts no
  // backoff. Called holding mutex_ through `lock`, which it releases.
  std::unique_ptr<Connection> open_in_slot(MutexLock& lock,
                                           std::optional<std::chrono::steady_clock::time_point> callers_deadline)
      TURNSTILE_REQUIRES(mutex_);
  void release(std::unique_ptr<Connection> connection) noexcept;
  // Closes a lent connection and frees its slot, without touching the idle
  // ones (unlike release() of a broken one).
  void discard(std::unique_ptr<Connection> connection) noexcept;
  // Opens a connection for a slot already counted in open_count_.
  std::unique_ptr<Connection> open_counted(
      std::optional<std::chrono::steady_clock::time_point> callers_deadline = std::nullopt);
  // 0 <= idle <= open_count_ <= pool_size.
  void check_counts_locked() const TURNSTILE_REQUIRES(mutex_);

  const RedisOptions options_;
  const std::shared_ptr<Counters> counters_;
  mutable Mutex mutex_;
  // First come, first served; at most kMaxPoolWaiters.
  std::deque<Waiter*> waiters_ TURNSTILE_GUARDED_BY(mutex_);
  std::vector<std::unique_ptr<Connection>> idle_ TURNSTILE_GUARDED_BY(mutex_);  // empty while anyone waits
  int open_count_ TURNSTILE_GUARDED_BY(mutex_) = 0;                             // idle + lent out + being opened
  Backoff backoff_ TURNSTILE_GUARDED_BY(mutex_);
  std::chrono::steady_clock::time_point next_connect_ TURNSTILE_GUARDED_BY(mutex_) = {};
  std::string last_connect_error_ TURNSTILE_GUARDED_BY(mutex_);
  // A connection broke since the last one opened: the next open is a
  // reconnect (Counters::reconnects).
  bool broke_ TURNSTILE_GUARDED_BY(mutex_) = false;
};

}  // namespace turnstile::redis

#endif  // TURNSTILE_REDIS_CONNECTION_POOL_H_
