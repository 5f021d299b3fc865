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
// Earlier releases lack what a flag says they lack: Redis 6.2 has no
// EXPIRE options, no sharded pub/sub, no "#!lua" shebang, and its own
// script errors ("ERR Error running script (call to f_<sha>):
// @user_script:<line>: <message>").

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
  // Redis 6.2's wording of the errors 7.0 reworded: backquoted
  // unknown-command texts, "invalid expire time in set", "Unknown
  // subcommand or wrong number of arguments", LPOS's shorter RANK text,
  // "(P)SUBSCRIBE" for subscribed clients, redis.call's "... from Lua
  // script" texts.
  bool redis_6_texts = false;
  // EXPIRE's NX / XX / GT / LT (7.0 on; before, EXPIRE takes exactly two
  // arguments).
  bool has_expire_options = true;
  // SET ... NX GET (7.0 on; before, a syntax error).
  bool set_nx_get_allowed = true;
  // DECRBY refuses -2^63 as a decrement (7.0 on; 6.2 negates it, which
  // leaves it -2^63, and adds that).
  bool decrby_checks_minimum = true;
  // SSUBSCRIBE, SUNSUBSCRIBE, SPUBLISH and PUBSUB SHARDCHANNELS /
  // SHARDNUMSUB (7.0 on).
  bool has_sharded_pubsub = true;
  // SCRIPT's and PUBSUB's subcommands are commands of their own, each
  // checking its arity ("ERR wrong number of arguments for
  // 'script|load' command"), 7.0 on; before, the command checks them all
  // ("Unknown subcommand or wrong number of arguments ...", SCRIPT EXISTS
  // without a sha an empty array).
  bool subcommands_are_commands = true;
  // The "#!lua" shebang line and its flags (7.0 on; before, a script
  // starting with "#!" is a Lua syntax error).
  bool has_shebang = true;
  // Redis 7's script errors: an error table carries its message, source
  // and line ("<msg> script: <sha>, on @user_script:<line>."), redis.call
  // raises the table, pcall unwraps it, redis.error_reply adds "ERR ".
  // Before (6.2), errors are strings: a failed run is "ERR Error running
  // script (call to f_<sha>): <source>:<line>: <message>", redis.call
  // raises "<source>: <line>: <message>", and an error table's err is
  // sent as it is.
  bool script_error_tables = true;
  // A script's {big_number=...} is a reply (7.0 on; before, an array).
  bool has_big_number_reply = true;
  // The sandbox keeps print (6.2).
  bool sandbox_keeps_print = false;
  // A small (listpack / ziplist) sorted set keeps a score's sign of zero
  // (6.2's ziplist stores "-0"; 7.0's listpack stores 0).
  bool compact_zset_keeps_negative_zero = false;
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
