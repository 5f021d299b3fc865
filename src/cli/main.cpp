// The `turnstile` command: parses the command line (CLI11) and dispatches
// to one subcommand. Each subcommand lives in its own file pair and
// registers itself with an add_<name>_command(CLI::App&, Options&); `sim`
// is the separate program turnstile-sim, executed with the arguments that
// follow it (cli/sim_dispatch.h).

#include <turnstile/version.h>

#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/completion.h"
#include "cli/exit_status.h"
#include "cli/ls_command.h"
#include "cli/leader_command.h"
#include "cli/revoke_command.h"
#include "cli/run_command.h"
#include "cli/semaphore_command.h"
#include "cli/sim_command.h"
#include "cli/sim_dispatch.h"
#include "cli/status_command.h"
#include "cli/unlock_command.h"

#if !defined(TURNSTILE_BIN_DIR) || !defined(TURNSTILE_SIM_LIBEXEC_DIR)
#error "src/cli/meson.build defines TURNSTILE_BIN_DIR and TURNSTILE_SIM_LIBEXEC_DIR"
#endif

namespace {

using namespace turnstile::cli;

constexpr const char* kDescription =
    "turnstile: distributed locks and semaphores on Redis for the shell.\n"
    "Redis is --redis URL, else $TURNSTILE_REDIS, else redis://127.0.0.1:6379.";

// "turnstile 0.1.0": this program's version, and libturnstile's if the
// shared library in the process is another one.
std::string version_line() {
  std::string line = std::string("turnstile ") + TURNSTILE_VERSION_STRING;
  if (std::strcmp(turnstile::version(), TURNSTILE_VERSION_STRING) != 0) {
    line += std::string(" (libturnstile ") + turnstile::version() + ")";
  }
  return line;
}

// CLI11's "The following arguments were not expected: ..." (and a
// missing name when an unknown option came first) as one line naming the
// first unexpected word and the command it was given to; nullopt when
// CLI11 saw nothing unexpected.
std::optional<int> report_unexpected(const CLI::App& app, const std::vector<const CLI::App*>& commands) {
  const std::vector<std::string> extras = app.remaining(true);
  if (extras.empty()) return std::nullopt;
  std::string command = "turnstile";
  for (const CLI::App* sub : commands) {
    if (sub->parsed()) {
      command += " " + sub->get_name();
      break;
    }
  }
  const std::string& first = extras.front();
  const bool option = first.size() > 1 && first[0] == '-';
  // An unknown option is named without its value: `--password=PW` (a
  // redis-cli habit) must not print the password.
  const std::string shown = option ? first.substr(0, first.find('=')) : first;
  std::fprintf(stderr, "turnstile: %s '%s' for '%s' (see %s --help)\n",
               option ? "unknown option" : "unexpected argument", shown.c_str(), command.c_str(), command.c_str());
  return kExitUsage;
}

}  // namespace

int main(int argc, char** argv) {
  // Everything after `sim` is turnstile-sim's: it parses it (and answers
  // `turnstile sim --help`).
  if (argc > 1 && std::strcmp(argv[1], "sim") == 0) {
    return exec_turnstile_sim(argc - 2, argv + 2, {TURNSTILE_BIN_DIR, TURNSTILE_SIM_LIBEXEC_DIR});
  }

  CLI::App app(kDescription, "turnstile");
  app.set_version_flag("-V,--version", version_line(), "Print the version and exit");
  app.set_help_all_flag("--help-all", "Print the help of every command and exit");
  app.footer(exit_status_table());
  // A subcommand, or --completion SHELL alone.
  app.require_subcommand(0, 1);
  std::string completion_shell;
  app.add_option("--completion", completion_shell, "print the shell completion script for SHELL (bash or zsh)")
      ->type_name("SHELL");

  RunOptions run_options;
  RunOptions elect_options;
  LeaderOptions leader_options;
  RevokeOptions revoke_options;
  StatusOptions status_options;
  UnlockOptions unlock_options;
  LsOptions ls_options;
  SemaphoreOptions semaphore_options;
  CLI::App* run = add_run_command(app, run_options);
  CLI::App* elect = add_elect_command(app, elect_options);
  CLI::App* leader = add_leader_command(app, leader_options);
  CLI::App* revoke = add_revoke_command(app, revoke_options);
  CLI::App* status = add_status_command(app, status_options);
  CLI::App* unlock = add_unlock_command(app, unlock_options);
  CLI::App* ls = add_ls_command(app, ls_options);
  CLI::App* semaphore = add_semaphore_command(app, semaphore_options);
  // Listed by --help; never parsed here (dispatched above).
  CLI::App* sim = app.add_subcommand("sim", std::string(kSimDescription) + " (turnstile sim --help)");
  sim->allow_extras();
  for (CLI::App* command : {run, elect, leader, revoke, status, unlock, ls, semaphore}) {
    command->footer(exit_status_table());
    // `turnstile run --version` too: the version wherever it is asked.
    command->set_version_flag("-V,--version", version_line(), "Print the version and exit");
  }

  // CLI11 would only say "A subcommand is required"; name what was typed.
  const auto is_command = [&](const char* word) {
    for (const CLI::App* command : {run, elect, leader, revoke, status, unlock, sim, ls, semaphore}) {
      if (command->get_name() == word) return true;
    }
    return false;
  };
  if (argc > 1 && argv[1][0] != '-' && !is_command(argv[1])) {
    std::fprintf(stderr,
                 "turnstile: unknown command '%s' (expected run, elect, leader, status, ls, unlock, semaphore or sim; "
                 "see turnstile --help)\n",
                 argv[1]);
    return kExitUsage;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& help) {
    return app.exit(help);
  } catch (const CLI::CallForAllHelp& help) {
    return app.exit(help);
  } catch (const CLI::CallForVersion& version) {
    return app.exit(version);
  } catch (const CLI::ExtrasError& error) {
    if (const std::optional<int> usage =
            report_unexpected(app, {run, elect, leader, revoke, status, unlock, ls, semaphore}))
      return *usage;
    std::fprintf(stderr, "turnstile: %s (see turnstile --help)\n", error.what());
    return kExitUsage;
  } catch (const CLI::RequiredError& error) {
    // A name missing because an unknown option came first: the option is
    // what to tell.
    const std::vector<std::string> extras = app.remaining(true);
    if (!extras.empty() && extras.front().size() > 1 && extras.front()[0] == '-' && extras.front() != "--") {
      if (const std::optional<int> usage =
              report_unexpected(app, {run, elect, leader, revoke, status, unlock, ls, semaphore}))
        return *usage;
    }
    std::fprintf(stderr, "turnstile: %s (see turnstile --help)\n", error.what());
    return kExitUsage;
  } catch (const CLI::ParseError& error) {
    std::fprintf(stderr, "turnstile: %s (see turnstile --help)\n", error.what());
    return kExitUsage;
  }

  hide_url_passwords(argc, argv);  // parsed: ps shows them masked from here on
  if (!completion_shell.empty()) {
    try {
      const std::string script = completion_script(app, completion_shell);
      std::fwrite(script.data(), 1, script.size(), stdout);
      return kExitSuccess;
    } catch (const UsageError& error) {
      std::fprintf(stderr, "turnstile: %s\n", error.what());
      return kExitUsage;
    }
  }
  if (*run) return run_command(run_options);
  if (*elect) {
    elect_options.elect = true;
    return run_command(elect_options);
  }
  if (*leader) return leader_command(leader_options);
  if (*revoke) return revoke_command(revoke_options);
  if (*status) return status_command(status_options);
  if (*unlock) return unlock_command(unlock_options);
  if (*ls) return ls_command(ls_options);
  if (*semaphore) return semaphore_command(semaphore_options);
  if (*sim) {
    std::fprintf(stderr, "turnstile: sim takes its options after it: turnstile sim [OPTIONS]\n");
    return kExitUsage;
  }
  std::fprintf(stderr,
               "turnstile: no subcommand given (run, status, ls, unlock, semaphore or sim; see turnstile --help)\n");
  return kExitUsage;
}
