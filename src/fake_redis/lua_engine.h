// fake_redis/lua_engine.h
//
// Lua 5.1, embedded and sandboxed the way Redis does it, so the fake runs the
// very same lua/*.lua files as a real redis-server: libraries base, table,
// string, math (no os, io, loadfile, dofile); writes to globals refused;
// KEYS and ARGV; redis.call / redis.pcall / redis.error_reply /
// redis.status_reply / redis.sha1hex / redis.log; conversions between Lua
// values and replies exactly as Redis's. The engine knows nothing about the
// keyspace: commands from scripts go through the callback given to run().
//
// The engine is split by job, as Redis splits its scripting: this object,
// its script cache and the call path (lua_engine.cpp); the sandboxed state
// (lua_sandbox.h); the redis table (lua_redis_api.h); Lua values <-> replies
// (lua_reply.h); the "#!lua" line (script_shebang.h); script names
// (sha1.h).

#ifndef TURNSTILE_FAKE_REDIS_LUA_ENGINE_H_
#define TURNSTILE_FAKE_REDIS_LUA_ENGINE_H_

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fake_redis/server_profile.h"
#include "fake_redis/sha1.h"  // sha1_hex, for the engine's users
#include "turnstile/reply.h"

namespace turnstile::sim {

class LuaEngine {
 public:
  // Runs one command for a script and returns the server's reply, error
  // replies as values (redis.call turns them into Lua errors itself).
  using CommandCallback = std::function<Reply(const std::vector<std::string>& argv)>;

  LuaEngine() : LuaEngine(ServerProfile::of(ServerRelease::redis_7_0)) {}
  explicit LuaEngine(const ServerProfile& profile);
  ~LuaEngine();
  LuaEngine(const LuaEngine&) = delete;
  LuaEngine& operator=(const LuaEngine&) = delete;

  // SCRIPT LOAD: compiles `source` and caches it. Returns the SHA-1 as a bulk
  // reply, or Redis's compile error as an error reply.
  Reply load(std::string_view source);

  // SCRIPT EXISTS for one sha (case-insensitive, as Redis).
  bool exists(std::string_view sha1) const;

  // SCRIPT FLUSH.
  void flush();

  // EVAL: loads `source` if needed, then runs it. `keys` and `args` are
  // views (the command's own argv, not copies of it).
  Reply eval(std::string_view source, std::span<const std::string> keys, std::span<const std::string> args,
             const CommandCallback& call);

  // EVALSHA: runs a cached script (its sha in either case); NOSCRIPT error
  // reply if unknown.
  Reply evalsha(std::string_view sha1, std::span<const std::string> keys, std::span<const std::string> args,
                const CommandCallback& call);

  // True while a script declared "#!lua flags=no-writes" runs: the command
  // path must then refuse write commands with Redis's text.
  bool running_read_only_script() const;

  // A server restart: SCRIPT FLUSH plus math.random's generator back to its
  // start state (SCRIPT FLUSH alone keeps it, as Redis's process-wide one).
  void restart();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace turnstile::sim

#endif  // TURNSTILE_FAKE_REDIS_LUA_ENGINE_H_
