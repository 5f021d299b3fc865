// The read-write lock: Redisson RReadWriteLock's keys and arithmetic, the
// two halves as Lock flavors (read_write_lock.h).

#include "turnstile/read_write_lock.h"

#include <cassert>
#include <cstdint>
#include <vector>

#include "locks/handles/client_core.h"
#include "locks/flavors/lock_flavors.h"
#include "locks/engine/latched_unlock.h"
#include "locks/engine/random_hex.h"
#include "locks/engine/reply_shape.h"
#include "locks/engine/wake_registry.h"
#include "lua_scripts.h"
#include "turnstile/errors.h"
#include "turnstile/mutex.h"

namespace turnstile::detail {
namespace {

// The halves' local records are kept apart (ClientCore::lock_core).
constexpr std::string_view kReadFamily = "read_lock";
constexpr std::string_view kWriteFamily = "write_lock";

// The write acquisition's answer to a task that holds the read lock.
constexpr std::int64_t kUpgradeRefused = -3;

KeyLayout layout_of(const ClientCore& client, std::string_view name) {
  return key_layout(Flavor::read_write, client.options.key_prefix + std::string(name));
}

// {locked, the hold count of `field`, pttl} in one read.
std::vector<std::int64_t> field_status(ClientCore& client, const std::string& name, const std::string& field) {
  const Reply reply = client.backend->eval(scripts::reentrant_lock_status, {name}, {field});
  return integer_array_reply(scripts::reentrant_lock_status, reply, 3);
}

// With fleet-wide wake-ups, the wake registry's key after a call's keys
// (lua/lib/read_write_wake.lua).
void add_registry_key(const ClientCore& client, const KeyLayout& layout, ScriptCall& call) {
  if (fleet_wakeups(client, layout)) call.keys.push_back(layout.wake_registry);
}

// The same for an acquisition, with its four arguments after the call's
// own: the process's wake channel, the wall clock, whether the caller
// waits after a failure, whether others of the process still wait after a
// success.
ScriptCall with_registry(ClientCore& client, const KeyLayout& layout, const Holding& holding, ScriptCall call) {
  if (!fleet_wakeups(client, layout)) return call;
  add_registry_key(client, layout, call);
  call.args.push_back(layout.wake_channel(client.id));
  call.args.push_back(std::to_string(client.runtime->wall_clock_ms()));
  call.args.emplace_back(holding.may_wait ? "1" : "0");
  call.args.emplace_back(holding.others_waiting ? "1" : "0");
  return call;
}

// A failed acquisition's reply: the lock's ttl, or with the registry
// {ttl, 1 if a hold may be foreign}.
LockEngine::Attempt failed_attempt(const Script& script, const Reply& reply) {
  if (reply.is_integer()) return LockEngine::Attempt{.retry_after_ms = reply.as_integer()};
  const std::vector<std::int64_t> values = integer_array_reply(script, reply, 2);
  if (values[1] != 0 && values[1] != 1) throw_unexpected(script, reply, "0 or 1 for a foreign holder");
  return LockEngine::Attempt{.retry_after_ms = values[0], .holder_may_be_foreign = values[1] == 1};
}

bool delete_in_mode(ClientCore& client, const KeyLayout& layout, std::string_view mode) {
  ScriptCall call{&scripts::read_write_lock_force_unlock,
                  {layout.name, layout.channel, layout.holder_identity},
                  {std::string(mode), std::string(client.backend->publish_command())}};
  add_registry_key(client, layout, call);
  const Reply reply = client.backend->eval(*call.script, call.keys, call.args);
  const std::int64_t deleted = integer_reply(scripts::read_write_lock_force_unlock, reply);
  if (deleted != 0 && deleted != 1) throw_unexpected(scripts::read_write_lock_force_unlock, reply, "0 or 1");
  return deleted == 1;
}

}  // namespace

// ---- ReadLock ----

ReadEngine::ReadEngine(std::shared_ptr<ClientCore> client, std::string_view name, const LockOptions& options)
    : LockEngine(client, layout_of(*client, name), options, kReadFamily) {
  ClientCore& core = *client;
  write_core_ = core.lock_core(std::move(client), layout().name, layout().channel, kWriteFamily);
}

ScriptCall ReadEngine::attempt_call(const std::string& owner, Duration lease, Holding& holding) {
  // A write hold the task does not know of (its reply lost in transit)
  // must not let the task read, re-arming that hold at every read: it
  // waits for it to lapse like anyone else.
  bool writes = false;
  {
    MutexLock guard(write_core_->mutex);
    writes = write_core_->holdings.contains(owner);
  }
  ScriptCall call = with_registry(
      client(), layout(), holding,
      ScriptCall{&scripts::read_write_lock_read_acquire,
                 call_strings(kCallKeysReserved, name(), layout().read_timeouts(owner)),
                 call_strings(kCallArgsReserved, server_lease_ms_arg(lease), owner, layout().write_field(owner),
                              writes ? "1" : "0", shape_check_arg(holding))});
  // With the registry: a reader that gets in tells the registered readers,
  // and a failed try reads the writer's identity (whether its release
  // wakes the registry: lua/lib/read_write_wake.lua).
  if (call.keys.size() == 3) {
    call.args.emplace_back(client().backend->publish_command());
    call.keys.push_back(layout().holder_identity);
  }
  // Last: the reader's identity, the value of its holds' timeout keys.
  call.args.push_back(holder_identity(owner));
  return call;
}

LockEngine::Attempt ReadEngine::attempt_result(const Reply& reply, const Holding&) {
  if (reply.is_nil()) return Attempt{.acquired = true};
  return failed_attempt(scripts::read_write_lock_read_acquire, reply);
}

std::optional<ScriptCall> ReadEngine::release_call(const std::string& owner, const Holding&) {
  ClientCore& client = this->client();
  ScriptCall call{&scripts::read_write_lock_read_unlock,
                  call_strings(kCallKeysReserved, name(), layout().channel, layout().read_timeouts(owner),
                               layout().hash_tag, layout().unlock_latch(random_hex128(*client.runtime))),
                  call_strings(kCallArgsReserved, kUnlockMessage, owner, first_send_latch_lifetime_arg(),
                               client.backend->publish_command())};
  call.latch_lifetime_arg = 2;  // ARGV[3]
  add_registry_key(client, layout(), call);
  return call;
}

ReleaseResult ReadEngine::release_result(const Reply& reply) {
  return latched_unlock_result(scripts::read_write_lock_read_unlock, reply);
}

LockEngine::Status ReadEngine::status(const std::string& owner, const Holding*) {
  const std::vector<std::int64_t> values = field_status(client(), name(), owner);
  return Status{.locked = values[0] == 1, .hold_count = values[1], .pttl_ms = values[2]};
}

const Script& ReadEngine::renew_script() const { return scripts::read_write_lock_renew; }

std::string ReadEngine::renew_holder(const std::string& owner, const Holding&) const { return owner; }

bool ReadEngine::force_delete() { return delete_in_mode(client(), layout(), "read"); }

WakeOptions ReadEngine::wake_options() const {
  return with_own_channel(client(), layout(), WakeOptions{.rule = WakeRule::read_write, .shared = true});
}

// ---- WriteLock ----

WriteEngine::WriteEngine(std::shared_ptr<ClientCore> client, std::string_view name, const LockOptions& options)
    : LockEngine(client, layout_of(*client, name), options, kWriteFamily) {}

ScriptCall WriteEngine::attempt_call(const std::string& owner, Duration lease, Holding& holding) {
  return with_registry(
      client(), layout(), holding,
      ScriptCall{&scripts::read_write_lock_write_acquire,
                 call_strings(kCallKeysReserved, name(), layout().holder_identity),
                 call_strings(kCallArgsReserved, server_lease_ms_arg(lease), layout().write_field(owner), owner,
                              shape_check_arg(holding), holder_identity(owner))});
}

LockEngine::Attempt WriteEngine::attempt_result(const Reply& reply, const Holding&) {
  if (reply.is_integer() && reply.as_integer() == kUpgradeRefused) {
    throw InvalidArgumentError("the write lock of " + in_quotes(name()) +
                               " asked for by a task that holds its read lock: read -> write upgrade would wait "
                               "for itself forever (release the read lock first)");
  }
  if (reply.is_nil()) return Attempt{.acquired = true};
  return failed_attempt(scripts::read_write_lock_write_acquire, reply);
}

std::optional<ScriptCall> WriteEngine::release_call(const std::string& owner, const Holding& holding) {
  ClientCore& client = this->client();
  ScriptCall call{
      &scripts::read_write_lock_write_unlock,
      call_strings(kCallKeysReserved, name(), layout().channel, layout().unlock_latch(random_hex128(*client.runtime)),
                   layout().holder_identity),
      call_strings(kCallArgsReserved, kReadUnlockMessage,
                   ClientCore::server_lease_ms_arg(holding.lease, holding.lock_delay), layout().write_field(owner),
                   first_send_latch_lifetime_arg(), client.backend->publish_command())};
  call.latch_lifetime_arg = 3;  // ARGV[4]
  add_registry_key(client, layout(), call);
  return call;
}

ReleaseResult WriteEngine::release_result(const Reply& reply) {
  return latched_unlock_result(scripts::read_write_lock_write_unlock, reply);
}

LockEngine::Status WriteEngine::status(const std::string& owner, const Holding*) {
  const std::vector<std::int64_t> values = field_status(client(), name(), layout().write_field(owner));
  return Status{.locked = values[0] == 1, .hold_count = values[1], .pttl_ms = values[2]};
}

const Script& WriteEngine::renew_script() const { return scripts::read_write_lock_renew; }

std::string WriteEngine::renew_holder(const std::string& owner, const Holding&) const {
  return layout().write_field(owner);
}

bool WriteEngine::force_delete() { return delete_in_mode(client(), layout(), "write"); }

WakeOptions WriteEngine::wake_options() const {
  return with_own_channel(client(), layout(), WakeOptions{.rule = WakeRule::read_write});
}

}  // namespace turnstile::detail

namespace turnstile {

// ---- ReadWriteLock ----

ReadWriteLock::ReadWriteLock(ReadLock read, WriteLock write) : read_(std::move(read)), write_(std::move(write)) {}

bool ReadWriteLock::force_unlock() {
  // Each half deletes the lock in its own mode and forgets its local
  // holdings: both are asked.
  const bool read = read_.force_unlock();
  const bool write = write_.force_unlock();
  return read || write;
}

}  // namespace turnstile
