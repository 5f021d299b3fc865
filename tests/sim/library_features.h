// tests/sim/library_features.h
//
// Library features some simulation tests depend on, detected at compile
// time so that the tests switch over by themselves when a feature is
// merged: a test of the defect skips once it is fixed, and the test of
// the fix skips until then.

#ifndef TURNSTILE_TESTS_SIM_LIBRARY_FEATURES_H_
#define TURNSTILE_TESTS_SIM_LIBRARY_FEATURES_H_

#include "turnstile/lock.h"

namespace turnstile::sim {

template <class Reason>
concept HasLeaseExpired = requires { Reason::lease_expired; };

// Whether the library ends a holding at its own client-side lease deadline
// (send instant of the last confirmed acquire or renewal + lease - margin;
// issue #17), which reports LockLostReason::lease_expired.
inline constexpr bool kLibraryHasClientLeaseDeadline = HasLeaseExpired<LockLostReason>;

}  // namespace turnstile::sim

#endif  // TURNSTILE_TESTS_SIM_LIBRARY_FEATURES_H_
