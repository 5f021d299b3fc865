#include "locks/wake_registry.h"

#include <exception>
#include <string>
#include <vector>

#include "locks/acquire_wait.h"
#include "locks/give_up.h"
#include "lua_scripts.h"
#include "turnstile/client.h"

namespace turnstile::detail {

bool fleet_wakeups(const ClientCore& client, const KeyLayout& layout) {
  return !layout.wake_registry.empty() && client.options.wake_scope == WakeScope::fleet;
}

WakeOptions with_own_channel(const ClientCore& client, const KeyLayout& layout, WakeOptions wake) {
  if (fleet_wakeups(client, layout)) wake.own_channel = layout.wake_channel(client.id);
  return wake;
}

void leave_wake_registry(ClientCore& client, const KeyLayout& layout, std::string_view wait_channel) {
  if (!fleet_wakeups(client, layout)) return;
  // Only the process's last waiter forgets the registration (this one has
  // left its queue already).
  if (client.wakeups->waiters_on(wait_channel) > 0) return;
  std::vector<std::string> registrations{layout.wake_channel(client.id)};
  if (layout.flavor == Flavor::read_write) {
    registrations.push_back(registrations.front() + std::string(kReaderRegistrationSuffix));
  }
  // Unreachable, or not answered within the grace (send_give_up): the
  // registration stays until it expires (lua/lib/wake_registry.lua's
  // margin). The first release that picks it meanwhile finds nobody
  // subscribed and wakes the next, or a subscription still lingering
  // swallows that one wake-up: the other waiters' timed retries bound it,
  // as they bound a lost message.
  try {
    (void)send_give_up(client, scripts::wake_registry_leave, {layout.wake_registry}, registrations);
  } catch (const std::exception&) {
    if (!is_transient(std::current_exception())) throw;
  }
}

void leave_wake_registry_reporting_errors(ClientCore& client, const KeyLayout& layout,
                                          std::string_view wait_channel) noexcept {
  try {
    leave_wake_registry(client, layout, wait_channel);
  } catch (const std::exception&) {
    client.report_background_error(std::current_exception());
  }
}

}  // namespace turnstile::detail
