// cli/sim_dispatch.h
//
// `turnstile sim ARGS` executes `turnstile-sim ARGS`, the way git runs its
// subcommands: the simulator and its dependencies (libturnstile_sim, Lua
// 5.1, Boost.Context) stay out of the `turnstile` process, which a host
// guarding a cron job runs.
//
// Where turnstile-sim is looked for, in order (the first that exists is
// executed):
//   1. $TURNSTILE_EXEC_PATH/turnstile-sim, if TURNSTILE_EXEC_PATH is set
//      (then nowhere else), like git's GIT_EXEC_PATH;
//   2. next to the running `turnstile` (a build tree, or both in bindir);
//   3. <its directory>/<bindir-relative path to libexecdir/turnstile>,
//      for an install tree moved or unpacked elsewhere;
//   4. the libexecdir/turnstile configured at build time.
// None found: one line on stderr naming the places and exit 127 (as a shell
// for a command not found); found but not executable: exit 126.

#ifndef TURNSTILE_CLI_SIM_DISPATCH_H_
#define TURNSTILE_CLI_SIM_DISPATCH_H_

#include <string>
#include <vector>

namespace turnstile::cli {

// Where the build installs turnstile-sim and `turnstile`, from Meson's
// options (main.cpp is compiled with them: src/cli/meson.build).
struct SimInstallPaths {
  std::string bin_dir;      // absolute: <prefix>/<bindir>
  std::string libexec_dir;  // absolute: <prefix>/<libexecdir>/turnstile
};

// The candidate paths of turnstile-sim, in the order above; `self` is the
// running program's path ("" if unknown), `exec_path` the value of
// TURNSTILE_EXEC_PATH (nullptr if unset).
std::vector<std::string> sim_program_candidates(const std::string& self, const char* exec_path,
                                                const SimInstallPaths& paths);

// Executes turnstile-sim with argv[0..argc) (what follows `turnstile sim`).
// Returns only on failure, with the exit status (126 or 127) after printing
// why.
int exec_turnstile_sim(int argc, char** argv, const SimInstallPaths& paths);

}  // namespace turnstile::cli

#endif  // TURNSTILE_CLI_SIM_DISPATCH_H_
