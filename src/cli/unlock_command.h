// cli/unlock_command.h
//
// `turnstile unlock --force NAME`: deletes the lock at NAME whoever holds it
// and wakes its waiters; its holder learns at its next renewal (a
// `turnstile run` holding it exits 75). --force is required: it is the
// confirmation, so scripts can use it and nobody does it by accident.
// Exit 0 if a lock was deleted, 1 if there was none, 65 if NAME holds
// something else (a semaphore included: it has no single holder).
//
// What is deleted (turnstile/inspection.h, force_unlock()): a lock of the
// flavor found at NAME (or given by --flavor / --config), as Redisson's
// forceUnlock does, including one held by another client of Redisson's
// layout (owner "<uuid>:...": node-redisson, Redisson's transactions). A
// hash of hold counts with any other field is shown by `status` and waited
// on by `run`, but never deleted here (65): it may be someone's data.

#ifndef TURNSTILE_CLI_UNLOCK_COMMAND_H_
#define TURNSTILE_CLI_UNLOCK_COMMAND_H_

#include <string>

#include <CLI/CLI.hpp>

#include "cli/command_common.h"

namespace turnstile::cli {

inline constexpr int kExitNothingToUnlock = 1;

struct UnlockOptions {
  RedisTarget redis;
  FlavorTarget flavor;
  std::string name;
  bool force = false;
};

CLI::App* add_unlock_command(CLI::App& app, UnlockOptions& options);
int unlock_command(const UnlockOptions& options);

}  // namespace turnstile::cli

#endif  // TURNSTILE_CLI_UNLOCK_COMMAND_H_
