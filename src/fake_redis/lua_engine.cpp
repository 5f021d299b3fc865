// The fake Redis's Lua 5.1 engine. Behaviour follows redis-server 7.0.15
// (script_lua.c, eval.c), checked against the real server:
//
//   * Globals are read-only: the script sees a proxy of the globals table
//     (and of every library table) whose writes fail with "Attempt to modify
//     a readonly table" and whose reads of unknown names fail with "Script
//     attempted to access nonexistent global variable". Real Redis patches
//     Lua for this; the stock liblua5.1 needs proxies, so pairs() over _G or
//     a library table sees nothing (an accepted difference).
//   * Errors reach the caller as Redis 7 formats them: an error handler adds
//     the script's source and line, and the reply is
//     "<msg> script: <sha>, on @user_script:<line>.".
//   * math.random is Redis's rand48, seeded once per server (not per call),
//     exactly as Redis 7 does; math.randomseed reseeds it.
//
// Lua raises errors with longjmp, so C functions called from Lua keep every
// C++ object in a helper that returns before lua_error() is called.

#include "fake_redis/lua_engine.h"

#include <openssl/sha.h>

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <limits>
#include <optional>
#include <unordered_map>
#include <utility>

extern "C" {
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
}

namespace turnstile::sim {
namespace {

constexpr std::string_view kChunkName = "@user_script";
constexpr std::size_t kSha1HexLength = 40;

// A runaway script must not hang the simulation. Redis itself never stops a
// script (it answers BUSY to others until SCRIPT KILL); the fake stops it
// after this many VM instructions with the text SCRIPT KILL would give.
constexpr int kHookPeriodInstructions = 100'000;
constexpr std::uint64_t kMaxScriptInstructions = 200'000'000;
constexpr const char* kScriptKilled = "Script killed by user with SCRIPT KILL...";
// A script that allocates without bound fails with Lua's "not enough
// memory" instead of taking the test process down.
// Deepest nesting of tables converted to a reply (small enough for a fiber
// stack under ASan); deeper ends in Redis's
// "reached lua stack limit" error, as Lua's own stack limit would.
constexpr int kMaxReplyDepth = 200;
constexpr std::size_t kMaxScriptMemoryBytes = std::size_t{512} << 20;

// Values Redis 7.0.15 exposes in the redis table.
constexpr const char* kRedisVersion = "7.0.15";
constexpr lua_Number kRedisVersionNum = 0x07000f;
constexpr int kLogDebug = 0;
constexpr int kLogWarning = 3;
constexpr int kReplNone = 0, kReplAof = 1, kReplSlave = 2, kReplAll = 3;

// Redis's rand48 (rand.c): the 48-bit linear congruential generator of
// lrand48, starting from the default seed, returning the top 31 bits.
class Rand48 {
 public:
  static constexpr std::int32_t kMax = std::numeric_limits<std::int32_t>::max();
  void seed(std::int32_t value) {
    state_ = (static_cast<std::uint64_t>(static_cast<std::uint32_t>(value)) << 16) | kLowSeedBits;
  }
  std::int32_t next() {
    state_ = (kMultiplier * state_ + kIncrement) & kMask;
    return static_cast<std::int32_t>(state_ >> 17);
  }
  void reset() { state_ = kDefaultState; }

 private:
  static constexpr std::uint64_t kMultiplier = 0x5DEECE66Dull;
  static constexpr std::uint64_t kIncrement = 0xB;
  static constexpr std::uint64_t kMask = (std::uint64_t{1} << 48) - 1;
  static constexpr std::uint64_t kLowSeedBits = 0x330E;
  static constexpr std::uint64_t kDefaultState = 0x1234ABCD330Eull;
  std::uint64_t state_ = kDefaultState;
};

// (long long) of a double as x86-64 computes it: out of range and NaN give
// INT64_MIN, which is what redis-server answers for `return 1e30`.
std::int64_t truncate_like_x86(lua_Number number) {
  constexpr double kTwoTo63 = 9223372036854775808.0;
  if (!(number >= -kTwoTo63 && number < kTwoTo63)) return std::numeric_limits<std::int64_t>::min();
  return static_cast<std::int64_t>(number);
}

// Redis builds these texts with sdsnew(): they end at the first NUL.
std::string_view up_to_nul(std::string_view text) { return text.substr(0, text.find('\0')); }

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

// An error reply as addReplyErrorFormat("-%s") sends it: trailing CR/LF
// trimmed, inner ones turned into spaces.
Reply formatted_error(std::string text) {
  while (!text.empty() && (text.back() == '\r' || text.back() == '\n')) text.pop_back();
  replace_newlines(text);
  return Reply::error(std::move(text));
}

std::string lower_case_sha(std::string_view sha1) {
  std::string lower(sha1);
  for (char& c : lower) {
    if (c >= 'A' && c <= 'F') c = static_cast<char>(c - 'A' + 'a');
  }
  return lower;
}

struct ParsedShebang {
  bool ok = true;
  std::string error;       // Redis's text when !ok
  std::size_t length = 0;  // bytes before the newline that ends the shebang
  bool no_writes = false;
};

// evalExtractShebangFlags: "#!lua [flags=a,b]" on the first line.
ParsedShebang parse_shebang(std::string_view source) {
  static constexpr std::string_view kKnownFlags[] = {"no-writes", "allow-oom", "allow-stale",
                                                     "no-cluster", "allow-cross-slot-keys"};
  ParsedShebang parsed;
  if (!source.starts_with("#!")) return parsed;
  const std::size_t end = source.find('\n');
  if (end == std::string_view::npos) return {false, "ERR Invalid script shebang"};
  parsed.length = end;
  std::vector<std::string_view> parts;
  std::string_view line = source.substr(0, end);
  while (!line.empty()) {
    const std::size_t start = line.find_first_not_of(" \t\r");
    if (start == std::string_view::npos) break;
    line.remove_prefix(start);
    const std::size_t stop = std::min(line.find_first_of(" \t\r"), line.size());
    parts.push_back(line.substr(0, stop));
    line.remove_prefix(stop);
  }
  if (parts.empty() || parts[0] != "#!lua") {
    return {false, "ERR Unexpected engine in script shebang: " +
                       std::string(parts.empty() ? "" : parts[0])};
  }
  for (std::size_t i = 1; i < parts.size(); ++i) {
    if (!parts[i].starts_with("flags=")) {
      return {false, "ERR Unknown lua shebang option: " + std::string(parts[i])};
    }
    std::string_view flags = parts[i].substr(6);
    for (;;) {
      const std::size_t comma = flags.find(',');
      const std::string_view flag = flags.substr(0, comma);
      if (std::find(std::begin(kKnownFlags), std::end(kKnownFlags), flag) == std::end(kKnownFlags)) {
        return {false, "ERR Unexpected flag in script shebang: " + std::string(flag)};
      }
      if (flag == "no-writes") parsed.no_writes = true;
      if (comma == std::string_view::npos) break;
      flags.remove_prefix(comma + 1);
    }
  }
  return parsed;
}

}  // namespace

std::string sha1_hex(std::string_view bytes) {
  unsigned char digest[SHA_DIGEST_LENGTH];
  SHA1(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), digest);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex(2 * SHA_DIGEST_LENGTH, '0');
  for (int i = 0; i < SHA_DIGEST_LENGTH; ++i) {
    hex[2 * i] = kHex[digest[i] >> 4];
    hex[2 * i + 1] = kHex[digest[i] & 0xf];
  }
  return hex;
}

// The engine's state; ScriptRuntime is this, and the C functions Lua calls
// reach it through the allocator's user data.
struct ScriptRuntime {
  struct CachedScript {
    int function_ref = LUA_NOREF;
    bool no_writes = false;
  };

  lua_State* lua = nullptr;
  std::size_t memory_in_use = 0;
  bool limit_memory = false;  // only while script code runs
  std::uint64_t instructions = 0;

  int globals_ref = LUA_NOREF;        // the real globals table
  int proxies_ref = LUA_NOREF;        // proxy -> protected table
  int error_handler_ref = LUA_NOREF;  // the handler lua_pcall uses
  int tostring_ref = LUA_NOREF;       // the base library's tostring

  std::unordered_map<std::string, CachedScript> scripts;
  Rand48 random;

  // State of the running script.
  const LuaEngine::CommandCallback* call = nullptr;
  const CachedScript* running = nullptr;
  std::vector<std::string> command_argv;  // reused between redis.call()s

  ScriptRuntime();
  ~ScriptRuntime() { lua_close(lua); }
  ScriptRuntime(const ScriptRuntime&) = delete;
  ScriptRuntime& operator=(const ScriptRuntime&) = delete;

  static ScriptRuntime& of(lua_State* lua) {
    void* self = nullptr;
    lua_getallocf(lua, &self);
    return *static_cast<ScriptRuntime*>(self);
  }

  void open_libraries();
  void protect_globals();
  void push_protected_proxy(int table_index);
  void install_redis_table();

  // Compiles and caches; returns the cached entry, or an error reply.
  const CachedScript* compile(const std::string& sha, std::string_view source, Reply* error);
  Reply run(const std::string& sha, const CachedScript& script, const std::vector<std::string>& keys,
            const std::vector<std::string>& args, const LuaEngine::CommandCallback& call);
  Reply error_reply_from_run(const std::string& sha);

  // redis.call / redis.pcall without the raising: pushes the result and
  // says whether it is an error to raise.
  bool push_command_result(lua_State* lua);
};

namespace {

void* allocate(void* self, void* block, std::size_t old_size, std::size_t new_size) {
  auto& impl = *static_cast<ScriptRuntime*>(self);
  if (new_size == 0) {
    std::free(block);
    impl.memory_in_use -= old_size;
    return nullptr;
  }
  // Lua requires that shrinking never fails.
  if (new_size > old_size && impl.limit_memory &&
      impl.memory_in_use - old_size + new_size > kMaxScriptMemoryBytes) {
    return nullptr;
  }
  void* grown = std::realloc(block, new_size);
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

void push_string(lua_State* lua, std::string_view text) { lua_pushlstring(lua, text.data(), text.size()); }

void set_string_field(lua_State* lua, const char* field, std::string_view value) {
  push_string(lua, value);
  lua_setfield(lua, -2, field);
}

// {err = text} as luaPushErrorBuff builds it from `raw`.
void push_error_table(lua_State* lua, std::string_view raw) {
  lua_createtable(lua, 0, 1);
  set_string_field(lua, "err", error_table_text(raw));
}

// A reply as a Lua value (redisProtocolToLuaType, RESP2).
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
      set_string_field(lua, "ok", up_to_nul(reply.as_string()));
      return;
    case Reply::Type::error:
      push_error_table(lua, "-" + reply.as_string());
      // Redis marks command errors so its error statistics count them once.
      lua_pushboolean(lua, 1);
      lua_setfield(lua, -2, "ignore_error_stats_update");
      return;
    case Reply::Type::array: {
      const auto& elements = reply.as_array();
      lua_createtable(lua, static_cast<int>(elements.size()), 0);
      int index = 1;
      for (const Reply& element : elements) {
        lua_checkstack(lua, 2);
        push_reply(lua, element);
        lua_rawseti(lua, -2, index++);
      }
      return;
    }
  }
}

Reply pop_reply(lua_State* lua, int depth = 0);

// Pushes t[field] (a raw lookup, as Redis's) of the table on top and
// returns its type.
int push_raw_field(lua_State* lua, const char* field) {
  lua_pushstring(lua, field);
  lua_rawget(lua, -2);
  return lua_type(lua, -1);
}

// t[field] of the table on top if it is a string (up to a NUL, as Redis
// reads it); the stack is left as it was.
std::optional<std::string> raw_string_field(lua_State* lua, const char* field) {
  std::optional<std::string> value;
  if (push_raw_field(lua, field) == LUA_TSTRING) {
    std::size_t length = 0;
    const char* text = lua_tolstring(lua, -1, &length);
    value.emplace(up_to_nul({text, length}));
  }
  lua_pop(lua, 1);
  return value;
}

// The entries of the table on top, flattened as RESP2 sends a map (key,
// value, ...) or a set (keys only, Lua values ignored).
Reply entries_reply(lua_State* lua, bool with_values, int depth) {
  std::vector<Reply> elements;
  lua_pushnil(lua);
  while (lua_next(lua, -2)) {
    if (!with_values) lua_pop(lua, 1);
    lua_pushvalue(lua, with_values ? -2 : -1);
    elements.push_back(pop_reply(lua, depth + 1));
    if (with_values) elements.push_back(pop_reply(lua, depth + 1));
  }
  return Reply::array(std::move(elements));
}

// The table on top as a reply, checking Redis's special fields in Redis's
// order; the table stays on the stack.
Reply table_reply(lua_State* lua, int depth) {
  if (std::optional<std::string> error = raw_string_field(lua, "err")) return formatted_error(std::move(*error));
  if (std::optional<std::string> status = raw_string_field(lua, "ok")) {
    replace_newlines(*status);
    return Reply::status(std::move(*status));
  }
  if (push_raw_field(lua, "double") == LUA_TNUMBER) {
    const double value = lua_tonumber(lua, -1);
    lua_pop(lua, 1);
    if (std::isinf(value)) return Reply::bulk(value > 0 ? "inf" : "-inf");
    char buffer[64];
    std::snprintf(buffer, sizeof buffer, "%.17g", value);
    return Reply::bulk(buffer);
  }
  lua_pop(lua, 1);
  if (std::optional<std::string> number = raw_string_field(lua, "big_number")) {
    replace_newlines(*number);
    return Reply::bulk(std::move(*number));
  }
  for (const auto& [field, with_values] : {std::pair{"map", true}, std::pair{"set", false}}) {
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

// The value on top of the stack as a reply (luaReplyToRedisReply); pops it.
Reply pop_reply(lua_State* lua, int depth) {
  // Lua's own stack limit ends a self-referencing table in Redis; the C
  // stack must not run out first (it would under ASan's larger frames).
  if (depth > kMaxReplyDepth || !lua_checkstack(lua, 4)) {
    lua_pop(lua, 1);
    return Reply::error("ERR reached lua stack limit");
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
  lua_pop(lua, 1);
  return reply;
}

// ---- functions the scripts call --------------------------------------------

int redis_call(lua_State* lua) {
  if (ScriptRuntime::of(lua).push_command_result(lua)) return lua_error(lua);
  return 1;
}

int redis_pcall(lua_State* lua) {
  ScriptRuntime::of(lua).push_command_result(lua);
  return 1;
}

// redis.error_reply / redis.status_reply: one string argument, else an error
// table (returned, not raised).
bool single_string_argument(lua_State* lua) {
  if (lua_gettop(lua) == 1 && lua_type(lua, -1) == LUA_TSTRING) return true;
  push_error_table(lua, "wrong number or type of arguments");
  return false;
}

int redis_error_reply(lua_State* lua) {
  if (!single_string_argument(lua)) return 1;
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

// redis.log checks its arguments as Redis does; the fake keeps no log.
int redis_log(lua_State* lua) {
  const char* problem = nullptr;
  if (lua_gettop(lua) < 2) {
    problem = "redis.log() requires two arguments or more.";
  } else if (!lua_isnumber(lua, 1)) {
    problem = "First argument must be a number (log level).";
  } else if (const lua_Number level = lua_tonumber(lua, 1); level < kLogDebug || level > kLogWarning) {
    problem = "Invalid debug level.";
  }
  if (problem == nullptr) return 0;
  lua_pushstring(lua, problem);
  return lua_error(lua);
}

int redis_setresp(lua_State* lua) {
  if (lua_gettop(lua) != 1) return luaL_error(lua, "redis.setresp() requires one argument.");
  const int version = static_cast<int>(lua_tonumber(lua, 1));
  if (version != 2 && version != 3) return luaL_error(lua, "RESP version must be 2 or 3.");
  // The fake's replies are RESP2 values only.
  if (version == 3) return luaL_error(lua, "RESP3 is not supported by the fake Redis.");
  return 0;
}

int redis_set_repl(lua_State* lua) {
  if (lua_gettop(lua) != 1) return luaL_error(lua, "redis.set_repl() requires one argument.");
  const int flags = static_cast<int>(lua_tonumber(lua, 1));
  if ((flags & ~kReplAll) != 0) return luaL_error(lua, "Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.");
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

// Redis's math.random: rand48 scaled as Lua 5.1 scales rand().
int redis_math_random(lua_State* lua) {
  auto& impl = ScriptRuntime::of(lua);
  const lua_Number r = static_cast<lua_Number>(impl.random.next() % Rand48::kMax) /
                       static_cast<lua_Number>(Rand48::kMax);
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

// ---- read-only globals -------------------------------------------------------

constexpr const char* kReadOnly = "Attempt to modify a readonly table";

int refuse_write(lua_State* lua) { return luaL_error(lua, kReadOnly); }

// __index of the real globals table: reads of unknown names fail.
int refuse_unknown_global(lua_State* lua) {
  if (!lua_isstring(lua, -1)) {
    return luaL_error(lua, "Second argument to luaProtectedTableError must be a string or number");
  }
  return luaL_error(lua, "Script attempted to access nonexistent global variable '%s'",
                    lua_tostring(lua, -1));
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

// The message handler of every script run (Redis's __redis__err__handler):
// turns the error into {err=..., source=..., line=...}, taking the position
// from the first Lua function on the stack.
int error_handler(lua_State* lua) {
  lua_Debug where;
  bool found = lua_getstack(lua, 1, &where) != 0;
  if (found) {
    lua_getinfo(lua, "nSl", &where);
    if (std::strcmp(where.what, "C") == 0) {
      found = lua_getstack(lua, 2, &where) != 0;
      if (found) lua_getinfo(lua, "nSl", &where);
    }
  }
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

ScriptRuntime::ScriptRuntime() {
  lua = lua_newstate(allocate, this);
  assert(lua != nullptr);
  open_libraries();
  install_redis_table();
  protect_globals();
  lua_sethook(lua, count_hook, LUA_MASKCOUNT, kHookPeriodInstructions);
}

void ScriptRuntime::open_libraries() {
  const std::pair<const char*, lua_CFunction> libraries[] = {
      {"", luaopen_base}, {LUA_TABLIBNAME, luaopen_table},
      {LUA_STRLIBNAME, luaopen_string}, {LUA_MATHLIBNAME, luaopen_math}};
  for (const auto& [name, open] : libraries) {
    lua_pushcfunction(lua, open);
    lua_pushstring(lua, name);
    lua_call(lua, 1, 0);
  }
  // What Redis 7.0 leaves out of the base library.
  for (const char* removed : {"print", "loadfile", "dofile", "setfenv", "getfenv", "newproxy"}) {
    lua_pushnil(lua);
    lua_setglobal(lua, removed);
  }
  lua_getglobal(lua, LUA_MATHLIBNAME);
  lua_pushcfunction(lua, redis_math_random);
  lua_setfield(lua, -2, "random");
  lua_pushcfunction(lua, redis_math_randomseed);
  lua_setfield(lua, -2, "randomseed");
  lua_pop(lua, 1);

  lua_getglobal(lua, "tostring");
  tostring_ref = luaL_ref(lua, LUA_REGISTRYINDEX);
  lua_pushcfunction(lua, error_handler);
  error_handler_ref = luaL_ref(lua, LUA_REGISTRYINDEX);
}

void ScriptRuntime::install_redis_table() {
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
      {"LOG_DEBUG", kLogDebug}, {"LOG_VERBOSE", 1}, {"LOG_NOTICE", 2}, {"LOG_WARNING", kLogWarning},
      {"REPL_NONE", kReplNone}, {"REPL_AOF", kReplAof}, {"REPL_SLAVE", kReplSlave},
      {"REPL_REPLICA", kReplSlave}, {"REPL_ALL", kReplAll}};
  for (const auto& [name, value] : constants) {
    lua_pushnumber(lua, value);
    lua_setfield(lua, -2, name);
  }
  lua_pushstring(lua, kRedisVersion);
  lua_setfield(lua, -2, "REDIS_VERSION");
  lua_pushnumber(lua, kRedisVersionNum);
  lua_setfield(lua, -2, "REDIS_VERSION_NUM");
  lua_setglobal(lua, "redis");

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

// Pushes a proxy of the table at `table_index`: reads go to the table, writes
// fail, and the proxy is remembered so rawget/rawset can see through it.
void ScriptRuntime::push_protected_proxy(int table_index) {
  if (table_index < 0) table_index = lua_gettop(lua) + 1 + table_index;
  lua_newtable(lua);                   // proxy
  lua_createtable(lua, 0, 3);          // its metatable
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
}

void ScriptRuntime::protect_globals() {
  lua_newtable(lua);
  proxies_ref = luaL_ref(lua, LUA_REGISTRYINDEX);

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
  lua_createtable(lua, 0, 1);
  lua_pushcfunction(lua, refuse_unknown_global);
  lua_setfield(lua, -2, "__index");
  lua_setmetatable(lua, -2);
  push_protected_proxy(-1);
  lua_pushvalue(lua, -1);
  lua_setfield(lua, -3, "_G");
  lua_replace(lua, LUA_GLOBALSINDEX);
  lua_pop(lua, 1);
  assert(lua_gettop(lua) == 0);
}

const ScriptRuntime::CachedScript* ScriptRuntime::compile(const std::string& sha,
                                                               std::string_view source, Reply* error) {
  if (auto found = scripts.find(sha); found != scripts.end()) return &found->second;
  const ParsedShebang shebang = parse_shebang(source);
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
    *error = formatted_error("ERR Error compiling script (new function): " +
                             std::string(up_to_nul(lua_tostring(lua, -1))));
    lua_pop(lua, 1);
    return nullptr;
  }
  CachedScript script{luaL_ref(lua, LUA_REGISTRYINDEX), shebang.no_writes};
  return &scripts.emplace(sha, script).first->second;
}

namespace {

void set_array_global(lua_State* lua, int globals_index, const char* name,
                      const std::vector<std::string>& values) {
  lua_pushstring(lua, name);
  lua_createtable(lua, static_cast<int>(values.size()), 0);
  int index = 1;
  for (const std::string& value : values) {
    push_string(lua, value);
    lua_rawseti(lua, -2, index++);
  }
  lua_rawset(lua, globals_index);
}

}  // namespace

Reply ScriptRuntime::run(const std::string& sha, const CachedScript& script,
                           const std::vector<std::string>& keys, const std::vector<std::string>& args,
                           const LuaEngine::CommandCallback& command_callback) {
  assert(call == nullptr && "scripts do not nest");
  lua_settop(lua, 0);
  lua_checkstack(lua, static_cast<int>(keys.size() + args.size()) + 8);
  lua_rawgeti(lua, LUA_REGISTRYINDEX, globals_ref);
  set_array_global(lua, 1, "KEYS", keys);
  set_array_global(lua, 1, "ARGV", args);
  lua_settop(lua, 0);

  lua_rawgeti(lua, LUA_REGISTRYINDEX, error_handler_ref);
  lua_rawgeti(lua, LUA_REGISTRYINDEX, script.function_ref);
  call = &command_callback;
  running = &script;
  instructions = 0;
  limit_memory = true;
  const int status = lua_pcall(lua, 0, 1, 1);
  limit_memory = false;
  call = nullptr;
  running = nullptr;
  Reply reply = status == 0 ? pop_reply(lua) : error_reply_from_run(sha);
  lua_settop(lua, 0);
  return reply;
}

// luaCallFunction's error path: the handler's table gives message, source
// and line; anything else (out of memory) is reported as Redis does.
Reply ScriptRuntime::error_reply_from_run(const std::string& sha) {
  if (!lua_istable(lua, -1)) {
    const char* message = lua_isstring(lua, -1) ? lua_tostring(lua, -1) : "execution failure";
    std::string text = "ERR Error running script " + sha + ", " +
                       std::string(std::string_view(message).substr(0, 100));
    return formatted_error(std::move(text));
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
  std::string text = message ? *message : "ERR unknown error";
  if (source && line) text += " script: " + sha + ", on " + *source + ":" + *line + ".";
  return formatted_error(std::move(text));
}

bool ScriptRuntime::push_command_result(lua_State* state) {
  const int argc = lua_gettop(state);
  if (argc == 0) {
    push_error_table(state, "Please specify at least one argument for this redis lib call");
    return true;
  }
  command_argv.resize(static_cast<std::size_t>(argc));
  for (int i = 1; i <= argc; ++i) {
    std::string& argument = command_argv[static_cast<std::size_t>(i - 1)];
    if (lua_type(state, i) == LUA_TNUMBER) {
      // Not lua_tostring: Redis keeps full precision.
      char buffer[64];
      const int length = std::snprintf(buffer, sizeof buffer, "%.17g", lua_tonumber(state, i));
      argument.assign(buffer, static_cast<std::size_t>(length));
      continue;
    }
    std::size_t length = 0;
    const char* text = lua_type(state, i) == LUA_TSTRING ? lua_tolstring(state, i, &length) : nullptr;
    if (text == nullptr) {
      lua_settop(state, 0);
      push_error_table(state, "Lua redis lib command arguments must be strings or integers");
      return true;
    }
    argument.assign(text, length);
  }
  lua_settop(state, 0);
  assert(call != nullptr);
  // Replies are converted without the memory cap: a failed allocation here
  // would longjmp over the C++ objects below.
  limit_memory = false;
  bool is_error = false;
  try {
    const Reply reply = (*call)(command_argv);
    is_error = reply.is_error();
    lua_checkstack(state, 4);
    push_reply(state, reply);
  } catch (const std::exception& failure) {
    push_error_table(state, std::string("-ERR ") + failure.what());
    is_error = true;
  }
  limit_memory = true;
  return is_error;
}

// ---- LuaEngine -----------------------------------------------------------------

struct LuaEngine::Impl : ScriptRuntime {};

LuaEngine::LuaEngine() : impl_(std::make_unique<Impl>()) {}
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

Reply LuaEngine::eval(std::string_view source, const std::vector<std::string>& keys,
                      const std::vector<std::string>& args, const CommandCallback& call) {
  const std::string sha = sha1_hex(source);
  Reply error;
  const ScriptRuntime::CachedScript* script = impl_->compile(sha, source, &error);
  if (script == nullptr) return error;
  return impl_->run(sha, *script, keys, args, call);
}

Reply LuaEngine::evalsha(std::string_view sha1, const std::vector<std::string>& keys,
                         const std::vector<std::string>& args, const CommandCallback& call) {
  std::string sha = sha1.size() == kSha1HexLength ? lower_case_sha(sha1) : std::string();
  auto found = impl_->scripts.find(sha);
  if (found == impl_->scripts.end()) return Reply::error("NOSCRIPT No matching script. Please use EVAL.");
  return impl_->run(sha, found->second, keys, args, call);
}

bool LuaEngine::running_read_only_script() const {
  return impl_->running != nullptr && impl_->running->no_writes;
}

}  // namespace turnstile::sim
