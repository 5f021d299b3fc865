// locks/wake_registry.h
//
// Fleet-wide wake-ups from the client's side, for every flavor whose
// layout has a wake registry (KeyLayout::wake_registry: reentrant, fenced,
// token, both semaphores, the read-write lock; lua/lib/wake_registry.lua,
// lua/lib/read_write_wake.lua): whether a client
// uses it (ClientOptions::wake_scope), the WakeupHub options that add the
// process's own channel, and forgetting a process whose last waiter left
// without acquiring.

#ifndef TURNSTILE_LOCKS_WAKE_REGISTRY_H_
#define TURNSTILE_LOCKS_WAKE_REGISTRY_H_

#include <cstdint>
#include <string_view>

#include "locks/client_core.h"
#include "locks/wakeup_hub.h"
#include "turnstile/key_layout.h"

namespace turnstile::detail {

// A semaphore waiter registered in the fleet tries again at least this
// often (ms), though no permit expires: its registration lives that long
// (plus a margin), and a release by a foreign client it did not heed (a
// Redisson release publishes on the shared channel only) is found then.
inline constexpr std::int64_t kFleetSemaphoreRetryMs = 10'000;

// A read-write lock's process registered for its readers: its wake channel
// with this suffix (lua/lib/read_write_wake.lua, READ_SUFFIX).
inline constexpr std::string_view kReaderRegistrationSuffix = ":read";

// Whether releases on `layout`'s name wake waiters of the whole fleet for
// `client`: wake_scope fleet and a layout with a registry.
bool fleet_wakeups(const ClientCore& client, const KeyLayout& layout);

// `wake` with the process's own channel when fleet_wakeups().
WakeOptions with_own_channel(const ClientCore& client, const KeyLayout& layout, WakeOptions wake);

// The process's last waiter on `wait_channel` has left without acquiring
// (it had registered): the process is forgotten, so no release picks it
// (a read-write lock's: for both kinds).
// Nothing while other waiters of the process still wait, nor without
// fleet_wakeups(). A transient failure leaves the registration (the next
// release that picks it finds nobody listening and wakes the next); any
// other is thrown.
void leave_wake_registry(ClientCore& client, const KeyLayout& layout, std::string_view wait_channel);
// The same for a wait that ends by throwing: a failure to leave goes to the
// client's background handler (the wait's own is the one thrown).
void leave_wake_registry_reporting_errors(ClientCore& client, const KeyLayout& layout,
                                          std::string_view wait_channel) noexcept;

}  // namespace turnstile::detail

#endif  // TURNSTILE_LOCKS_WAKE_REGISTRY_H_
