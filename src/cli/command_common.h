// cli/command_common.h
//
// What every subcommand shares: where Redis is and how to log in, the
// lock-name argument, and connecting.
//
// Where: --redis URL (default redis://127.0.0.1:6379, or TURNSTILE_REDIS
// from the environment). The password, first found of:
//   --askpass                    prompted on the terminal, not echoed
//   --password-file FILE         the file's first line
//   TURNSTILE_REDIS_PASSWORD     (redis-cli's REDISCLI_AUTH)
//   the URL's redis://user:password@...
// A password in an argument (--redis on the command line) is visible to
// every user of the machine in ps(1): it works, with a warning. `run`
// passes no secret to its command (child_secret_overrides()).
//
// TLS: a rediss:// URL (or rediss+cluster://, rediss+sentinel://), with
// the URL's tls_* options or these, which take precedence over them:
//   --tls-ca-file FILE      TURNSTILE_TLS_CA_FILE
//   --tls-ca-dir DIR        TURNSTILE_TLS_CA_DIR
//   --tls-cert FILE         TURNSTILE_TLS_CERT    (client certificate, PEM)
//   --tls-key FILE          TURNSTILE_TLS_KEY     (its private key, PEM)
//   --tls-server-name NAME  (the name the certificate must carry, and SNI)
//   --tls-insecure          (no verification: for tests only)
// Any of them with a plaintext URL is a usage error.

#ifndef TURNSTILE_CLI_COMMAND_COMMON_H_
#define TURNSTILE_CLI_COMMAND_COMMON_H_

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "turnstile/backend.h"
#include "turnstile/flavor.h"

namespace turnstile::cli {

inline constexpr std::string_view kDefaultRedisUrl = "redis://127.0.0.1:6379";
inline constexpr std::string_view kRedisUrlVariable = "TURNSTILE_REDIS";

inline constexpr std::string_view kRedisPasswordVariable = "TURNSTILE_REDIS_PASSWORD";
// redis-cli's own password variable, read after ours; left in the
// environment of the command `run` starts (it is redis-cli's to use).
inline constexpr std::string_view kRedisCliAuthVariable = "REDISCLI_AUTH";

inline constexpr std::string_view kTlsCaFileVariable = "TURNSTILE_TLS_CA_FILE";
inline constexpr std::string_view kTlsCaDirVariable = "TURNSTILE_TLS_CA_DIR";
inline constexpr std::string_view kTlsCertVariable = "TURNSTILE_TLS_CERT";
inline constexpr std::string_view kTlsKeyVariable = "TURNSTILE_TLS_KEY";

// The TLS options of one command line; each set one replaces the URL's.
struct TlsTarget {
  std::optional<std::string> ca_file;
  std::optional<std::string> ca_dir;
  std::optional<std::string> cert_file;
  std::optional<std::string> key_file;
  std::optional<std::string> server_name;
  bool insecure = false;
};

// The Redis options of one command line.
struct RedisTarget {
  std::string url;
  std::optional<std::string> password_file;
  bool askpass = false;
  TlsTarget tls;
};

// Adds --redis URL, --password-file FILE, --askpass and the --tls-* options
// to `command`.
void add_redis_option(CLI::App& command, RedisTarget& target);
// The flavor NAME is used as, if the command line says: --flavor FLAVOR (--lock, its old name), or
// --config FILE (the policy file's rule for NAME, as `run --config` uses
// it). Unset: read from what Redis holds (turnstile/inspection.h).
struct FlavorTarget {
  std::optional<std::string> flavor;
  std::optional<std::string> config_path;
};

// Adds --flavor FLAVOR and --config FILE to `command` (excluding each other).
void add_flavor_options(CLI::App& command, FlavorTarget& target);
// The flavor `target` names for `name` (UsageError for an unknown --flavor;
// InvalidArgumentError for a policy file that cannot be loaded).
std::optional<Flavor> target_flavor(const FlavorTarget& target, std::string_view name);

// Adds the required NAME positional to `command`, stored in `name`.
void add_name_argument(CLI::App& command, std::string& name);

// Throws UsageError for a name no lock may have (check_lock_name():
// empty, too long, one whole hash tag), before anything is sent.
void check_name(std::string_view name);

// A backend for `target` (does not connect yet), with the password found
// as the overview says. Throws UsageError for a malformed URL, an
// unreadable password file, or --askpass without a terminal. `max_timeout`,
// if set, caps its command and connect timeouts (a lease holder's calls
// must not outlast its renewal period).
std::shared_ptr<Backend> make_backend(const RedisTarget& target,
                                      std::optional<std::chrono::milliseconds> max_timeout = std::nullopt);

// The environment changes that keep every secret from a child process:
// TURNSTILE_REDIS_PASSWORD removed, and TURNSTILE_REDIS removed if its URL
// carries a password. nullopt values mean "remove".
std::vector<std::pair<std::string, std::optional<std::string>>> child_secret_overrides();

// Overwrites, in place, the password of every URL among turnstile's own
// arguments (`argv[1]` up to a "--") with 'x's, as mysql does with -p: ps
// and /proc/<pid>/cmdline then show it masked, for turnstile and for the
// guardian it forks. Call it once the arguments are parsed (the parser
// keeps its own copies). The command's words after "--" are left alone.
void hide_url_passwords(int argc, char** argv);

}  // namespace turnstile::cli

#endif  // TURNSTILE_CLI_COMMAND_COMMON_H_
