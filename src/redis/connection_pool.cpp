#include "redis/connection_pool.h"

#include <algorithm>

#include "core/check.h"
#include "turnstile/errors.h"

namespace turnstile::redis {

using Clock = std::chrono::steady_clock;

ConnectionPool::ConnectionPool(RedisOptions options, std::shared_ptr<Counters> counters)
    : options_(std::move(options)), counters_(counters_or_new(std::move(counters))) {
  TURNSTILE_CHECK_MSG(options_.pool_size > 0 && options_.command_timeout_ms > 0, "RedisOptions::validate() ran");
  // So that release() never allocates.
  idle_.reserve(static_cast<std::size_t>(options_.pool_size));
}

ConnectionPool::~ConnectionPool() {
  const MutexLock lock(mutex_);
  // A lease holds the pool alive: only idle connections are left.
  TURNSTILE_CHECK_MSG(open_count_ == static_cast<int>(idle_.size()), "no connection outlives its pool");
}

void ConnectionPool::check_counts_locked() const {
  TURNSTILE_CHECK(open_count_ >= 0 && open_count_ <= options_.pool_size);
  TURNSTILE_CHECK(idle_.size() <= static_cast<std::size_t>(open_count_));
  // Callers queue only while nothing is left to take.
  TURNSTILE_CHECK(waiters_.empty() || (idle_.empty() && open_count_ == options_.pool_size));
}

ConnectionPool::Lease& ConnectionPool::Lease::operator=(Lease&& other) noexcept {
  if (this != &other) {
    drop();
    pool_ = std::move(other.pool_);
    connection_ = std::move(other.connection_);
  }
  return *this;
}

void ConnectionPool::Lease::give_back() noexcept {
  if (connection_ == nullptr) return;
  TURNSTILE_CHECK(pool_ != nullptr);
  pool_->release(std::move(connection_));
  pool_.reset();
}

void ConnectionPool::Lease::drop() noexcept {
  if (connection_ == nullptr) return;
  TURNSTILE_CHECK(pool_ != nullptr);
  pool_->discard(std::move(connection_));
  pool_.reset();
}

std::size_t ConnectionPool::waiting() const {
  const MutexLock lock(mutex_);
  return waiters_.size();
}

ConnectionPool::Lease ConnectionPool::lease(SendWithin send_within) {
  return Lease(shared_from_this(), acquire(send_within));
}

std::unique_ptr<Connection> ConnectionPool::acquire(SendWithin send_within) {
  // The caller's deadline, when it has one: it bounds the wait for a turn
  // and the handshake of a connection opened for it.
  const std::optional<Clock::time_point> callers_deadline = callers_deadline_after(send_within);
  MutexLock lock(mutex_);
  check_counts_locked();
  // Nobody queued before us: an idle connection, or a slot for a new one.
  if (waiters_.empty()) {
    if (!idle_.empty()) {
      std::unique_ptr<Connection> connection = std::move(idle_.back());
      idle_.pop_back();
      TURNSTILE_CHECK_MSG(connection != nullptr && !connection->broken(), "only sound connections are kept idle");
      return connection;
    }
    if (open_count_ < options_.pool_size) {
      ++open_count_;
      return open_in_slot(lock, callers_deadline);
    }
  }
  const std::chrono::nanoseconds command_timeout = std::chrono::milliseconds(options_.command_timeout_ms);
  const bool callers_bound = send_within && *send_within < command_timeout;
  const std::chrono::nanoseconds wait =
      callers_bound ? std::max(*send_within, std::chrono::nanoseconds::zero()) : command_timeout;
  std::unique_ptr<Connection> handed = wait_turn_locked(
      lock, Clock::now() + wait, callers_bound ? WaitBound::callers_deadline : WaitBound::command_timeout);
  if (handed != nullptr) return handed;
  return open_in_slot(lock, callers_deadline);  // a slot was handed over, counted for us
}

std::unique_ptr<Connection> ConnectionPool::wait_turn_locked(MutexLock& lock, Clock::time_point deadline,
                                                             WaitBound bound) {
  TURNSTILE_CHECK(lock.owns_lock());
  // Whoever queues finds nothing to take: what comes back goes to the queue.
  TURNSTILE_CHECK(idle_.empty() || !waiters_.empty());
  if (waiters_.size() >= kMaxPoolWaiters) {
    throw PoolExhaustedError("redis " + options_.endpoint() + ": all " + std::to_string(options_.pool_size) +
                             " pooled connections are busy and " + std::to_string(kMaxPoolWaiters) +
                             " callers already wait for one (pool_size)");
  }
  Waiter me;
  waiters_.push_back(&me);
  // Ends by the deadline at the latest (spurious wake-ups only loop back).
  while (me.connection == nullptr && !me.slot) {
    if (lock.wait_until(me.handed_over, deadline) == std::cv_status::timeout) break;
  }
  if (me.connection != nullptr) return std::move(me.connection);
  if (me.slot) return nullptr;
  // Still queued: whoever hands something over takes it off the queue first.
  const auto queued = std::find(waiters_.begin(), waiters_.end(), &me);
  TURNSTILE_CHECK_MSG(queued != waiters_.end(), "a waiter handed nothing is still queued");
  waiters_.erase(queued);
  if (bound == WaitBound::callers_deadline) {
    throw PoolExhaustedError("redis " + options_.endpoint() + ": all " + std::to_string(options_.pool_size) +
                             " pooled connections stayed busy until the caller's deadline (pool_size); nothing was "
                             "sent");
  }
  throw PoolExhaustedError("redis " + options_.endpoint() + ": all " + std::to_string(options_.pool_size) +
                           " pooled connections stayed busy for " + std::to_string(options_.command_timeout_ms) +
                           " ms (pool_size, command_timeout_ms); nothing was sent");
}

void ConnectionPool::hand_free_slots_locked() {
  // Bounded by the pool size: each turn counts one slot again.
  while (!waiters_.empty() && open_count_ < options_.pool_size) {
    Waiter* next = waiters_.front();
    waiters_.pop_front();
    TURNSTILE_CHECK(next != nullptr && next->connection == nullptr && !next->slot);
    next->slot = true;
    ++open_count_;
    next->handed_over.notify_one();  // under the lock: the waiter outlives it
  }
  check_counts_locked();
}

// Not analysed: it releases the caller's `lock`, which the analysis cannot
// follow into a function handed the lock by reference.
std::unique_ptr<Connection> ConnectionPool::open_in_slot(
    MutexLock& lock, std::optional<Clock::time_point> callers_deadline) TURNSTILE_NO_THREAD_SAFETY_ANALYSIS {
  TURNSTILE_CHECK(lock.owns_lock() && open_count_ > 0);
  const auto now = Clock::now();
  if (now < next_connect_) {
    --open_count_;
    hand_free_slots_locked();  // the next waiter fails as fast, or connects after the backoff
    const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(next_connect_ - now);
    throw ConnectionError(last_connect_error_ + " (not retrying for another " + std::to_string(wait.count()) + " ms)");
  }
  check_counts_locked();
  lock.unlock();
  return open_counted(callers_deadline);
}

std::unique_ptr<Connection> ConnectionPool::open_counted(std::optional<Clock::time_point> callers_deadline) {
  try {
    std::unique_ptr<Connection> connection = Connection::open(options_, callers_deadline);
    TURNSTILE_CHECK(connection != nullptr);
    // Outside the lock: a restart found here is told to the handlers now,
    // and so is a reconnection (the first connection opened since one broke).
    const bool restarted = counters_->identities->observe(options_.endpoint(), connection->server_run_id());
    bool reconnected = false;
    {
      const MutexLock lock(mutex_);
      TURNSTILE_CHECK_MSG(open_count_ > 0, "this connection's slot is counted");
      backoff_.reset();
      next_connect_ = {};
      reconnected = std::exchange(broke_, false);
      if (reconnected) counters_->reconnects.fetch_add(1, std::memory_order_relaxed);
    }
    if (reconnected && !restarted) counters_->identities->reconnected(options_.endpoint());
    return connection;
  } catch (const PoolExhaustedError&) {
    // The caller's deadline cut the handshake short: no sign the server is
    // down, so no backoff for the callers after it.
    const MutexLock lock(mutex_);
    TURNSTILE_CHECK(open_count_ > 0);
    --open_count_;
    hand_free_slots_locked();
    throw;
  } catch (const ConnectionError& error) {
    const MutexLock lock(mutex_);
    TURNSTILE_CHECK(open_count_ > 0);
    --open_count_;
    last_connect_error_ = error.what();
    next_connect_ = Clock::now() + backoff_.next();
    hand_free_slots_locked();
    throw;
  } catch (...) {
    const MutexLock lock(mutex_);
    TURNSTILE_CHECK(open_count_ > 0);
    --open_count_;
    hand_free_slots_locked();
    throw;
  }
}

void ConnectionPool::release(std::unique_ptr<Connection> connection) noexcept {
  TURNSTILE_CHECK(connection != nullptr);
  std::vector<std::unique_ptr<Connection>> dropped;  // closed outside the lock
  {
    const MutexLock lock(mutex_);
    // The connection is lent out, so it is counted and not idle.
    TURNSTILE_CHECK(idle_.size() < static_cast<std::size_t>(open_count_));
    if (!connection->broken()) {
      if (!waiters_.empty()) {
        // Straight to the longest waiter: a caller arriving now cannot take
        // it first.
        Waiter* next = waiters_.front();
        waiters_.pop_front();
        TURNSTILE_CHECK(next != nullptr && next->connection == nullptr && !next->slot);
        next->connection = std::move(connection);
        next->handed_over.notify_one();  // under the lock: the waiter outlives it
        return;
      }
      idle_.push_back(std::move(connection));
      check_counts_locked();
      return;
    }
    --open_count_;
    broke_ = true;
    if (!connection->timed_out()) {
      open_count_ -= static_cast<int>(idle_.size());
      dropped.swap(idle_);
      idle_.reserve(static_cast<std::size_t>(options_.pool_size));
    }
    dropped.push_back(std::move(connection));
    hand_free_slots_locked();  // several slots may have freed up
  }
}

void ConnectionPool::discard(std::unique_ptr<Connection> connection) noexcept {
  TURNSTILE_CHECK(connection != nullptr);
  {
    const MutexLock lock(mutex_);
    TURNSTILE_CHECK(idle_.size() < static_cast<std::size_t>(open_count_));  // counted, and lent out
    --open_count_;
    hand_free_slots_locked();
  }
  connection.reset();  // closed outside the lock
}

}  // namespace turnstile::redis
