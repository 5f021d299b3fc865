// turnstile-sim: the `sim` command of turnstile as its own program, so that
// `turnstile` itself links libturnstile alone (no Lua, no Boost.Context).
// `turnstile sim ARGS` executes `turnstile-sim ARGS` (cli/sim_dispatch.h);
// run directly, it behaves the same. Its options: cli/sim_command.h.

#include <turnstile/version.h>

#include <cstdio>

#include <CLI/CLI.hpp>

#include "cli/exit_status.h"
#include "cli/sim_command.h"

int main(int argc, char** argv) {
  using namespace turnstile::cli;
  CLI::App app(std::string("turnstile sim: ") + kSimDescription + ".", "turnstile sim");
  app.set_version_flag("-V,--version", std::string("turnstile-sim ") + TURNSTILE_VERSION_STRING,
                       "Print the version and exit");
  app.footer(exit_status_table());
  SimOptions options;
  add_sim_options(app, options);
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& done) {  // --help, --version
    return app.exit(done);
  } catch (const CLI::ParseError& error) {
    std::fprintf(stderr, "turnstile sim: %s (see turnstile sim --help)\n", error.what());
    return kExitUsage;
  }
  return sim_command(options);
}
