// `turnstile unlock --force`.

#include "cli/unlock_command.h"

#include <cstdio>

#include "cli/command_common.h"
#include "cli/exit_status.h"
#include "cli/lock_inspection.h"
#include "turnstile/client.h"
#include "turnstile/errors.h"

namespace turnstile::cli {
namespace {

// The lock flavor that force-unlocks `kind` (its script checks the type
// again, atomically, so a change since the inspection is refused).
bool force_unlock(Client& client, const std::string& name, std::optional<Flavor> flavor) {
  if (!flavor) return false;
  switch (*flavor) {
    case Flavor::reentrant:
    case Flavor::redlock:  // a node of one
    case Flavor::multilock:
      return client.lock(name).force_unlock();
    case Flavor::fair:  // wakes the head of the queue, on its own channel
      return client.fair_lock(name).force_unlock();
    case Flavor::token:
      return client.token_lock(name).force_unlock();
    case Flavor::read_write:
      return client.read_write_lock(name).force_unlock();
    case Flavor::semaphore:
    case Flavor::counting_semaphore:
      throw WrongTypeError("WRONGTYPE " + in_quotes(name) +
                           " is a semaphore: its permits have no single holder to unlock");
  }
  return false;
}

}  // namespace

CLI::App* add_unlock_command(CLI::App& app, UnlockOptions& options) {
  CLI::App* unlock = app.add_subcommand(
      "unlock", "turnstile unlock --force NAME\nForce-unlock NAME whoever holds it (--force confirms)");
  add_redis_option(*unlock, options.redis);
  add_name_argument(*unlock, options.name);
  unlock->add_flag("--force", options.force,
                   "confirm: delete the lock whoever holds it (its holder finds out at its next renewal)");
  return unlock;
}

int unlock_command(const UnlockOptions& options) {
  ErrorContext context{.redis = {}, .name = options.name};
  try {
    check_name(options.name);
    if (!options.force) {
      throw UsageError("unlock deletes " + in_quotes(options.name) + " whoever holds it: confirm with --force");
    }
    std::shared_ptr<Backend> backend = make_backend(options.redis);
    context.redis = backend->describe();
    const Inspection inspection = inspect(*backend, options.name);
    Client client(backend);
    if (!force_unlock(client, options.name, inspection.flavor)) {
      std::fprintf(stderr, "turnstile: '%s' was not locked (Redis at %s)\n", options.name.c_str(),
                   context.redis.c_str());
      return kExitNothingToUnlock;
    }
    std::fprintf(stderr, "turnstile: unlocked '%s' (Redis at %s)\n", options.name.c_str(), context.redis.c_str());
    return kExitSuccess;
  } catch (...) {
    return report_error(std::current_exception(), context);
  }
}

}  // namespace turnstile::cli
