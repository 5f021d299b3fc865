#include "fake_redis/lua_redis_api.h"

#include <cstdint>
#include <cstring>
#include <exception>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/check.h"
#include "fake_redis/command_args.h"
#include "fake_redis/double_text.h"
#include "fake_redis/lua_reply.h"
#include "fake_redis/lua_sandbox.h"
#include "fake_redis/redis_errors.h"
#include "fake_redis/sha1.h"

namespace turnstile::sim {
namespace {

constexpr int kLogDebug = 0;
constexpr int kLogWarning = 3;
constexpr int kReplNone = 0, kReplAof = 1, kReplSlave = 2, kReplAll = 3;

// Resizes `argv` to `size`, parking the strings it drops in `spare` and
// taking strings from there when it grows, so their buffers are reused.
void resize_keeping_capacity(std::vector<std::string>& argv, std::vector<std::string>& spare, std::size_t size) {
  while (argv.size() > size) {
    spare.push_back(std::move(argv.back()));
    argv.pop_back();
  }
  while (argv.size() < size) {
    if (spare.empty()) {
      argv.emplace_back();
      continue;
    }
    argv.push_back(std::move(spare.back()));
    spare.pop_back();
  }
}

int redis_call(lua_State* lua) {
  ScriptRuntime& runtime = ScriptRuntime::of(lua);
  if (!runtime.push_command_result(lua)) return 1;
  // Redis 6.2 raises the error table's err string (luaRaiseError).
  if (!runtime.profile.script_error_tables) {
    runtime.push_name(lua, ScriptRuntime::Name::err);
    lua_rawget(lua, -2);
  }
  return lua_error(lua);
}

int redis_pcall(lua_State* lua) {
  ScriptRuntime::of(lua).push_command_result(lua);
  return 1;
}

// redis.error_reply / redis.status_reply: one string argument, else an error
// table (returned, not raised).
bool single_string_argument(lua_State* lua) {
  if (lua_gettop(lua) == 1 && lua_type(lua, -1) == LUA_TSTRING) return true;
  push_script_error(lua, redis_errors::kReplyHelperArguments);
  return false;
}

int redis_error_reply(lua_State* lua) {
  if (!single_string_argument(lua)) return 1;
  const ScriptRuntime& runtime = ScriptRuntime::of(lua);
  if (!runtime.profile.script_error_tables) {
    // Redis 6.2: {err = the text as it is}.
    lua_createtable(lua, 0, 1);
    runtime.push_name(lua, ScriptRuntime::Name::err);
    lua_pushvalue(lua, 1);
    lua_rawset(lua, -3);
    return 1;
  }
  std::size_t length = 0;
  const char* text = lua_tolstring(lua, 1, &length);
  const std::string_view message(text, length);
  push_error_table(lua, message.starts_with('-') ? std::string(message) : "-" + std::string(message));
  return 1;
}

int redis_status_reply(lua_State* lua) {
  if (!single_string_argument(lua)) return 1;
  lua_createtable(lua, 0, 1);
  lua_pushvalue(lua, 1);
  lua_setfield(lua, -2, "ok");
  return 1;
}

int redis_sha1hex(lua_State* lua) {
  if (lua_gettop(lua) != 1) {
    lua_pushstring(lua, "wrong number of arguments");
    return lua_error(lua);
  }
  std::size_t length = 0;
  const char* bytes = lua_tolstring(lua, 1, &length);
  char hex[kSha1HexLength];
  {
    const std::string digest = sha1_hex(bytes == nullptr ? std::string_view() : std::string_view(bytes, length));
    std::memcpy(hex, digest.data(), kSha1HexLength);
  }
  lua_pushlstring(lua, hex, kSha1HexLength);
  return 1;
}

// Raises `message` as Redis's own helpers raise their argument errors: the
// text alone, without luaL_error's "user_script:1: " position.
int raise_plain(lua_State* lua, std::string_view message) {
  lua_pushlstring(lua, message.data(), message.size());
  return lua_error(lua);
}

// Pushes the release's text for `helper` called with a wrong argument
// count (the string is gone before raise_helper_arity raises).
void push_helper_arity(lua_State* lua, redis_errors::ScriptHelper helper) {
  push_string(lua, redis_errors::script_helper_arity(ScriptRuntime::of(lua).profile, helper));
}

int raise_helper_arity(lua_State* lua, redis_errors::ScriptHelper helper) {
  push_helper_arity(lua, helper);
  return lua_error(lua);
}

// redis.log checks its arguments as Redis does; the fake keeps no log.
int redis_log(lua_State* lua) {
  if (lua_gettop(lua) < 2) return raise_helper_arity(lua, redis_errors::ScriptHelper::log);
  if (!lua_isnumber(lua, 1)) return raise_plain(lua, redis_errors::kLogLevelNotNumber);
  if (const lua_Number level = lua_tonumber(lua, 1); level < kLogDebug || level > kLogWarning) {
    return raise_plain(lua, redis_errors::invalid_log_level(ScriptRuntime::of(lua).profile));
  }
  return 0;
}

// Argument `index` as Redis reads it into a C int (lua_tonumber, then the
// conversion): truncated toward zero. A value no int can hold (inf, nan,
// beyond +-2^31) is INT_MIN, what x86's conversion gives Redis (in C++ the
// conversion itself would be undefined).
int to_c_int(lua_State* lua, int index) {
  const lua_Number number = lua_tonumber(lua, index);
  constexpr auto kLowest = static_cast<lua_Number>(std::numeric_limits<int>::min());
  constexpr auto kHighest = static_cast<lua_Number>(std::numeric_limits<int>::max());
  if (!(number > kLowest - 1 && number < kHighest + 1)) return std::numeric_limits<int>::min();
  return static_cast<int>(number);
}

int redis_setresp(lua_State* lua) {
  if (lua_gettop(lua) != 1) return raise_helper_arity(lua, redis_errors::ScriptHelper::setresp);
  const int version = to_c_int(lua, 1);
  if (version != 2 && version != 3) return raise_plain(lua, "RESP version must be 2 or 3.");
  // The fake's replies are RESP2 values only.
  if (version == 3) return raise_plain(lua, "RESP3 is not supported by the fake Redis.");
  return 0;
}

int redis_set_repl(lua_State* lua) {
  if (lua_gettop(lua) != 1) return raise_helper_arity(lua, redis_errors::ScriptHelper::set_repl);
  const int flags = to_c_int(lua, 1);
  if ((flags & ~kReplAll) != 0)
    return raise_plain(lua, "Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.");
  return 0;
}

int redis_replicate_commands(lua_State* lua) {
  lua_pushboolean(lua, 1);
  return 1;
}

int redis_breakpoint(lua_State* lua) {
  lua_pushboolean(lua, 0);
  return 1;
}

int redis_debug(lua_State*) { return 0; }

}  // namespace

void push_script_error(lua_State* lua, std::string_view message) {
  if (ScriptRuntime::of(lua).profile.script_error_tables) {
    push_error_table(lua, message);
    return;
  }
  // luaPushError: the position of the function that called the C one.
  lua_createtable(lua, 0, 1);
  ScriptRuntime::of(lua).push_name(lua, ScriptRuntime::Name::err);
  lua_Debug caller;
  if (lua_getstack(lua, 1, &caller) != 0 && lua_getinfo(lua, "nSl", &caller) != 0) {
    lua_pushfstring(lua, "%s: %d: ", caller.source, caller.currentline);
    push_string(lua, message);
    lua_concat(lua, 2);
  } else {
    push_string(lua, message);
  }
  lua_rawset(lua, -3);
}

void install_redis_table(lua_State* lua) {
  const luaL_Reg functions[] = {
      {"call", redis_call},
      {"pcall", redis_pcall},
      {"error_reply", redis_error_reply},
      {"status_reply", redis_status_reply},
      {"sha1hex", redis_sha1hex},
      {"log", redis_log},
      {"setresp", redis_setresp},
      {"set_repl", redis_set_repl},
      {"replicate_commands", redis_replicate_commands},
      {"breakpoint", redis_breakpoint},
      {"debug", redis_debug},
  };
  lua_createtable(lua, 0, 32);
  for (const luaL_Reg& function : functions) {
    lua_pushcfunction(lua, function.func);
    lua_setfield(lua, -2, function.name);
  }
  const std::pair<const char*, int> constants[] = {
      {"LOG_DEBUG", kLogDebug},     {"LOG_VERBOSE", 1},           {"LOG_NOTICE", 2},
      {"LOG_WARNING", kLogWarning}, {"REPL_NONE", kReplNone},     {"REPL_AOF", kReplAof},
      {"REPL_SLAVE", kReplSlave},   {"REPL_REPLICA", kReplSlave}, {"REPL_ALL", kReplAll}};
  for (const auto& [name, value] : constants) {
    lua_pushnumber(lua, value);
    lua_setfield(lua, -2, name);
  }
  const ServerProfile& profile = ScriptRuntime::of(lua).profile;
  if (profile.has_version_in_scripts) {
    lua_pushlstring(lua, profile.redis_version.data(), profile.redis_version.size());
    lua_setfield(lua, -2, "REDIS_VERSION");
    lua_pushnumber(lua, profile.redis_version_number());
    lua_setfield(lua, -2, "REDIS_VERSION_NUM");
  }
  lua_setglobal(lua, "redis");

  if (!profile.script_error_tables) return;
  // Redis 7 replaces pcall: an error table caught by pcall is handed to the
  // script as its err string.
  luaL_dostring(lua, R"lua(
    local base_pcall = pcall
    local function unwrap(ok, ...)
      if ok then return ok, ... end
      local err = ...
      if type(err) == 'table' and type(rawget(err, 'err')) == 'string' then err = rawget(err, 'err') end
      return false, err
    end
    pcall = function(f, ...) return unwrap(base_pcall(f, ...)) end
  )lua");
}

bool ScriptRuntime::push_command_result(lua_State* state) {
  const int argc = lua_gettop(state);
  if (argc == 0) {
    push_script_error(state, redis_errors::redis_call_no_arguments(profile));
    return true;
  }
  resize_keeping_capacity(command_argv, spare_arguments, static_cast<std::size_t>(argc));
  for (int i = 1; i <= argc; ++i) {
    std::string& argument = command_argv[static_cast<std::size_t>(i - 1)];
    const int type = lua_type(state, i);
    if (type == LUA_TNUMBER) {
      // Full precision, not lua_tostring's "%.14g".
      assign_number_argument(profile, lua_tonumber(state, i), argument);
      continue;
    }
    std::size_t length = 0;
    const char* text = type == LUA_TSTRING ? lua_tolstring(state, i, &length) : nullptr;
    if (text == nullptr) {
      lua_settop(state, 0);
      push_script_error(state, redis_errors::redis_call_bad_argument(profile));
      return true;
    }
    argument.assign(text, length);
  }
  lua_settop(state, 0);
  TURNSTILE_CHECK_MSG(call != nullptr && limit_memory, "redis.call runs inside a script only");
  // Replies are converted without the memory cap: a failed allocation here
  // would longjmp over the C++ objects below.
  limit_memory = false;
  bool is_error = false;
  try {
    const Reply reply = (*call)(command_argv);
    is_error = reply.is_error();
    lua_checkstack(state, 4);
    if (is_error && !profile.script_error_tables && redis_errors::is_redis_6_script_refusal(reply.as_string())) {
      push_script_error(state, reply.as_string());
    } else {
      push_reply(state, reply);
    }
  } catch (const std::exception& failure) {
    push_error_table(state, std::string("-ERR ") + failure.what());
    is_error = true;
  }
  limit_memory = true;
  return is_error;
}

}  // namespace turnstile::sim
