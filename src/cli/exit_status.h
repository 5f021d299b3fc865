// cli/exit_status.h
//
// The exit statuses of the `turnstile` command, in one place, and the one
// function that turns an error escaping a command into its status and its
// one line on stderr. The table is printed by `turnstile --help` and copied
// into docs/cli.md:
//
//   0..255   run with a command: the command's own exit status
//   128+N    run: the command was killed by signal N
//   1        run: the lock was not had in time (-E / --conflict-exit-code);
//            unlock: nothing was locked; semaphore: nothing to release or
//            reset; sim: an unexpected violation
//   64       usage: bad option, malformed duration, empty name, bad config
//   65       the name holds another kind of value, or its permits differ
//   69       Redis unreachable or refusing (connection, auth, ACL, read-only)
//   70       internal error
//   74       sim: the trace file could not be written
//   75       run: the lock was lost while held; the command was terminated
//   78       run: Redis may evict lock keys (maxmemory-policy); nothing was
//            held (--allow-evicting runs anyway, with a warning)
//   126/127  run: the command could not be executed / was not found; sim:
//            likewise turnstile-sim (not installed: 127)

#ifndef TURNSTILE_CLI_EXIT_STATUS_H_
#define TURNSTILE_CLI_EXIT_STATUS_H_

#include <exception>
#include <stdexcept>
#include <string>
#include <string_view>

namespace turnstile::cli {

inline constexpr int kExitSuccess = 0;
inline constexpr int kExitDefaultConflict = 1;
inline constexpr int kExitUsage = 64;           // EX_USAGE
inline constexpr int kExitWrongKind = 65;       // EX_DATAERR
inline constexpr int kExitUnavailable = 69;     // EX_UNAVAILABLE
inline constexpr int kExitInternal = 70;        // EX_SOFTWARE
inline constexpr int kExitLockLost = 75;        // EX_TEMPFAIL: worth retrying
inline constexpr int kExitUnsafeServer = 78;    // EX_CONFIG: the server's configuration
inline constexpr int kExitCannotExecute = 126;  // as sh, env, flock
inline constexpr int kExitCommandNotFound = 127;
inline constexpr int kExitSignalBase = 128;  // + signal number
inline constexpr int kMaxExitStatus = 255;

// Bad command-line input found after parsing (conflicting flags, an empty
// name, a malformed duration): exit 64.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// MismatchError (turnstile/errors.h: a name used with another setting
// than its other users', such as a semaphore's total permits): exit 65,
// like a value of another kind.

// What an error line names besides the error itself.
struct ErrorContext {
  std::string redis;  // Backend::describe(): never a password
  std::string name;   // the lock name, if any
};

// Prints one line "turnstile: ..." for `error` on stderr and returns its
// exit status (never 0, never a conflict status).
int report_error(const std::exception_ptr& error, const ErrorContext& context);

// The exit status a shell would report for a child's waitpid() status:
// the exit code, or 128 + the signal number.
int exit_status_of_wait_status(int wait_status);

// The table above, for --help and docs/cli.md.
std::string exit_status_table();

}  // namespace turnstile::cli

#endif  // TURNSTILE_CLI_EXIT_STATUS_H_
