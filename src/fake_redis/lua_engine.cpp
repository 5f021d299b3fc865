// The fake Redis's Lua 5.1 engine: the script cache and the call path of
// EVAL, EVALSHA and SCRIPT LOAD. Behaviour follows redis-server 7.0.15
// (eval.c, script_lua.c), checked against the real server. Errors reach the
// caller as Redis 7 formats them: the sandbox's error handler adds the
// script's source and line, and the reply is
// "<msg> script: <sha>, on @user_script:<line>."; or as Redis 6.2 does:
// "ERR Error running script (call to f_<sha>): @user_script:<line>: <msg>".

#include "fake_redis/lua_engine.h"

#include <algorithm>
#include <functional>
#include <optional>
#include <unordered_map>
#include <utility>

#include "core/check.h"
#include "fake_redis/lua_reply.h"
#include "fake_redis/lua_sandbox.h"
#include "fake_redis/redis_errors.h"
#include "fake_redis/script_shebang.h"

namespace turnstile::sim {
namespace {

constexpr std::string_view kChunkName = "@user_script";

// The Lua strings of the last runs' KEYS or ARGV, by position. Calls for
// one lock pass mostly the same keys, lease and owner ids again: a value
// equal to the last one at its place is pushed from here, without hashing
// it into Lua's string table and without leaving a string for the
// collector. Strings are values in Lua, so what a script sees is the same.
class ArgumentStrings {
 public:
  // Positions and sizes kept (a longer or larger value is pushed as is).
  static constexpr std::size_t kMaxPositions = 32;
  static constexpr std::size_t kMaxBytes = 256;

  explicit ArgumentStrings(lua_State* lua) {
    lua_createtable(lua, static_cast<int>(kMaxPositions), 0);
    table_ref_ = luaL_ref(lua, LUA_REGISTRYINDEX);
    TURNSTILE_CHECK(table_ref_ > 0);
  }

  // Sets global `name` of the table at `globals_index` to an array of
  // `values`.
  void set_array_global(lua_State* lua, int globals_index, ScriptRuntime::Name name,
                        std::span<const std::string> values) {
    ScriptRuntime::of(lua).push_name(lua, name);
    lua_createtable(lua, static_cast<int>(values.size()), 0);
    lua_rawgeti(lua, LUA_REGISTRYINDEX, table_ref_);
    for (std::size_t i = 0; i < values.size(); ++i) {
      push(lua, i, values[i]);
      lua_rawseti(lua, -3, static_cast<int>(i + 1));
    }
    lua_pop(lua, 1);
    lua_rawset(lua, globals_index);
  }

 private:
  // Pushes `value`, the argument at `position`; the cache table is on top.
  void push(lua_State* lua, std::size_t position, const std::string& value) {
    const int slot = static_cast<int>(position + 1);
    if (position < texts_.size() && texts_[position] && *texts_[position] == value) {
      lua_rawgeti(lua, -1, slot);
      return;
    }
    push_string(lua, value);
    if (position >= kMaxPositions || value.size() > kMaxBytes) return;
    if (texts_.size() <= position) texts_.resize(position + 1);
    texts_[position] = value;
    lua_pushvalue(lua, -1);
    lua_rawseti(lua, -3, slot);
  }

  int table_ref_ = LUA_NOREF;
  std::vector<std::optional<std::string>> texts_;  // what the table holds, by position - 1
};

}  // namespace

// The engine's state: the sandboxed Lua state and the scripts compiled in it.
struct LuaEngine::Impl : ScriptRuntime {
  explicit Impl(const ServerProfile& server_profile) : ScriptRuntime(server_profile) {}

  struct CachedScript {
    int function_ref = LUA_NOREF;
    bool no_writes = false;
  };

  struct ShaHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view sha) const { return std::hash<std::string_view>{}(sha); }
  };
  // By lower-case sha; looked up by string_view (no copy per EVALSHA).
  std::unordered_map<std::string, CachedScript, ShaHash, std::equal_to<>> scripts;
  const CachedScript* running = nullptr;
  ArgumentStrings keys_strings{lua};
  ArgumentStrings args_strings{lua};

  // Compiles and caches; returns the cached entry, or an error reply.
  const CachedScript* compile(const std::string& sha, std::string_view source, Reply* error);
  Reply run(std::string_view sha, const CachedScript& script, std::span<const std::string> keys,
            std::span<const std::string> args, const LuaEngine::CommandCallback& call);
  Reply error_reply_from_run(std::string_view sha);
};

const LuaEngine::Impl::CachedScript* LuaEngine::Impl::compile(const std::string& sha, std::string_view source,
                                                              Reply* error) {
  TURNSTILE_CHECK(sha.size() == kSha1HexLength);
  if (auto found = scripts.find(sha); found != scripts.end()) return &found->second;
  // Before 7.0 a shebang is no shebang: Lua refuses its "#".
  const ParsedShebang shebang = profile.has_shebang ? parse_shebang(source) : ParsedShebang();
  if (!shebang.ok) {
    *error = Reply::error(shebang.error);
    return nullptr;
  }
  // The shebang line is skipped but its newline kept, so line numbers match.
  const std::string_view body = source.substr(shebang.length);
  limit_memory = true;
  const int status = luaL_loadbuffer(lua, body.data(), body.size(), kChunkName.data());
  limit_memory = false;
  if (status != 0) {
    *error = formatted_error(redis_errors::script_compile_error(up_to_nul(lua_tostring(lua, -1))));
    lua_pop(lua, 1);
    return nullptr;
  }
  CachedScript script{luaL_ref(lua, LUA_REGISTRYINDEX), shebang.no_writes};
  TURNSTILE_CHECK_MSG(script.function_ref > 0, "a compiled chunk is a function, never nil");
  const auto [cached, inserted] = scripts.emplace(sha, script);
  TURNSTILE_CHECK(inserted);
  return &cached->second;
}

Reply LuaEngine::Impl::run(std::string_view sha, const CachedScript& script, std::span<const std::string> keys,
                           std::span<const std::string> args, const LuaEngine::CommandCallback& command_callback) {
  TURNSTILE_CHECK_MSG(call == nullptr && running == nullptr, "scripts do not nest");
  TURNSTILE_CHECK(script.function_ref > 0 && !limit_memory);
  lua_settop(lua, 0);
  lua_checkstack(lua, static_cast<int>(keys.size() + args.size()) + 8);
  lua_rawgeti(lua, LUA_REGISTRYINDEX, globals_ref);
  keys_strings.set_array_global(lua, 1, Name::keys, keys);
  args_strings.set_array_global(lua, 1, Name::argv, args);
  lua_settop(lua, 0);

  lua_rawgeti(lua, LUA_REGISTRYINDEX, error_handler_ref);
  lua_rawgeti(lua, LUA_REGISTRYINDEX, script.function_ref);
  call = &command_callback;
  running = &script;
  instructions = 0;
  limit_memory = true;
  const int status = lua_pcall(lua, 0, 1, 1);
  limit_memory = false;
  TURNSTILE_CHECK(lua_gettop(lua) == 2);  // the error handler, then the result or the error
  call = nullptr;
  running = nullptr;
  Reply reply = status == 0 ? pop_reply(lua) : error_reply_from_run(sha);
  lua_settop(lua, 0);
  return reply;
}

// luaCallFunction's error path: the handler's table gives message, source
// and line; anything else (out of memory) is reported as Redis does.
Reply LuaEngine::Impl::error_reply_from_run(std::string_view sha) {
  if (!profile.script_error_tables) {
    // Redis 6.2: the handler's string (or Lua's, out of memory) in its
    // "Error running script" text.
    const std::string_view message =
        lua_isstring(lua, -1) ? up_to_nul(lua_tostring(lua, -1)) : redis_errors::kPrintfNull;
    return formatted_error(redis_errors::wrapped_script_error(sha, message));
  }
  if (!lua_istable(lua, -1)) {
    const char* message = lua_isstring(lua, -1) ? lua_tostring(lua, -1) : "execution failure";
    return formatted_error(redis_errors::script_run_error(sha, message));
  }
  // Raw lookups: a metamethod could raise outside any protected call here.
  auto string_field = [this](const char* field) -> std::optional<std::string> {
    lua_pushstring(lua, field);
    lua_rawget(lua, -2);
    std::optional<std::string> value;
    if (lua_isstring(lua, -1)) value = std::string(up_to_nul(lua_tostring(lua, -1)));
    lua_pop(lua, 1);
    return value;
  };
  const std::optional<std::string> message = string_field("err");
  const std::optional<std::string> source = string_field("source");
  const std::optional<std::string> line = string_field("line");
  // Redis 7.0.15 crashes on an error table without a string err
  // (error({})); the fake answers with a generic error instead.
  std::string text = message ? *message : std::string(redis_errors::kScriptUnknownError);
  if (source && line) text += " script: " + std::string(sha) + ", on " + *source + ":" + *line + ".";
  // 7.2 sends the message as it is: a CRLF in it ends the reply early.
  if (profile.script_errors_keep_newlines) return Reply::error(std::move(text));
  return formatted_error(std::move(text));
}

// ---- LuaEngine -----------------------------------------------------------------

LuaEngine::LuaEngine(const ServerProfile& profile) : impl_(std::make_unique<Impl>(profile)) {}
LuaEngine::~LuaEngine() = default;

Reply LuaEngine::load(std::string_view source) {
  const std::string sha = sha1_hex(source);
  Reply error;
  if (impl_->compile(sha, source, &error) == nullptr) return error;
  return Reply::bulk(sha);
}

bool LuaEngine::exists(std::string_view sha1) const {
  return sha1.size() == kSha1HexLength && impl_->scripts.contains(lower_case_sha(sha1));
}

void LuaEngine::flush() {
  for (auto& [sha, script] : impl_->scripts) luaL_unref(impl_->lua, LUA_REGISTRYINDEX, script.function_ref);
  impl_->scripts.clear();
  lua_gc(impl_->lua, LUA_GCCOLLECT, 0);
}

void LuaEngine::restart() {
  flush();
  impl_->random.reset();
}

Reply LuaEngine::eval(std::string_view source, std::span<const std::string> keys, std::span<const std::string> args,
                      const CommandCallback& call) {
  const std::string sha = sha1_hex(source);
  Reply error;
  const Impl::CachedScript* script = impl_->compile(sha, source, &error);
  if (script == nullptr) return error;
  return impl_->run(sha, *script, keys, args, call);
}

Reply LuaEngine::evalsha(std::string_view sha1, std::span<const std::string> keys, std::span<const std::string> args,
                         const CommandCallback& call) {
  if (sha1.size() != kSha1HexLength) return Reply::error(std::string(redis_errors::no_script(impl_->profile)));
  // Clients send lower case; only an upper-case sha pays for a copy.
  std::string lowered;
  if (std::any_of(sha1.begin(), sha1.end(), [](char c) { return c >= 'A' && c <= 'F'; })) {
    lowered = lower_case_sha(sha1);
    sha1 = lowered;
  }
  auto found = impl_->scripts.find(sha1);
  if (found == impl_->scripts.end()) return Reply::error(std::string(redis_errors::no_script(impl_->profile)));
  return impl_->run(found->first, found->second, keys, args, call);
}

bool LuaEngine::running_read_only_script() const { return impl_->running != nullptr && impl_->running->no_writes; }

}  // namespace turnstile::sim
