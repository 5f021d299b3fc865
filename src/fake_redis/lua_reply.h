// fake_redis/lua_reply.h
//
// Lua values and replies, converted both ways exactly as Redis 7.0's
// script_lua.c converts them (RESP2 only):
//
//   * a reply becomes a Lua value for redis.call (redisProtocolToLuaType):
//     nil -> false, integer -> number, bulk -> string, status -> {ok=...},
//     error -> {err=...}, array -> table;
//   * a script's result becomes a reply (luaReplyToRedisReply): strings are
//     bulks, numbers truncate to integers as x86 does, true is 1 and false
//     nil, tables are arrays cut at the first nil unless they carry Redis's
//     special fields (err, ok, double, big_number, map, set), which are
//     looked up raw, in Redis's order.
//
// A table nested too deeply (or referencing itself) ends in Redis's "reached
// lua stack limit" error instead of running the C stack out.

#ifndef TURNSTILE_FAKE_REDIS_LUA_REPLY_H_
#define TURNSTILE_FAKE_REDIS_LUA_REPLY_H_

#include <string>
#include <string_view>

#include "turnstile/reply.h"

struct lua_State;

namespace turnstile::sim {

// Redis builds these texts with sdsnew(): they end at the first NUL.
std::string_view up_to_nul(std::string_view text);

// An error reply as addReplyErrorFormat("-%s") sends it: trailing CR/LF
// trimmed, inner ones turned into spaces.
Reply formatted_error(std::string text);

// Pushes `text` as a Lua string, NUL bytes included.
void push_string(lua_State* lua, std::string_view text);

// {err = text} as luaPushErrorBuff builds it from `raw`: "-CODE msg" keeps
// CODE, anything else gets "ERR"; the message loses surrounding CR/LF.
void push_error_table(lua_State* lua, std::string_view raw);

// A reply as a Lua value (redisProtocolToLuaType, RESP2).
void push_reply(lua_State* lua, const Reply& reply);

// The value on top of the stack as a reply (luaReplyToRedisReply); pops it.
Reply pop_reply(lua_State* lua, int depth = 0);

}  // namespace turnstile::sim

#endif  // TURNSTILE_FAKE_REDIS_LUA_REPLY_H_
