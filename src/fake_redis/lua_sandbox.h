// fake_redis/lua_sandbox.h
//
// The Lua 5.1 state scripts run in, sandboxed the way Redis 7.0 does it
// (script_lua.c), and the state the C functions called from Lua reach
// (through the allocator's user data):
//
//   * Libraries base, table, string, math only (no os, io, loadfile,
//     dofile, print, setfenv, getfenv, newproxy; 6.2 keeps print and the
//     last three, 7.2 the last three); math.random is Redis's
//     rand48, seeded once per server (not per call), exactly as Redis 7
//     does; math.randomseed reseeds it.
//   * Globals are read-only: the script sees a proxy of the globals table
//     (and of every library table) whose writes fail with "Attempt to modify
//     a readonly table" and whose reads of unknown names fail with "Script
//     attempted to access nonexistent global variable". Real Redis patches
//     Lua for this; the stock liblua5.1 needs proxies, so pairs() over _G or
//     a library table sees nothing (an accepted difference). rawget, rawset
//     and setmetatable see through the proxies.
//   * Every run has a message handler (Redis's __redis__err__handler) that
//     turns an error into {err=..., source=..., line=...} (Redis 6.2's:
//     into the string "<source>:<line>: <err>").
//   * Limits Redis does not have, so a runaway script cannot hang or sink
//     the simulation: an instruction budget (ending with SCRIPT KILL's text)
//     and a memory cap while script code runs.
//
// Lua raises errors with longjmp, so C functions called from Lua keep every
// C++ object in a helper that returns before lua_error() is called.
//
// ScriptRuntime's members are defined where their job is: creation and the
// sandbox in lua_sandbox.cpp, redis.call's command path in
// lua_redis_api.cpp.

#ifndef TURNSTILE_FAKE_REDIS_LUA_SANDBOX_H_
#define TURNSTILE_FAKE_REDIS_LUA_SANDBOX_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fake_redis/lua_engine.h"
#include "fake_redis/rand48.h"
#include "fake_redis/server_profile.h"
#include "fake_redis/small_block_pool.h"

extern "C" {
#include <lauxlib.h>
#include <lua.h>
}

namespace turnstile::sim {

// The sandboxed state; LuaEngine's implementation adds the script cache.
struct ScriptRuntime {
  const ServerProfile& profile;  // the release whose sandbox and texts this is
  SmallBlockPool pool;           // the state's memory; outlives it (lua_close first)
  lua_State* lua = nullptr;
  std::size_t memory_in_use = 0;
  bool limit_memory = false;  // only while script code runs
  std::uint64_t instructions = 0;

  int globals_ref = LUA_NOREF;        // the real globals table
  int proxies_ref = LUA_NOREF;        // proxy -> protected table
  int error_handler_ref = LUA_NOREF;  // the handler lua_pcall uses
  int tostring_ref = LUA_NOREF;       // the base library's tostring

  Rand48 random;

  // Strings the conversions push on every run or reply (the special fields
  // of a reply table, KEYS, ARGV), interned once and held by the registry:
  // pushing one reads an array slot instead of hashing its bytes again.
  enum class Name : std::uint8_t { err, ok, double_value, big_number, map, set, keys, argv };
  static constexpr std::size_t kNames = 8;
  std::array<int, kNames> name_refs{};
  // Pushes `name` on `lua` (this state or one of its coroutines).
  void push_name(lua_State* state, Name name) const {
    lua_rawgeti(state, LUA_REGISTRYINDEX, name_refs[static_cast<std::size_t>(name)]);
  }

  // State of the running script.
  const LuaEngine::CommandCallback* call = nullptr;
  std::vector<std::string> command_argv;  // reused between calls of redis.call
  // Strings of command_argv beyond the current call's argc, kept with their
  // capacity for the next longer call (no allocation per argument).
  std::vector<std::string> spare_arguments;

  explicit ScriptRuntime(const ServerProfile& server_profile);
  ~ScriptRuntime() { lua_close(lua); }
  ScriptRuntime(const ScriptRuntime&) = delete;
  ScriptRuntime& operator=(const ScriptRuntime&) = delete;

  static ScriptRuntime& of(lua_State* lua) {
    void* self = nullptr;
    lua_getallocf(lua, &self);
    return *static_cast<ScriptRuntime*>(self);
  }

  void open_libraries();
  void intern_names();
  void protect_globals();
  void push_protected_proxy(int table_index);

  // redis.call / redis.pcall without the raising: pushes the result and
  // says whether it is an error to raise (lua_redis_api.cpp).
  bool push_command_result(lua_State* lua);
};

}  // namespace turnstile::sim

#endif  // TURNSTILE_FAKE_REDIS_LUA_SANDBOX_H_
