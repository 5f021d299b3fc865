// locks/flavors/required_total.h
//
// The total permits a semaphore handle makes sure of before its next
// acquisition (HoldableOptions::permits, require_total()): set once, settled
// by the first acquisition after it (a script call outside this object's
// mutex: two tasks may both settle it, which is harmless, set-if-absent).
//
// Thread-safe.

#ifndef TURNSTILE_LOCKS_FLAVORS_REQUIRED_TOTAL_H_
#define TURNSTILE_LOCKS_FLAVORS_REQUIRED_TOTAL_H_

#include <cstdint>
#include <optional>

#include "turnstile/mutex.h"

namespace turnstile::detail {

class RequiredTotal {
 public:
  // The total to make sure of before the next acquisition, until settled().
  void require(std::int64_t total);
  std::optional<std::int64_t> unsettled() const;
  void settled();

 private:
  mutable Mutex mutex_;  // never held across a call
  std::optional<std::int64_t> total_ TURNSTILE_GUARDED_BY(mutex_);
  bool settled_ TURNSTILE_GUARDED_BY(mutex_) = false;
};

}  // namespace turnstile::detail

#endif  // TURNSTILE_LOCKS_FLAVORS_REQUIRED_TOTAL_H_
