#include "fake_redis/lua_sandbox.h"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <optional>
#include <utility>

#include "core/check.h"
#include "fake_redis/command_args.h"
#include "fake_redis/lua_redis_api.h"
#include "fake_redis/lua_reply.h"
#include "fake_redis/redis_errors.h"

extern "C" {
#include <lualib.h>
}

namespace turnstile::sim {
namespace {

// A runaway script must not hang the simulation. Redis itself never stops a
// script (it answers BUSY to others until SCRIPT KILL); the fake stops it
// after this many VM instructions with the text SCRIPT KILL would give.
constexpr int kHookPeriodInstructions = 100'000;
constexpr std::uint64_t kMaxScriptInstructions = 200'000'000;
constexpr const char* kScriptKilled = "Script killed by user with SCRIPT KILL...";
// A script that allocates without bound fails with Lua's "not enough
// memory" instead of taking the test process down.
constexpr std::size_t kMaxScriptMemoryBytes = std::size_t{512} << 20;
// Lua starts a collection cycle when its memory reaches this percentage
// of what the last cycle left (Lua's default: 200). The state keeps
// little between runs (the compiled scripts) and every run leaves
// garbage: collecting at 4x that marks the live part rarely, and the
// garbage stays small enough to be swept while still in the cache (10x
// measured 2 % slower on the fair simulated hour, the default 200 6 %).
// What scripts see does not depend on it (no finalizers in Lua 5.1's
// tables; collectgarbage('count') differs from Redis's anyway).
constexpr int kGcPausePercent = 400;

void* allocate(void* self, void* block, std::size_t old_size, std::size_t new_size) {
  auto& impl = *static_cast<ScriptRuntime*>(self);
  if (new_size == 0) {
    impl.pool.reallocate(block, old_size, 0);
    impl.memory_in_use -= old_size;
    return nullptr;
  }
  // Lua requires that shrinking never fails.
  if (new_size > old_size && impl.limit_memory && impl.memory_in_use - old_size + new_size > kMaxScriptMemoryBytes) {
    return nullptr;
  }
  void* grown = impl.pool.reallocate(block, old_size, new_size);
  if (grown != nullptr) impl.memory_in_use = impl.memory_in_use - old_size + new_size;
  return grown;
}

void count_hook(lua_State* lua, lua_Debug*) {
  auto& impl = ScriptRuntime::of(lua);
  impl.instructions += kHookPeriodInstructions;
  if (impl.instructions > kMaxScriptInstructions) {
    lua_pushstring(lua, kScriptKilled);
    lua_error(lua);
  }
}

// Redis's math.random: rand48 scaled as Lua 5.1 scales rand().
int redis_math_random(lua_State* lua) {
  auto& impl = ScriptRuntime::of(lua);
  const lua_Number r =
      static_cast<lua_Number>(impl.random.next() % Rand48::kMax) / static_cast<lua_Number>(Rand48::kMax);
  switch (lua_gettop(lua)) {
    case 0:
      lua_pushnumber(lua, r);
      break;
    case 1: {
      const int upper = luaL_checkint(lua, 1);
      luaL_argcheck(lua, 1 <= upper, 1, "interval is empty");
      lua_pushnumber(lua, std::floor(r * upper) + 1);
      break;
    }
    case 2: {
      const int lower = luaL_checkint(lua, 1);
      const int upper = luaL_checkint(lua, 2);
      luaL_argcheck(lua, lower <= upper, 2, "interval is empty");
      lua_pushnumber(lua, std::floor(r * (upper - lower + 1)) + lower);
      break;
    }
    default:
      return luaL_error(lua, "wrong number of arguments");
  }
  return 1;
}

int redis_math_randomseed(lua_State* lua) {
  ScriptRuntime::of(lua).random.seed(luaL_checkint(lua, 1));
  return 0;
}

// Valkey's os.clock: the server's CPU seconds there; here 0, as a script
// runs at one virtual instant and the fake stays deterministic.
int os_clock(lua_State* lua) {
  lua_pushnumber(lua, 0);
  return 1;
}

// The base library's tonumber, word for word as Lua 5.1's luaB_tonumber,
// but converting a string once: the stock one asks lua_isnumber and then
// lua_tonumber, two strtod calls, for every number a script reads from
// a command's reply. A plain decimal integer (the scores and counts they read)
// needs no strtod at all.
int fast_tonumber(lua_State* lua) {
  if (lua_type(lua, 1) == LUA_TSTRING && lua_isnoneornil(lua, 2)) {
    std::size_t length = 0;
    const char* text = lua_tolstring(lua, 1, &length);
    if (const std::optional<double> integer = parse_short_integer_float({text, length})) {
      lua_pushnumber(lua, *integer);
      return 1;
    }
  }
  const int base = luaL_optint(lua, 2, 10);
  if (base == 10) {
    luaL_checkany(lua, 1);
    // lua_tonumber answers 0 for what is no number: only then ask again.
    const lua_Number number = lua_tonumber(lua, 1);
    if (number != 0 || lua_isnumber(lua, 1)) {
      lua_pushnumber(lua, number);
      return 1;
    }
  } else {
    const char* text = luaL_checkstring(lua, 1);
    luaL_argcheck(lua, 2 <= base && base <= 36, 2, "base out of range");
    char* end = nullptr;
    const unsigned long number = std::strtoul(text, &end, base);
    if (end != text) {
      while (std::isspace(static_cast<unsigned char>(*end))) ++end;
      if (*end == '\0') {
        lua_pushnumber(lua, static_cast<lua_Number>(number));
        return 1;
      }
    }
  }
  lua_pushnil(lua);
  return 1;
}

// ---- read-only globals -------------------------------------------------------

constexpr const char* kReadOnly = "Attempt to modify a readonly table";

int refuse_write(lua_State* lua) { return luaL_error(lua, kReadOnly); }

// __index of the real globals table: reads of unknown names fail.
int refuse_unknown_global(lua_State* lua) {
  if (!lua_isstring(lua, -1)) {
    return luaL_error(lua, "Second argument to luaProtectedTableError must be a string or number");
  }
  return luaL_error(lua, "Script attempted to access nonexistent global variable '%s'", lua_tostring(lua, -1));
}

// Replaces the value at `index` by the table it proxies, if it is a proxy.
bool unwrap_proxy(lua_State* lua, int index) {
  auto& impl = ScriptRuntime::of(lua);
  lua_rawgeti(lua, LUA_REGISTRYINDEX, impl.proxies_ref);
  lua_pushvalue(lua, index);
  lua_rawget(lua, -2);
  const bool proxy = !lua_isnil(lua, -1);
  if (proxy) lua_replace(lua, index);
  lua_settop(lua, lua_gettop(lua) - (proxy ? 1 : 2));
  return proxy;
}

// rawget, rawset and setmetatable see through proxies, so the protected
// tables behave like Redis's read-only ones (C errors carry no position).
int protected_rawget(lua_State* lua) {
  luaL_checktype(lua, 1, LUA_TTABLE);
  luaL_checkany(lua, 2);
  unwrap_proxy(lua, 1);
  lua_settop(lua, 2);
  lua_rawget(lua, 1);
  return 1;
}

int protected_rawset(lua_State* lua) {
  luaL_checktype(lua, 1, LUA_TTABLE);
  luaL_checkany(lua, 2);
  luaL_checkany(lua, 3);
  if (unwrap_proxy(lua, 1)) {
    lua_pushstring(lua, kReadOnly);
    return lua_error(lua);
  }
  lua_settop(lua, 3);
  lua_rawset(lua, 1);
  return 1;
}

int protected_setmetatable(lua_State* lua) {
  if (lua_type(lua, 1) == LUA_TTABLE && unwrap_proxy(lua, 1)) {
    lua_pushstring(lua, kReadOnly);
    return lua_error(lua);
  }
  // The base library's own setmetatable, kept as upvalue 1.
  lua_pushvalue(lua, lua_upvalueindex(1));
  lua_insert(lua, 1);
  lua_call(lua, lua_gettop(lua) - 1, 1);
  return 1;
}

// Where the error a message handler handles was raised: the function that
// raised it, or its caller if that is a C function.
bool error_position(lua_State* lua, lua_Debug* where) {
  bool found = lua_getstack(lua, 1, where) != 0;
  if (found) {
    lua_getinfo(lua, "nSl", where);
    if (std::strcmp(where->what, "C") == 0) {
      found = lua_getstack(lua, 2, where) != 0;
      if (found) lua_getinfo(lua, "nSl", where);
    }
  }
  return found;
}

// Redis 6.2's message handler (a Lua function there, of chunk
// "@err_handler_def"): "<source>:<line>: " .. err, a string; an err no
// string nor number fails its concatenation, which it handles in turn.
int string_error_handler(lua_State* lua) {
  const int type = lua_type(lua, 1);
  if (type != LUA_TSTRING && type != LUA_TNUMBER) {
    push_string(lua, redis_errors::kErrorHandlerFailureBefore);
    lua_pushstring(lua, lua_typename(lua, type));
    push_string(lua, redis_errors::kErrorHandlerFailureAfter);
    lua_concat(lua, 3);
    return 1;
  }
  lua_Debug where;
  if (!error_position(lua, &where)) {
    lua_settop(lua, 1);
    return 1;
  }
  lua_pushfstring(lua, "%s:%d: ", where.source, where.currentline);
  lua_pushvalue(lua, 1);
  lua_concat(lua, 2);
  return 1;
}

// Redis 6.2's print writes to the server's standard output, which no
// client sees: here it does nothing.
int silent_print(lua_State*) { return 0; }

// The message handler of every script run (Redis 7's
// __redis__err__handler): turns the error into {err=..., source=...,
// line=...}, taking the position from the first Lua function on the stack.
int error_handler(lua_State* lua) {
  lua_Debug where;
  const bool found = error_position(lua, &where);
  if (!lua_istable(lua, 1)) {
    // {err = 'ERR ' .. tostring(err)}
    lua_rawgeti(lua, LUA_REGISTRYINDEX, ScriptRuntime::of(lua).tostring_ref);
    lua_pushvalue(lua, 1);
    lua_call(lua, 1, 1);
    lua_pushstring(lua, "ERR ");
    lua_insert(lua, -2);
    lua_concat(lua, 2);
    lua_createtable(lua, 0, 3);
    lua_insert(lua, -2);
    lua_setfield(lua, -2, "err");
    lua_replace(lua, 1);
  }
  lua_settop(lua, 1);
  if (found) {
    lua_pushstring(lua, where.source);
    lua_setfield(lua, 1, "source");
    lua_pushnumber(lua, where.currentline);
    lua_setfield(lua, 1, "line");
  }
  return 1;
}

}  // namespace

ScriptRuntime::ScriptRuntime(const ServerProfile& server_profile) : profile(server_profile) {
  lua = lua_newstate(allocate, this);
  TURNSTILE_CHECK(lua != nullptr);
  open_libraries();
  intern_names();
  install_redis_table(lua);
  protect_globals();
  lua_sethook(lua, count_hook, LUA_MASKCOUNT, kHookPeriodInstructions);
  lua_gc(lua, LUA_GCSETPAUSE, kGcPausePercent);
}

void ScriptRuntime::open_libraries() {
  const std::pair<const char*, lua_CFunction> libraries[] = {{"", luaopen_base},
                                                             {LUA_TABLIBNAME, luaopen_table},
                                                             {LUA_STRLIBNAME, luaopen_string},
                                                             {LUA_MATHLIBNAME, luaopen_math}};
  for (const auto& [name, open] : libraries) {
    lua_pushcfunction(lua, open);
    lua_pushstring(lua, name);
    lua_call(lua, 1, 0);
  }
  // What Redis leaves out of the base library; 7.0 also the environment
  // functions.
  auto remove_globals = [this](std::initializer_list<const char*> names) {
    for (const char* name : names) {
      lua_pushnil(lua);
      lua_setglobal(lua, name);
    }
  };
  remove_globals({"print", "loadfile", "dofile"});
  if (profile.sandbox_keeps_print) {
    lua_pushcfunction(lua, silent_print);
    lua_setglobal(lua, "print");
  }
  if (!profile.sandbox_keeps_fenv) remove_globals({"setfenv", "getfenv", "newproxy"});
  if (profile.sandbox_has_os_clock) {
    // Valkey's os table: clock alone.
    lua_createtable(lua, 0, 1);
    lua_pushcfunction(lua, os_clock);
    lua_setfield(lua, -2, "clock");
    lua_setglobal(lua, "os");
  }
  lua_pushcfunction(lua, fast_tonumber);
  lua_setglobal(lua, "tonumber");
  lua_getglobal(lua, LUA_MATHLIBNAME);
  lua_pushcfunction(lua, redis_math_random);
  lua_setfield(lua, -2, "random");
  lua_pushcfunction(lua, redis_math_randomseed);
  lua_setfield(lua, -2, "randomseed");
  lua_pop(lua, 1);

  lua_getglobal(lua, "tostring");
  tostring_ref = luaL_ref(lua, LUA_REGISTRYINDEX);
  lua_pushcfunction(lua, profile.script_error_tables ? error_handler : string_error_handler);
  error_handler_ref = luaL_ref(lua, LUA_REGISTRYINDEX);
  TURNSTILE_CHECK(tostring_ref > 0 && error_handler_ref > 0 && lua_gettop(lua) == 0);
}

void ScriptRuntime::intern_names() {
  constexpr std::array<const char*, kNames> kTexts = {"err", "ok",  "double", "big_number",
                                                      "map", "set", "KEYS",   "ARGV"};
  for (std::size_t i = 0; i < kNames; ++i) {
    lua_pushstring(lua, kTexts[i]);
    name_refs[i] = luaL_ref(lua, LUA_REGISTRYINDEX);
    TURNSTILE_CHECK(name_refs[i] > 0);
  }
}

// Pushes a proxy of the table at `table_index`: reads go to the table, writes
// fail, and the proxy is remembered so rawget/rawset can see through it.
void ScriptRuntime::push_protected_proxy(int table_index) {
  if (table_index < 0) table_index = lua_gettop(lua) + 1 + table_index;
  TURNSTILE_CHECK(table_index > 0 && lua_istable(lua, table_index));
  const int top = lua_gettop(lua);
  lua_newtable(lua);           // proxy
  lua_createtable(lua, 0, 3);  // its metatable
  lua_pushvalue(lua, table_index);
  lua_setfield(lua, -2, "__index");
  lua_pushcfunction(lua, refuse_write);
  lua_setfield(lua, -2, "__newindex");
  lua_pushboolean(lua, 0);
  lua_setfield(lua, -2, "__metatable");
  lua_setmetatable(lua, -2);
  lua_rawgeti(lua, LUA_REGISTRYINDEX, proxies_ref);
  lua_pushvalue(lua, -2);
  lua_pushvalue(lua, table_index);
  lua_rawset(lua, -3);
  lua_pop(lua, 1);
  TURNSTILE_CHECK(lua_gettop(lua) == top + 1);  // the proxy
}

void ScriptRuntime::protect_globals() {
  lua_newtable(lua);
  proxies_ref = luaL_ref(lua, LUA_REGISTRYINDEX);
  TURNSTILE_CHECK(proxies_ref > 0);

  lua_getglobal(lua, "setmetatable");
  lua_pushcclosure(lua, protected_setmetatable, 1);
  lua_setglobal(lua, "setmetatable");
  lua_pushcfunction(lua, protected_rawget);
  lua_setglobal(lua, "rawget");
  lua_pushcfunction(lua, protected_rawset);
  lua_setglobal(lua, "rawset");

  // Library tables become proxies, in the globals and as the strings' __index.
  for (const char* library : {LUA_STRLIBNAME, LUA_TABLIBNAME, LUA_MATHLIBNAME, LUA_COLIBNAME, "redis"}) {
    lua_getglobal(lua, library);
    push_protected_proxy(-1);
    lua_setglobal(lua, library);
    lua_pop(lua, 1);
  }
  lua_pushliteral(lua, "");
  lua_getmetatable(lua, -1);
  lua_getglobal(lua, LUA_STRLIBNAME);
  lua_setfield(lua, -2, "__index");
  push_protected_proxy(-1);
  lua_setfield(lua, -2, "__metatable");
  lua_pop(lua, 2);

  // The real globals answer unknown names with an error; scripts see them
  // through a proxy, which also becomes _G and the thread's globals.
  lua_pushvalue(lua, LUA_GLOBALSINDEX);
  lua_pushvalue(lua, -1);
  globals_ref = luaL_ref(lua, LUA_REGISTRYINDEX);
  TURNSTILE_CHECK(globals_ref > 0);
  lua_createtable(lua, 0, 1);
  lua_pushcfunction(lua, refuse_unknown_global);
  lua_setfield(lua, -2, "__index");
  lua_setmetatable(lua, -2);
  push_protected_proxy(-1);
  lua_pushvalue(lua, -1);
  lua_setfield(lua, -3, "_G");
  lua_replace(lua, LUA_GLOBALSINDEX);
  lua_pop(lua, 1);
  TURNSTILE_CHECK(lua_gettop(lua) == 0);
}

}  // namespace turnstile::sim
