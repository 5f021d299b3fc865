// cli/revoke_command.h
//
// `turnstile revoke [OPTIONS] NAME`: asks the holders of NAME (any flavor,
// an election's leader too) to release it (turnstile/revocation.h): a
// `turnstile run --on-revoke SIGNAL` holding it sends SIGNAL to its
// command; a library holder's watch is told. Advice, not force: a holder
// that does not listen keeps the lock (`unlock --force` breaks it). Exit 0
// when some process listened, 1 when nobody did.

#ifndef TURNSTILE_CLI_REVOKE_COMMAND_H_
#define TURNSTILE_CLI_REVOKE_COMMAND_H_

#include <string>

#include <CLI/CLI.hpp>

#include "cli/command_common.h"

namespace turnstile::cli {

struct RevokeOptions {
  RedisTarget redis;
  std::string name;
  std::string reason;
};

CLI::App* add_revoke_command(CLI::App& app, RevokeOptions& options);
int revoke_command(const RevokeOptions& options);

}  // namespace turnstile::cli

#endif  // TURNSTILE_CLI_REVOKE_COMMAND_H_
