// turnstile-sim: `turnstile sim` on its own, until the `turnstile`
// executable (src/cli/main.cpp) registers it.

#include <cstdio>

#include <CLI/CLI.hpp>

#include "cli/sim_command.h"

int main(int argc, char** argv) {
  CLI::App app("turnstile-sim: deterministic lock simulations on the embedded fake Redis", "turnstile");
  app.require_subcommand(1);
  turnstile::cli::SimOptions options;
  turnstile::cli::add_sim_command(app, options);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& help) {
    return app.exit(help);
  } catch (const CLI::ParseError& error) {
    std::fprintf(stderr, "turnstile sim: %s\n", error.what());
    return 64;
  }
  return turnstile::cli::sim_command(options);
}
