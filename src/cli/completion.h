// cli/completion.h
//
// Shell completion for `turnstile`, generated from the command line's own
// definition (the CLI11 app), so it never drifts from the options:
// `turnstile --completion bash` / `--completion zsh` print the script, and
// the build installs both (bash-completion's completions/turnstile, zsh's
// vendor-completions/_turnstile). Completed: subcommands, each one's
// options, files after options that take one, flavor names after
// --flavor.

#ifndef TURNSTILE_CLI_COMPLETION_H_
#define TURNSTILE_CLI_COMPLETION_H_

#include <string>
#include <string_view>

#include <CLI/CLI.hpp>

namespace turnstile::cli {

// The shells completion scripts are made for.
inline constexpr std::string_view kCompletionShells = "bash, zsh";

std::string bash_completion(const CLI::App& app);
std::string zsh_completion(const CLI::App& app);

// The script for `shell` ("bash" or "zsh"); UsageError for another.
std::string completion_script(const CLI::App& app, std::string_view shell);

}  // namespace turnstile::cli

#endif  // TURNSTILE_CLI_COMPLETION_H_
