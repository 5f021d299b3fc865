#include "locks/wake_registry.h"

#include <exception>
#include <string>
#include <vector>

#include "locks/acquire_wait.h"
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
  try {
    (void)client.backend->eval(scripts::wake_registry_leave, {layout.wake_registry}, registrations);
  } catch (const std::exception&) {
    // Unreachable: the registration stays. The first release that picks
    // it finds nobody subscribed and wakes the next, or a subscription
    // still lingering swallows that one wake-up: the other waiters' timed
    // retries bound it, as they bound a lost message.
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
