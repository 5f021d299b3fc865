// locks/flavors/semaphore_common.h
//
// What both semaphore kinds share: validating permit counts and leases
// (their keys: turnstile/key_layout.h).

#ifndef TURNSTILE_LOCKS_FLAVORS_SEMAPHORE_COMMON_H_
#define TURNSTILE_LOCKS_FLAVORS_SEMAPHORE_COMMON_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "turnstile/runtime.h"

namespace turnstile::detail {

// Throws InvalidArgumentError naming `operation` unless
// 0 <= permits <= kMaxPermits.
void check_permit_count(std::int64_t permits, std::string_view operation);

// The lease in whole ms; throws InvalidArgumentError (check_lease()) if
// below 1 ms or above kMaxLease.
std::int64_t lease_ms_of(Duration lease);

}  // namespace turnstile::detail

#endif  // TURNSTILE_LOCKS_FLAVORS_SEMAPHORE_COMMON_H_
