#include "redis/connection_pool.h"

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
  const std::lock_guard lock(mutex_);
  // A lease holds the pool alive: only idle connections are left.
  TURNSTILE_CHECK_MSG(open_count_ == static_cast<int>(idle_.size()), "no connection outlives its pool");
}

void ConnectionPool::check_counts_locked() const {
  TURNSTILE_CHECK(open_count_ >= 0 && open_count_ <= options_.pool_size);
  TURNSTILE_CHECK(idle_.size() <= static_cast<std::size_t>(open_count_));
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

ConnectionPool::Lease ConnectionPool::lease() { return Lease(shared_from_this(), acquire()); }

std::unique_ptr<Connection> ConnectionPool::acquire() {
  std::unique_lock lock(mutex_);
  check_counts_locked();
  const auto deadline = Clock::now() + std::chrono::milliseconds(options_.command_timeout_ms);
  while (idle_.empty() && open_count_ >= options_.pool_size) {
    if (returned_.wait_until(lock, deadline) == std::cv_status::timeout && idle_.empty() &&
        open_count_ >= options_.pool_size) {
      throw TimeoutError("redis " + options_.endpoint() + ": all " + std::to_string(options_.pool_size) +
                         " pooled connections stayed busy for " + std::to_string(options_.command_timeout_ms) +
                         " ms (pool_size, command_timeout_ms)");
    }
  }
  if (!idle_.empty()) {
    std::unique_ptr<Connection> connection = std::move(idle_.back());
    idle_.pop_back();
    TURNSTILE_CHECK_MSG(connection != nullptr && !connection->broken(), "only sound connections are kept idle");
    return connection;
  }
  TURNSTILE_CHECK(open_count_ < options_.pool_size);
  const auto now = Clock::now();
  if (now < next_connect_) {
    const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(next_connect_ - now);
    throw ConnectionError(last_connect_error_ + " (not retrying for another " + std::to_string(wait.count()) + " ms)");
  }
  ++open_count_;
  check_counts_locked();
  lock.unlock();
  return open_counted();
}

std::unique_ptr<Connection> ConnectionPool::open_counted() {
  try {
    std::unique_ptr<Connection> connection = Connection::open(options_);
    TURNSTILE_CHECK(connection != nullptr);
    // Outside the lock: a restart found here is told to the handlers now.
    counters_->identities->observe(options_.endpoint(), connection->server_run_id());
    const std::lock_guard lock(mutex_);
    TURNSTILE_CHECK_MSG(open_count_ > 0, "this connection's slot is counted");
    backoff_.reset();
    next_connect_ = {};
    if (std::exchange(broke_, false)) counters_->reconnects.fetch_add(1, std::memory_order_relaxed);
    return connection;
  } catch (const ConnectionError& error) {
    const std::lock_guard lock(mutex_);
    TURNSTILE_CHECK(open_count_ > 0);
    --open_count_;
    last_connect_error_ = error.what();
    next_connect_ = Clock::now() + backoff_.next();
    returned_.notify_one();
    throw;
  } catch (...) {
    const std::lock_guard lock(mutex_);
    TURNSTILE_CHECK(open_count_ > 0);
    --open_count_;
    returned_.notify_one();
    throw;
  }
}

void ConnectionPool::release(std::unique_ptr<Connection> connection) noexcept {
  TURNSTILE_CHECK(connection != nullptr);
  std::vector<std::unique_ptr<Connection>> dropped;  // closed outside the lock
  {
    const std::lock_guard lock(mutex_);
    // The connection is lent out, so it is counted and not idle.
    TURNSTILE_CHECK(idle_.size() < static_cast<std::size_t>(open_count_));
    if (!connection->broken()) {
      idle_.push_back(std::move(connection));
      check_counts_locked();
      returned_.notify_one();
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
    check_counts_locked();
  }
  returned_.notify_all();  // several slots may have freed up
}

void ConnectionPool::discard(std::unique_ptr<Connection> connection) noexcept {
  TURNSTILE_CHECK(connection != nullptr);
  {
    const std::lock_guard lock(mutex_);
    TURNSTILE_CHECK(idle_.size() < static_cast<std::size_t>(open_count_));  // counted, and lent out
    --open_count_;
  }
  returned_.notify_one();
  connection.reset();  // closed outside the lock
}

}  // namespace turnstile::redis
