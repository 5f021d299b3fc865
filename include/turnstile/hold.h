// turnstile/hold.h
//
// A hold as a value. Every lock, both semaphores and both composite locks
// (Holdable, flavor.h) can hand out what they grant as a LockHold, a
// move-only object that owns exactly that hold, whoever carries it:
//
//   turnstile::LockHold hold = lock.acquire_hold();        // waits
//   pool.submit([hold = std::move(hold)]() mutable {        // another thread
//     write(hold.fencing_token());
//     hold.release();                                      // or its destructor
//   });
//
//   if (turnstile::LockHold hold = lock.try_acquire_hold({.wait = 3s})) { ... }
//
// Why: the classic API (lock()/unlock(), lock.h) is Redisson's: a hold
// belongs to the task (thread) that took it, is reentrant per task, and
// only that task can release it. A LockHold belongs to no thread: it can
// be released from any thread, a thread pool's continuation or a coroutine
// resumed elsewhere, and it can be moved into a lambda or across an
// executor (turnstile/asio.h awaits one from a coroutine). Use the classic
// API where one thread takes and gives back (and for reentrancy); use
// holds everywhere else.
//
// Contract:
//   * Identity. Each hold of a lock has an owner id of its own,
//     "<client uuid>:<n>" with n unique per hold of the client (counting
//     up from 2^62, never a task's id), the form Redisson's
//     lockAsync(threadId) writes, so mixed fleets keep excluding each
//     other. Two holds are never reentrant with each other: a second
//     acquire_hold() on a held exclusive lock waits, even on the same
//     thread, and a classic lock() by a thread does not reenter a hold.
//     A crash-safe semaphore's hold is its permit (owner() = the permit
//     id); a counting semaphore's is one permit of the count.
//   * Releasing. release() gives the hold back once and never throws: a
//     hold lost meanwhile was told to the lost handler when it happened
//     (or is told then, LockLostReason::gone, if the release finds it
//     gone), and a release that cannot reach Redis leaves the hold to its
//     lease and goes to ClientOptions::on_background_error (lock.h,
//     "Releasing"). The destructor and move-assignment release. A
//     release from several threads at once gives it back once.
//     release_or_throw() is the strict form, for callers that act on the
//     outcome: NotOwnerError (PermitNotHeldError for a permit) for a hold
//     lost meanwhile (told first as any loss, if this call found it), the
//     unlock's error for one that failed.
//   * The local deadline (lock.h) rules here too: held() and loss_token()
//     answer from this process's own record, never from a late reply.
//   * Thread safety: one LockHold is one value, like a std::unique_ptr:
//     not for concurrent use by several threads, except release(). The
//     holdable it came from may be destroyed first; its Client may not.

#ifndef TURNSTILE_HOLD_H_
#define TURNSTILE_HOLD_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include "turnstile/export.h"
#include "turnstile/future.h"
#include "turnstile/runtime.h"

namespace turnstile {

enum class Flavor : std::uint8_t;
class LockHold;

namespace detail {
class HoldRecord;
// Wraps a hold the library took (src/locks/engine/hold_record.h).
LockHold wrap_hold(std::shared_ptr<HoldRecord> record);
}  // namespace detail

class TURNSTILE_EXPORT LockHold {
 public:
  // Holds nothing (as a moved-from hold, and what try_acquire_hold()
  // returns when nothing was taken in time).
  LockHold() noexcept;
  LockHold(LockHold&& other) noexcept;
  // Releases what this held (as release()), then takes `other`'s.
  LockHold& operator=(LockHold&& other) noexcept;
  LockHold(const LockHold&) = delete;
  LockHold& operator=(const LockHold&) = delete;
  // release(): never throws.
  ~LockHold();

  // Whether this object has a hold it has not released (a lost hold is
  // still owned until released: held() says whether it is still had).
  [[nodiscard]] bool owns_hold() const noexcept;
  explicit operator bool() const noexcept { return owns_hold(); }

  // An empty hold (default-made, moved from, released) answers the queries
  // below as holding nothing: held() false, loss_token() already stopped,
  // no fencing token, no permits, an empty name and owner; extend() throws
  // NotOwnerError; release() and release_or_throw() do nothing. flavor()
  // and release_async() require owns_hold() (asserted in every build).
  Flavor flavor() const;
  // The lock's key (the client's prefix included; a composite: its first node's).
  const std::string& name() const;
  // Locks: "<client uuid>:<n>" (a composite: its first node's). The
  // crash-safe semaphore: the permit id (32 hex digits). The counting
  // semaphore: an id of this hold, known only here (the server keeps none).
  const std::string& owner() const;
  // Fenced reentrant and fair locks: this acquisition's token.
  std::optional<std::int64_t> fencing_token() const;
  // The crash-safe semaphore: the permit ids taken; empty otherwise.
  const std::vector<std::string>& permit_ids() const;

  // Whether the hold is still believed held: its local deadline has not
  // passed and no loss was seen. No call to Redis. Flavors without a
  // lease (the counting semaphore) are held until released.
  [[nodiscard]] bool held() const;
  // Requested at the instant this hold is lost (lock.h, Lock::loss_token():
  // the local deadline, a renewal, extend() or a release finding it gone, a
  // force-unlock through this client); never by release(). A counting
  // semaphore's permit has no lease and is never lost.
  std::stop_token loss_token() const;
  // Re-arms the hold with `lease` from now (Lock::extend(); a permit:
  // PermitSemaphore::extend()); the watchdog renews it no more. Throws
  // NotOwnerError / PermitNotHeldError if it was lost (NotOwnerError for
  // an empty hold),
  // InvalidArgumentError for a composite lock or a counting semaphore
  // (nothing to extend).
  void extend(Duration lease);

  // Gives the hold back (see the file comment); a no-op once released or
  // for an empty hold. Never throws.
  void release() noexcept;
  // release() on a new task of the client's runtime, for a caller that
  // must not wait for the script call (an executor's thread; see
  // turnstile/asio.h). Requires owns_hold(); the hold is empty on return.
  // The future never fails: what release() would report goes where
  // release() sends it.
  [[nodiscard]] Future<void> release_async();
  // The strict release: throws what the file comment says. A no-op once
  // released; the hold counts as released even if it throws.
  void release_or_throw();

 private:
  friend LockHold detail::wrap_hold(std::shared_ptr<detail::HoldRecord> record);
  TURNSTILE_HIDDEN explicit LockHold(std::shared_ptr<detail::HoldRecord> record) noexcept;
  const detail::HoldRecord& record() const;

  std::shared_ptr<detail::HoldRecord> record_;
};

}  // namespace turnstile

#endif  // TURNSTILE_HOLD_H_
