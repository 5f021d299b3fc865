// `turnstile semaphore`: resize, free a permit, reset (cli/semaphore_command.h).

#include "cli/semaphore_command.h"

#include <cstdio>
#include <optional>

#include "cli/exit_status.h"
#include "cli/holder_identity.h"
#include "cli/status_command.h"
#include "turnstile/client.h"
#include "turnstile/errors.h"
#include "turnstile/inspection.h"
#include "turnstile/key_layout.h"
#include "turnstile/semaphore.h"

namespace turnstile::cli {
namespace {

// The semaphore flavor at `options.name`: told, else found; a free name is
// the crash-safe kind. Anything else is refused, untouched.
Flavor semaphore_flavor(Backend& backend, const SemaphoreOptions& options) {
  const std::optional<Flavor> told = target_flavor(options.flavor, options.name);
  const Inspection seen = inspect(backend, options.name, {.flavor = told});
  const Flavor flavor = seen.flavor.value_or(Flavor::semaphore);
  if (!is_semaphore(flavor)) {
    throw WrongTypeError("WRONGTYPE " + in_quotes(options.name) + " is a " + std::string(flavor_name(flavor)) +
                         ", not a semaphore: nothing changed");
  }
  return flavor;
}

// Who holds permit `id` of `name` (permit_identity_key(): key_layout.h),
// read before a release says whose it freed; nullopt: none stored, or a
// value of another type there (as status ignores it: never a reason not
// to release).
std::optional<HolderIdentity> permit_holder(Backend& backend, const std::string& name, const PermitId& id) {
  try {
    const Reply reply = backend.command({"GET", permit_identity_key(name, id.hex())});
    if (!reply.is_bulk()) return std::nullopt;
    return parse_holder_identity(reply.as_string());
  } catch (const WrongTypeError&) {
    return std::nullopt;
  }
}

bool key_exists(Backend& backend, const std::string& key) {
  const Reply reply = backend.command({"EXISTS", key});
  return reply.is_integer() && reply.as_integer() > 0;
}

// A change (--set-permits, --reset) to an integer that already stands at
// `options.name` needs a sign that it is a semaphore, as a bare integer is
// anyone's counter just as well: its kind named (--flavor, --config), a
// permit held (the crash-safe kind's timeout zset), or a turnstile process
// waiting on it (its wake registry). Without one, refused untouched.
void check_it_is_a_semaphore(Backend& backend, const SemaphoreOptions& options) {
  if (target_flavor(options.flavor, options.name)) return;
  const KeyLayout permits = key_layout(Flavor::semaphore, options.name);
  if (!key_exists(backend, permits.name)) return;  // a new semaphore
  if (key_exists(backend, permits.permit_timeouts) || key_exists(backend, permits.wake_registry)) return;
  throw WrongTypeError("WRONGTYPE " + in_quotes(options.name) +
                       " holds an integer with nothing of a semaphore beside it (no permit held, no turnstile "
                       "process waiting): it may be anyone's counter. Name its kind to change it "
                       "(--flavor semaphore or --flavor counting-semaphore): nothing changed");
}

void tell(const std::string& line) { std::fprintf(stderr, "turnstile: %s\n", line.c_str()); }

}  // namespace

CLI::App* add_semaphore_command(CLI::App& app, SemaphoreOptions& options) {
  CLI::App* semaphore =
      app.add_subcommand("semaphore",
                         "turnstile semaphore NAME [--set-permits N | --release ID | --reset --force]\n"
                         "Show a semaphore, resize it, free a permit or reset it");
  add_redis_option(*semaphore, options.redis);
  add_flavor_options(*semaphore, options.flavor);
  add_name_argument(*semaphore, options.name);
  CLI::Option* set = semaphore->add_option(
      "--set-permits", options.set_permits,
      "the crash-safe kind: the total becomes N (available = N - held); the counting kind: available becomes N");
  CLI::Option* release = semaphore->add_option(
      "--release", options.release, "give back the crash-safe semaphore's permit ID (32 hex digits) whoever holds it");
  CLI::Option* reset =
      semaphore->add_flag("--reset", options.reset, "delete the semaphore and every held permit (needs --force)");
  semaphore->add_flag("--force", options.force, "confirm --reset");
  set->excludes(release)->excludes(reset);
  release->excludes(reset);
  return semaphore;
}

int semaphore_command(const SemaphoreOptions& options) {
  ErrorContext context{.redis = {}, .name = options.name};
  try {
    check_name(options.name);
    if (options.reset && !options.force) {
      throw UsageError("--reset deletes " + in_quotes(options.name) + " and every held permit: confirm with --force");
    }
    if (options.force && !options.reset) throw UsageError("--force confirms --reset, and nothing else");
    if (options.set_permits && (*options.set_permits < 0 || *options.set_permits > kMaxPermits)) {
      throw UsageError("--set-permits must be within [0, 2^53 = " + std::to_string(kMaxPermits) + "], got " +
                       std::to_string(*options.set_permits));
    }
    std::optional<PermitId> permit;
    if (options.release) {
      try {
        permit = PermitId(*options.release);
      } catch (const InvalidArgumentError& bad) {
        throw UsageError(std::string("--release: ") + bad.what());
      }
    }
    std::shared_ptr<Backend> backend = make_backend(options.redis);
    context.redis = backend->describe();
    const Flavor flavor = semaphore_flavor(*backend, options);
    if (options.set_permits || options.reset) check_it_is_a_semaphore(*backend, options);
    Client client(backend);
    const std::string name = in_quotes(options.name);
    if (options.set_permits) {
      if (has_leased_permits(flavor)) {
        client.permit_semaphore(options.name).set_permits(*options.set_permits);
        tell(name + " now has " + std::to_string(*options.set_permits) + " permits in total");
      } else {
        const std::int64_t before = client.counting_semaphore(options.name).set_permits(*options.set_permits);
        tell(name + " now has " + std::to_string(*options.set_permits) + " permits available (was " +
             std::to_string(before) + ")");
      }
      return kExitSuccess;
    }
    if (permit) {
      if (!has_leased_permits(flavor)) {
        throw UsageError(name + " is a counting semaphore: its permits have no ids to release (--set-permits)");
      }
      const std::optional<HolderIdentity> whose = permit_holder(*backend, options.name, *permit);
      if (!client.permit_semaphore(options.name).try_release(*permit)) {
        tell("permit " + permit->hex() + " of " + name + " was not held: nothing changed");
        return kExitNothingToChange;
      }
      tell("released permit " + permit->hex() + " of " + name + ", held by " + holder_identity_text(whose));
      return kExitSuccess;
    }
    if (options.reset) {
      const bool existed = has_leased_permits(flavor) ? client.permit_semaphore(options.name).reset()
                                                      : client.counting_semaphore(options.name).reset();
      if (!existed) {
        tell(name + " did not exist: nothing to reset");
        return kExitNothingToChange;
      }
      tell("reset " + name + " (Redis at " + context.redis + ")");
      return kExitSuccess;
    }
    // What is there: "free" for nothing yet (as status says), not the
    // kind a change would have made.
    const std::string out = status_text(
        inspect(*backend, options.name, {.flavor = target_flavor(options.flavor, options.name)}), context.redis);
    std::fwrite(out.data(), 1, out.size(), stdout);
    return kExitSuccess;
  } catch (...) {
    return report_error(std::current_exception(), context);
  }
}

}  // namespace turnstile::cli
