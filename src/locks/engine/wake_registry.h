// locks/engine/wake_registry.h
//
// Fleet-wide wake-ups from the client's side, for every flavor whose
// layout has a wake registry (KeyLayout::wake_registry: reentrant, fenced,
// token, both semaphores, the read-write lock; lua/lib/wake_registry.lua,
// lua/lib/read_write_wake.lua): whether a client
// uses it (ClientOptions::wake_scope), the WakeupHub options that add the
// process's own channel, and forgetting a process whose last waiter left
// without acquiring.

#ifndef TURNSTILE_LOCKS_ENGINE_WAKE_REGISTRY_H_
#define TURNSTILE_LOCKS_ENGINE_WAKE_REGISTRY_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "locks/handles/client_core.h"
#include "locks/engine/wakeup_hub.h"
#include "turnstile/key_layout.h"
#include "turnstile/script.h"

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

// Whether a PUBLISH (or SPUBLISH) inside a script counts every subscriber
// its message reaches, as a direct handoff needs: it commits a grant only
// when the grant's message is counted as received. Not on a Redis Cluster
// with classic pub/sub (Redis 6.2): PUBLISH counts the node's own
// subscribers, but the cluster bus delivers the message to every node's,
// so a grant counted as reaching nobody (and so never made) would still be
// received and taken, beside the hold of whoever takes the free lock. Every
// direct handoff falls back to telling (Handoff::announce) there.
bool publish_counts_every_receiver(const Backend& backend);

// `wake` with the process's own channel when fleet_wakeups().
WakeOptions with_own_channel(const ClientCore& client, const KeyLayout& layout, WakeOptions wake);

// The process's last waiter on `wait_channel` has left without acquiring
// (it had registered): the process is forgotten, so no release picks it
// (a read-write lock's: for both kinds).
// Nothing while other waiters of the process still wait, nor without
// fleet_wakeups(). A transient failure leaves the registration (the next
// release that picks it finds nobody listening and wakes the next); any
// other is thrown.
//
// With `give_back` (the crash-safe semaphore's direct handoff: the
// acquisition left an offer), its call is made instead, whether or not
// other waiters of the process wait, with one more argument: "1" if this
// was the process's last waiter (forgotten then), else "0". It withdraws
// the offer and gives back a grant never taken.
struct GiveBack {
  const Script* script = nullptr;
  std::vector<std::string> keys;
  std::vector<std::string> args;
};
void leave_wake_registry(ClientCore& client, const KeyLayout& layout, std::string_view wait_channel,
                         const GiveBack* give_back = nullptr);
// The same for a wait that ends by throwing: a failure to leave goes to the
// client's background handler (the wait's own is the one thrown).
void leave_wake_registry_reporting_errors(ClientCore& client, const KeyLayout& layout, std::string_view wait_channel,
                                          const GiveBack* give_back = nullptr) noexcept;
// After a success of a fleet try (wake registry), `success.others_sent` the try's
// "others" argument (lua/lib/wake_registry.lua, after_success):
//   * '1' kept the process registered for its other waiters. If none is
//     left (each got in or gave up meanwhile, its own leave skipped while
//     this one still waited), the registration is stale: a release picking
//     it would publish on the process's channel, still subscribed for
//     kChannelLingerMs but heard by nobody, and that wake-up would be lost
//     (the wake-up property, token seed 31). The process leaves as its
//     last waiter would.
//   * '0' forgot the process. A sibling that joined meanwhile may have
//     registered it before that ran: a semaphore's wanting more permits
//     (it failed where this one got in: seed 336), a lock's whose try ran
//     first, while the lock was still another's (token seed 5236). The
//     process's remaining waiters try again (WakeupHub::wake_all; a lock's:
//     one of them, wake_one_unless_waking) and register it anew.
//   * Either way, a sibling may have registered the process after the
//     success ran (its try found the lock taken by it), then given up
//     while this one still waited, leaving the registration to it
//     (WakeupHub::note_skipped_leave): the process leaves as its last
//     waiter would (the token lock, seed 3179).
//   * A semaphore's success that left permits free while '1' (the script
//     said so): one more waiter of the process tries, unless one is woken
//     already (WakeupHub::wake_one_unless_waking).
//     The release that woke this process forgot it in the registry until
//     this try registered it again; a release in between told only the
//     shared channel, which the process may have ignored (seeds 651, 495).
// Failures go to the client's background handler.
struct TrySuccess {
  bool others_sent = false;   // the try's "others" argument was '1'
  bool permits_left = false;  // a semaphore's: free permits remain
};
void settle_registration_after_success(ClientCore& client, const KeyLayout& layout, std::string_view wait_channel,
                                       TrySuccess success) noexcept;

// Direct handoff by process (reentrant lock, crash-safe semaphore): the
// send instant a grant message's "<acquisition id>:<send instant>"
// (`grant`) names, if its waiter may take it without a try: it names
// `acquisition`, an instant from `floor` (no grant is older) to now, and
// leaves at least a renewal period of `lease` (lock.h, "The local
// deadline": the lease is timed from that instant), two if the watchdog is
// to renew it (`renewed`: its next tick may be a period away). Else
// nullopt: a stale, foreign or unreadable grant is left to the try, which
// takes a grant of its acquisition from the server.
std::optional<Instant> grant_sent_at(const ClientCore& client, const std::optional<std::string>& grant,
                                     std::string_view acquisition, Instant floor, Duration lease, bool renewed);

}  // namespace turnstile::detail

#endif  // TURNSTILE_LOCKS_ENGINE_WAKE_REGISTRY_H_
