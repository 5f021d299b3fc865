// cli/run_command.h
//
// `turnstile run [OPTIONS] NAME [-- COMMAND [ARG...]]`: wait for the lock
// (or permits), run COMMAND as a child while the watchdog renews the lease
// every lease/3, release when it exits, and exit with its status. Without a
// command, hold until SIGINT, SIGTERM or SIGHUP (exit 0), printing one line
// when acquired.
//
// Signals: SIGINT, SIGTERM and SIGHUP are forwarded to the child (unless the
// terminal already sent them to its whole process group). While still
// waiting for the lock they end turnstile at once with 128+N.
//
// Lock lost while held (renewal found it gone, or Redis unreachable for a
// whole lease): SIGTERM to the child, SIGKILL after --kill-grace, exit 75.
// Without a child: exit 75 at once.
//
// --max-hold DURATION (ClientOptions::max_hold): once the lock has been
// held that long the watchdog renews it no more and the hold counts as lost
// then: the command is stopped exactly as on any loss (SIGTERM, SIGKILL
// after --kill-grace, exit 75), and the lease lapses on the server within
// one lease.
//
// A Redis that may evict lock keys (maxmemory-policy allkeys-* or
// volatile-* with a memory limit, on any master: turnstile/server_check.h)
// is refused before anything is held: exit 78 with the policy and the fix.
// --allow-evicting (or `allow_evicting = true` in the --config rule) holds
// anyway, with a warning on stderr. A policy that cannot be read (INFO
// refused) is not refused.
//
// --metrics-textfile FILE: what the run did (outcome, wait and hold
// seconds, exit status), for node_exporter's textfile collector, written
// atomically at exit (cli/metrics_textfile.h).
//
// flock(1) habits: -w SECONDS (a bare number is seconds), -c STRING (run
// with /bin/sh -c), -s/--shared and -x/--exclusive (a read-write lock's
// halves; also --read and --write), -o (accepted, nothing to close).
//
// -v/--verbose: the client's events as timestamped lines on stderr (what
// it waits for, refreshed every 5 s, the acquisition, losses); -vv adds
// renewals and wake-ups (cli/verbose_log.h). Quiet by default.
//
// --lease DURATION (default 30s) was spelt --ttl, and --ttl still works: a
// deprecated alias, hidden from --help, for existing cron lines.

#ifndef TURNSTILE_CLI_RUN_COMMAND_H_
#define TURNSTILE_CLI_RUN_COMMAND_H_

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/command_common.h"

namespace turnstile::cli {

inline constexpr std::chrono::milliseconds kDefaultLease = std::chrono::seconds(30);
inline constexpr std::chrono::milliseconds kMinLease = std::chrono::milliseconds(100);
// The kill grace comes out of the lease: the command gets SIGTERM at the
// local lease deadline minus the grace, SIGKILL at the deadline. Default:
// this, or a quarter of the lease if that is less; at most half of it.
inline constexpr std::chrono::milliseconds kDefaultKillGrace = std::chrono::seconds(5);
// How long a waiting `run` rides out Redis being unreachable (no successful
// call at all) before it gives up with 69: the default.
inline constexpr std::chrono::milliseconds kDefaultUnreachableLimit = std::chrono::seconds(30);
// Commands and connects wait at most a third of the lease's window (the
// lease less its margins), and never less than this.
inline constexpr std::chrono::milliseconds kMinCommandTimeout = std::chrono::milliseconds(50);

struct RunOptions {
  RedisTarget redis;
  std::string name;
  bool fair = false;
  bool token = false;
  bool read = false;   // the read half of a read-write lock (shared)
  bool write = false;  // the write half of a read-write lock
  std::optional<std::int64_t> permits;
  std::optional<std::string> wait;               // a duration; unset: the config's, else forever
  bool no_wait = false;                          // -n: --wait 0
  bool quiet = false;                            // -q: no line when the lock is not had
  std::optional<std::string> lease;              // unset: the config's, else 30s
  std::optional<std::string> kill_grace;         // unset: min(5s, lease/4)
  std::optional<std::string> unreachable_limit;  // unset: 30s
  std::optional<std::string> max_hold;           // unset: no limit
  std::optional<std::string> lock_delay;         // unset: none
  std::optional<std::string> warn_before;        // unset: no warning before a loss
  std::optional<std::string> warn_signal;        // with warn_before: sent to the command's group
  std::optional<std::string> on_revoke;          // a signal: watch release requests (turnstile revoke)
  int conflict_exit_code = 1;
  std::optional<std::string> config_path;
  bool allow_evicting = false;                  // hold even on a Redis that may evict lock keys
  std::optional<std::string> shell_command;     // -c STRING: run with /bin/sh -c (flock's -c)
  std::optional<std::string> metrics_textfile;  // node_exporter textfile written at exit
  int verbose = 0;                              // -v: what it waits for, acquisitions, losses; -vv: renewals too
  std::string label;                            // --label: stored with the holder's identity
  std::vector<std::string> command;
  // `turnstile elect`: campaign for leadership of NAME (a fenced fair lock,
  // turnstile/election.h), run the command while leader, and campaign again
  // when the leadership is lost (unless --once).
  bool elect = false;
  std::optional<std::string> elect_value;  // --value; unset: "<host>:<pid>"
  bool once = false;                       // --once: a lost leadership ends the run (75)
};

// The shell of -c STRING.
inline constexpr std::string_view kShell = "/bin/sh";

// Registers `run` on `app`; parsed values land in `options`.
CLI::App* add_run_command(CLI::App& app, RunOptions& options);
// Registers `elect` on `app`; run_command() runs it with options.elect set.
CLI::App* add_elect_command(CLI::App& app, RunOptions& options);

// Runs it; returns the exit status.
int run_command(const RunOptions& options);

}  // namespace turnstile::cli

#endif  // TURNSTILE_CLI_RUN_COMMAND_H_
