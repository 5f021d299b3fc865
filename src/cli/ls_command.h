// cli/ls_command.h
//
// `turnstile ls [PATTERN] [--json] [--limit N]`: every lock, semaphore and
// fair queue whose name matches PATTERN (a Redis glob, default "*"), on
// every master (turnstile/inspection.h list_locks(): SCAN with a bounded
// COUNT, never KEYS). One line per name: kind, holders (permits held for a
// semaphore), waiters in a fair queue, permits available, remaining lease.
// With --json, one object: "redis", "pattern", "complete" and "locks", each
// what `status --json` shows for the name. Exit 0, also when nothing
// matches; a listing cut short by --limit says so on stderr (JSON:
// "complete": false).

#ifndef TURNSTILE_CLI_LS_COMMAND_H_
#define TURNSTILE_CLI_LS_COMMAND_H_

#include <cstddef>
#include <string>

#include <CLI/CLI.hpp>

#include "cli/command_common.h"
#include "turnstile/inspection.h"

namespace turnstile::cli {

struct LsOptions {
  RedisTarget redis;
  std::string pattern = "*";
  bool json = false;
  std::size_t limit = 1000;  // names listed at most (ListOptions::max_names)
};

CLI::App* add_ls_command(CLI::App& app, LsOptions& options);
int ls_command(const LsOptions& options);

// The renderings, separate for tests: a table with a header line; one
// JSON document.
std::string ls_text(const LockListing& listing);
std::string ls_json(const LockListing& listing, const std::string& redis, const std::string& pattern);

}  // namespace turnstile::cli

#endif  // TURNSTILE_CLI_LS_COMMAND_H_
