// cli/flavor.h
//
// What `turnstile run` holds, whatever the flavor: the one place where a
// lock flavor (reentrant, fair, token) or the crash-safe semaphore plugs
// into the command. Each flavor maps onto four operations:
//
//   acquire(wait, stop)
//                    wait up to `wait` (nullopt: forever) unless `stop` is
//                    requested first (a signal); what is held (owner id,
//                    fencing token, permit ids), or nullopt if not in time
//                    or stopped (nothing left behind: a fair queue entry is
//                    withdrawn). Transient Redis failures are ridden out
//                    (ClientOptions::unreachable_limit).
//   release()        give it back; throws NotOwnerError / LockLostError if
//                    it was lost meanwhile
//   lost handler     told once, on a background thread, if the holding is
//                    lost while held (renewal found it gone, or Redis was
//                    unreachable for a whole ttl)
//
// acquire() and release() must run on the same thread: a lock's owner id
// names the acquiring thread.

#ifndef TURNSTILE_CLI_FLAVOR_H_
#define TURNSTILE_CLI_FLAVOR_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "turnstile/client.h"
#include "turnstile/lock_policy.h"
#include "turnstile/runtime.h"

namespace turnstile::cli {

struct Held {
  std::string owner;                          // TURNSTILE_OWNER
  std::optional<std::int64_t> fencing_token;  // TURNSTILE_FENCING_TOKEN, if the flavor has one
  std::vector<std::string> permit_ids;        // semaphores: TURNSTILE_PERMIT_IDS
};

// Why a holding was lost, as one phrase for the error line.
using LostHandler = std::function<void(std::string_view why)>;

class Flavor {
 public:
  Flavor() = default;
  Flavor(const Flavor&) = delete;
  Flavor& operator=(const Flavor&) = delete;
  virtual ~Flavor() = default;

  // What is held, for messages: "lock", "permit of".
  virtual std::string_view noun() const = 0;
  // Call before acquire().
  virtual void set_lost_handler(LostHandler handler) = 0;
  [[nodiscard]] virtual std::optional<Held> acquire(std::optional<Duration> wait, std::stop_token stop) = 0;
  virtual void release() = 0;
};

// The flavor `rule` names for `name` on `client`: a reentrant or fair lock
// (fenced), a token lock, or one permit of the crash-safe semaphore with
// rule.permits permits.
std::unique_ptr<Flavor> make_flavor(Client& client, std::string_view name, const LockRule& rule);

}  // namespace turnstile::cli

#endif  // TURNSTILE_CLI_FLAVOR_H_
