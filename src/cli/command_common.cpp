// Options and set-up shared by the subcommands.

#include "cli/command_common.h"

#include <fcntl.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "cli/exit_status.h"
#include "turnstile/client.h"
#include "turnstile/errors.h"
#include "turnstile/lock_policy.h"
#include "turnstile/redis_backend.h"

namespace turnstile::cli {

namespace {

constexpr std::string_view kTlsGroup = "TLS (with a rediss:// URL)";

void add_tls_options(CLI::App& command, TlsTarget& tls) {
  const std::string group(kTlsGroup);
  command.add_option("--tls-ca-file", tls.ca_file, "Trust the CA certificates in FILE (PEM) instead of the system's")
      ->envname(std::string(kTlsCaFileVariable))
      ->group(group);
  command.add_option("--tls-ca-dir", tls.ca_dir, "Trust the CA certificates in DIR (OpenSSL hashed directory)")
      ->envname(std::string(kTlsCaDirVariable))
      ->group(group);
  command.add_option("--tls-cert", tls.cert_file, "Client certificate FILE (PEM) for servers that require one")
      ->envname(std::string(kTlsCertVariable))
      ->group(group);
  command.add_option("--tls-key", tls.key_file, "Private key FILE (PEM) of --tls-cert")
      ->envname(std::string(kTlsKeyVariable))
      ->group(group);
  command
      .add_option("--tls-server-name", tls.server_name,
                  "The name the server's certificate must carry (and SNI), if not the URL's host")
      ->group(group);
  command.add_flag("--tls-insecure", tls.insecure, "Do not verify the server's certificate (tests only)")->group(group);
}

// Applies the command line's TLS options over the URL's; throws UsageError
// for one given with a plaintext URL.
void apply_tls_options(const TlsTarget& given, RedisOptions& options) {
  struct Given {
    std::string_view flag;
    const std::optional<std::string>& value;
    std::string& field;
  };
  const Given given_options[] = {
      {"--tls-ca-file", given.ca_file, options.tls.ca_file},
      {"--tls-ca-dir", given.ca_dir, options.tls.ca_dir},
      {"--tls-cert", given.cert_file, options.tls.cert_file},
      {"--tls-key", given.key_file, options.tls.key_file},
      {"--tls-server-name", given.server_name, options.tls.server_name},
  };
  bool any = given.insecure;
  for (const Given& option : given_options) {
    if (!option.value.has_value()) continue;
    if (option.value->empty()) throw UsageError(std::string(option.flag) + ": empty");
    option.field = *option.value;
    any = true;
  }
  if (given.insecure) options.tls.insecure_skip_verify = true;
  if (any && !options.tls.enabled) {
    throw UsageError("--redis: the --tls-* options (or TURNSTILE_TLS_* variables) need a rediss:// URL");
  }
}

}  // namespace

void add_redis_option(CLI::App& command, RedisTarget& target) {
  target.url = std::string(kDefaultRedisUrl);
  command
      .add_option("--redis", target.url,
                  "Redis URL: redis://[user@]host[:port][/db], rediss://... (TLS) or unix:///path[?db=N] (a "
                  "password here shows in ps)")
      ->envname(std::string(kRedisUrlVariable))
      ->capture_default_str();
  command.add_option("--password-file", target.password_file,
                     "Read the Redis password from the first line of FILE (or set TURNSTILE_REDIS_PASSWORD)");
  command.add_flag("--askpass", target.askpass, "Prompt for the Redis password on the terminal");
  add_tls_options(command, target.tls);
}

void add_name_argument(CLI::App& command, std::string& name) {
  command.add_option("name", name, "the lock (or semaphore) name: its Redis key")->required();
}

void add_flavor_options(CLI::App& command, FlavorTarget& target) {
  CLI::Option* flavor = command.add_option(
      "--flavor,--lock", target.flavor,
      "the flavor NAME is used as: " + flavor_names() +
          " (default: what Redis holds, which cannot always tell reentrant from fair, nor the two semaphores apart)");
  command.add_option("--config", target.config_path, "the lock policy file whose rule for NAME gives its flavor")
      ->excludes(flavor);
}

std::optional<Flavor> target_flavor(const FlavorTarget& target, std::string_view name) {
  if (target.config_path) return LockPolicy::load(*target.config_path).rule_for(name).flavor;
  if (!target.flavor) return std::nullopt;
  const std::optional<Flavor> flavor = parse_flavor(*target.flavor);
  if (!flavor) throw UsageError("--flavor must be one of " + flavor_names() + ", not " + in_quotes(*target.flavor));
  return flavor;
}

void check_name(std::string_view name) {
  try {
    check_lock_name(name, name, "the lock name");
  } catch (const InvalidArgumentError& invalid) {
    throw UsageError(invalid.what());
  }
}

namespace {

// Longer than any real password; a bigger "password file" is a mistake.
constexpr std::size_t kMaxPasswordBytes = 4096;

std::string first_line(std::string text) {
  const std::size_t end = text.find_first_of("\r\n");
  if (end != std::string::npos) text.resize(end);
  return text;
}

std::string read_password_file(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw UsageError("--password-file: cannot read " + in_quotes(path) + ": " + std::strerror(errno));
  std::string text(kMaxPasswordBytes + 1, '\0');
  file.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (file.bad()) throw UsageError("--password-file: cannot read " + in_quotes(path));
  text.resize(static_cast<std::size_t>(file.gcount()));
  std::string password = first_line(std::move(text));
  if (password.size() > kMaxPasswordBytes) {
    throw UsageError("--password-file: the first line of " + in_quotes(path) + " is longer than " +
                     std::to_string(kMaxPasswordBytes) + " bytes");
  }
  if (password.empty()) throw UsageError("--password-file: " + in_quotes(path) + " starts with an empty line");
  return password;
}

// Reads one line from the controlling terminal with echo off, as
// redis-cli --askpass and ssh do.
std::string ask_password() {
  const int tty = ::open("/dev/tty", O_RDWR | O_CLOEXEC | O_NOCTTY);
  if (tty < 0) throw UsageError("--askpass: no terminal to ask on (use --password-file or TURNSTILE_REDIS_PASSWORD)");
  termios saved{};
  const bool is_terminal = tcgetattr(tty, &saved) == 0;
  if (is_terminal) {
    termios quiet = saved;
    quiet.c_lflag &= ~static_cast<tcflag_t>(ECHO);
    (void)tcsetattr(tty, TCSAFLUSH, &quiet);
  }
  constexpr std::string_view kPrompt = "Redis password: ";
  (void)!::write(tty, kPrompt.data(), kPrompt.size());
  std::string password;
  char c = 0;
  while (password.size() <= kMaxPasswordBytes) {
    const ssize_t got = ::read(tty, &c, 1);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0 || c == '\n' || c == '\r') break;
    password += c;
  }
  if (is_terminal) (void)tcsetattr(tty, TCSAFLUSH, &saved);
  (void)!::write(tty, "\n", 1);
  ::close(tty);
  if (password.size() > kMaxPasswordBytes) throw UsageError("--askpass: longer than any password");
  return password;
}

// The password the overview's order finds, or nullopt for the URL's own.
std::optional<std::string> password_of(const RedisTarget& target) {
  if (target.askpass) return ask_password();
  if (target.password_file) return read_password_file(*target.password_file);
  for (const std::string_view name : {kRedisPasswordVariable, kRedisCliAuthVariable}) {
    if (const char* variable = std::getenv(std::string(name).c_str()); variable != nullptr && *variable != '\0') {
      return std::string(variable);
    }
  }
  return std::nullopt;
}

bool url_from_environment(const std::string& url) {
  const char* variable = std::getenv(std::string(kRedisUrlVariable).c_str());
  return variable != nullptr && url == variable;
}

}  // namespace

void hide_url_passwords(int argc, char** argv) {
  for (int i = 1; i < argc && std::strcmp(argv[i], "--") != 0; ++i) {
    char* const word = argv[i];
    const std::string_view text(word);
    const std::size_t scheme_end = text.find("://");
    if (scheme_end == std::string_view::npos) continue;
    const std::size_t authority = scheme_end + 3;
    const std::size_t authority_end = text.find_first_of("/?#", authority);
    const std::size_t at = text.substr(0, authority_end).rfind('@');
    if (at == std::string_view::npos || at < authority) continue;
    const std::size_t colon = text.find(':', authority);
    if (colon == std::string_view::npos || colon > at) continue;  // a user name only
    for (std::size_t k = colon + 1; k < at; ++k) word[k] = 'x';
  }
}

std::shared_ptr<Backend> make_backend(const RedisTarget& target, std::optional<std::chrono::milliseconds> max_timeout) {
  RedisOptions options;
  try {
    options = RedisOptions::parse_url(target.url);
  } catch (const InvalidArgumentError& invalid) {
    throw UsageError(std::string("--redis: ") + invalid.what());
  }
  apply_tls_options(target.tls, options);
  if (std::optional<std::string> password = password_of(target)) {
    options.password = std::move(*password);
  } else if (!options.password.empty() && !url_from_environment(target.url)) {
    std::fprintf(stderr,
                 "turnstile: warning: the password in --redis is visible to every user of this machine (ps); "
                 "use %s, --password-file or --askpass\n",
                 std::string(kRedisPasswordVariable).c_str());
  }
  if (max_timeout) {
    const int cap_ms = static_cast<int>(std::min<std::int64_t>(max_timeout->count(), INT32_MAX));
    options.command_timeout_ms = std::min(options.command_timeout_ms, cap_ms);
    options.connect_timeout_ms = std::min(options.connect_timeout_ms, cap_ms);
    // WAIT's reply must come within the command timeout (redis_backend.h).
    options.replica_sync_timeout_ms = std::max(1, std::min(options.replica_sync_timeout_ms, cap_ms / 2));
  }
  try {
    return make_redis_backend(options);
  } catch (const InvalidArgumentError& invalid) {
    throw UsageError(std::string("--redis: ") + invalid.what());
  }
}

std::vector<std::pair<std::string, std::optional<std::string>>> child_secret_overrides() {
  std::vector<std::pair<std::string, std::optional<std::string>>> overrides;
  overrides.emplace_back(std::string(kRedisPasswordVariable), std::nullopt);
  if (const char* url = std::getenv(std::string(kRedisUrlVariable).c_str()); url != nullptr) {
    bool has_password = true;  // a URL that does not parse is not handed on either
    try {
      has_password = !RedisOptions::parse_url(url).password.empty();
    } catch (const InvalidArgumentError&) {
    }
    if (has_password) overrides.emplace_back(std::string(kRedisUrlVariable), std::nullopt);
  }
  return overrides;
}

}  // namespace turnstile::cli
