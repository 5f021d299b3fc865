// The public lock handles (lock.h): each call goes to the flavor's engine
// (locks/engine/lock_engine.h).

#include "turnstile/lock.h"

#include <utility>

#include "core/check.h"
#include "locks/handles/client_core.h"
#include "locks/engine/lock_engine.h"

namespace turnstile {

Lock::Lock(std::shared_ptr<detail::LockEngine> engine) : engine_(std::move(engine)) {
  TURNSTILE_CHECK(engine_ != nullptr);
}
Lock::Lock(Lock&&) noexcept = default;
Lock& Lock::operator=(Lock&&) noexcept = default;
Lock::~Lock() = default;

detail::LockEngine& Lock::engine() const {
  TURNSTILE_CHECK_MSG(engine_ != nullptr, "a moved-from lock is used");
  return *engine_;
}

Flavor Lock::flavor() const { return engine().flavor(); }
const std::string& Lock::name() const { return engine().name(); }
const KeyLayout& Lock::layout() const { return engine().layout(); }

void Lock::lock() { engine().lock(std::nullopt); }
void Lock::lock(Duration lease) { engine().lock(lease); }

bool Lock::try_lock() { return engine().try_lock(std::nullopt, engine().client().runtime->now(), {}); }

bool Lock::try_lock(const AcquireOptions& options) {
  return engine().try_lock(options.lease, engine().client().runtime->deadline_after(options.wait), options.stop);
}

bool Lock::try_lock_until(Instant deadline) { return engine().try_lock(std::nullopt, deadline, {}); }

void Lock::unlock() { engine().unlock(); }
void Lock::extend(Duration lease) { engine().extend(lease); }
bool Lock::force_unlock() { return engine().force_unlock(); }
bool Lock::is_locked() { return engine().is_locked(); }
bool Lock::is_held_by_current_thread() { return engine().is_held_by_current_thread(); }
std::int64_t Lock::hold_count() { return engine().hold_count(); }
std::optional<std::chrono::milliseconds> Lock::remaining_lease() { return engine().remaining_lease(); }

Future<void> Lock::lock_async(std::optional<Duration> lease) { return engine().lock_async(lease); }
Future<bool> Lock::try_lock_async(const AcquireOptions& options) { return engine().try_lock_async(options); }
Future<void> Lock::unlock_async() { return engine().unlock_async(); }

std::optional<std::int64_t> Lock::fencing_token() { return engine().fencing_token(); }
std::stop_token Lock::loss_token() { return engine().loss_token(); }
void Lock::set_lost_handler(LockLostHandler handler) { engine().set_lost_handler(std::move(handler)); }

LockHold Lock::try_acquire_hold(const AcquireOptions& options) { return engine().try_acquire_hold(options); }
Future<LockHold> Lock::try_acquire_hold_async(const AcquireOptions& options) {
  return engine().try_acquire_hold_async(options);
}

std::string Lock::current_owner() const { return engine().current_owner(); }

void Lock::report_background_error(std::exception_ptr error) const noexcept { engine().report_background_error(error); }

}  // namespace turnstile
