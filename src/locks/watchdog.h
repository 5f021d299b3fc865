// locks/watchdog.h
//
// Keeps leases alive while locks (and semaphore permits) are held: one per
// Client, one timer, firing every lease/3 while anything is watched. Each
// tick renews every watched target with its own renew script, up to
// kMaxLocksPerRenewal targets per script call (Redisson's batch size). A lock whose renewal answers 0 is gone
// (its lease ran out or it was deleted); one that could not be renewed for a
// whole lease because Redis was unreachable has expired. Either way it stops
// being watched and its on_lost callback runs, once.

#ifndef TURNSTILE_LOCKS_WATCHDOG_H_
#define TURNSTILE_LOCKS_WATCHDOG_H_

#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "turnstile/backend.h"
#include "turnstile/lock.h"
#include "turnstile/runtime.h"
#include "turnstile/script.h"

namespace turnstile::detail {

class Watchdog : public std::enable_shared_from_this<Watchdog> {
 public:
  static constexpr std::size_t kMaxLocksPerRenewal = 100;

  struct Target {
    // KEYS = the targets' keys; ARGV = lease ms, [wall clock ms,] holders...
    const Script* renew_script = nullptr;
    std::string key;
    std::string holder;  // what the script compares: owner id, token, permit id
    // Whether the script takes the runtime's wall clock (Unix ms) after the
    // lease: expiries stored as Unix times (permits) need it. The same for
    // every target of one script.
    bool pass_wall_clock_ms = false;
    // Runs once if the lock is lost while watched, with this target's id.
    std::function<void(std::uint64_t id, LockLostReason reason)> on_lost;
  };

  Watchdog(Backend& backend, Runtime& runtime, Duration lease,
           std::function<void(std::exception_ptr)> on_error);

  // Starts renewing `target`; returns its id for unwatch().
  std::uint64_t watch(Target target);
  // Stops renewing (idempotent). A renewal already under way may still
  // renew it once, but its on_lost will not run.
  void unwatch(std::uint64_t id);
  // The holder's own release of `id` is on its way: a renewal that finds
  // it gone meanwhile is most likely seeing that release, so the loss is
  // held back. unwatch() (released) drops it; end_release() (not released:
  // the release failed, or left it held) delivers it through on_lost.
  void begin_release(std::uint64_t id);
  void end_release(std::uint64_t id);
  // Stops the timer for good (the client is going away).
  void stop();

  std::size_t watched_count() const;
  Duration lease() const { return lease_; }

 private:
  struct Entry {
    Target target;
    Instant last_renewed;
    bool releasing = false;                             // see begin_release()
    std::optional<LockLostReason> lost_while_releasing;  // no longer renewed
  };

  void arm_locked();
  void tick();
  void renew_batch(const Script& script, bool pass_wall_clock_ms, const std::vector<std::uint64_t>& ids,
                   std::vector<std::string> keys, std::vector<std::string> holders);
  void lose(std::uint64_t id, LockLostReason reason);

  Backend& backend_;
  Runtime& runtime_;
  const Duration lease_;
  std::function<void(std::exception_ptr)> on_error_;

  mutable std::mutex mutex_;  // never held across a backend call or callback
  std::map<std::uint64_t, Entry> entries_;  // ordered: renewals run in a fixed order
  std::uint64_t next_id_ = 1;
  std::optional<Runtime::TimerId> timer_;
  bool stopped_ = false;
};

}  // namespace turnstile::detail

#endif  // TURNSTILE_LOCKS_WATCHDOG_H_
