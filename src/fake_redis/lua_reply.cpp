#include "fake_redis/lua_reply.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "core/check.h"
#include "fake_redis/double_text.h"
#include "fake_redis/lua_sandbox.h"
#include "fake_redis/redis_errors.h"

extern "C" {
#include <lauxlib.h>
#include <lua.h>
}

namespace turnstile::sim {
namespace {

// Deepest nesting of tables converted to a reply (small enough for a fiber
// stack under ASan); deeper ends in Redis's
// "reached lua stack limit" error, as Lua's own stack limit would.
constexpr int kMaxReplyDepth = 200;

// (long long) of a double as x86-64 computes it: out of range and NaN give
// INT64_MIN, which is what redis-server answers for `return 1e30`.
std::int64_t truncate_like_x86(lua_Number number) {
  constexpr double kTwoTo63 = 9223372036854775808.0;
  if (!(number >= -kTwoTo63 && number < kTwoTo63)) return std::numeric_limits<std::int64_t>::min();
  return static_cast<std::int64_t>(number);
}

void replace_newlines(std::string& text) {
  for (char& c : text) {
    if (c == '\r' || c == '\n') c = ' ';
  }
}

// luaPushErrorBuff: "-CODE msg" keeps CODE, anything else gets "ERR"; the
// message loses surrounding CR/LF.
std::string error_table_text(std::string_view raw) {
  raw = up_to_nul(raw);
  std::string_view code = "ERR";
  std::string_view message = raw;
  if (!raw.empty() && raw[0] == '-') {
    const std::size_t space = raw.find(' ');
    if (space == std::string_view::npos) {
      message = raw.substr(1);
    } else {
      code = raw.substr(1, space - 1);
      message = raw.substr(space + 1);
    }
  }
  while (!message.empty() && (message.front() == '\r' || message.front() == '\n')) message.remove_prefix(1);
  while (!message.empty() && (message.back() == '\r' || message.back() == '\n')) message.remove_suffix(1);
  std::string text(code);
  text += ' ';
  text += message;
  return text;
}

using Name = ScriptRuntime::Name;

// Sets t[field] of the new table on top (no metatable: a raw set is what
// lua_setfield would do).
void set_string_field(lua_State* lua, Name field, std::string_view value) {
  ScriptRuntime::of(lua).push_name(lua, field);
  push_string(lua, value);
  lua_rawset(lua, -3);
}

// Pushes t[field] (a raw lookup, as Redis's) of the table on top and
// returns its type.
int push_raw_field(lua_State* lua, Name field) {
  ScriptRuntime::of(lua).push_name(lua, field);
  lua_rawget(lua, -2);
  return lua_type(lua, -1);
}

// t[field] of the table on top if it is a string (up to a NUL, as Redis
// reads it); the stack is left as it was.
std::optional<std::string> raw_string_field(lua_State* lua, Name field) {
  const int top = lua_gettop(lua);
  std::optional<std::string> value;
  if (push_raw_field(lua, field) == LUA_TSTRING) {
    std::size_t length = 0;
    const char* text = lua_tolstring(lua, -1, &length);
    value.emplace(up_to_nul({text, length}));
  }
  lua_pop(lua, 1);
  TURNSTILE_CHECK(lua_gettop(lua) == top);
  return value;
}

// The entries of the table on top, flattened as RESP2 sends a map (key,
// value, ...) or a set (keys only, Lua values ignored).
Reply entries_reply(lua_State* lua, bool with_values, int depth) {
  const int top = lua_gettop(lua);
  TURNSTILE_CHECK(lua_istable(lua, -1));
  std::vector<Reply> elements;
  lua_pushnil(lua);
  while (lua_next(lua, -2)) {
    if (!with_values) lua_pop(lua, 1);
    lua_pushvalue(lua, with_values ? -2 : -1);
    elements.push_back(pop_reply(lua, depth + 1));
    if (with_values) elements.push_back(pop_reply(lua, depth + 1));
  }
  TURNSTILE_CHECK(lua_gettop(lua) == top);  // lua_next popped the last key
  return Reply::array(std::move(elements));
}

// The table on top as a reply, checking Redis's special fields in Redis's
// order; the table stays on the stack.
Reply table_reply(lua_State* lua, int depth) {
  if (std::optional<std::string> error = raw_string_field(lua, Name::err)) return formatted_error(std::move(*error));
  if (std::optional<std::string> status = raw_string_field(lua, Name::ok)) {
    replace_newlines(*status);
    return Reply::status(std::move(*status));
  }
  if (push_raw_field(lua, Name::double_value) == LUA_TNUMBER) {
    const double value = lua_tonumber(lua, -1);
    lua_pop(lua, 1);
    return Reply::bulk(double_reply_text(ScriptRuntime::of(lua).profile, value));
  }
  lua_pop(lua, 1);
  if (ScriptRuntime::of(lua).profile.has_big_number_reply) {
    if (std::optional<std::string> number = raw_string_field(lua, Name::big_number)) {
      replace_newlines(*number);
      return Reply::bulk(std::move(*number));
    }
  }
  for (const auto& [field, with_values] : {std::pair{Name::map, true}, std::pair{Name::set, false}}) {
    if (push_raw_field(lua, field) == LUA_TTABLE) {
      Reply entries = entries_reply(lua, with_values, depth);
      lua_pop(lua, 1);
      return entries;
    }
    lua_pop(lua, 1);
  }
  // An array, cut at the first nil.
  std::vector<Reply> elements;
  for (int index = 1;; ++index) {
    lua_pushnumber(lua, index);
    lua_rawget(lua, -2);
    if (lua_isnil(lua, -1)) {
      lua_pop(lua, 1);
      break;
    }
    elements.push_back(pop_reply(lua, depth + 1));
  }
  return Reply::array(std::move(elements));
}

}  // namespace

std::string_view up_to_nul(std::string_view text) { return text.substr(0, text.find('\0')); }

Reply formatted_error(std::string text) {
  while (!text.empty() && (text.back() == '\r' || text.back() == '\n')) text.pop_back();
  replace_newlines(text);
  return Reply::error(std::move(text));
}

void push_string(lua_State* lua, std::string_view text) { lua_pushlstring(lua, text.data(), text.size()); }

void push_error_table(lua_State* lua, std::string_view raw) {
  const int top = lua_gettop(lua);
  lua_createtable(lua, 0, 1);
  set_string_field(lua, Name::err, error_table_text(raw));
  TURNSTILE_CHECK(lua_gettop(lua) == top + 1);
}

void push_reply(lua_State* lua, const Reply& reply) {
  switch (reply.type()) {
    case Reply::Type::nil:
      lua_pushboolean(lua, 0);
      return;
    case Reply::Type::integer:
      lua_pushnumber(lua, static_cast<lua_Number>(reply.as_integer()));
      return;
    case Reply::Type::bulk:
      push_string(lua, reply.as_string());
      return;
    case Reply::Type::status:
      lua_createtable(lua, 0, 1);
      set_string_field(lua, Name::ok, up_to_nul(reply.as_string()));
      return;
    case Reply::Type::error:
      push_error_table(lua, "-" + reply.as_string());
      // Redis marks command errors so its error statistics count them once.
      lua_pushboolean(lua, 1);
      lua_setfield(lua, -2, "ignore_error_stats_update");
      return;
    case Reply::Type::array: {
      const auto& elements = reply.as_array();
      const int top = lua_gettop(lua);
      lua_createtable(lua, static_cast<int>(elements.size()), 0);
      int index = 1;
      for (const Reply& element : elements) {
        lua_checkstack(lua, 2);
        push_reply(lua, element);
        lua_rawseti(lua, -2, index++);
      }
      TURNSTILE_CHECK(lua_gettop(lua) == top + 1);  // each element pushed one value
      return;
    }
  }
}

Reply pop_reply(lua_State* lua, int depth) {
  // Lua's own stack limit ends a self-referencing table in Redis; the C
  // stack must not run out first (it would under ASan's larger frames).
  const int top = lua_gettop(lua);
  TURNSTILE_CHECK(top >= 1 && depth >= 0);
  if (depth > kMaxReplyDepth || !lua_checkstack(lua, 4)) {
    lua_pop(lua, 1);
    return Reply::error(std::string(redis_errors::kLuaStackLimit));
  }
  Reply reply;
  switch (lua_type(lua, -1)) {
    case LUA_TSTRING: {
      std::size_t length = 0;
      const char* text = lua_tolstring(lua, -1, &length);
      reply = Reply::bulk(std::string(text, length));
      break;
    }
    case LUA_TBOOLEAN:
      if (lua_toboolean(lua, -1)) reply = Reply::integer(1);
      break;
    case LUA_TNUMBER:
      reply = Reply::integer(truncate_like_x86(lua_tonumber(lua, -1)));
      break;
    case LUA_TTABLE:
      reply = table_reply(lua, depth);
      break;
    default:
      break;  // nil, functions, userdata, threads: a nil reply
  }
  TURNSTILE_CHECK(lua_gettop(lua) == top);  // table_reply leaves the table where it was
  lua_pop(lua, 1);
  return reply;
}

}  // namespace turnstile::sim
