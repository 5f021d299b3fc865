// cli/command_common.h
//
// What every subcommand shares: the --redis option (default
// redis://127.0.0.1:6379, or TURNSTILE_REDIS from the environment), the
// lock-name argument, and connecting.

#ifndef TURNSTILE_CLI_COMMAND_COMMON_H_
#define TURNSTILE_CLI_COMMAND_COMMON_H_

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <CLI/CLI.hpp>

#include "turnstile/backend.h"

namespace turnstile::cli {

inline constexpr std::string_view kDefaultRedisUrl = "redis://127.0.0.1:6379";
inline constexpr std::string_view kRedisUrlVariable = "TURNSTILE_REDIS";

// Adds --redis URL to `command`, stored in `url`.
void add_redis_option(CLI::App& command, std::string& url);
// Adds the required NAME positional to `command`, stored in `name`.
void add_name_argument(CLI::App& command, std::string& name);

// Throws UsageError for a name no lock may have (check_lock_name():
// empty, too long, one whole hash tag), before anything is sent.
void check_name(std::string_view name);

// A backend for `url` (does not connect yet). Throws UsageError for a
// malformed URL. `max_timeout`, if set, caps its command and connect
// timeouts (a lease holder's calls must not outlast its renewal period).
std::shared_ptr<Backend> make_backend(const std::string& url,
                                      std::optional<std::chrono::milliseconds> max_timeout = std::nullopt);

}  // namespace turnstile::cli

#endif  // TURNSTILE_CLI_COMMAND_COMMON_H_
