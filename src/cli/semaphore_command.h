// cli/semaphore_command.h
//
// `turnstile semaphore NAME [--set-permits N | --release ID | --reset --force]`:
// a semaphore's administration, for the stuck permit, the resize and the
// reset that otherwise take a raw `redis-cli DEL`.
//
//   (no action)       what `status NAME` shows
//   --set-permits N   the crash-safe semaphore: the total becomes N (the
//                     available count is N minus the permits held, negative
//                     until enough are released); the counting one: the
//                     available count becomes N. Waiters are woken.
//   --release ID      the crash-safe semaphore: gives back the permit ID (32
//                     hex digits, as `status` shows it) whoever holds it; its
//                     holder finds it gone at its next renewal. Exit 1 if it
//                     was not held.
//   --reset --force   deletes the semaphore: its count and every held permit
//                     (--force confirms). Exit 1 if there was none.
//
// The kind is --flavor semaphore | counting-semaphore (or --config FILE's
// rule), else read from Redis (turnstile/inspection.h); a free name is
// taken as the crash-safe one, the kind `run --permits` makes. A name
// holding anything but a semaphore (a lock, someone's data) is refused with
// 65 and left as it is.

#ifndef TURNSTILE_CLI_SEMAPHORE_COMMAND_H_
#define TURNSTILE_CLI_SEMAPHORE_COMMAND_H_

#include <cstdint>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "cli/command_common.h"

namespace turnstile::cli {

inline constexpr int kExitNothingToChange = 1;

struct SemaphoreOptions {
  RedisTarget redis;
  FlavorTarget flavor;
  std::string name;
  std::optional<std::int64_t> set_permits;
  std::optional<std::string> release;  // a permit id
  bool reset = false;
  bool force = false;
};

CLI::App* add_semaphore_command(CLI::App& app, SemaphoreOptions& options);
int semaphore_command(const SemaphoreOptions& options);

}  // namespace turnstile::cli

#endif  // TURNSTILE_CLI_SEMAPHORE_COMMAND_H_
