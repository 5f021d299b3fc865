// RedisOptions: URL parsing, validation and password-free rendering.

#include <charconv>
#include <cstddef>
#include <limits>
#include <string>
#include <string_view>

#include "turnstile/errors.h"
#include "turnstile/redis_backend.h"

namespace turnstile {
namespace {

constexpr std::string_view kRedisScheme = "redis://";
constexpr std::string_view kTlsScheme = "rediss://";
constexpr std::string_view kUnixScheme = "unix://";
constexpr std::string_view kClusterScheme = "redis+cluster://";
constexpr std::string_view kSentinelScheme = "redis+sentinel://";
constexpr std::string_view kTlsClusterScheme = "rediss+cluster://";
constexpr std::string_view kTlsSentinelScheme = "rediss+sentinel://";
constexpr std::string_view kExpectedSchemes =
    "redis://, rediss://, unix://, redis+cluster://, rediss+cluster://, redis+sentinel:// or rediss+sentinel://";
constexpr int kMaxPort = 65535;

[[noreturn]] void bad_url(std::string_view problem) {
  throw InvalidArgumentError("invalid Redis URL: " + std::string(problem));
}

// The value of a non-negative decimal integer up to `max`, or -1 if `text` is
// not one.
int parse_number(std::string_view text, int max) {
  int value = -1;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size() || value < 0 || value > max) {
    return -1;
  }
  return value;
}

int parse_db(std::string_view text) {
  const int db = parse_number(text, std::numeric_limits<int>::max());
  if (db < 0) bad_url("database '" + std::string(text) + "' is not a non-negative integer");
  return db;
}

bool is_alphanumeric(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Decodes %XX escapes. `what` names the part for the error message; the text
// itself is not echoed, since it may be a password.
std::string percent_decode(std::string_view text, std::string_view what) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out.push_back(text[i]);
      continue;
    }
    const int high = i + 2 < text.size() ? hex_digit(text[i + 1]) : -1;
    const int low = i + 2 < text.size() ? hex_digit(text[i + 2]) : -1;
    if (high < 0 || low < 0) bad_url("malformed %-escape in the " + std::string(what));
    out.push_back(static_cast<char>(high * 16 + low));
    i += 2;
  }
  return out;
}

// The inverse of percent_decode: every byte but letters, digits and
// "-._~" as %XX, so that describe() gives a URL that parses back.
std::string percent_encode(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (is_alphanumeric(c) || std::string_view("-._~").find(c) != std::string_view::npos) {
      out.push_back(c);
      continue;
    }
    const auto byte = static_cast<unsigned char>(c);
    out += {'%', kHex[byte >> 4], kHex[byte & 0xf]};
  }
  return out;
}

// Calls `use(name, value)` for each "name=value" of "a=1&b=2".
template <typename Use>
void for_each_parameter(std::string_view parameters, Use&& use) {
  while (!parameters.empty()) {
    const std::size_t amp = parameters.find('&');
    const std::string_view parameter = parameters.substr(0, amp);
    parameters = amp == std::string_view::npos ? std::string_view() : parameters.substr(amp + 1);
    const std::size_t equals = parameter.find('=');
    const std::string_view name = parameter.substr(0, equals);
    if (equals == std::string_view::npos) bad_url("query parameter '" + std::string(name) + "' has no value");
    use(name, parameter.substr(equals + 1));
  }
}

// Splits "user[:password]@rest" off the front of `rest` into `options`.
void parse_credentials(std::string_view& rest, RedisOptions& options) {
  const std::size_t at = rest.rfind('@');
  if (at == std::string_view::npos) return;
  const std::string_view credentials = rest.substr(0, at);
  rest.remove_prefix(at + 1);
  const std::size_t colon = credentials.find(':');
  options.user = percent_decode(credentials.substr(0, colon), "user name");
  if (colon != std::string_view::npos) {
    options.password = percent_decode(credentials.substr(colon + 1), "password");
  }
}

RedisEndpoint parse_host_port(std::string_view authority, int default_port);

// A host name or IPv4 address: letters, digits, '.', '-', '_'. Inside
// brackets an IPv6 address: hex digits, ':', '.', and '%' before a zone
// ("fe80::1%eth0"), and at least one ':'. Anything else ('?', '/', spaces, control bytes, a ':'
// outside brackets) is a mistake in the URL, not a name to look up.
bool is_valid_host(std::string_view host, bool bracketed) {
  if (bracketed && host.find(':') == std::string_view::npos) return false;  // not IPv6
  const std::string_view extra = bracketed ? ":.%-_" : ".-_";
  for (char c : host) {
    if (!is_alphanumeric(c) && extra.find(c) == std::string_view::npos) return false;
  }
  return true;
}

// "on" / "off" for a boolean query option.
bool parse_switch(std::string_view name, std::string_view value) {
  if (value == "on") return true;
  if (value == "off") return false;
  bad_url(std::string(name) + " must be on or off");
}

// Applies the TLS query option `name`; false if `name` is not one.
bool parse_tls_option(std::string_view name, std::string_view value, TlsOptions& tls) {
  std::string* path = nullptr;
  if (name == "tls_ca_file") path = &tls.ca_file;
  if (name == "tls_ca_dir") path = &tls.ca_dir;
  if (name == "tls_cert_file") path = &tls.cert_file;
  if (name == "tls_key_file") path = &tls.key_file;
  if (name == "tls_server_name") path = &tls.server_name;
  if (path != nullptr) {
    *path = percent_decode(value, name);
    if (path->empty()) bad_url(std::string(name) + " is empty");
    return true;
  }
  if (name == "tls_insecure") {
    tls.insecure_skip_verify = parse_switch(name, value);
    return true;
  }
  return false;
}

// The grant-sync options every URL form takes; false if `name` is not one.
bool parse_sync_option(std::string_view name, std::string_view value, RedisOptions& options) {
  if (name == "replica_sync") {
    options.replica_sync = parse_switch(name, value);
  } else if (name == "replica_sync_timeout_ms") {
    options.replica_sync_timeout_ms = parse_number(value, std::numeric_limits<int>::max());
    if (options.replica_sync_timeout_ms <= 0) bad_url("replica_sync_timeout_ms must be a positive integer");
  } else if (name == "aof_sync") {
    options.aof_sync = parse_switch(name, value);
  } else if (name == "aof_sync_timeout_ms") {
    options.aof_sync_timeout_ms = parse_number(value, std::numeric_limits<int>::max());
    if (options.aof_sync_timeout_ms <= 0) bad_url("aof_sync_timeout_ms must be a positive integer");
  } else {
    return false;
  }
  return true;
}

void parse_tcp(std::string_view rest, RedisOptions& options) {
  // Credentials first, so that no later error message can echo a password.
  parse_credentials(rest, options);
  // Only "/db" and TLS options may follow the host and port.
  const std::size_t query = rest.find('?');
  if (query != std::string_view::npos) {
    for_each_parameter(rest.substr(query + 1), [&](std::string_view name, std::string_view value) {
      if (!parse_tls_option(name, value, options.tls) && !parse_sync_option(name, value, options)) {
        bad_url("unknown query parameter '" + std::string(name) +
                "' (redis:// takes the tls_*, replica_sync* and aof_sync* options)");
      }
    });
    rest = rest.substr(0, query);
  }
  const std::size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  if (slash != std::string_view::npos) {
    const std::string_view db = rest.substr(slash + 1);
    if (!db.empty()) options.db = parse_db(db);
  }

  const RedisEndpoint endpoint = parse_host_port(authority, kDefaultRedisPort);
  options.host = endpoint.host;
  options.port = endpoint.port;
}

RedisEndpoint parse_host_port(std::string_view authority, int default_port) {
  std::string_view host = authority;
  std::string_view port;
  if (authority.starts_with('[')) {
    const std::size_t close = authority.find(']');
    if (close == std::string_view::npos) bad_url("unterminated '[' in an IPv6 host");
    host = authority.substr(1, close - 1);
    const std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (!after.starts_with(':')) bad_url("unexpected text after the IPv6 host");
      port = after.substr(1);
      if (port.empty()) bad_url("empty port after ':'");
    }
  } else {
    const std::size_t colon = authority.rfind(':');
    if (colon != std::string_view::npos) {
      host = authority.substr(0, colon);
      port = authority.substr(colon + 1);
      if (port.empty()) bad_url("empty port after ':'");
    }
  }
  if (host.empty()) bad_url("missing host");
  if (!is_valid_host(host, authority.starts_with('['))) {
    bad_url(authority.starts_with('[') ? "invalid character in the IPv6 host"
                                       : "invalid character in the host (IPv6 hosts go in brackets: [::1])");
  }
  RedisEndpoint endpoint{std::string(host), default_port};
  if (!port.empty()) {
    endpoint.port = parse_number(port, kMaxPort);
    if (endpoint.port <= 0) bad_url("port '" + std::string(port) + "' is not in 1..65535");
  }
  return endpoint;
}

// The ?name=value&... options of redis+cluster:// and redis+sentinel://.
void parse_mode_options(std::string_view parameters, RedisOptions& options) {
  for_each_parameter(parameters, [&](std::string_view name, std::string_view value) {
    if (name == "sentinel_password") {
      options.sentinel_password = percent_decode(value, "sentinel password");
    } else if (name == "sentinel_user") {
      options.sentinel_user = percent_decode(value, "sentinel user name");
    } else if (parse_sync_option(name, value, options)) {
    } else if (name == "db" && options.mode == RedisMode::sentinel) {
      options.db = parse_db(value);
    } else if (!parse_tls_option(name, value, options.tls)) {
      bad_url("unknown query parameter '" + std::string(name) + "'");
    }
  });
}

// redis+cluster:// and redis+sentinel://: credentials, a comma-separated
// list of host:port, then "/mastername" (sentinel only) and options.
void parse_multi_host(std::string_view rest, RedisOptions& options) {
  const std::size_t query = rest.rfind('?');
  const std::string_view parameters = query == std::string_view::npos ? std::string_view() : rest.substr(query + 1);
  rest = rest.substr(0, query);
  parse_credentials(rest, options);
  const std::size_t slash = rest.find('/');
  std::string_view hosts = rest.substr(0, slash);
  const std::string_view path = slash == std::string_view::npos ? std::string_view() : rest.substr(slash + 1);
  const bool sentinel = options.mode == RedisMode::sentinel;
  if (sentinel) {
    if (path.empty() || path.find('/') != std::string_view::npos) {
      bad_url("redis+sentinel:// needs the master's name as its path (redis+sentinel://host:port/mastername)");
    }
    options.sentinel_master_name = percent_decode(path, "master name");
  } else if (!path.empty()) {
    bad_url("redis+cluster:// takes no path (a cluster has only database 0)");
  }
  if (hosts.empty()) bad_url("missing host");
  while (!hosts.empty()) {
    const std::size_t comma = hosts.find(',');
    options.seeds.push_back(
        parse_host_port(hosts.substr(0, comma), sentinel ? kDefaultSentinelPort : kDefaultRedisPort));
    hosts = comma == std::string_view::npos ? std::string_view() : hosts.substr(comma + 1);
    if (comma != std::string_view::npos && hosts.empty()) bad_url("empty host after ','");
  }
  parse_mode_options(parameters, options);
}

std::string join_seeds(const std::vector<RedisEndpoint>& seeds) {
  std::string joined;
  for (const RedisEndpoint& seed : seeds) {
    if (!joined.empty()) joined += ',';
    const bool ipv6 = seed.host.find(':') != std::string::npos;
    joined += (ipv6 ? "[" + seed.host + "]" : seed.host) + ":" + std::to_string(seed.port);
  }
  return joined;
}

void parse_unix(std::string_view rest, RedisOptions& options) {
  parse_credentials(rest, options);
  const std::size_t query = rest.find('?');
  const std::string_view path_part = rest.substr(0, query);
  if (!path_part.starts_with('/')) bad_url("unix:// needs an absolute socket path (unix:///path)");
  // hiredis would connect to the path up to the NUL, not the one asked for.
  if (path_part.find('\0') != std::string_view::npos) bad_url("NUL byte in the socket path");
  options.unix_socket_path = std::string(path_part);
  if (query == std::string_view::npos) return;
  for_each_parameter(rest.substr(query + 1), [&](std::string_view name, std::string_view value) {
    if (parse_sync_option(name, value, options)) return;
    if (name != "db") {
      bad_url("unknown query parameter '" + std::string(name) + "' (unix:// takes db=N, replica_sync* and aof_sync*)");
    }
    options.db = parse_db(value);
  });
}

}  // namespace

RedisOptions RedisOptions::from_url(std::string_view url) {
  RedisOptions options = parse_url(url);
  options.validate();
  return options;
}

RedisOptions RedisOptions::parse_url(std::string_view url) {
  RedisOptions options;
  if (url.starts_with(kRedisScheme)) {
    parse_tcp(url.substr(kRedisScheme.size()), options);
  } else if (url.starts_with(kTlsScheme)) {
    options.tls.enabled = true;
    parse_tcp(url.substr(kTlsScheme.size()), options);
  } else if (url.starts_with(kTlsClusterScheme)) {
    options.tls.enabled = true;
    options.mode = RedisMode::cluster;
    parse_multi_host(url.substr(kTlsClusterScheme.size()), options);
  } else if (url.starts_with(kTlsSentinelScheme)) {
    options.tls.enabled = true;
    options.mode = RedisMode::sentinel;
    parse_multi_host(url.substr(kTlsSentinelScheme.size()), options);
  } else if (url.starts_with(kUnixScheme)) {
    parse_unix(url.substr(kUnixScheme.size()), options);
  } else if (url.starts_with(kClusterScheme)) {
    options.mode = RedisMode::cluster;
    parse_multi_host(url.substr(kClusterScheme.size()), options);
  } else if (url.starts_with(kSentinelScheme)) {
    options.mode = RedisMode::sentinel;
    parse_multi_host(url.substr(kSentinelScheme.size()), options);
  } else {
    const std::size_t scheme_end = url.find("://");
    bad_url(scheme_end == std::string_view::npos ? "missing scheme (expected " + std::string(kExpectedSchemes) + ")"
                                                 : "unsupported scheme '" + std::string(url.substr(0, scheme_end)) +
                                                       "' (expected " + std::string(kExpectedSchemes) + ")");
  }
  return options;
}

std::string RedisOptions::endpoint() const {
  if (mode != RedisMode::standalone) return join_seeds(seeds);
  if (!unix_socket_path.empty()) return unix_socket_path;
  const bool ipv6 = host.find(':') != std::string::npos;
  return (ipv6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

std::string RedisOptions::describe() const {
  const std::string user_part = user.empty() ? "" : percent_encode(user) + "@";
  // The TLS and AOF-sync options as "name=value" parameters joined by '&'.
  std::string query;
  auto add = [&](std::string_view name, const std::string& value) {
    if (value.empty()) return;
    query += (query.empty() ? "" : "&") + std::string(name) + "=" + percent_encode(value);
  };
  add("tls_ca_file", tls.ca_file);
  add("tls_ca_dir", tls.ca_dir);
  add("tls_cert_file", tls.cert_file);
  add("tls_key_file", tls.key_file);
  add("tls_server_name", tls.server_name);
  if (tls.insecure_skip_verify) add("tls_insecure", "on");
  if (aof_sync) add("aof_sync", "on");
  if (aof_sync_timeout_ms != kDefaultAofSyncTimeoutMs) add("aof_sync_timeout_ms", std::to_string(aof_sync_timeout_ms));
  const std::string suffix = query.empty() ? "" : "?" + query;
  const std::string redis = tls.enabled ? "rediss" : "redis";
  if (mode == RedisMode::cluster) return redis + "+cluster://" + user_part + endpoint() + suffix;
  if (mode == RedisMode::sentinel) {
    return redis + "+sentinel://" + user_part + endpoint() + "/" + percent_encode(sentinel_master_name) +
           "?db=" + std::to_string(db) + (query.empty() ? "" : "&" + query);
  }
  if (!unix_socket_path.empty()) {
    return "unix://" + user_part + unix_socket_path + "?db=" + std::to_string(db) + (query.empty() ? "" : "&" + query);
  }
  return redis + "://" + user_part + endpoint() + "/" + std::to_string(db) + suffix;
}

void RedisOptions::validate() const {
  auto fail = [](const std::string& problem) { throw InvalidArgumentError("invalid Redis options: " + problem); };
  if (mode != RedisMode::standalone) {
    if (seeds.empty()) fail("no seed addresses for cluster/sentinel mode");
    for (const RedisEndpoint& seed : seeds) {
      if (seed.host.empty()) fail("empty seed host");
      if (seed.port <= 0 || seed.port > kMaxPort)
        fail("seed port " + std::to_string(seed.port) + " is not in 1..65535");
    }
  }
  if (mode == RedisMode::cluster && db != 0) fail("a cluster has only database 0");
  if (mode == RedisMode::sentinel && sentinel_master_name.empty()) fail("sentinel mode needs the master's name");
  if (!sentinel_user.empty() && sentinel_password.empty())
    fail("sentinel user '" + sentinel_user + "' has no password");
  if (replica_sync_timeout_ms <= 0) fail("replica_sync_timeout_ms must be positive");
  if (aof_sync_timeout_ms <= 0) fail("aof_sync_timeout_ms must be positive");
  if (mode == RedisMode::standalone && unix_socket_path.empty()) {
    if (host.empty()) fail("empty host");
    if (port <= 0 || port > kMaxPort) fail("port " + std::to_string(port) + " is not in 1..65535");
  }
  if (db < 0) fail("negative database " + std::to_string(db));
  const bool tls_options = !tls.ca_file.empty() || !tls.ca_dir.empty() || !tls.cert_file.empty() ||
                           !tls.key_file.empty() || !tls.server_name.empty() || tls.insecure_skip_verify;
  if (!tls.enabled && tls_options) fail("TLS options given without TLS (use rediss://)");
  if (tls.enabled && mode == RedisMode::standalone && !unix_socket_path.empty()) {
    fail("TLS over a Unix socket is not supported");
  }
  if (!tls.cert_file.empty() && tls.key_file.empty()) fail("TLS client certificate without its key (tls_key_file)");
  if (tls.cert_file.empty() && !tls.key_file.empty()) fail("TLS client key without its certificate (tls_cert_file)");
  if (!user.empty() && password.empty()) {
    fail("user '" + user + "' has no password (redis://user:password@host)");
  }
  if (connect_timeout_ms <= 0) fail("connect_timeout_ms must be positive");
  if (command_timeout_ms <= 0) fail("command_timeout_ms must be positive");
  if (pool_size <= 0) fail("pool_size must be positive");
  if (pubsub_ping_interval_ms <= 0) fail("pubsub_ping_interval_ms must be positive");
}

}  // namespace turnstile
