// fake_redis/server_profile.h
//
// Which server the fake Redis speaks: Redis 6.2, 7.0 (the default, what
// the rest of the project simulates), 7.2 or Valkey 8.0. A profile names
// the release it was checked against (word for word, by the differential
// test) and the behaviours that set it apart; the error texts that differ
// live with the others in redis_errors.h, chosen by the profile.
//
//   sim::Server server(clock, sim::ServerOptions(), sim::ServerProfile::of(sim::ServerRelease::redis_7_2));
//
// Later releases keep what they inherit unless a flag says otherwise:
// Valkey 8.0 forked from Redis 7.2.4.
//
// Redis 6.2's profile is partial: it has 6.2's sandbox, but not yet 6.2's
// commands (no EXPIRE options, no SET NX GET, backquoted unknown-command
// texts, ...) nor its wrapped script errors ("ERR Error running script
// (call to f_<sha>): @user_script:<line>: <message>"), so the
// differential test does not run against 6.2 (tools/test_servers).

#ifndef TURNSTILE_FAKE_REDIS_SERVER_PROFILE_H_
#define TURNSTILE_FAKE_REDIS_SERVER_PROFILE_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace turnstile::sim {

enum class ServerRelease : std::uint8_t { redis_6_2, redis_7_0, redis_7_2, valkey_8_0 };

struct ServerProfile {
  ServerRelease release = ServerRelease::redis_7_0;
  // For messages: "Redis 7.0.15", "Valkey 8.0.1".
  std::string_view label;
  // What INFO server says: redis_version (also redis.REDIS_VERSION in
  // scripts), and for Valkey server_name and valkey_version (empty for
  // Redis).
  std::string_view redis_version;
  std::string_view server_name;
  std::string_view server_version;

  // ---- behaviours (true where the release has them) ----
  // redis.REDIS_VERSION and redis.REDIS_VERSION_NUM in scripts (7.0 on).
  bool has_version_in_scripts = true;
  // Lua numbers and sorted-set scores as text the shortest way that reads
  // back the same ("0.1", "1e17" as "100000000000000000"), 7.2 on; before,
  // printf's %.17g ("0.10000000000000001", "1e+17").
  bool shortest_double_text = false;
  // The sandbox keeps setfenv, getfenv and newproxy (6.2, 7.2 on; 7.0
  // removed them).
  bool sandbox_keeps_fenv = false;
  // A script's error message keeps its CR and LF (7.2 on; 7.0 turns them
  // into spaces). A CRLF in it then ends the error reply early on the wire.
  bool script_errors_keep_newlines = false;
  // redis.set_repl() without its argument says "requires one argument"
  // (7.2 on; before, "two arguments").
  bool set_repl_arity_fixed = false;
  // LPOS refuses RANK -2^63 as out of range (7.2 on; 7.0 took it as -1).
  bool lpos_rank_range_checked = false;
  // SCRIPT HELP's last line says "Print this help." (7.2 on; "Prints").
  bool help_says_print = false;
  // Valkey's wording of the script path's errors (no "Redis" in them, the
  // helpers' table called "server") and NOSCRIPT without "Please use EVAL.".
  bool valkey_texts = false;
  // The sandbox has an os table holding clock (Valkey 8).
  bool sandbox_has_os_clock = false;

  // redis_version as one number, 0x00MMmmpp (REDIS_VERSION_NUM).
  std::int64_t redis_version_number() const;

  static const ServerProfile& of(ServerRelease release);
  // Every profile, oldest release first.
  static std::span<const ServerProfile> all();
  // The profile of a server whose INFO server says `redis_version`,
  // `server_name` and `server_version` (valkey_version; both "" for Redis,
  // which has no such fields), if the fake models that exact release.
  static std::optional<ServerRelease> find(std::string_view redis_version, std::string_view server_name,
                                           std::string_view server_version);
};

}  // namespace turnstile::sim

#endif  // TURNSTILE_FAKE_REDIS_SERVER_PROFILE_H_
