// The flavors `turnstile run` can hold, behind cli::Flavor.

#include "cli/flavor.h"

#include <cassert>
#include <utility>

#include "cli/exit_status.h"
#include "turnstile/fair_lock.h"
#include "turnstile/lock.h"

namespace turnstile::cli {
namespace {

std::string_view lost_reason_text(LockLostReason reason) {
  switch (reason) {
    case LockLostReason::gone:
      return "it was deleted, force-unlocked or expired";
    case LockLostReason::unreachable:
      return "Redis was unreachable for a whole ttl";
  }
  return "unknown reason";
}

// Any Lock: reentrant and fair (both fenced, for TURNSTILE_FENCING_TOKEN),
// token.
class LockFlavorAdapter final : public Flavor {
 public:
  explicit LockFlavorAdapter(std::unique_ptr<Lock> lock) : lock_(std::move(lock)) { assert(lock_ != nullptr); }

  void set_lost_handler(LostHandler handler) override {
    lock_->set_lost_handler(
        [handler = std::move(handler)](const LockLost& lost) { handler(lost_reason_text(lost.reason)); });
  }

  std::optional<Held> acquire(std::optional<Duration> wait) override {
    if (wait) {
      if (!lock_->try_lock(AcquireOptions{.wait = *wait, .lease = std::nullopt})) return std::nullopt;
    } else {
      lock_->lock();
    }
    return Held{.owner = lock_->current_owner(), .fencing_token = lock_->fencing_token(), .permit_ids = {}};
  }

  void release() override { lock_->unlock(); }

 private:
  std::unique_ptr<Lock> lock_;
};

[[noreturn]] void not_in_this_build(std::string_view what) {
  throw UsageError(std::string(what) + " is not available in this build of turnstile");
}

}  // namespace

std::unique_ptr<Flavor> make_flavor(Client& client, std::string_view name, const LockRule& rule) {
  switch (rule.flavor) {
    case LockFlavor::reentrant:
      return std::make_unique<LockFlavorAdapter>(std::make_unique<ReentrantLock>(client.fenced_lock(name)));
    case LockFlavor::token:
      return std::make_unique<LockFlavorAdapter>(std::make_unique<TokenLock>(client.token_lock(name)));
    case LockFlavor::fair: {
      FairLockOptions options;
      options.fenced = true;
      return std::make_unique<LockFlavorAdapter>(std::make_unique<FairLock>(client.fair_lock(name, options)));
    }
    case LockFlavor::semaphore:
      not_in_this_build("--permits (the crash-safe semaphore)");
  }
  assert(false && "unknown LockFlavor");
  return nullptr;
}

}  // namespace turnstile::cli
