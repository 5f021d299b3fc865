// cli/status_command.h
//
// `turnstile status NAME [--json]`: what is at NAME (see lock_inspection.h):
// kind, holders and hold counts, remaining ttl, the fair queue with
// positions, permits available and held. Exit 0 whatever the state (a free
// name included); 65 if NAME holds something that is not a turnstile lock.

#ifndef TURNSTILE_CLI_STATUS_COMMAND_H_
#define TURNSTILE_CLI_STATUS_COMMAND_H_

#include <string>

#include <CLI/CLI.hpp>

#include "cli/command_common.h"

#include "cli/lock_inspection.h"

namespace turnstile::cli {

struct StatusOptions {
  RedisTarget redis;
  std::string name;
  bool json = false;
};

CLI::App* add_status_command(CLI::App& app, StatusOptions& options);
int status_command(const StatusOptions& options);

// The renderings, separate for tests: one JSON object; "key: value" lines.
std::string status_json(const Inspection& inspection, const std::string& redis);
std::string status_text(const Inspection& inspection, const std::string& redis);

}  // namespace turnstile::cli

#endif  // TURNSTILE_CLI_STATUS_COMMAND_H_
