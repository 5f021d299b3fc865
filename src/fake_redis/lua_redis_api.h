// fake_redis/lua_redis_api.h
//
// The `redis` table scripts see, as Redis 7.0.15 registers it
// (script_lua.c, luaRegisterRedisAPI): redis.call and redis.pcall (which run
// a command through the engine's callback and convert its reply, call
// raising error replies, pcall returning them), redis.error_reply,
// redis.status_reply, redis.sha1hex, redis.log (arguments checked, nothing
// logged), redis.setresp (RESP2 only), redis.set_repl,
// redis.replicate_commands, redis.breakpoint, redis.debug, the LOG_* and
// REPL_* constants, REDIS_VERSION and REDIS_VERSION_NUM. Also Redis 7's
// pcall, which hands an error table it catches to the script as its err
// string. Redis 6.2 (ServerProfile::script_error_tables false) has no such
// pcall, redis.call raises strings and redis.error_reply keeps its text.

#ifndef TURNSTILE_FAKE_REDIS_LUA_REDIS_API_H_
#define TURNSTILE_FAKE_REDIS_LUA_REDIS_API_H_

#include <string_view>

struct lua_State;

namespace turnstile::sim {

// Sets the global `redis` and replaces pcall; the state must be a
// ScriptRuntime's (redis.call reaches it through the allocator's user data).
void install_redis_table(lua_State* lua);

// Pushes the error table a refused redis.call (or a redis helper called
// wrongly) gives the script: {err = "ERR <message>"}; Redis 6.2's
// luaPushError puts the calling function's "<source>: <line>: " before the
// message instead.
void push_script_error(lua_State* lua, std::string_view message);

}  // namespace turnstile::sim

#endif  // TURNSTILE_FAKE_REDIS_LUA_REDIS_API_H_
