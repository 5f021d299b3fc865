// cli/leader_command.h
//
// `turnstile leader [OPTIONS] NAME`: who leads the election NAME
// (turnstile/election.h, `turnstile elect`): its value, term, owner, since
// when, and the lease its lock has left; with --json one object. Exit 0
// when somebody leads, 1 when nobody does (between leaders, or never
// elected), so a script can ask `turnstile leader NAME && ...`.

#ifndef TURNSTILE_CLI_LEADER_COMMAND_H_
#define TURNSTILE_CLI_LEADER_COMMAND_H_

#include <cstdint>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "cli/command_common.h"
#include "turnstile/election.h"

namespace turnstile::cli {

struct LeaderOptions {
  RedisTarget redis;
  std::string name;
  bool json = false;
};

CLI::App* add_leader_command(CLI::App& app, LeaderOptions& options);
int leader_command(const LeaderOptions& options);

// The renderings, separate for tests: one JSON object; "key: value" lines.
std::string leader_json(const std::string& name, const std::optional<Leader>& leader, const std::string& redis);
std::string leader_text(const std::string& name, const std::optional<Leader>& leader, const std::string& redis);

}  // namespace turnstile::cli

#endif  // TURNSTILE_CLI_LEADER_COMMAND_H_
