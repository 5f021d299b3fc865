// locks/engine/hold_record.h
//
// What a LockHold (turnstile/hold.h) owns: one hold taken for an owner id of
// its own, and how to give it back. Each kind of holdable has a subclass
// (the lock engine, the composite locks, both semaphores), which knows its
// own machinery; the record releases at most once, whichever thread asks.

#ifndef TURNSTILE_LOCKS_ENGINE_HOLD_RECORD_H_
#define TURNSTILE_LOCKS_ENGINE_HOLD_RECORD_H_

#include <atomic>
#include <cstdint>
#include <exception>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include "turnstile/flavor.h"
#include "turnstile/hold.h"
#include "turnstile/runtime.h"

namespace turnstile::detail {

class HoldRecord {
 public:
  HoldRecord(Flavor flavor_in, std::string name_in, std::string owner_in)
      : flavor(flavor_in), name(std::move(name_in)), owner(std::move(owner_in)) {}
  HoldRecord(const HoldRecord&) = delete;
  HoldRecord& operator=(const HoldRecord&) = delete;
  virtual ~HoldRecord() = default;

  const Flavor flavor;
  const std::string name;
  const std::string owner;
  std::optional<std::int64_t> fencing_token;
  std::vector<std::string> permit_ids;

  // LockHold::release(): once; failures go to the background handler.
  void release_quietly() noexcept;
  // LockHold::release_or_throw(): once.
  void release_strictly();

  virtual bool held() const = 0;
  virtual std::stop_token loss_token() const = 0;
  virtual void extend(Duration lease) = 0;
  // The runtime of the client that took it.
  virtual Runtime& runtime() const = 0;

 protected:
  // Gives the hold back. A loss it finds is told as every loss is; then
  // `strict` throws (release_or_throw()'s errors) where unlock()'s contract
  // returns. Called once.
  virtual void release(bool strict) = 0;
  virtual void report_background_error(std::exception_ptr error) const noexcept = 0;
  // For subclasses without a lease: whether release() has begun.
  bool released() const noexcept { return released_.load(std::memory_order_acquire); }

 private:
  std::atomic<bool> released_{false};
};

// An owner id for one hold of a client: "<uuid>:<n>", n counting up from
// kFirstHoldId (above every task id: those count up from 1).
inline constexpr std::uint64_t kFirstHoldId = std::uint64_t{1} << 62;

// A stop token that is already requested: what a hold that is not held
// any more answers.
std::stop_token stopped_token();

}  // namespace turnstile::detail

#endif  // TURNSTILE_LOCKS_ENGINE_HOLD_RECORD_H_
