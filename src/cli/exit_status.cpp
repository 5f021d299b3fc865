// Exit statuses and the mapping from errors to them.

#include "cli/exit_status.h"

#include <sys/wait.h>

#include <cstdio>
#include <optional>

#include "core/check.h"
#include "turnstile/errors.h"

namespace turnstile::cli {
namespace {

void print_line(const std::string& line) { std::fprintf(stderr, "turnstile: %s\n", line.c_str()); }

std::string at_redis(const ErrorContext& context) {
  return context.redis.empty() ? std::string() : " (Redis at " + context.redis + ")";
}

std::string quoted_name(const ErrorContext& context) {
  return context.name.empty() ? std::string("the name") : in_quotes(context.name);
}

// How Redis refuses to serve (exit 69), or nullopt for any other error reply.
std::optional<std::string_view> refusal_of(const ServerError& error) {
  if (dynamic_cast<const AuthenticationError*>(&error) != nullptr) return "refused the credentials";
  if (dynamic_cast<const PermissionError*>(&error) != nullptr) return "refused by ACL";
  if (dynamic_cast<const ReadOnlyError*>(&error) != nullptr) return "is a read-only replica";
  if (dynamic_cast<const OutOfMemoryError*>(&error) != nullptr) return "is out of memory";
  if (dynamic_cast<const NoReplicasError*>(&error) != nullptr) {
    return "has too few replicas to take writes (min-replicas-to-write); try again";
  }
  if (dynamic_cast<const BusyError*>(&error) != nullptr) return "is busy running a script";
  if (dynamic_cast<const NoScriptError*>(&error) != nullptr) {
    return "lost turnstile's scripts again right after they were loaded (SCRIPT FLUSH, a restart); try again";
  }
  if (dynamic_cast<const ServerNotReadyError*>(&error) != nullptr) {
    return "is not ready (loading its data after a restart, or a replica without its master); try again";
  }
  if (dynamic_cast<const DatabaseSelectError*>(&error) != nullptr) return "refused to select the URL's database";
  return std::nullopt;
}

}  // namespace

int report_error(const std::exception_ptr& error, const ErrorContext& context) {
  TURNSTILE_CHECK(error != nullptr);
  try {
    std::rethrow_exception(error);
  } catch (const UsageError& usage) {
    print_line(usage.what());
    return kExitUsage;
  } catch (const InvalidArgumentError& invalid) {
    print_line(invalid.what());
    return kExitUsage;
  } catch (const MismatchError& mismatch) {
    print_line(std::string(mismatch.what()) + at_redis(context));
    return kExitWrongKind;
  } catch (const WrongTypeError& wrong_type) {
    print_line(quoted_name(context) + " holds another kind of value" + at_redis(context) + ": " + wrong_type.what());
    return kExitWrongKind;
  } catch (const UnsafeServerError& unsafe) {
    // Evicting (run's own check names --allow-evicting), or aof_sync asked
    // of a server that cannot fsync a grant.
    print_line(std::string(unsafe.what()) + "; nothing was held");
    return kExitUnsafeServer;
  } catch (const ConnectionError& connection) {
    print_line("cannot reach Redis at " + context.redis + ": " + connection.what());
    return kExitUnavailable;
  } catch (const ServerError& server_error) {
    if (std::optional<std::string_view> refusal = refusal_of(server_error)) {
      print_line("Redis at " + context.redis + " " + std::string(*refusal) + ": " + server_error.what());
      return kExitUnavailable;
    }
    print_line("internal error" + at_redis(context) + ": " + server_error.what());
    return kExitInternal;
  } catch (const ReplicaSyncError& unreplicated) {
    // Tried again until the wait's end: the master's replicas stayed out
    // of step (one in its first sync, lagging, or stopped).
    print_line("Redis at " + context.redis + ": " + unreplicated.what() + "; nothing is held");
    return kExitUnavailable;
  } catch (const std::exception& other) {
    print_line("internal error" + at_redis(context) + ": " + other.what());
    return kExitInternal;
  } catch (...) {
    print_line("internal error: unknown exception");
    return kExitInternal;
  }
}

int exit_status_of_wait_status(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return kExitSignalBase + WTERMSIG(wait_status);
  TURNSTILE_UNREACHABLE("exit_status_of_wait_status: the child neither exited nor was killed");
  return kExitInternal;
}

std::string exit_status_table() {
  return "Exit status:\n"
         "  N        run and elect with a command: the command's exit status\n"
         "  128+N    run and elect: the command was killed by signal N\n"
         "  1        run: the lock was not had in time (change with -E); elect: not elected\n"
         "           in time; leader: nobody leads; unlock: nothing was locked; semaphore:\n"
         "           nothing to release or reset; sim: a checker found a violation the\n"
         "           scenario does not expect\n"
         "  64       usage: bad option, malformed duration, empty name, bad config file\n"
         "  65       the name holds another kind of value, or its permit count differs\n"
         "  69       Redis unreachable or refusing (connection, auth, ACL, read-only, db)\n"
         "  70       internal error\n"
         "  74       sim: the trace file could not be written\n"
         "  75       run: the lock was lost while held; the command was terminated; elect\n"
         "           --once: the leadership was lost\n"
         "  78       run: Redis may evict lock keys (maxmemory-policy); nothing was held\n"
         "           (--allow-evicting runs anyway, with a warning)\n"
         "  126/127  run: the command could not be executed / was not found; sim: likewise\n"
         "           turnstile-sim (not installed: 127)\n";
}

}  // namespace turnstile::cli
