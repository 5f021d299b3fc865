#include "locks/engine/wake_registry.h"

#include <charconv>
#include <exception>
#include <string>
#include <vector>

#include "locks/engine/acquire_wait.h"
#include "locks/engine/give_up.h"
#include "lua_scripts.h"
#include "turnstile/client.h"

namespace turnstile::detail {

bool fleet_wakeups(const ClientCore& client, const KeyLayout& layout) {
  return !layout.wake_registry.empty() && client.options.wake_scope == WakeScope::fleet;
}

bool publish_counts_every_receiver(const Backend& backend) {
  const bool cluster = backend.cluster_slot("").has_value();
  return !cluster || backend.publish_command() == "SPUBLISH";
}

WakeOptions with_own_channel(const ClientCore& client, const KeyLayout& layout, WakeOptions wake) {
  if (fleet_wakeups(client, layout)) wake.own_channel = layout.wake_channel(client.id);
  return wake;
}

void leave_wake_registry(ClientCore& client, const KeyLayout& layout, std::string_view wait_channel,
                         const GiveBack* give_back) {
  if (!fleet_wakeups(client, layout)) return;
  // Only the process's last waiter forgets the registration (this one has
  // left its queue already); a waiter that joins while the leave is under
  // way holds its first try back until the ticket goes (WakeupHub::
  // LeaveTicket).
  const std::optional<WakeupHub::LeaveTicket> ticket = client.wakeups->begin_leave_if_last(wait_channel);
  const bool last = ticket.has_value();
  // The process stays registered for the others: they settle it.
  if (!last) client.wakeups->note_skipped_leave(wait_channel);
  if (!last && give_back == nullptr) return;
  // Unreachable, or not answered within the grace (send_give_up): the
  // registration stays until it expires (lua/lib/wake_registry.lua's
  // margin). The first release that picks it meanwhile finds nobody
  // subscribed and wakes the next, or a subscription still lingering
  // swallows that one wake-up: the other waiters' timed retries bound it,
  // as they bound a lost message. (Answered, the script passes such a
  // wake-up on itself: below.)
  try {
    if (give_back != nullptr) {
      std::vector<std::string> args = give_back->args;
      args.emplace_back(last ? "1" : "0");
      (void)send_give_up(client, *give_back->script, give_back->keys, args);
      return;
    }
    // A lock's release that took this process's registration woke it, and
    // nobody here used that: the script passes it on (not a semaphore's:
    // lua/wake_registry_leave.lua).
    const bool semaphore = is_semaphore(layout.flavor);
    const bool pass_on = !semaphore;
    std::vector<std::string> keys{layout.wake_registry};
    if (pass_on) keys.push_back(layout.name);
    std::vector<std::string> args{pass_on ? "lock" : "", std::string(client.backend->publish_command()),
                                  layout.wake_channel(client.id)};
    if (has_shared_holds(layout.flavor)) args.push_back(args.back() + std::string(kReaderRegistrationSuffix));
    (void)send_give_up(client, scripts::wake_registry_leave, keys, args);
  } catch (const std::exception&) {
    if (!is_transient(std::current_exception())) throw;
  }
}

void leave_wake_registry_reporting_errors(ClientCore& client, const KeyLayout& layout, std::string_view wait_channel,
                                          const GiveBack* give_back) noexcept {
  try {
    leave_wake_registry(client, layout, wait_channel, give_back);
  } catch (const std::exception&) {
    client.report_background_error(std::current_exception());
  }
}

void settle_registration_after_success(ClientCore& client, const KeyLayout& layout, std::string_view wait_channel,
                                       TrySuccess success) noexcept {
  TURNSTILE_CHECK(!success.permits_left || (success.others_sent && is_semaphore(layout.flavor)));
  // A sibling that gave up while this one waited left the registration to
  // it; the success may have run before that sibling's try registered the
  // process, forgetting it too early ("others" '0').
  const bool skipped_leave = client.wakeups->take_skipped_leave(wait_channel);
  if (success.others_sent) {
    if (success.permits_left) client.wakeups->wake_one_unless_waking(wait_channel);
    leave_wake_registry_reporting_errors(client, layout, wait_channel);
    return;
  }
  // One retry registers the process again (a registration is the
  // process's, not a waiter's); a semaphore's siblings may want more
  // permits than the one woken, so all of them try.
  if (is_semaphore(layout.flavor)) {
    client.wakeups->wake_all(wait_channel);
  } else {
    client.wakeups->wake_one_unless_waking(wait_channel);
  }
  if (skipped_leave) leave_wake_registry_reporting_errors(client, layout, wait_channel);
}

}  // namespace turnstile::detail

namespace turnstile::detail {

std::optional<Instant> grant_sent_at(const ClientCore& client, const std::optional<std::string>& grant,
                                     std::string_view acquisition, Instant floor, Duration lease, bool renewed) {
  if (!grant) return std::nullopt;
  // "<acquisition id>:<send instant>" (lua/lib/fair_handoff.lua,
  // lua/lib/wake_registry.lua). Anything else, or an instant this
  // acquisition never sent, is left to the try.
  const std::size_t colon = grant->find(':');
  if (colon == std::string::npos || std::string_view(*grant).substr(0, colon) != acquisition) return std::nullopt;
  Duration::rep sent_ns = 0;
  const char* const end = grant->data() + grant->size();
  const auto [stop, error] = std::from_chars(grant->data() + colon + 1, end, sent_ns);
  if (error != std::errc() || stop != end) return std::nullopt;
  const Instant sent_at{Duration(sent_ns)};
  const Instant now = client.runtime->now();
  if (sent_at < floor || sent_at > now) return std::nullopt;
  // The grant followed the server's processing of the try sent then, so
  // its lease runs out no earlier than that instant + lease: the local
  // deadline is timed from it (lock.h, "The local deadline"). With less
  // than a renewal period (a third of the window) of it left, the try
  // renews it first (it takes the grant and re-arms the lease from its own
  // send instant); with less than two if the watchdog is to renew it: its
  // next tick may be a whole period away, and that renewal must be
  // confirmed before the deadline. With one period, a grant to an offer a
  // waiter had left two periods before was renewed at its deadline and
  // lost under load (cli-redis,
  // NineProcessesWithThreePermitsNeverHaveMoreThanThreeInside, lease 2 s).
  const LeaseTiming& timing = client.watchdog->timing();
  const Duration period = timing.window(lease) / 3;
  if (sent_at + timing.window(lease) - now < (renewed ? 2 * period : period)) return std::nullopt;
  return sent_at;
}

}  // namespace turnstile::detail
