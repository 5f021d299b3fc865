// The read-write lock: Redisson RReadWriteLock's keys and arithmetic, the
// two halves as Lock flavors (read_write_lock.h).

#include "turnstile/read_write_lock.h"

#include <cassert>
#include <cstdint>
#include <mutex>
#include <vector>

#include "locks/client_core.h"
#include "locks/latched_unlock.h"
#include "locks/random_hex.h"
#include "locks/reply_shape.h"
#include "lua_scripts.h"
#include "turnstile/errors.h"

namespace turnstile {
namespace {

// The halves' local records are kept apart (ClientCore::lock_core).
constexpr std::string_view kReadFamily = "read_lock";
constexpr std::string_view kWriteFamily = "write_lock";

// The write acquisition's answer to a task that holds the read lock.
constexpr std::int64_t kUpgradeRefused = -3;

std::string lease_ms_arg(Duration lease) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(lease).count();
  assert(ms >= 1);
  return std::to_string(ms);
}

KeyLayout layout_of(const detail::ClientCore& client, std::string_view name) {
  return key_layout(Flavor::read_write, client.options.key_prefix + std::string(name));
}

// {locked, the hold count of `field`, pttl} in one read.
std::vector<std::int64_t> field_status(detail::ClientCore& client, const std::string& name, const std::string& field) {
  const Reply reply = client.backend->eval(scripts::reentrant_lock_status, {name}, {field});
  return detail::integer_array_reply(scripts::reentrant_lock_status, reply, 3);
}

bool delete_in_mode(detail::ClientCore& client, const KeyLayout& layout, std::string_view mode) {
  const Reply reply = client.backend->eval(scripts::read_write_lock_force_unlock, {layout.name, layout.channel},
                                           {std::string(mode), std::string(client.backend->publish_command())});
  const std::int64_t deleted = detail::integer_reply(scripts::read_write_lock_force_unlock, reply);
  if (deleted != 0 && deleted != 1) detail::throw_unexpected(scripts::read_write_lock_force_unlock, reply, "0 or 1");
  return deleted == 1;
}

}  // namespace

// ---- ReadLock ----

ReadLock::ReadLock(std::shared_ptr<detail::ClientCore> client, std::string_view name)
    : Lock(client, layout_of(*client, name), kReadFamily) {
  detail::ClientCore& core = *client;
  write_core_ = core.lock_core(std::move(client), layout().name, layout().channel, kWriteFamily);
}

Lock::ScriptCall ReadLock::attempt_call(const std::string& owner, Duration lease, detail::Holding&) {
  // A write hold the task does not know of (its reply lost in transit)
  // must not let the task read, re-arming that hold at every read: it
  // waits for it to lapse like anyone else.
  bool writes = false;
  {
    std::lock_guard guard(write_core_->mutex);
    writes = write_core_->holdings.contains(owner);
  }
  return ScriptCall{&scripts::read_write_lock_read_acquire,
                    {name(), layout().read_timeouts(owner)},
                    {lease_ms_arg(lease), owner, layout().write_field(owner), writes ? "1" : "0"}};
}

Lock::Attempt ReadLock::attempt_result(const Reply& reply, const detail::Holding&) {
  if (reply.is_nil()) return Attempt{.acquired = true};
  return Attempt{.retry_after_ms = detail::integer_reply(scripts::read_write_lock_read_acquire, reply)};
}

std::optional<Lock::ScriptCall> ReadLock::release_call(const std::string& owner, const detail::Holding&) {
  detail::ClientCore& client = this->client();
  return ScriptCall{&scripts::read_write_lock_read_unlock,
                    {name(), layout().channel, layout().read_timeouts(owner), layout().hash_tag,
                     layout().unlock_latch(detail::random_hex128(*client.runtime))},
                    {std::string(kUnlockMessage), owner, std::to_string(detail::kUnlockLatchLifetimeMs),
                     std::string(client.backend->publish_command())}};
}

Lock::ReleaseResult ReadLock::release_result(const Reply& reply) {
  return detail::latched_unlock_result(scripts::read_write_lock_read_unlock, reply);
}

Lock::Status ReadLock::status(const std::string& owner, const detail::Holding*) {
  const std::vector<std::int64_t> values = field_status(client(), name(), owner);
  return Status{.locked = values[0] == 1, .hold_count = values[1], .pttl_ms = values[2]};
}

const Script& ReadLock::renew_script() const { return scripts::read_write_lock_renew; }

std::string ReadLock::renew_holder(const std::string& owner, const detail::Holding&) const { return owner; }

bool ReadLock::force_delete() { return delete_in_mode(client(), layout(), "read"); }

// ---- WriteLock ----

WriteLock::WriteLock(std::shared_ptr<detail::ClientCore> client, std::string_view name)
    : Lock(client, layout_of(*client, name), kWriteFamily) {}

Lock::ScriptCall WriteLock::attempt_call(const std::string& owner, Duration lease, detail::Holding&) {
  return ScriptCall{
      &scripts::read_write_lock_write_acquire, {name()}, {lease_ms_arg(lease), layout().write_field(owner), owner}};
}

Lock::Attempt WriteLock::attempt_result(const Reply& reply, const detail::Holding&) {
  if (reply.is_integer() && reply.as_integer() == kUpgradeRefused) {
    throw InvalidArgumentError("the write lock of " + in_quotes(name()) +
                               " asked for by a task that holds its read lock: read -> write upgrade would wait "
                               "for itself forever (release the read lock first)");
  }
  if (reply.is_nil()) return Attempt{.acquired = true};
  return Attempt{.retry_after_ms = detail::integer_reply(scripts::read_write_lock_write_acquire, reply)};
}

std::optional<Lock::ScriptCall> WriteLock::release_call(const std::string& owner, const detail::Holding& holding) {
  detail::ClientCore& client = this->client();
  return ScriptCall{&scripts::read_write_lock_write_unlock,
                    {name(), layout().channel, layout().unlock_latch(detail::random_hex128(*client.runtime))},
                    {std::string(kReadUnlockMessage), lease_ms_arg(holding.lease), layout().write_field(owner),
                     std::to_string(detail::kUnlockLatchLifetimeMs), std::string(client.backend->publish_command())}};
}

Lock::ReleaseResult WriteLock::release_result(const Reply& reply) {
  return detail::latched_unlock_result(scripts::read_write_lock_write_unlock, reply);
}

Lock::Status WriteLock::status(const std::string& owner, const detail::Holding*) {
  const std::vector<std::int64_t> values = field_status(client(), name(), layout().write_field(owner));
  return Status{.locked = values[0] == 1, .hold_count = values[1], .pttl_ms = values[2]};
}

const Script& WriteLock::renew_script() const { return scripts::read_write_lock_renew; }

std::string WriteLock::renew_holder(const std::string& owner, const detail::Holding&) const {
  return layout().write_field(owner);
}

bool WriteLock::force_delete() { return delete_in_mode(client(), layout(), "write"); }

// ---- ReadWriteLock ----

ReadWriteLock::ReadWriteLock(std::shared_ptr<detail::ClientCore> client, std::string_view name)
    : read_(client, name), write_(client, name) {}

bool ReadWriteLock::force_unlock() {
  // Each half deletes the lock in its own mode and forgets its local
  // holdings: both are asked.
  const bool read = read_.force_unlock();
  const bool write = write_.force_unlock();
  return read || write;
}

}  // namespace turnstile
