// `turnstile unlock --force`.

#include "cli/unlock_command.h"

#include <cstdio>

#include "cli/command_common.h"
#include "cli/exit_status.h"
#include "turnstile/client.h"
#include "turnstile/errors.h"
#include "turnstile/inspection.h"

namespace turnstile::cli {

CLI::App* add_unlock_command(CLI::App& app, UnlockOptions& options) {
  CLI::App* unlock = app.add_subcommand(
      "unlock", "turnstile unlock --force NAME\nForce-unlock NAME whoever holds it (--force confirms)");
  add_redis_option(*unlock, options.redis);
  add_flavor_options(*unlock, options.flavor);
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
    const InspectOptions inspect_options{.flavor = target_flavor(options.flavor, options.name)};
    std::shared_ptr<Backend> backend = make_backend(options.redis);
    context.redis = backend->describe();
    Client client(backend);
    bool unlocked = false;
    try {
      unlocked = force_unlock(client, options.name, inspect_options);
    } catch (const WrongTypeError&) {
      // A semaphore has its own administration: say which (one read, on
      // this refusal only).
      const Inspection seen = inspect(*backend, options.name, inspect_options);
      if (!seen.flavor || !flavor_traits(*seen.flavor).is_semaphore) throw;
      throw WrongTypeError("WRONGTYPE " + in_quotes(options.name) + " is a " + std::string(flavor_name(*seen.flavor)) +
                           ": its permits have no single holder to unlock; free a stuck permit with `turnstile "
                           "semaphore NAME --release ID` (ids: `turnstile status NAME`) or start over with "
                           "`turnstile semaphore NAME --reset --force`");
    }
    if (!unlocked) {
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
