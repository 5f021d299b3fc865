// The flavors `turnstile run` can hold, behind cli::Flavor.

#include "cli/flavor.h"

#include <cassert>
#include <utility>

#include "cli/exit_status.h"
#include "turnstile/errors.h"
#include "turnstile/fair_lock.h"
#include "turnstile/lock.h"
#include "turnstile/semaphore.h"

namespace turnstile::cli {
namespace {

std::string_view lost_reason_text(LockLostReason reason) {
  switch (reason) {
    case LockLostReason::gone:
      return "it was deleted, force-unlocked or expired";
    case LockLostReason::lease_expired:
      return "no renewal was confirmed before its local lease deadline (Redis unreachable or too slow)";
  }
  return "unknown reason";
}

// Any Lock: reentrant and fair (both fenced, for TURNSTILE_FENCING_TOKEN),
// token.
class LockFlavorAdapter final : public Flavor {
 public:
  explicit LockFlavorAdapter(std::unique_ptr<Lock> lock) : lock_(std::move(lock)) { assert(lock_ != nullptr); }

  std::string_view noun() const override { return "lock"; }

  void set_lost_handler(LostHandler handler) override {
    lock_->set_lost_handler(
        [handler = std::move(handler)](const LockLost& lost) { handler(lost_reason_text(lost.reason)); });
  }

  std::optional<Held> acquire(std::optional<Duration> wait, std::stop_token stop) override {
    if (!lock_->try_lock(AcquireOptions{.wait = wait.value_or(Duration::max()), .lease = std::nullopt, .stop = stop})) {
      return std::nullopt;
    }
    return Held{.owner = lock_->current_owner(), .fencing_token = lock_->fencing_token(), .permit_ids = {}};
  }

  void release() override { lock_->unlock(); }

 private:
  std::unique_ptr<Lock> lock_;
};

// One permit of the crash-safe semaphore, renewed by the watchdog. The
// first user of the name sets the total; every later one must name the same
// total (a mismatch is an error, never silently accepted).
class PermitFlavor final : public Flavor {
 public:
  PermitFlavor(PermitSemaphore semaphore, std::int64_t permits)
      : semaphore_(std::move(semaphore)), permits_(permits) {
    assert(permits_ >= 1);
  }

  std::string_view noun() const override { return "permit of"; }

  void set_lost_handler(LostHandler handler) override {
    semaphore_.set_lost_handler(
        [handler = std::move(handler)](const PermitLost& lost) { handler(lost_reason_text(lost.reason)); });
  }

  std::optional<Held> acquire(std::optional<Duration> wait, std::stop_token stop) override {
    const PermitTotal total = semaphore_.try_set_permits_or_get(permits_);
    if (total.total != permits_) {
      throw MismatchError(in_quotes(semaphore_.name()) + " has " + std::to_string(total.total) +
                          " permits, not --permits " + std::to_string(permits_) +
                          ": every user of a name must agree on the number");
    }
    permit_ = semaphore_.try_acquire(
        AcquireOptions{.wait = wait.value_or(Duration::max()), .lease = std::nullopt, .stop = stop});
    if (!permit_) return std::nullopt;
    // A permit is owned by its id, not by a task.
    return Held{.owner = permit_->hex(), .fencing_token = std::nullopt, .permit_ids = {permit_->hex()}};
  }

  void release() override {
    assert(permit_.has_value());
    semaphore_.release(*permit_);
  }

 private:
  PermitSemaphore semaphore_;
  const std::int64_t permits_;
  std::optional<PermitId> permit_;
};

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
      return std::make_unique<PermitFlavor>(client.permit_semaphore(name), rule.permits);
  }
  assert(false && "unknown LockFlavor");
  return nullptr;
}

}  // namespace turnstile::cli
