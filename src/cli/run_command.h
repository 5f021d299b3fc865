// cli/run_command.h
//
// `turnstile run [OPTIONS] NAME [-- COMMAND [ARG...]]`: wait for the lock
// (or permits), run COMMAND as a child while the watchdog renews the lease
// every ttl/3, release when it exits, and exit with its status. Without a
// command, hold until SIGINT, SIGTERM or SIGHUP (exit 0), printing one line
// when acquired.
//
// Signals: SIGINT, SIGTERM and SIGHUP are forwarded to the child (unless the
// terminal already sent them to its whole process group). While still
// waiting for the lock they end turnstile at once with 128+N.
//
// Lock lost while held (renewal found it gone, or Redis unreachable for a
// whole ttl): SIGTERM to the child, SIGKILL after --kill-grace, exit 75.
// Without a child: exit 75 at once.

#ifndef TURNSTILE_CLI_RUN_COMMAND_H_
#define TURNSTILE_CLI_RUN_COMMAND_H_

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace turnstile::cli {

inline constexpr std::chrono::milliseconds kDefaultTtl = std::chrono::seconds(30);
inline constexpr std::chrono::milliseconds kMinTtl = std::chrono::milliseconds(100);
inline constexpr std::chrono::milliseconds kDefaultKillGrace = std::chrono::seconds(5);

struct RunOptions {
  std::string redis_url;
  std::string name;
  bool fair = false;
  bool token = false;
  std::optional<std::int64_t> permits;
  std::optional<std::string> wait;  // a duration; unset: the config's, else forever
  bool no_wait = false;             // -n: --wait 0
  std::optional<std::string> ttl;   // unset: the config's, else 30s
  std::string kill_grace = "5s";
  int conflict_exit_code = 1;
  std::optional<std::string> config_path;
  std::vector<std::string> command;
};

// Registers `run` on `app`; parsed values land in `options`.
CLI::App* add_run_command(CLI::App& app, RunOptions& options);

// Runs it; returns the exit status.
int run_command(const RunOptions& options);

}  // namespace turnstile::cli

#endif  // TURNSTILE_CLI_RUN_COMMAND_H_
