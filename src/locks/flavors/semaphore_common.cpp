#include "locks/flavors/semaphore_common.h"

#include <chrono>

#include "locks/engine/acquire_wait.h"
#include "turnstile/client.h"
#include "turnstile/errors.h"

namespace turnstile::detail {

void check_permit_count(std::int64_t permits, std::string_view operation) {
  if (permits < 0) {
    throw InvalidArgumentError(std::string(operation) + ": permit count must not be negative, got " +
                               std::to_string(permits));
  }
  if (permits > kMaxPermits) {
    throw InvalidArgumentError(std::string(operation) + ": permit count must be at most 2^53 (" +
                               std::to_string(kMaxPermits) + "), got " + std::to_string(permits));
  }
}

std::int64_t lease_ms_of(Duration lease) {
  check_lease(lease);
  return std::chrono::duration_cast<std::chrono::milliseconds>(lease).count();
}

}  // namespace turnstile::detail
