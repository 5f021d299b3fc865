// A Redisson client played at the Redis level (see redisson_client.h).

#include "redisson_client.h"

#include <cstdio>
#include <random>
#include <stdexcept>

#include "redisson_scripts.h"
#include "turnstile/redis_backend.h"
#include "turnstile/semaphore.h"

namespace turnstile::testing {
namespace {

std::string random_hex(std::size_t digits) {
  static std::mutex mutex;
  static std::mt19937_64 random(std::random_device{}());
  std::lock_guard guard(mutex);
  std::string out;
  while (out.size() < digits) {
    char chunk[17];
    std::snprintf(chunk, sizeof chunk, "%016llx", static_cast<unsigned long long>(random()));
    out += chunk;
  }
  out.resize(digits);
  return out;
}

std::string side(std::string_view prefix, const std::string& name) { return std::string(prefix) + ":{" + name + "}"; }

}  // namespace

std::int64_t wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Mailbox::Mailbox(Backend& backend, const std::string& channel)
    : subscription_(backend.subscribe(channel, [this](const PubSubEvent& event) {
        if (event.kind != PubSubEvent::Kind::message) return;
        std::lock_guard guard(mutex_);
        messages_.emplace_back(event.payload);
        changed_.notify_all();
      })) {}

std::int64_t Mailbox::wait_beyond(std::int64_t seen, std::chrono::milliseconds patience) {
  std::unique_lock guard(mutex_);
  changed_.wait_for(guard, patience, [&] { return std::ssize(messages_) > seen; });
  return std::ssize(messages_);
}

std::int64_t Mailbox::count() {
  std::lock_guard guard(mutex_);
  return std::ssize(messages_);
}

std::vector<std::string> Mailbox::messages() {
  std::lock_guard guard(mutex_);
  return messages_;
}

RedissonClient::RedissonClient(const std::string& url) : backend_(make_redis_backend(RedisOptions::from_url(url))) {
  const std::string hex = random_hex(32);
  uuid_ = hex.substr(0, 8) + "-" + hex.substr(8, 4) + "-" + hex.substr(12, 4) + "-" + hex.substr(16, 4) + "-" +
          hex.substr(20, 12);
}

std::string RedissonClient::owner(int thread) const { return uuid_ + ":" + std::to_string(thread); }

Reply RedissonClient::eval(const char* script, const std::vector<std::string>& keys,
                           const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"EVAL", script, std::to_string(keys.size())};
  argv.insert(argv.end(), keys.begin(), keys.end());
  argv.insert(argv.end(), args.begin(), args.end());
  return backend_->command(argv);
}

std::optional<std::int64_t> RedissonClient::lock(const std::string& name, const std::string& owner,
                                                 std::int64_t lease_ms) {
  const Reply reply = eval(redisson::kLockAcquire, {name}, {std::to_string(lease_ms), owner});
  if (reply.is_nil()) return std::nullopt;
  return reply.as_integer();
}

std::optional<std::int64_t> RedissonClient::fenced_lock(const std::string& name, const std::string& owner,
                                                        std::int64_t lease_ms) {
  const Reply reply =
      eval(redisson::kFencedAcquire, {name, side("redisson_lock_token", name)}, {std::to_string(lease_ms), owner});
  if (reply.as_array()[0].as_integer() != 1) return std::nullopt;
  return reply.as_array()[1].as_integer();
}

Reply RedissonClient::unlock(const std::string& name, const std::string& owner) {
  const std::string latch = side("redisson_unlock_latch", name) + ":" + random_hex(32);
  Reply reply =
      eval(redisson::kLockUnlock, {name, side("redisson_lock__channel", name), latch}, {"0", "30000", owner, "10000"});
  backend_->command({"DEL", latch});
  return reply;
}

std::optional<std::int64_t> RedissonClient::fair_lock(const std::string& name, const std::string& owner,
                                                      std::int64_t lease_ms, std::int64_t wait_ms, bool queue) {
  const Reply reply = eval(
      redisson::kFairAcquire, {name, side("redisson_lock_queue", name), side("redisson_lock_timeout", name)},
      {std::to_string(lease_ms), owner, std::to_string(wait_ms), std::to_string(wall_ms()), queue ? "wait" : "try"});
  if (reply.is_nil()) return std::nullopt;
  return reply.as_integer();
}

void RedissonClient::fair_give_up(const std::string& name, const std::string& owner, std::int64_t wait_ms) {
  (void)eval(redisson::kFairGiveUp, {side("redisson_lock_queue", name), side("redisson_lock_timeout", name)},
             {owner, std::to_string(wait_ms)});
}

Reply RedissonClient::fair_unlock(const std::string& name, const std::string& owner) {
  const std::string latch = side("redisson_unlock_latch", name) + ":" + random_hex(32);
  Reply reply = eval(redisson::kFairUnlock,
                     {name, side("redisson_lock_queue", name), side("redisson_lock_timeout", name),
                      side("redisson_lock__channel", name), latch},
                     {"0", "30000", owner, "10000", std::to_string(wall_ms())});
  backend_->command({"DEL", latch});
  return reply;
}

bool RedissonClient::semaphore_acquire(const std::string& name, std::int64_t permits) {
  return eval(redisson::kSemaphore, {name, side("redisson_sc", name)}, {"acquire", std::to_string(permits)})
             .as_integer() == 1;
}

std::int64_t RedissonClient::semaphore_release(const std::string& name, std::int64_t permits) {
  return eval(redisson::kSemaphore, {name, side("redisson_sc", name)}, {"release", std::to_string(permits)})
      .as_integer();
}

std::optional<std::string> RedissonClient::permit_acquire(const std::string& name,
                                                          std::optional<std::int64_t> lease_ms) {
  const std::string hex = random_hex(32);
  const std::int64_t expiry = lease_ms ? wall_ms() + *lease_ms : PermitSemaphore::kNeverExpiresMs;
  const Reply reply = eval(redisson::kPermitSemaphore, {name, "{" + name + "}:timeout", side("redisson_sc", name)},
                           {std::to_string(wall_ms()), "acquire", std::to_string(expiry), hex_to_bytes(hex)});
  if (reply.is_status()) return hex;
  return std::nullopt;
}

bool RedissonClient::permit_release(const std::string& name, const std::string& hex_id) {
  return eval(redisson::kPermitSemaphore, {name, "{" + name + "}:timeout", side("redisson_sc", name)},
              {std::to_string(wall_ms()), "release", hex_to_bytes(hex_id)})
             .as_integer() == 1;
}

std::int64_t RedissonClient::permit_add(const std::string& name, std::int64_t permits) {
  return eval(redisson::kPermitSemaphore, {name, "{" + name + "}:timeout", side("redisson_sc", name)},
              {std::to_string(wall_ms()), "add", std::to_string(permits)})
      .as_integer();
}

std::string redisson_tag(const std::string& name) {
  return name.find('{') == std::string::npos ? "{" + name + "}" : name;
}

// ---- RReadWriteLock ----

RedissonReadWriteLock::RedissonReadWriteLock(RedissonClient& client, std::string name)
    : client_(client),
      name_(std::move(name)),
      tag_(redisson_tag(name_)),
      channel_("redisson_rwlock:" + tag_),
      internal_lease_ms_(client.watchdog_ms()) {}

RedissonReadWriteLock::~RedissonReadWriteLock() = default;

std::string RedissonReadWriteLock::timeout_key(const std::string& owner, std::int64_t k) const {
  return tag_ + ":" + owner + ":rwlock_timeout:" + std::to_string(k);
}

std::optional<std::int64_t> RedissonReadWriteLock::attempt(bool write, const std::string& owner,
                                                           std::optional<std::int64_t> lease_ms) {
  const std::int64_t lease = lease_ms.value_or(client_.watchdog_ms());
  const Reply reply =
      write ? client_.eval(redisson::kWriteLockAcquire, {name_}, {std::to_string(lease), owner + ":write"})
            : client_.eval(redisson::kReadLockAcquire, {name_, tag_ + ":" + owner + ":rwlock_timeout"},
                           {std::to_string(lease), owner, owner + ":write"});
  if (!reply.is_nil()) return reply.as_integer();
  if (write) {
    std::lock_guard guard(mutex_);
    internal_lease_ms_ = lease;
  }
  return std::nullopt;
}

std::optional<std::int64_t> RedissonReadWriteLock::try_read(const std::string& owner,
                                                            std::optional<std::int64_t> lease_ms) {
  return attempt(false, owner, lease_ms);
}

std::optional<std::int64_t> RedissonReadWriteLock::try_write(const std::string& owner,
                                                             std::optional<std::int64_t> lease_ms) {
  return attempt(true, owner, lease_ms);
}

bool RedissonReadWriteLock::read_lock(const std::string& owner, std::optional<std::int64_t> lease_ms,
                                      std::chrono::milliseconds patience) {
  return wait_for(false, owner, lease_ms, patience);
}

bool RedissonReadWriteLock::write_lock(const std::string& owner, std::optional<std::int64_t> lease_ms,
                                       std::chrono::milliseconds patience) {
  return wait_for(true, owner, lease_ms, patience);
}

void RedissonReadWriteLock::on_message(const std::string& payload) {
  std::lock_guard guard(mutex_);
  if (payload == "0") {
    ++zeros_;
    ++permits_;  // one waiter
  } else if (payload == "1") {
    ++ones_;
    permits_ += waiting_;  // every waiter (those between attempts too: none is missed)
  }
  woken_.notify_all();
}

bool RedissonReadWriteLock::wait_for(bool write, const std::string& owner, std::optional<std::int64_t> lease_ms,
                                     std::chrono::milliseconds patience) {
  const auto deadline = std::chrono::steady_clock::now() + patience;
  // Registered (and subscribed) before the first attempt: a release after
  // it is heard.
  {
    std::lock_guard subscribing(subscription_mutex_);
    if (!subscription_.active()) {
      subscription_ = client_.backend().subscribe(channel_, [this](const PubSubEvent& event) {
        if (event.kind == PubSubEvent::Kind::message) on_message(std::string(event.payload));
      });
    }
    std::lock_guard guard(mutex_);
    ++waiting_;
  }
  // The last waiter out drops the subscription, whatever way it leaves.
  struct Leave {
    RedissonReadWriteLock& lock;
    ~Leave() {
      std::lock_guard subscribing(lock.subscription_mutex_);
      bool last = false;
      {
        std::lock_guard guard(lock.mutex_);
        last = --lock.waiting_ == 0;
      }
      if (last) lock.subscription_.reset();
    }
  } leave{*this};
  while (attempt(write, owner, lease_ms).has_value()) {
    std::unique_lock guard(mutex_);
    ++sleeping_;
    const bool woken = woken_.wait_until(guard, deadline, [&] { return permits_ > 0; });
    --sleeping_;
    if (!woken) return false;
    --permits_;
    ++wakeups_;
  }
  return true;
}

Reply RedissonReadWriteLock::read_unlock(const std::string& owner) {
  const std::string latch = "redisson_unlock_latch:" + tag_ + ":" + random_hex(32);
  Reply reply =
      client_.eval(redisson::kReadLockUnlock, {name_, channel_, tag_ + ":" + owner + ":rwlock_timeout", tag_, latch},
                   {"0", owner, "10000"});
  client_.backend().command({"DEL", latch});
  return reply;
}

Reply RedissonReadWriteLock::write_unlock(const std::string& owner) {
  const std::string latch = "redisson_unlock_latch:" + tag_ + ":" + random_hex(32);
  std::int64_t internal_lease = 0;
  {
    std::lock_guard guard(mutex_);
    internal_lease = internal_lease_ms_;
  }
  Reply reply = client_.eval(redisson::kWriteLockUnlock, {name_, channel_, latch},
                             {"1", std::to_string(internal_lease), owner + ":write", "10000"});
  client_.backend().command({"DEL", latch});
  return reply;
}

bool RedissonReadWriteLock::renew_reads(const std::vector<std::string>& owners) {
  std::vector<std::string> args = {std::to_string(client_.watchdog_ms())};
  args.insert(args.end(), owners.begin(), owners.end());
  return client_.eval(redisson::kReadLockRenew, {name_, tag_}, args).as_integer() == 1;
}

bool RedissonReadWriteLock::renew_write(const std::string& owner) {
  return client_.eval(redisson::kWriteLockRenew, {name_}, {std::to_string(client_.watchdog_ms()), owner + ":write"})
             .as_integer() == 1;
}

bool RedissonReadWriteLock::force_unlock_read() {
  return client_.eval(redisson::kReadWriteForceUnlock, {name_, channel_}, {"read", "0"}).as_integer() == 1;
}

bool RedissonReadWriteLock::force_unlock_write() {
  return client_.eval(redisson::kReadWriteForceUnlock, {name_, channel_}, {"write", "1"}).as_integer() == 1;
}

int RedissonReadWriteLock::waiting() {
  std::lock_guard guard(mutex_);
  return waiting_;
}

int RedissonReadWriteLock::sleeping() {
  std::lock_guard guard(mutex_);
  return sleeping_;
}

std::int64_t RedissonReadWriteLock::wakeups() {
  std::lock_guard guard(mutex_);
  return wakeups_;
}

std::int64_t RedissonReadWriteLock::messages(const std::string& payload) {
  std::lock_guard guard(mutex_);
  return payload == "0" ? zeros_ : payload == "1" ? ones_ : 0;
}

std::string hex_to_bytes(const std::string& hex) {
  if (hex.size() % 2 != 0) throw std::invalid_argument("odd hex length");
  std::string bytes;
  for (std::size_t i = 0; i < hex.size(); i += 2) {
    bytes += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  }
  return bytes;
}

}  // namespace turnstile::testing
