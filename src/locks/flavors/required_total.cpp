#include "locks/flavors/required_total.h"

namespace turnstile::detail {

void RequiredTotal::require(std::int64_t total) {
  const MutexLock guard(mutex_);
  total_ = total;
  settled_ = false;
}

std::optional<std::int64_t> RequiredTotal::unsettled() const {
  const MutexLock guard(mutex_);
  if (settled_) return std::nullopt;
  return total_;
}

void RequiredTotal::settled() {
  const MutexLock guard(mutex_);
  settled_ = true;
}

}  // namespace turnstile::detail
